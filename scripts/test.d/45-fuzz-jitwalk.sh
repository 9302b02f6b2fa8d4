#!/usr/bin/env bash
# Fuzzes the eBPF walker's decoders of foreign data for a short, fixed time: .eh_frame -> rows
# (fuzz/jitwalk_ehframe.cpp), a JIT window's SFrame -> strictly laid out rows
# (fuzz/jitwalk_window.cpp), jitdump and perf map readers (fuzz/jitwalk_jitnames.cpp).
# Seeds: .eh_frame of a gcc-built object, .sframe of an llvm-mc --gsframe object (v2), a perf map.
# FUZZ_SECONDS (default 20) per target.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD_DIR=${FUZZ_JITWALK_BUILD_DIR:-build-fuzz-jitwalk}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-20}

CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DJITUNWIND_BUILD_FUZZ=ON -DJITUNWIND_BUILD_TESTS=OFF -DJITUNWIND_BUILD_BENCH=OFF \
  -DJITUNWIND_BUILD_EXAMPLES=OFF -DJITUNWIND_BUILD_BPF=OFF -DJITUNWIND_BUILD_TOOLS=OFF >/dev/null
cmake --build "$BUILD_DIR" -j2 --target fuzz_jitwalk_ehframe fuzz_jitwalk_window fuzz_jitwalk_jitnames

work=$(mktemp -d /tmp/jitunwind-fuzz-jitwalk.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ehframe" "$work/window" "$work/jitnames"
printf 'long f(long x) { return x + 1; }\nlong g(long (*h)(long)) { return h(2) * 3; }\n' >"$work/s.c"
gcc -O2 -fomit-frame-pointer -c "$work/s.c" -o "$work/gcc.o"
objcopy -O binary --only-section=.eh_frame "$work/gcc.o" "$work/eh.bin"
# 8 bytes of section address, then the section (fuzz/jitwalk_ehframe.cpp's input format).
{ printf '\000\020\000\000\000\000\000\000'; cat "$work/eh.bin"; } >"$work/ehframe/seed"
gcc -O2 -fomit-frame-pointer -S "$work/s.c" -o "$work/s.s"
llvm-mc-22 -triple x86_64-linux-gnu -filetype=obj --gsframe "$work/s.s" -o "$work/llvm.o"
objcopy -O binary --only-section=.sframe "$work/llvm.o" "$work/sf.bin"
{ printf '\000\020\000'; cat "$work/sf.bin"; } >"$work/window/seed"
printf '\0017f0000001000 40 jit:foo\n7f0000001040 20 bar\n' >"$work/jitnames/seed"

status=0
for target in ehframe window jitnames; do
  echo "fuzz_jitwalk_$target: ${SECONDS_PER_TARGET}s"
  if ! (cd "$work" && "$OLDPWD/$BUILD_DIR/fuzz/fuzz_jitwalk_$target" \
      -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 -print_final_stats=1 \
      "$work/$target" >"$work/$target.log" 2>&1); then
    tail -n 60 "$work/$target.log"
    echo "fuzz_jitwalk_$target: FAILED (inputs kept in $work)"
    trap - EXIT
    status=1
  else
    grep -E "^stat::number_of_executed_units|^Done" "$work/$target.log" || true
  fi
done
exit $status
