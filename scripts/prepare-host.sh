#!/usr/bin/env bash
# Readies the machine for the tests beyond installing packages: what a fresh Debian 12 machine may
# lack that no package provides. Idempotent; says what it changed.
#  - tracefs on /sys/kernel/tracing: bpftrace's tracepoints and kprobes, `perf probe` and
#    uprobe_events need it, and not every machine of this kind mounts it at boot (CI once failed
#    three bpftrace tests for that alone).
set -euo pipefail

if [[ ! -e /sys/kernel/tracing/uprobe_events ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "prepare-host: tracefs is not mounted on /sys/kernel/tracing (tests that trace need it;" \
      "run as root to mount it)" >&2
  elif mount -t tracefs nodev /sys/kernel/tracing; then
    echo "prepare-host: mounted tracefs on /sys/kernel/tracing"
  else
    echo "prepare-host: could not mount tracefs on /sys/kernel/tracing" >&2
    exit 1
  fi
fi
