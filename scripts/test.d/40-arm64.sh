#!/usr/bin/env bash
# AArch64 stage (docs/aarch64.md): cross-builds the SDK, its unit tests of the modules that
# describe, encode, decode and unwind frames (frame, sframe, cfi, elf, C API, registry), the C API
# consumer test and toy-jit for arm64 (cmake/aarch64-linux-gnu.cmake, -O1 -g0), runs them under
# qemu-aarch64-static -cpu max (pointer authentication on), and runs the host CLI's differential
# test of `sframe build --from-eh-frame` on arm64 objects against gas's --gsframe.
#
# Only what this stage runs is built: no BPF walker (eBPF and perf do not run under qemu-user),
# benchmarks, fuzzers, ORC plugin, preload library or CLI in the cross build. The host side
# (the x86-64 toy-jit as the reference output, the CLI and its tests) comes from stage 10's
# build/ (a no-op rebuild there; a partial build when this stage runs alone).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/stage.sh

stage_build() {
  bash scripts/install-deps.sh arm64
  cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_C_FLAGS_RELEASE=-O1 -g0 -DNDEBUG" \
    "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -g0 -DNDEBUG" \
    -DJITUNWIND_BUILD_BPF=OFF -DJITUNWIND_BUILD_BENCH=OFF -DJITUNWIND_BUILD_FUZZ=OFF \
    -DJITUNWIND_BUILD_ORC=OFF -DJITUNWIND_BUILD_PRELOAD=OFF -DJITUNWIND_BUILD_TOOLS=OFF \
    "-DJITUNWIND_TEST_MODULES=frame;sframe;cfi;elf;capi;registry;arm64;consumer" \
    "-DJITUNWIND_EXAMPLES=toylang;toy-jit" \
    -DJITUNWIND_HOST_TOY_JIT="$PWD/build/examples/toy-jit/toy-jit" >/dev/null
  cmake --build build-arm64 -j"$(nproc)"
}

stage_test() {
  # The host side: the x86-64 toy-jit (the reference output), the CLI and its tests. A no-op
  # after stage 10; built here when this stage runs alone. Never in the build phase, which may
  # run in the background while stage 10's tests use build/.
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j"$(nproc)" --target toy-jit jitunwind_cli test_cli

  local status=0
  # Every test of the cross build, each under qemu-aarch64-static (CMAKE_CROSSCOMPILING_EMULATOR).
  ctest --test-dir build-arm64 --output-on-failure --timeout 900 -j"${CTEST_JOBS:-3}" \
    --no-tests=error || status=1
  # The host CLI on arm64 objects; here a missing cross compiler is a failure, not a skip.
  JITUNWIND_REQUIRE_ARM64=1 ctest --test-dir build --output-on-failure --timeout 900 \
    -R '^cli:arm64 objects:' --no-tests=error || status=1
  return $status
}

run_stage_phases "$@"
