#!/usr/bin/env bash
# libFuzzer stage: builds every fuzz/<name>.cpp with clang in build-fuzz (the library itself is
# compiled with -fsanitize=fuzzer-no-link,address,undefined so the fuzzers see its coverage) and
# runs each fuzz_<name>, one per core at a time, for FUZZ_SECONDS (default 15, sized to the CI budget; the SFrame decoder, the decoder every
# consumer relies on, gets twice that) on the seed corpus fuzz/corpus/<name>/
# when it exists. New inputs go to build-fuzz/corpus/<name>/ (scratch, not committed). A crash,
# a sanitizer report, a leak or a 10 s timeout on one input fails the stage; the reproducer is
# left in build-fuzz/ (crash-*, timeout-*, leak-*).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/sanitizer-build-flags.sh
FUZZ_SECONDS=${FUZZ_SECONDS:-15}

CC=clang CXX=clang++ cmake -S . -B build-fuzz "${SANITIZER_BUILD_FLAGS[@]}" \
  -DJITUNWIND_BUILD_FUZZ=ON -DJITUNWIND_SANITIZE=fuzzer-no-link,address,undefined \
  -DJITUNWIND_BUILD_TESTS=OFF -DJITUNWIND_BUILD_BENCH=OFF -DJITUNWIND_BUILD_TOOLS=OFF \
  -DJITUNWIND_BUILD_EXAMPLES=OFF -DJITUNWIND_BUILD_BPF=OFF >/dev/null
cmake --build build-fuzz -j2

shopt -s nullglob
# One fuzzer per core at a time: each still gets a whole core for its time, as when they ran one
# after another, in half the wall time.
FUZZ_JOBS=${FUZZ_JOBS:-$(nproc)}

# Runs one fuzzer; its output goes to build-fuzz/NAME.log, its exit status to NAME.status.
fuzz_one() {
  local bin=$1 name=$2 seconds=$3
  local work=build-fuzz/corpus/$name
  mkdir -p "$work"
  local seeds=()
  [[ -d fuzz/corpus/$name ]] && seeds=("fuzz/corpus/$name")
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix=build-fuzz/ "$work" "${seeds[@]}" \
    >"build-fuzz/$name.log" 2>&1
  echo $? >"build-fuzz/$name.status"
}

names=()
for bin in build-fuzz/fuzz/fuzz_*; do
  [[ -f $bin && -x $bin ]] || continue
  name=${bin##*/fuzz_}
  seconds=$FUZZ_SECONDS
  [[ $name == sframe_decode ]] && seconds=$((FUZZ_SECONDS * 2))
  seeds=none
  [[ -d fuzz/corpus/$name ]] && seeds=fuzz/corpus/$name
  echo "fuzz: $name for ${seconds} s (seed corpus: $seeds)"
  rm -f "build-fuzz/$name.status"
  while (($(jobs -rp | wc -l) >= FUZZ_JOBS)); do wait -n; done
  fuzz_one "$bin" "$name" "$seconds" &
  names+=("$name")
done
wait

status=0
for name in "${names[@]}"; do
  if [[ $(cat "build-fuzz/$name.status" 2>/dev/null) == 0 ]]; then
    echo "fuzz: $name passed"
    grep -E "^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb)" \
      "build-fuzz/$name.log" || true
  else
    echo "fuzz: $name FAILED; last output:"
    tail -60 "build-fuzz/$name.log"
    status=1
  fi
done
if ((${#names[@]} == 0)); then
  echo "fuzz: no fuzz_* binaries were built"
  exit 1
fi
exit $status
