# An executable that links the SDK statically must export the registry object in .dynsym so that
# readers find it even in a stripped binary (docs/registry-abi.md, "Finding the registry").
# Propagated to consumers of jitunwind_static (CMake) and to `pkg-config --static` users.
list(APPEND JITUNWIND_SYSTEM_LIBS "-Wl,--export-dynamic-symbol=jitunwind_registry")
string(APPEND JITUNWIND_PC_LIBS " -Wl,--export-dynamic-symbol=jitunwind_registry")
