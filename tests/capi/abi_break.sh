#!/usr/bin/env bash
# usage: abi_break.sh LIBJITUNWIND_SO BASELINE.abi
# The test of the ABI check (never on main's baseline itself): a copy of the baseline in which
# jitunwind_session_options has a field inserted before `abi` (every later member 32 bits
# further, the struct 32 bits larger), as if a release had changed the struct without a version
# bump. tests/capi/abi.sh must find the change and name the struct.
set -euo pipefail
lib=$1 baseline=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
awk '
  /<class-decl name=.jitunwind_session_options. size-in-bits=/ {
    inside = 1
    match($0, /size-in-bits=.[0-9]+./)
    n = substr($0, RSTART + 14, RLENGTH - 15) + 32
    sub(/size-in-bits=.[0-9]+./, "size-in-bits='\''" n "'\''")
  }
  inside && /<data-member / {
    match($0, /layout-offset-in-bits=.[0-9]+./)
    off = substr($0, RSTART + 23, RLENGTH - 24)
    if (off > 0) sub(/layout-offset-in-bits=.[0-9]+./, "layout-offset-in-bits='\''" off + 32 "'\''")
    changed++
  }
  inside && /<\/class-decl>/ { inside = 0 }
  { print }
  END { if (changed < 10) { print "abi_break: struct not found in the baseline" > "/dev/stderr"; exit 1 } }
' "$baseline" >"$work/changed.abi"
cmp -s "$baseline" "$work/changed.abi" && { echo "abi_break: nothing changed" >&2; exit 1; }
bash "$here/abi.sh" "$lib" "$work/changed.abi" --expect-break | tee "$work/report"
grep -q "jitunwind_session_options" "$work/report" ||
  { echo "abi_break: the report does not name jitunwind_session_options" >&2; exit 1; }
echo "abi_break: the check fails on a changed jitunwind_session_options, as it must"
