#!/bin/bash
# jitwalk's start-up and memory next to perf's, measured in the same run (issue 21, point 7):
#  - wall time of `jitwalk profile -- CMD` vs `perf record -g -e cpu-clock -- CMD` for
#    CMD = `node -e 0` and a ~20 ms native program (built here), median of N interleaved runs;
#    jitwalk with its native table cache warm (the normal case from the second run on) and with
#    --no-table-cache (every table converted, the first run's cost);
#  - jitwalk's peak RSS vs the bytes of the unwind rows it loaded (its -v "table bytes" line).
# JITWALK_BASELINE=PATH adds another jitwalk binary (e.g. one built from an older commit), timed
# in the same rounds, for a before/after.
# Root needed (BPF, perf events). Usage: sudo bench/jitwalk_startup.sh [BUILD_DIR] [N]
# Prints one line per measurement and the ratios; exits 1 if a tool is missing.
set -euo pipefail
build=${1:-build}
reps=${2:-5}
jw=$build/bpf/jitwalk
for t in "$jw" perf node cc /usr/bin/time; do
  command -v "$t" >/dev/null || { echo "jitwalk_startup: $t not found" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/cache  # a cache of this run only: warmed below, never the user's
cat >"$work/spin20.c" <<'C'
#include <time.h>
static volatile unsigned long sink;
__attribute__((noinline)) static void work(void) { for (int i = 0; i < 1000; i++) sink += i; }
int main(void) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do {
    work();
    clock_gettime(CLOCK_MONOTONIC, &b);
  } while ((b.tv_sec - a.tv_sec) * 1000.0 + (b.tv_nsec - a.tv_nsec) / 1e6 < 20);
  return 0;
}
C
cc -O2 -o "$work/spin20" "$work/spin20.c"

# Wall seconds of one run of "$@" (output discarded).
wall() {
  local s e
  s=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || true
  e=$(date +%s.%N)
  echo "$e - $s" | bc
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run_target() {  # name, command...
  local name=$1
  shift
  "$jw" profile -q --folded "$work/f" -- "$@" >/dev/null 2>&1 || true  # warms the cache
  : >"$work/plain" >"$work/perf" >"$work/jw" >"$work/jwcold" >"$work/base"
  for _ in $(seq "$reps"); do
    wall "$@" >>"$work/plain"
    wall perf record -q -o "$work/perf.data" -g -e cpu-clock -- "$@" >>"$work/perf"
    wall "$jw" profile -q --folded "$work/f" -- "$@" >>"$work/jw"
    wall "$jw" profile -q --no-table-cache --folded "$work/f" -- "$@" >>"$work/jwcold"
    if [ -n "${JITWALK_BASELINE:-}" ]; then
      wall "$JITWALK_BASELINE" profile -q --folded "$work/f" -- "$@" >>"$work/base"
    fi
  done
  local p f j c
  p=$(median <"$work/plain")
  f=$(median <"$work/perf")
  j=$(median <"$work/jw")
  c=$(median <"$work/jwcold")
  printf '%-10s plain %.3f s  perf record -g %.3f s  jitwalk %.3f s (%.2fx perf)  jitwalk --no-table-cache %.3f s (%.2fx perf)\n' \
    "$name" "$p" "$f" "$j" "$(echo "$j / $f" | bc -l)" "$c" "$(echo "$c / $f" | bc -l)"
  if [ -n "${JITWALK_BASELINE:-}" ]; then
    local b
    b=$(median <"$work/base")
    printf '%-10s baseline jitwalk (%s) %.3f s (%.2fx perf)\n' "$name" "$JITWALK_BASELINE" "$b" \
      "$(echo "$b / $f" | bc -l)"
    /usr/bin/time -f '%M' -o "$work/brss" "$JITWALK_BASELINE" profile -q --folded "$work/f" -- "$@" \
      >/dev/null 2>&1 || true
    printf '%-10s baseline jitwalk peak RSS %.1f MiB\n' "$name" "$(echo "$(tail -1 "$work/brss") / 1024" | bc -l)"
  fi
  # Memory: peak RSS (KiB) vs the rows loaded (bytes), same run; and perf's RSS for scale.
  /usr/bin/time -f '%M' -o "$work/rss" "$jw" profile -v --folded "$work/f" -- "$@" \
    >/dev/null 2>"$work/err" || true
  local rss bytes prss
  rss=$(tail -1 "$work/rss")
  bytes=$(sed -n 's/.*table bytes: [0-9]* rows (\([0-9]*\) bytes).*/\1/p' "$work/err")
  /usr/bin/time -f '%M' -o "$work/prss" perf record -q -o "$work/perf.data" -g -e cpu-clock \
    -- "$@" >/dev/null 2>&1 || true
  prss=$(tail -1 "$work/prss")
  printf '%-10s jitwalk peak RSS %.1f MiB, unwind rows loaded %.1f MiB (RSS %.1fx the rows); perf record peak RSS %.1f MiB\n' \
    "$name" "$(echo "$rss / 1024" | bc -l)" "$(echo "${bytes:-0} / 1048576" | bc -l)" \
    "$(echo "$rss * 1024 / ${bytes:-1}" | bc -l)" "$(echo "$prss / 1024" | bc -l)"
}

echo "jitwalk start-up and memory, median of $reps runs each (load: $(cut -d' ' -f1-3 /proc/loadavg))"
run_target "node -e 0" node -e 0
run_target "20 ms C" "$work/spin20"
