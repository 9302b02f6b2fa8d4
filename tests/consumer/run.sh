#!/usr/bin/env bash
# usage: run.sh BUILD_DIR CONSUMER_PROJECT_DIR [JITWALK]
# Installs the SDK into a scratch prefix and builds the outside project against it, as a
# runtime author would: find_package (shared and static) and pkg-config (by hand, C11 -pedantic,
# C++17, C++20; the C program also linked statically through pkg-config --static). Every program
# runs once. As root, each embedder (pkg-config and both find_package builds) then runs under
# perf record (perf report must name its JIT function) and under jitwalk profile (the JIT frame
# must unwind to main).
# Cross builds (tests/consumer/CMakeLists.txt) set CONSUMER_TOOLCHAIN (a CMake toolchain file),
# CONSUMER_CC/CONSUMER_CXX (the compilers) and CONSUMER_RUN (the emulator the programs run under).
set -euo pipefail
build=$1 project=$2 jitwalk=${3:-}
cc=${CONSUMER_CC:-gcc} cxx=${CONSUMER_CXX:-g++}
read -r -a emulator <<<"${CONSUMER_RUN:-}"
cross_args=()
[[ -n ${CONSUMER_TOOLCHAIN:-} ]] && cross_args=(-DCMAKE_TOOLCHAIN_FILE="$CONSUMER_TOOLCHAIN")
label=consumer
scratch=$(mktemp -d /tmp/jitunwind-consumer-XXXXXX)
source "$(dirname "$0")/../support/embedder_checks.sh"
# The embedders' perf maps and jitdumps go to the scratch directory, not /tmp.
export JITUNWIND_DIR=$scratch JITDUMPDIR=$scratch
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
for kind in shared static; do
  cmake -S "$project" -B "$scratch/build-$kind" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
        -DCONSUMER_LINK="$kind" "${cross_args[@]}" >/dev/null
  cmake --build "$scratch/build-$kind" >/dev/null
  for prog in consumer embed_c embed_cxx17 embed_cxx20; do
    echo "consumer: find_package ($kind): $prog"
    LD_LIBRARY_PATH="$scratch/prefix/lib" "${emulator[@]}" "$scratch/build-$kind/$prog"
  done
done

# pkg-config: compile and link by hand, the way a Makefile would.
export PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig"
pc() { pkg-config "$@" jitunwind; }
"$cxx" -std=c++20 "$project/main.cpp" -o "$scratch/consumer-pc" $(pc --cflags --libs)
"$cc" -std=c11 -pedantic -Wall -Wextra -Werror "$project/embed.c" -o "$scratch/embed_c" \
    $(pc --cflags --libs)
for std in 17 20; do
  "$cxx" -std=c++$std -pedantic -Wall -Wextra -Werror "$project/embed.cpp" \
      -o "$scratch/embed_cxx$std" $(pc --cflags --libs)
done
# Static: the archive, then what pkg-config --static says it needs (Libs.private: -lstdc++ for a
# C program, -lelf, ...), linked by the C driver.
"$cc" -std=c11 -pedantic "$project/embed.c" -o "$scratch/embed_c_static" $(pc --cflags) \
    "$scratch/prefix/lib/libjitunwind.a" $(pc --static --libs | sed 's/-ljitunwind\b//')
for prog in consumer-pc embed_c embed_cxx17 embed_cxx20 embed_c_static; do
  echo "consumer: pkg-config: $prog"
  LD_LIBRARY_PATH="$scratch/prefix/lib" "${emulator[@]}" "$scratch/$prog"
done

if ((${#emulator[@]})); then
  echo "consumer: ok (no perf or jitwalk runs: under ${emulator[0]##*/} they would profile the" \
    "emulator, not the code it runs; docs/aarch64.md says how to run them on AArch64 hardware)"
  exit 0
fi
can_profile "$jitwalk" || exit 0

# The real tools on each embedder, as built each way (pkg-config; find_package shared and
# static): perf report names the JIT function from the perf map the SDK wrote; jitwalk walks from
# it through run_jit to main with the published SFrame.
export LD_LIBRARY_PATH="$scratch/prefix/lib"
for dir in "$scratch" "$scratch/build-shared" "$scratch/build-static"; do
  for prog in embed_c embed_cxx17 embed_cxx20; do
    name=${prog%17}; name=${name%20}:spin
    run=("$dir/$prog" 1)
    echo "consumer: profiling ${dir#$scratch/} $prog"
    check_perf_names "$name" -- "${run[@]}"
    check_jitwalk_rooted "$jitwalk" "$name" ";main;(.*;)?run_jit[^;]*;$name" \
      "through run_jit to main" -- "${run[@]}"
  done
done
echo "consumer: ok"
