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

# The same checks for many programs with one tool start each: add_to_script SCRIPT NAME --
# COMMAND... appends COMMAND to SCRIPT, which runs the programs one after the other and writes
# "PID NAME" for each to SCRIPT.pids; check_perf_names_each and check_jitwalk_rooted_each then
# run the script once under perf record / jitwalk profile (which follows the processes a command
# starts) and check every process on its own. A perf or jitwalk start costs more than a short
# program: this is what keeps tests of many embedders fast.
add_to_script() {
  local script=$1 name=$2
  shift 3
  { printf '%q ' "$@"; printf '& echo "$! %s" >>%q; wait $!\n' "$name" "$script.pids"; } >>"$script"
}

check_perf_names_each() {
  local script=$1 data=$scratch/perf-each-$RANDOM.data m pid name
  : >"$script.pids"
  perf record -q -e cpu-clock -F 499 -g -o "$data" -- bash -e "$script" >/dev/null
  for m in "$scratch"/perf-*.map; do
    [[ -e /tmp/${m##*/} ]] || { cp "$m" /tmp/ && copied_maps+=("/tmp/${m##*/}"); }
  done
  perf report -i "$data" --stdio --no-children --sort pid,sym -g none 2>/dev/null >"$data.report"
  while read -r pid name; do
    if ! awk -v pid="$pid" -v name="$name" \
         'match($0, "(^|[^0-9])" pid ":") && index($0, name) {found = 1} END {exit !found}' \
         "$data.report"; then
      echo "$label: FAILED: perf report does not name $name in process $pid:" >&2
      head -40 "$data.report" >&2
      exit 1
    fi
    echo "$label: perf report names $name in process $pid"
  done <"$script.pids"
}

# check_jitwalk_rooted_each JITWALK SCRIPT REGEX WHAT: as check_jitwalk_rooted for each process
# of SCRIPT, NAME being its name and REGEX with every "@NAME@" replaced by it.
check_jitwalk_rooted_each() {
  local jitwalk=$1 script=$2 template=$3 what=$4 folded=$scratch/jitwalk-each-$RANDOM.folded
  local pid name regex jit rooted
  : >"$script.pids"
  "$jitwalk" profile -q -F 499 --folded "$folded" -- bash -e "$script" >/dev/null
  while read -r pid name; do
    regex=${template//@NAME@/$name}
    jit=$({ grep -E "^[^;]*-$pid;" "$folded" || true; } | { grep -F ";$name " || true; } |
          awk '{n += $NF} END {print n + 0}')
    rooted=$({ grep -E "^[^;]*-$pid;" "$folded" || true; } | { grep -F ";$name " || true; } |
             { grep -E "$regex [0-9]+$" || true; } | awk '{n += $NF} END {print n + 0}')
    if ((jit == 0 || rooted * 100 < jit * 95)); then
      echo "$label: FAILED: jitwalk: $rooted of $jit samples in $name (process $pid) unwind $what:" >&2
      grep -E "^[^;]*-$pid;" "$folded" | sort -k2 -n -r | head -20 >&2
      exit 1
    fi
    echo "$label: jitwalk unwinds $rooted of $jit samples in $name (process $pid) $what"
  done <"$script.pids"
}
