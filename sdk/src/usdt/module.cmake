# Dynamic USDT writes its shared objects with libelf (libelf-dev).
list(APPEND JITUNWIND_SYSTEM_LIBS elf)
string(APPEND JITUNWIND_PC_LIBS " -lelf")
