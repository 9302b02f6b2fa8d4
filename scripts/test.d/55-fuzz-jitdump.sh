#!/usr/bin/env bash
# libFuzzer run of the jitdump parser (fuzz/jitdump_parse.cpp, ASan + UBSan) starting from its
# seed corpus. JITUNWIND_FUZZ_SECONDS (default 30) bounds the run; a crash fails the stage.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=build-fuzz
CC=clang CXX=clang++ cmake -S . -B "$dir" -DJITUNWIND_BUILD_FUZZ=ON -DJITUNWIND_BUILD_TESTS=OFF \
  -DJITUNWIND_BUILD_BENCH=OFF -DJITUNWIND_BUILD_TOOLS=OFF -DJITUNWIND_BUILD_EXAMPLES=OFF \
  -DJITUNWIND_BUILD_BPF=OFF >/dev/null
cmake --build "$dir" -j2 --target fuzz_jitdump_parse
work=$(mktemp -d /tmp/jitunwind-fuzz-jitdump-XXXXXX)
trap 'rm -rf "$work"' EXIT
cp fuzz/corpus/jitdump_parse/* "$work"/
"$dir/fuzz/fuzz_jitdump_parse" -max_total_time="${JITUNWIND_FUZZ_SECONDS:-30}" -max_len=4096 \
  -print_final_stats=1 "$work" 2>&1 | tail -n 12
