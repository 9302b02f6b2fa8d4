#!/usr/bin/env bash
# Installs the Debian 12 packages jitunwind needs. `install-deps.sh demo` installs only what the
# demo (scripts/demo.sh) builds and runs; `install-deps.sh` (or `all`) everything needed to build,
# test and benchmark. Idempotent: does nothing when everything is present; runs `apt-get update`
# at most once.
set -euo pipefail
set_name=${1:-all}

DEMO_PACKAGES=(
  # build
  build-essential cmake pkg-config git python3
  # SDK dependencies
  libelf-dev systemtap-sdt-dev
  # the jitunwind CLI (JSON), toy-jit (asmjit), jitwalk (BPF)
  nlohmann-json3-dev libasmjit-dev clang libbpf-dev bpftool zlib1g-dev
  # the demo's cross-checks: readelf, llvm-readobj-22
  binutils llvm-22
)
PACKAGES=(
  "${DEMO_PACKAGES[@]}"
  # tests, benchmarks
  catch2 libbenchmark-dev
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
  # fuzzers
  libclang-rt-14-dev
)
case $set_name in
  demo) PACKAGES=("${DEMO_PACKAGES[@]}") ;;
  all) ;;
  *) echo "usage: $0 [demo|all]" >&2; exit 2 ;;
esac

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
