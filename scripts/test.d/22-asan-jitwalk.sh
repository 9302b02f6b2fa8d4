#!/usr/bin/env bash
# ASan + UBSan stage for the eBPF walker's user side: jitwalk and its tests (unit tests of the
# .eh_frame reader, row layout, table store, writers, JIT names; end-to-end runs with BPF when
# root) built with -fsanitize=address,undefined. It reuses stage 20's build-asan (the library is
# already compiled there) and leaves out the acceptance tests against the example runtimes
# (stage 10 runs them), so only jitwalk and its test programs are compiled here.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/sanitizer-build-flags.sh

cmake -S . -B build-asan "${SANITIZER_BUILD_FLAGS[@]}" \
  -DJITUNWIND_SANITIZE=address,undefined -DJITUNWIND_BUILD_BENCH=OFF \
  -DJITWALK_TEST_EXAMPLES=OFF >/dev/null
cmake --build build-asan -j2 --target test_jitwalk
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Left out here (stage 10 runs them): the two 20-run acceptance tests of recompiling runtimes
# (~4 min each; the same readers are exercised by the other jitwalk tests in a fraction of the
# time), and the sub-page test's share of samples that reach main (>= 99 %): its target, built
# with ASan here, runs several times slower, so more samples land while windows are still being
# published (97.5 % in one run) -- a threshold about the release build, not a memory check.
ctest --test-dir build-asan --output-on-failure --timeout 900 -R '^jitwalk:' --no-tests=error \
  -E 'profiled 20 times|verify of recompiling runtimes, 20 times|^jitwalk:sub-page publishing: 1000 functions'
