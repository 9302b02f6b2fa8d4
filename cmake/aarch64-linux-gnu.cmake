# CMake toolchain file: cross-compiles jitunwind for AArch64 Linux (little endian) on a Debian
# x86-64 host with g++-aarch64-linux-gnu and the arm64 multiarch packages
# (scripts/install-deps.sh arm64), and runs what it builds under qemu-user:
#
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake ...
#
# CTest runs every test through CMAKE_CROSSCOMPILING_EMULATOR. `-cpu max` gives the emulated
# CPU pointer authentication (paciasp/autiasp sign and check instead of acting as NOPs). The
# programs load the arm64 multiarch libraries (libc6:arm64, libstdc++6:arm64, ...) through
# /lib/ld-linux-aarch64.so.1, not the cross toolchain's copies in /usr/aarch64-linux-gnu: with
# `-L /usr/aarch64-linux-gnu` the loader comes from there and libc from the multiarch package,
# and glibc's private interface between them differs between the two package versions (here
# pthread_create never returned).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Debian multiarch: find_package and find_library look in /usr/lib/aarch64-linux-gnu (the
# arm64 packages) and never in /usr/lib/x86_64-linux-gnu; architecture-independent packages
# (Catch2, nlohmann-json) are found in /usr as on the host.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
find_program(JITUNWIND_QEMU_AARCH64 qemu-aarch64-static REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${JITUNWIND_QEMU_AARCH64} -cpu max)
