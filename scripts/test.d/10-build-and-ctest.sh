#!/usr/bin/env bash
# Release-style build with every component, then the whole CTest suite.
set -euo pipefail
cd "$(dirname "$0")/../.."
# The peers' versions, for comparing runs on machines installed on different days (llvm-22,
# chromium and linux-perf come from bookworm-security and move).
{
  echo "peers: $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"
  for v in "bpftrace --version" "perf version" "llvm-readobj-22 --version" "gdb --version" \
    "chromium --version" "as --version" "clang --version"; do
    printf 'peers: %s: %s\n' "${v%% *}" "$($v 2>/dev/null | grep -m1 -iE 'version|[0-9]+\.[0-9]+' | xargs)"
  done
} || true
BUILD_DIR=build bash scripts/build.sh
ctest --test-dir build --output-on-failure --timeout 900 -j"${CTEST_JOBS:-3}" ${CTEST_ARGS:-}

# catch_discover_tests splits a test name at ';' into CTest tests that run nothing and pass:
# refuse such names (found after two tests had silently not run).
bad=$(for t in build/tests/test_*; do
  [[ -f $t && -x $t ]] && "$t" --list-test-names-only | grep ';' | sed "s|^|${t##*/}: |"
done || true)
if [[ -n $bad ]]; then
  echo "test names with ';' (CTest would not run them):" >&2
  echo "$bad" >&2
  exit 1
fi
