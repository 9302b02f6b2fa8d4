#!/usr/bin/env bash
# usage: run.sh BUILD_DIR CONSUMER_PROJECT_DIR
set -euo pipefail
build=$1 project=$2
scratch=$(mktemp -d /tmp/jitunwind-consumer-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
for kind in shared static; do
  cmake -S "$project" -B "$scratch/build-$kind" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
        -DCONSUMER_LINK="$kind" >/dev/null
  cmake --build "$scratch/build-$kind" >/dev/null
  LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/build-$kind/consumer"
done
# pkg-config: compile and link the same program by hand.
export PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig"
g++ -std=c++20 "$project/main.cpp" -o "$scratch/consumer-pc" $(pkg-config --cflags --libs jitunwind)
LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/consumer-pc"
echo "consumer: ok"
