#!/usr/bin/env bash
# usage: [NM=nm] symbols.sh LIBJITUNWIND_SO PUBLIC_INCLUDE_DIR
# The shared library's C API carries symbol versions (sdk/jitunwind.map) and its SONAME is the C
# ABI generation of jitunwind/config.h: every function the C headers (jitunwind/c/*.h) declare is exported as
# name@@JITUNWIND_<v>, no exported C symbol lacks a version.
set -euo pipefail
lib=$1 include=$2
fail() { echo "symbols: $*" >&2; exit 1; }

soversion=$(sed -n 's/^#define JITUNWIND_SOVERSION \([0-9]*\)$/\1/p' "$include/jitunwind/config.h")
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == "libjitunwind.so.$soversion" ]] || fail "SONAME '$soname', config.h says $soversion"
readelf -V -W "$lib" | grep -q 'Name: JITUNWIND_0\.1' || fail "no JITUNWIND_0.1 version definition"

exported=$("${NM:-nm}" -D --defined-only --with-symbol-versions "$lib" | awk '{print $3}')
declared=$(cat "$include"/jitunwind/c/*.h | grep 'JITUNWIND_API' |
           grep -oE '\bjitunwind_[a-z0-9_]+\(' | tr -d '(' | sort -u)
[[ $(wc -l <<<"$declared") -ge 80 ]] || fail "found only $(wc -l <<<"$declared") declarations"
for f in $declared; do
  grep -qxE "$f@@JITUNWIND_[0-9.]+" <<<"$exported" || fail "$f is not exported with a version"
done
unversioned=$(grep -E '^jitunwind_' <<<"$exported" | grep -v '@@JITUNWIND_' || true)
[[ -z $unversioned ]] || fail "C symbols without a version: $unversioned"
echo "symbols: $(wc -l <<<"$declared") C functions versioned, SONAME $soname"
