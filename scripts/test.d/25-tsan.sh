#!/usr/bin/env bash
# ThreadSanitizer build of the registry (writer, in-process seqlock reader) and the remote reader,
# running their tests, including the 8-thread hammer with its out-of-process reader, the
# window test that polls a session from two threads while windows are retired, and the batched
# file publishers with their flusher thread (no fork tests: TSan does not follow a
# multithreaded fork). Only these targets are built, so the stage stays a few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/sanitizer-build-flags.sh
BUILD_DIR=build-tsan
cmake -S . -B "$BUILD_DIR" "${SANITIZER_BUILD_FLAGS[@]}" -DJITUNWIND_SANITIZE=thread \
  -DJITUNWIND_BUILD_BPF=OFF -DJITUNWIND_BUILD_EXAMPLES=OFF -DJITUNWIND_BUILD_TOOLS=OFF \
  -DJITUNWIND_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target test_registry test_remote test_window test_perfmap
# halt_on_error: the first race report fails the test (and so the stage).
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  ctest --test-dir "$BUILD_DIR" -j"${CTEST_JOBS:-3}" -R '^(registry|remote):|^window:session: poll on other threads|^perfmap:(concurrent writers|batched|the flusher writes)|^window:(batched: flush|the flusher thread writes)' --no-tests=error --output-on-failure --timeout 600
