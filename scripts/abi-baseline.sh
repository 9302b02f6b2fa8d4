#!/usr/bin/env bash
# usage: abi-baseline.sh [BUILD_DIR]   (default: build)
# Replaces abi/libjitunwind.abi, the C ABI that tests/capi/abi.sh compares every build with,
# after an intended C API change. It refuses unless the change came with a version bump
# (docs/c-api.md, "What is stable"): a new symbol version node in sdk/jitunwind.map for added
# functions, or a new JITUNWIND_SOVERSION for anything removed or changed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
lib=$build/sdk/libjitunwind.so
[[ -f $lib ]] || { echo "abi-baseline: $lib missing: build first" >&2; exit 1; }
new=$(mktemp)
trap 'rm -f "$new"' EXIT
bash scripts/abi-dump.sh "$lib" "$new"
versions() { grep -o "version='JITUNWIND_[0-9.]*'" "$1" | sort -u; }
soname() { grep -o "soname='[^']*'" "$1" | head -1; }
if [[ -f abi/libjitunwind.abi ]]; then
  if cmp -s "$new" abi/libjitunwind.abi; then
    echo "abi-baseline: unchanged"
    exit 0
  fi
  # Only positions in the headers moved (abidiff sees no ABI change): refresh the baseline.
  if abidiff --no-default-suppression abi/libjitunwind.abi "$new" >/dev/null 2>&1; then
    install -m 644 "$new" abi/libjitunwind.abi
    echo "abi-baseline: no ABI change; abi/libjitunwind.abi refreshed"
    exit 0
  fi
  if [[ $(soname "$new") == "$(soname abi/libjitunwind.abi)" &&
        $(versions "$new") == "$(versions abi/libjitunwind.abi)" ]]; then
    echo "abi-baseline: the C ABI changed but neither JITUNWIND_SOVERSION nor the symbol" \
         "version nodes did: add a node to sdk/jitunwind.map for new functions, bump" \
         "JITUNWIND_SOVERSION (jitunwind/config.h) for changed or removed ones" >&2
    exit 1
  fi
fi
install -m 644 "$new" abi/libjitunwind.abi
echo "abi-baseline: abi/libjitunwind.abi written ($(soname "$new"), $(versions "$new" | tr '\n' ' '))"
