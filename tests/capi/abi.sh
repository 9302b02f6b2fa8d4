#!/usr/bin/env bash
# usage: abi.sh LIBJITUNWIND_SO BASELINE.abi [--expect-break]
# The C ABI check: compares the built library's C ABI (scripts/abi-dump.sh) with the baseline
# kept in the repository (abi/libjitunwind.abi) using abidiff. Any difference fails: a changed
# or removed function, a changed struct layout or enum, and also an addition that was not
# recorded with scripts/abi-baseline.sh (which demands the version bump). With --expect-break
# the check must find an incompatible change (the test of the check itself).
set -euo pipefail
lib=$1 baseline=$2 expect=${3:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$root/scripts/abi-dump.sh" "$lib" "$work/current.abi"
set +e
abidiff --no-default-suppression "$baseline" "$work/current.abi" >"$work/report" 2>&1
rc=$?
set -e
# abidiff's status is a bit field: 1 error, 2 usage error, 4 ABI change, 8 incompatible change.
if ((rc & 3)); then
  echo "abi: abidiff failed (status $rc):" >&2
  cat "$work/report" >&2
  exit 1
fi
if [[ $expect == --expect-break ]]; then
  ((rc & 4)) || { echo "abi: the deliberately changed baseline was not found different" >&2; exit 1; }
  cat "$work/report"
  echo "abi: the change was found (abidiff status $rc)"
  exit 0
fi
if ((rc != 0)); then
  echo "abi: the C ABI differs from $baseline (abidiff status $rc):" >&2
  cat "$work/report" >&2
  echo "abi: if intended, bump the version (a new node in sdk/jitunwind.map for added functions," \
       "JITUNWIND_SOVERSION for changed or removed ones) and run scripts/abi-baseline.sh" >&2
  exit 1
fi
echo "abi: the C ABI equals $baseline ($(grep -c '<elf-symbol' "$baseline") symbols)"
