#!/usr/bin/env bash
# Release-style build with every component, then the whole CTest suite.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=build bash scripts/build.sh
ctest --test-dir build --output-on-failure --timeout 900 ${CTEST_ARGS:-}
