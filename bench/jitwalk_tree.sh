#!/bin/bash
# jitwalk on a pre-forking server against one process of the same runtime (issue 31): a node
# cluster of N workers (tests/jitwalk/targets/node_cluster.js: fork + exec of node per worker,
# each burning 200 ms of CPU) next to one node process exec'd the same way (`sh -c 'exec node
# ...'`), both profiled by `jitwalk profile -v` with the native table cache warm:
#  - jitwalk's peak RSS (/usr/bin/time %M) and the rows in its BPF table at the peak;
#  - the time each exec'd node is held at its exec until its tables and probes are in place
#    (jitwalk's -v "in place in X ms" lines; median and maximum over the workers);
#  - jitwalk's wall time.
# Ratios cluster / one process are printed. Root needed. Usage:
#   sudo bench/jitwalk_tree.sh [BUILD_DIR] [WORKERS] [ROUNDS]
set -euo pipefail
build=${1:-build}
workers=${2:-16}
rounds=${3:-3}
jw=$build/bpf/jitwalk
src=$(cd "$(dirname "$0")/.." && pwd)
for t in "$jw" node /usr/bin/time; do
  command -v "$t" >/dev/null || { echo "jitwalk_tree: $t not found" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/cache # warmed by the first round, never the user's cache
cluster=$src/tests/jitwalk/targets/node_cluster.js
one="const s=process.cpuUsage();let x=0;while(true){for(let i=0;i<1e5;i++)x+=(i*7)%13;const u=process.cpuUsage(s);if((u.user+u.system)/1000>=200)break}"

# measure LABEL -- COMMAND...: prints "LABEL rss_kib rows wall_s median_ms max_ms"
measure() {
  local label=$1
  shift 2
  local s e
  s=$(date +%s.%N)
  /usr/bin/time -f '%M' -o "$work/rss" "$jw" profile -v -F 99 -- "$@" >/dev/null 2>"$work/err"
  e=$(date +%s.%N)
  local rows ms
  rows=$(grep -o 'table bytes: [0-9]* rows' "$work/err" | grep -o '[0-9]*' | head -1)
  ms=$(grep -o 'in place in [0-9]* ms' "$work/err" | grep -o '[0-9]*' | sort -n)
  local n med max
  n=$(echo "$ms" | grep -c . || true)
  med=$(echo "$ms" | sed -n "$(((n + 1) / 2))p")
  max=$(echo "$ms" | tail -1)
  echo "$label $(cat "$work/rss") ${rows:-0} $(echo "$e - $s" | bc) ${med:-0} ${max:-0}"
}

"$jw" profile -q -F 99 -- node -e 0 >/dev/null 2>&1 # warm the table cache
for r in $(seq "$rounds"); do
  measure one -- sh -c "exec node -e '$one'"
  measure cluster -- node "$cluster" "$workers" 200
done | tee "$work/all"
awk -v w="$workers" '
  { rss[$1] += $2; rows[$1] += $3; wall[$1] += $4; med[$1] += $5; max[$1] += $6; n[$1]++ }
  END {
    for (k in n) printf "%-8s mean of %d: peak RSS %.1f MiB, rows at peak %d, wall %.2f s, exec held %.0f ms median (%.0f max)\n",
      k, n[k], rss[k] / n[k] / 1024, rows[k] / n[k], wall[k] / n[k], med[k] / n[k], max[k] / n[k]
    printf "ratios %d workers / one process: peak RSS %.2fx, rows at peak %.2fx, exec held (median) %.2fx\n",
      w, rss["cluster"] / rss["one"], rows["cluster"] / rows["one"], med["cluster"] / med["one"]
  }' "$work/all"
