# Shell helpers for the tests that profile an outside embedder with the real tools (sourced by
# tests/consumer/run.sh and tests/python/run.sh). They expect $scratch (a directory removed on
# exit) and $label (the prefix of every message); every check prints what it found or fails.

copied_maps=()
trap 'rm -rf "$scratch" "${copied_maps[@]}"' EXIT

# True when the profiling checks can run: root and a jitwalk binary. Otherwise says why and
# fails the test under JITUNWIND_REQUIRE_BPF=1 (CI), else returns 1 (the caller skips).
can_profile() {
  local jitwalk=$1
  [[ $(id -u) == 0 && -n $jitwalk ]] && return 0
  local why="perf and jitwalk runs need root and jitwalk (uid $(id -u), jitwalk '$jitwalk')"
  if [[ ${JITUNWIND_REQUIRE_BPF:-} == 1 ]]; then
    echo "$label: FAILED: $why, and JITUNWIND_REQUIRE_BPF=1" >&2
    exit 1
  fi
  echo "$label: skipped: $why"
  return 1
}

# perf report NAME -- COMMAND...: records COMMAND with call graphs and checks that perf report
# names NAME (from the perf map the SDK wrote under $JITUNWIND_DIR: perf looks for
# /tmp/perf-PID.map only, so the maps are copied there and removed on exit).
check_perf_names() {
  local name=$1 data=$scratch/perf-$RANDOM.data m
  shift 2
  perf record -q -e cpu-clock -F 499 -g -o "$data" -- "$@" >/dev/null
  for m in "$scratch"/perf-*.map; do
    [[ -e /tmp/${m##*/} ]] || { cp "$m" /tmp/ && copied_maps+=("/tmp/${m##*/}"); }
  done
  perf report -i "$data" --stdio --no-children --sort sym 2>/dev/null >"$data.report"
  if ! grep -qF "$name" "$data.report"; then
    echo "$label: FAILED: perf report does not name $name:" >&2
    head -40 "$data.report" >&2
    exit 1
  fi
  echo "$label: perf report names $name"
}

# check_jitwalk_rooted JITWALK NAME REGEX WHAT -- COMMAND...: profiles COMMAND with jitwalk and
# checks that at least 95 % of the samples whose leaf is NAME have a stack matching REGEX
# (extended, against the folded line without its count).
check_jitwalk_rooted() {
  local jitwalk=$1 name=$2 regex=$3 what=$4 folded=$scratch/jitwalk-$RANDOM.folded
  shift 5
  "$jitwalk" profile -q -F 499 --folded "$folded" -- "$@" >/dev/null
  local jit rooted
  jit=$({ grep -F ";$name " "$folded" || true; } | awk '{n += $NF} END {print n + 0}')
  rooted=$({ grep -E "$regex [0-9]+$" "$folded" || true; } | { grep -F ";$name " || true; } |
           awk '{n += $NF} END {print n + 0}')
  if ((jit == 0 || rooted * 100 < jit * 95)); then
    echo "$label: FAILED: jitwalk: $rooted of $jit samples in $name unwind $what:" >&2
    sort -k2 -n -r "$folded" | head -20 >&2
    exit 1
  fi
  echo "$label: jitwalk unwinds $rooted of $jit samples in $name $what"
}
