#!/usr/bin/env bash
# Installs what the arm64 stage (scripts/test.d/40-arm64.sh) needs on a Debian 12 x86-64 host:
# the AArch64 cross compiler and binutils, qemu-user to run the result, and the arm64 builds of
# the libraries and headers the SDK, its tests and toy-jit use (libelf, asmjit, sys/sdt.h).
# Architecture-independent header-only dependencies (Catch2, nlohmann-json) come from the host
# packages scripts/install-deps.sh installs. Enables the arm64 architecture in dpkg (multiarch).
# Idempotent: does nothing when everything is present.
set -euo pipefail

PACKAGES=(
  g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user-static
  libelf-dev:arm64 libasmjit-dev:arm64 systemtap-sdt-dev:arm64
  # what the programs load at run time (qemu-aarch64-static finds the arm64 dynamic loader and
  # libraries of these multiarch packages in /lib/aarch64-linux-gnu)
  libc6:arm64 libstdc++6:arm64
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps-arm64: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps-arm64: missing packages: ${missing[*]}" >&2
  echo "install-deps-arm64: run as root (or: sudo $0)" >&2
  exit 1
fi
echo "install-deps-arm64: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  dpkg --add-architecture arm64
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
