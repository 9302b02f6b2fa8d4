#!/usr/bin/env bash
# Configures and builds jitunwind into ${BUILD_DIR:-build}: every part, also where the demo
# configured the directory for its own targets only. Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
  -DJITUNWIND_BUILD_TESTS=ON -DJITUNWIND_BUILD_BENCH=ON "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
