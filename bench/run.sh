#!/usr/bin/env bash
# Runs every Google Benchmark program (bench_*) of a build and prints ratio tables.
#
#   bench/run.sh [--build DIR] [--filter REGEX] [-- extra benchmark args]
#   e.g. bench/run.sh -- --benchmark_min_time=0.5 --benchmark_repetitions=3
#
# Convention (how a benchmark finds its baseline, measured in the same run):
#   1. A benchmark that calls state.SetLabel("ratio_to=<name>") is compared with <name>.
#   2. Otherwise "BM_<thing>/<variant>[/<args>]" is compared with "BM_<thing>/baseline/<args>",
#      or with "BM_<thing>/baseline" when there is no baseline with the same arguments.
#   3. Benchmarks without a baseline are listed without a ratio.
# The compared quantity is CPU time per item when both set items processed
# (state.SetItemsProcessed), else CPU time per iteration. With --benchmark_repetitions the
# median is used. Raw JSON is kept in DIR/bench-results/<program>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=build
FILTER=.
while (($#)); do
  case $1 in
    --build) BUILD_DIR=$2; shift 2 ;;
    --filter) FILTER=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "bench/run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
out_dir=$BUILD_DIR/bench-results
mkdir -p "$out_dir"
shopt -s nullglob
programs=("$BUILD_DIR"/bench/bench_*)
if ((${#programs[@]} == 0)); then
  echo "bench/run.sh: no bench_* programs in $BUILD_DIR/bench (build them first)" >&2
  exit 1
fi
for prog in "${programs[@]}"; do
  [[ -x $prog && -f $prog ]] || continue
  name=$(basename "$prog")
  [[ $name =~ $FILTER ]] || continue
  echo "== $name" >&2
  "$prog" --benchmark_format=json "$@" >"$out_dir/$name.json"
  python3 - "$out_dir/$name.json" <<'PY'
import json, re, sys

data = json.load(open(sys.argv[1]))
ctx = data.get("context", {})
rows = {}
order = []
for b in data["benchmarks"]:
    if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
        continue
    name = b.get("run_name", b["name"])
    unit = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
    cpu = b["cpu_time"] * unit
    ips = b.get("items_per_second")
    per_item = 1e9 / ips if ips else None
    if name not in rows:
        order.append(name)
    rows[name] = {"cpu": cpu, "item": per_item, "label": b.get("label", "")}

def baseline_of(name):
    m = re.search(r"ratio_to=(\S+)", rows[name]["label"])
    if m:
        return m.group(1)
    parts = name.split("/")
    if len(parts) < 2 or parts[1] == "baseline":
        return None
    for cand in ["/".join([parts[0], "baseline"] + parts[2:]), parts[0] + "/baseline"]:
        if cand in rows:
            return cand
    return None

def fmt(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.1f} ns"

print(f"{sys.argv[1].rsplit('/', 1)[-1][:-5]} ({ctx.get('num_cpus', '?')} CPUs, "
      f"load {ctx.get('load_avg', ['?'])[0] if ctx.get('load_avg') else '?'})")
print(f"  {'benchmark':<40} {'cpu/item':>12} {'cpu/iter':>12} {'ratio':>9}  baseline")
for name in order:
    r = rows[name]
    base = baseline_of(name)
    ratio = ""
    if base and base in rows:
        b = rows[base]
        if r["item"] and b["item"]:
            ratio = f"{r['item'] / b['item']:.2f}x"
        else:
            ratio = f"{r['cpu'] / b['cpu']:.2f}x"
    item = fmt(r["item"]) if r["item"] else "-"
    print(f"  {name:<40} {item:>12} {fmt(r['cpu']):>12} {ratio:>9}  {base or ''}")
PY
done
