#!/usr/bin/env bash
# Fuzzes the jitunwind CLI's input paths for a short, fixed time: ELF/raw section loading with
# relocation resolution (fuzz/cli_sframe_input.cpp) and the JSON description reader with its
# encode/decode round-trip property (fuzz/cli_sframe_json.cpp). Seeds: the demo description,
# an llvm-mc --gsframe object (v2) and a gcc -Wa,--gsframe object (binutils 2.40: v1).
# FUZZ_SECONDS (default 30) per target.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD_DIR=${FUZZ_CLI_BUILD_DIR:-build-fuzz-cli}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-30}

CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DJITUNWIND_BUILD_FUZZ=ON -DJITUNWIND_BUILD_TESTS=OFF -DJITUNWIND_BUILD_BENCH=OFF \
  -DJITUNWIND_BUILD_EXAMPLES=OFF -DJITUNWIND_BUILD_BPF=OFF -DJITUNWIND_BUILD_TOOLS=OFF >/dev/null
cmake --build "$BUILD_DIR" -j2 --target fuzz_cli_sframe_input fuzz_cli_sframe_json

work=$(mktemp -d /tmp/jitunwind-fuzz-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/input" "$work/json"
cp examples/demo/jit-functions.json "$work/json/"
llvm-mc-22 -triple x86_64-linux-gnu -filetype=obj --gsframe tests/cli/data/cfi_amd64.s \
  -o "$work/input/llvm.o"
printf 'int f(int x) { return x + 1; }\nint g(int (*h)(int)) { return h(2) * 3; }\n' >"$work/v1.c"
gcc -O2 -Wa,--gsframe -c "$work/v1.c" -o "$work/input/v1.o"

status=0
for target in input json; do
  echo "fuzz_cli_sframe_$target: ${SECONDS_PER_TARGET}s"
  if ! (cd "$work" && "$OLDPWD/$BUILD_DIR/fuzz/fuzz_cli_sframe_$target" \
      -max_total_time="$SECONDS_PER_TARGET" -max_len=80000 -print_final_stats=1 \
      "$work/$target" >"$work/$target.log" 2>&1); then
    tail -n 60 "$work/$target.log"
    echo "fuzz_cli_sframe_$target: FAILED (crash input left in $work, kept: see above)"
    trap - EXIT
    status=1
  else
    grep -E "^stat::number_of_executed_units|^Done" "$work/$target.log" || true
  fi
done
exit $status
