#!/usr/bin/env bash
# usage: symbols.sh LIBJITUNWIND_SO PUBLIC_INCLUDE_DIR VERSION_SCRIPT
# The shared library's C API carries symbol versions (sdk/jitunwind.map) and its SONAME is the C
# ABI generation of jitunwind/config.h: every function the C headers (jitunwind/c/*.h) declare
# is exported as name@@JITUNWIND_<v>, no exported C symbol lacks a version, the version script
# lists its symbols one by one (a pattern would take in any new function silently), and no node
# is named after a release newer than the library's own version.
set -euo pipefail
lib=$1 include=$2 map=$3
fail() { echo "symbols: $*" >&2; exit 1; }

define() { sed -n "s/^#define JITUNWIND_$1 \\([0-9]*\\)\$/\\1/p" "$include/jitunwind/config.h"; }
soversion=$(define SOVERSION) major=$(define VERSION_MAJOR) minor=$(define VERSION_MINOR)
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == "libjitunwind.so.$soversion" ]] || fail "SONAME '$soname', config.h says $soversion"

# The version script: explicit names only, nodes no newer than this release.
body=$(sed 's:/\*.*\*/::g' "$map" | sed '/\/\*/,/\*\//d')
grep -q '[*?[]' <<<"$body" && fail "$map uses a pattern: list each symbol"
nodes=$(grep -oE '^JITUNWIND_[0-9]+\.[0-9]+' <<<"$body")
[[ -n $nodes ]] || fail "no version node in $map"
for n in $nodes; do
  v=${n#JITUNWIND_}
  if ((${v%.*} > major || (${v%.*} == major && ${v#*.} > minor))); then
    fail "node $n is newer than the library's version $major.$minor (jitunwind/config.h)"
  fi
  readelf -V -W "$lib" | grep -q "Name: $n\$" || fail "no $n version definition in $lib"
done

exported=$(nm -D --defined-only --with-symbol-versions "$lib" | awk '{print $3}')
# Declarations may span lines: join each header, then take the name before the first '('.
declared=$(for h in "$include"/jitunwind/c/*.h; do
             sed 's:/\*.*\*/::g' "$h" | tr '\n' ' ' |
               grep -oE 'JITUNWIND_API[^;(]*\bjitunwind_[a-z0-9_]+\(' |
               grep -oE 'jitunwind_[a-z0-9_]+\($' | tr -d '('
           done | sort -u)
[[ $(wc -l <<<"$declared") -ge 100 ]] || fail "found only $(wc -l <<<"$declared") declarations"
for f in $declared; do
  grep -qxE "$f@@JITUNWIND_[0-9.]+" <<<"$exported" || fail "$f is not exported with a version"
done
unversioned=$(grep -E '^jitunwind_' <<<"$exported" | grep -v '@@JITUNWIND_' || true)
[[ -z $unversioned ]] || fail "C symbols without a version: $unversioned"
echo "symbols: $(wc -l <<<"$declared") C functions versioned (nodes: $(echo $nodes)), SONAME $soname"
