#!/usr/bin/env bash
# usage: abi-dump.sh LIBJITUNWIND_SO OUT.abi
# Writes the C ABI of a libjitunwind.so built with debug information (RelWithDebInfo or Debug)
# as libabigail XML: the exported jitunwind_* functions and variables with their symbol versions
# and the layouts of every type the public C headers define (abi/c-api.suppr leaves out the C++
# API, which is source-compatible only, and the opaque handles' insides).
set -euo pipefail
lib=$1 out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
command -v abidw >/dev/null || { echo "abi: abidw missing (Debian: abigail-tools)" >&2; exit 1; }
abidw --exported-interfaces-only --suppressions "$root/abi/c-api.suppr" \
  --no-corpus-path --no-comp-dir-path --short-locs --type-id-style hash \
  "$lib" >"$out"
# Without DWARF abidw only sees symbols: no layout would be compared.
grep -q '<function-decl' "$out" ||
  { echo "abi: $lib has no debug information (build RelWithDebInfo or Debug)" >&2; exit 1; }
