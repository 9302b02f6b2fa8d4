#!/usr/bin/env bash
# Installs every Debian 12 package jitunwind needs to build, test, demo and benchmark.
# Idempotent: does nothing when everything is present; runs `apt-get update` at most once.
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake pkg-config git python3
  # SDK dependencies
  libelf-dev systemtap-sdt-dev
  # CLI, tests, benchmarks
  nlohmann-json3-dev catch2 libbenchmark-dev
  # real peers the tests compare against
  binutils elfutils llvm-22 gdb linux-perf bpftrace protobuf-compiler chromium
  # runtimes nobody here wrote, profiled by jitwalk's tests (V8, LuaJIT)
  nodejs luajit
  # CFI -> SFrame differential tests: random C programs, LLVM's own --gsframe through clang
  csmith libcsmith-dev clang-22
  # the C ABI check (abidiff against abi/libjitunwind.abi)
  abigail-tools
  # the optional LLVM ORC plugin (jitunwind::orc) and its example
  llvm-22-dev
  # examples
  libasmjit-dev
  # eBPF walker and fuzzers
  clang libclang-rt-14-dev libbpf-dev bpftool zlib1g-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo $0)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
