#!/usr/bin/env bash
# usage: run.sh LIBJITUNWIND_SO SOURCE_DIR [JITWALK]
# The LuaJIT module (lua/jitunwind.lua) on Debian's luajit: its checks without a profiler
# (check_module.lua), then, as root, hot.lua and spill.lua profiled: jitwalk unwinds from the
# traces through the interpreter's C frame to _start, perf report names the traces from the
# perf map. Also prints (does not assert) how much of an interpreter-only run (-joff) jitwalk
# unwinds: LuaJIT's own unwind entry for lj_vm is wrong in its helper routines (docs/jitwalk.md).
set -euo pipefail
lib=$1 src=$2 jitwalk=${3:-}
label=luajit
luajit=${LUAJIT:-/usr/bin/luajit}
if [[ ! -x $luajit ]]; then
  if [[ ${JITUNWIND_REQUIRE_BPF:-} == 1 ]]; then
    echo "$label: FAILED: no $luajit (scripts/install-deps.sh installs Debian's luajit)" >&2
    exit 1
  fi
  echo "$label: skipped: no $luajit (apt-get install luajit)"
  exit 0
fi
scratch=$(mktemp -d /tmp/jitunwind-luajit-XXXXXX)
source "$src/tests/support/embedder_checks.sh"
tests=$src/tests/luajit
export JITUNWIND_LIBRARY=$lib LUA_PATH="$src/lua/?.lua;;" JITUNWIND_DIR=$scratch
export JITDUMPDIR=$scratch

# An error in a trace event handler is only printed by LuaJIT ("VM handler failed"): fail on it.
"$luajit" "$tests/check_module.lua" "$tests" >"$scratch/check.out" 2>"$scratch/check.err" &&
  ! grep -q "handler failed" "$scratch/check.err" ||
  { cat "$scratch/check.out" "$scratch/check.err" >&2; exit 1; }
grep "^$label:" "$scratch/check.out"
can_profile "$jitwalk" || exit 0

# profile_share SCRIPT SECONDS [LUAJIT OPTIONS]: prints "rooted total" for a jitwalk profile of
# the script with the module loaded: samples whose stack runs from _start through lua_pcall
# (the script's interpreter frame) into a trace the module named.
profile_share() {
  local script=$1 seconds=$2 folded=$scratch/jitwalk-$RANDOM.folded
  shift 2
  "$jitwalk" profile -q -F 499 --folded "$folded" -- \
    "$luajit" "$@" -e 'require("jitunwind")' "$tests/$script" "$seconds" >/dev/null
  awk -v re='^luajit(-[0-9]+)?;_start;(.*;)?lua_pcall;TRACE_[0-9]+ [^;]+$' '
    { n = $NF; total += n; line = $0; sub(/ [0-9]+$/, "", line); if (line ~ re) rooted += n }
    END { print rooted + 0, total + 0 }' "$folded"
  cp "$folded" "$scratch/last.folded"
}

for script in hot.lua spill.lua; do
  read -r rooted total < <(profile_share "$script" 1)
  if ((total == 0 || rooted * 100 < total * 90)); then
    echo "$label: FAILED: jitwalk: $rooted of $total samples of $script unwind" \
      "from a trace to _start" >&2
    sort -t' ' -k2 "$scratch/last.folded" | tail -15 >&2
    exit 1
  fi
  echo "$label: jitwalk: $rooted of $total samples of $script unwind from a named trace to _start"
done

# Only the perf map names anything "hot.lua:" (the trace number and, rarely, which trace is
# hottest depend on LuaJIT's hot counters, hashed by address: check_module.lua).
check_perf_names "hot.lua:" -- \
  "$luajit" -e 'require("jitunwind")' "$tests/hot.lua" 0.5

# Interpreter only: no traces; what LuaJIT's own lj_vm unwind entry gives (not asserted).
folded=$scratch/joff.folded
"$jitwalk" profile -q -F 499 --folded "$folded" -- \
  "$luajit" -joff "$tests/hot.lua" 0.5 >/dev/null
awk '{ n = $NF; total += n; if ($0 ~ /^luajit(-[0-9]+)?;_start;/) rooted += n }
     END { printf "luajit: -joff (information): %d of %d samples unwound to _start\n",
                   rooted, total }' \
  "$folded"
