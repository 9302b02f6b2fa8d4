#!/usr/bin/env bash
# The whole test suite: installs dependencies, then runs every stage in scripts/test.d/ in order
# (the README's demo, build + CTest, sanitizer builds, fuzzing, ...). All stages run; the exit
# status is non-zero if any failed. Set JITUNWIND_TEST_STAGES="10 20" to run only stages whose
# names start with those.
#
# A stage fails if it leaves anything in /tmp (tests write under their own directories and remove
# them: a perf map or jitdump left in a shared /tmp is met again by a later process that gets the
# same PID). As root each stage runs in a mount namespace whose /tmp is build/test-tmp/STAGE,
# where what a failing stage left stays inspectable.
# Ends with a table of stage times and the 20 slowest tests of the run.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh || exit 1
bash scripts/prepare-host.sh || exit 1

logs=build/test-logs
mkdir -p "$logs"
rm -f "$logs"/*.log

# Runs one stage script; fails it if it leaves anything in /tmp. As root (and when the checkout
# is not itself under /tmp, whose paths the tests need), the stage gets a /tmp of its own;
# otherwise /tmp's entries are compared before and after, which is exact on a machine that runs
# nothing else (CI).
run_stage() {
  local stage=$1 name=$2
  if [[ $(id -u) -eq 0 && $(realpath "$PWD")/ != /tmp/* ]] && command -v unshare >/dev/null; then
    local tmp=$PWD/build/test-tmp/$name
    rm -rf "$tmp" && mkdir -p "$tmp" && chmod 1777 "$tmp"
    unshare --mount --propagation private bash -c '
      mount --bind "$1" /tmp || exit 1
      bash "$2"
      status=$?
      left=$(find /tmp -mindepth 1 -maxdepth 1 -printf "%f\n" | sort | head -n 20)
      if [[ -n $left ]]; then
        echo "test stage $3 left files in /tmp (kept in $1):"
        printf "  %s\n" $left
        status=1
      fi
      exit $status' _ "$tmp" "$stage" "$name"
    return
  fi
  local before
  before=$(find /tmp -mindepth 1 -maxdepth 1 -printf "%f\n" | sort)
  bash "$stage"
  local status=$?
  local left
  left=$(comm -13 <(echo "$before") <(find /tmp -mindepth 1 -maxdepth 1 -printf "%f\n" | sort) |
    head -n 20)
  if [[ -n $left ]]; then
    echo "test stage $name left files in /tmp:"
    printf '  %s\n' $left
    status=1
  fi
  return $status
}

failed=()
summary=()
for stage in scripts/test.d/*.sh; do
  name=$(basename "$stage" .sh)
  if [[ -n "${JITUNWIND_TEST_STAGES:-}" ]]; then
    selected=0
    for s in $JITUNWIND_TEST_STAGES; do [[ $name == "$s"* ]] && selected=1; done
    ((selected)) || continue
  fi
  echo "=== test stage $name"
  start=$(date +%s)
  if run_stage "$stage" "$name" 2>&1 | tee "$logs/$name.log"; then
    result=passed
  else
    result=FAILED
    failed+=("$name")
  fi
  seconds=$(($(date +%s) - start))
  echo "=== test stage $name: $result ($seconds s)"
  summary+=("$(printf '%-24s %-7s %6d s' "$name" "$result" "$seconds")")
done

echo
echo "=== stage times"
printf '%s\n' "${summary[@]}"
echo
echo "=== the 20 slowest tests (CTest, all stages)"
# CTest's progress lines: "  12/480 Test  #37: module: name ....   Passed   12.34 sec"
grep -hE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* sec$' "$logs"/*.log 2>/dev/null |
  sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: (.*[^ .]) [ .]*(\*\*\*)?([A-Za-z][A-Za-z ]*[a-z]) +([0-9.]+) sec$/\4\t\3\t\1/' |
  sort -t$'\t' -k1,1 -rn | head -n 20 | awk -F'\t' '{ printf "%8.1f s  %-8s %s\n", $1, $2, $3 }'

if ((${#failed[@]})); then
  echo "test.sh: failed stages: ${failed[*]}"
  exit 1
fi
echo "test.sh: all stages passed"
