#!/usr/bin/env bash
# usage: run.sh BUILD_DIR CONSUMER_PROJECT_DIR [JITWALK [LLVM_VERSION]]
# Installs the SDK into a scratch prefix and builds the outside project against it, as a
# runtime author would: find_package (shared and static) and pkg-config (by hand, C11 -pedantic,
# C++17, C++20; the C program also linked statically through pkg-config --static). Every program
# runs once. As root, each embedder (pkg-config and both find_package builds) then runs under
# perf record (perf report must name its JIT function) and under jitwalk profile (the JIT frame
# must unwind to main). A C-only project (project_c: no CXX language) links the static library
# and finds no LLVM; with LLVM_VERSION (jitunwind::orc built), project_orc uses
# find_package(jitunwind COMPONENTS orc), which must find that LLVM (not another installed one),
# and a component jitunwind does not have must fail.
# A strict C89 embedder compiles with -Werror, and the Python package installed with the SDK
# loads the library installed beside it without JITUNWIND_LIBRARY.
set -euo pipefail
build=$1 project=$2 jitwalk=${3:-} llvm_version=${4:-}
label=consumer
scratch=$(mktemp -d /tmp/jitunwind-consumer-XXXXXX)
source "$(dirname "$0")/../support/embedder_checks.sh"
# The embedders' perf maps and jitdumps go to the scratch directory, not /tmp.
export JITUNWIND_DIR=$scratch JITDUMPDIR=$scratch
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
for kind in shared static; do
  cmake -S "$project" -B "$scratch/build-$kind" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
        -DCONSUMER_LINK="$kind" >/dev/null
  cmake --build "$scratch/build-$kind" >/dev/null
  for prog in consumer embed_c embed_cxx17 embed_cxx20; do
    echo "consumer: find_package ($kind): $prog"
    LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/build-$kind/$prog"
  done
done

# A C-only project: jitunwind_static's link interface brings the C++ runtime.
here=$(dirname "$0")
cmake -S "$here/project_c" -B "$scratch/build-c" -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/build-c" >/dev/null
for prog in embed_c_static embed_c_shared; do
  echo "consumer: C-only project: $prog"
  LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/build-c/$prog"
done

# COMPONENTS orc.
if [[ -n $llvm_version ]]; then
  cmake -S "$here/project_orc" -B "$scratch/build-orc" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
        -DJITUNWIND_EXPECT_LLVM="$llvm_version" | grep 'consumer:'
  cmake --build "$scratch/build-orc" >/dev/null
  LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/build-orc/orc_consumer"
  if cmake -S "$here/project_orc" -B "$scratch/build-bogus" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
           -DJITUNWIND_BOGUS_COMPONENT=1 >"$scratch/bogus.log" 2>&1; then
    echo "consumer: FAILED: find_package(jitunwind COMPONENTS orc bogus) succeeded" >&2
    exit 1
  fi
  grep -q "no component 'bogus'" "$scratch/bogus.log" ||
    { echo "consumer: FAILED: no reason given for the unknown component:" >&2; cat "$scratch/bogus.log" >&2; exit 1; }
  echo "consumer: COMPONENTS orc bogus refused: no component 'bogus'"
else
  echo "consumer: jitunwind::orc not built: its find_package(COMPONENTS orc) check is skipped"
fi

# pkg-config: compile and link by hand, the way a Makefile would.
export PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig"
pc() { pkg-config "$@" jitunwind; }
g++ -std=c++20 "$project/main.cpp" -o "$scratch/consumer-pc" $(pc --cflags --libs)
gcc -std=c11 -pedantic -Wall -Wextra -Werror "$project/embed.c" -o "$scratch/embed_c" \
    $(pc --cflags --libs)
gcc -std=c89 -pedantic -Wall -Wextra -Werror "$project/embed_c89.c" -o "$scratch/embed_c89" \
    $(pc --cflags --libs)
for std in 17 20; do
  g++ -std=c++$std -pedantic -Wall -Wextra -Werror "$project/embed.cpp" \
      -o "$scratch/embed_cxx$std" $(pc --cflags --libs)
done
# Static: the archive, then what pkg-config --static says it needs (Libs.private: -lstdc++ for a
# C program, -lelf, ...), linked by the C driver.
gcc -std=c11 -pedantic "$project/embed.c" -o "$scratch/embed_c_static" $(pc --cflags) \
    "$scratch/prefix/lib/libjitunwind.a" $(pc --static --libs | sed 's/-ljitunwind\b//')
for prog in consumer-pc embed_c embed_c89 embed_cxx17 embed_cxx20 embed_c_static; do
  echo "consumer: pkg-config: $prog"
  LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/$prog"
done

# The Python package where cmake --install put it (the prefix's site-packages directory, as
# python3 would search it for an installed prefix), the library found beside it.
package=$(find "$scratch/prefix" -path '*/jitunwind/_install.py')
[[ -n $package ]] || { echo "consumer: cmake --install put no Python package" >&2; exit 1; }
env -u JITUNWIND_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$(dirname "$(dirname "$package")")" \
  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 "$(dirname "$0")/python_installed.py" "$scratch/prefix"

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
