#!/usr/bin/env bash
# The whole test suite: installs dependencies, then runs every stage in scripts/test.d/ in order
# (build + CTest, sanitizer builds, fuzzing, ...). All stages run; the exit status is non-zero if
# any failed. Set JITUNWIND_TEST_STAGES="10 20" to run only stages whose names start with those.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh || exit 1
bash scripts/prepare-host.sh || exit 1

failed=()
for stage in scripts/test.d/*.sh; do
  name=$(basename "$stage" .sh)
  if [[ -n "${JITUNWIND_TEST_STAGES:-}" ]]; then
    selected=0
    for s in $JITUNWIND_TEST_STAGES; do [[ $name == "$s"* ]] && selected=1; done
    ((selected)) || continue
  fi
  echo "=== test stage $name"
  start=$(date +%s)
  if bash "$stage"; then
    echo "=== test stage $name: passed ($(( $(date +%s) - start )) s)"
  else
    echo "=== test stage $name: FAILED ($(( $(date +%s) - start )) s)"
    failed+=("$name")
  fi
done
if ((${#failed[@]})); then
  echo "test.sh: failed stages: ${failed[*]}"
  exit 1
fi
echo "test.sh: all stages passed"
