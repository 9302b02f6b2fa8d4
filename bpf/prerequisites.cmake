# Whether the eBPF walker can be built here: sets JITWALK_CAN_BUILD (and the tool paths). Included
# by bpf/CMakeLists.txt and tests/jitwalk/CMakeLists.txt (which is configured first).
find_program(JITWALK_CLANG NAMES clang clang-14)
find_program(JITWALK_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin)
# The kernel types walker.bpf.c uses, per target architecture (bpf/vmlinux/<arch>/vmlinux.h,
# written for the walker, not dumped from the build machine's kernel), and libbpf's name for it.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(JITWALK_ARCH x86_64)
  set(JITWALK_BPF_TARGET_ARCH x86)
else()
  set(JITWALK_ARCH ${CMAKE_SYSTEM_PROCESSOR})
  set(JITWALK_BPF_TARGET_ARCH "")
endif()
set(JITWALK_VMLINUX_DIR ${CMAKE_CURRENT_LIST_DIR}/vmlinux/${JITWALK_ARCH})
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(LIBBPF QUIET IMPORTED_TARGET libbpf)
  pkg_check_modules(LIBELF QUIET IMPORTED_TARGET libelf)
  pkg_check_modules(ZLIB_PC QUIET IMPORTED_TARGET zlib)
endif()
if(JITUNWIND_BUILD_BPF AND JITWALK_CLANG AND JITWALK_BPFTOOL AND JITWALK_BPF_TARGET_ARCH
   AND EXISTS ${JITWALK_VMLINUX_DIR}/vmlinux.h AND LIBBPF_FOUND AND LIBELF_FOUND AND ZLIB_PC_FOUND)
  set(JITWALK_CAN_BUILD ON)
  # For script-driven tests that take jitwalk's path as an argument ("" when it is not built).
  set(JITWALK_PATH_FOR_TESTS $<TARGET_FILE:jitwalk>)
else()
  set(JITWALK_CAN_BUILD OFF)
  set(JITWALK_PATH_FOR_TESTS "")
endif()
