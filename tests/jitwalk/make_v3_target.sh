#!/bin/sh
# Makes a copy of a program whose .sframe (gas 2.40: SFrame v1) is replaced by the same rows as
# SFrame v3, made by `jitunwind sframe convert`. The v3 section is larger than the v1 one, so it
# cannot take the old one's place in the loaded image: it is added as a non-loaded section at
# the old one's address (FDE starts are relative to it) and the v1 section is renamed. Readers of
# the file's `.sframe` (jitwalk, `jitunwind sframe dump`) then see v3.
# Usage: make_v3_target.sh JITUNWIND OBJCOPY IN OUT
set -eu
jitunwind=$1 objcopy=$2 in=$3 out=$4
addr=$(LC_ALL=C readelf -SW "$in" | sed -n 's/^ *\[ *[0-9]*\] \.sframe  *[A-Z_]*  *\([0-9a-f]*\) .*/\1/p')
[ -n "$addr" ] || { echo "make_v3_target.sh: $in has no .sframe" >&2; exit 1; }
"$jitunwind" sframe convert "$in" --sframe-version 3 --raw "$out.sframe" --address "0x$addr" >/dev/null
"$objcopy" --rename-section .sframe=.sframe.gas-v1 --add-section ".sframe=$out.sframe" \
  --change-section-address ".sframe=0x$addr" "$in" "$out"
rm -f "$out.sframe"
