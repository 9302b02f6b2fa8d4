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
# Stages that build a tree of their own run in two phases (scripts/lib/stage.sh); once the first
# build phase is done, the later stages' trees are built in the background at the lowest priority
# while the tests run (they mostly wait on the programs they drive), and each stage's own build
# phase waits for its tree. JITUNWIND_CI_OVERLAP=0 builds each tree only in its stage.
# Ends with a table of stage times (with the phases' own times) and the 20 slowest tests.
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
  local stage=$1 name=$2 phase=${3:-}
  if [[ $(id -u) -eq 0 && $(realpath "$PWD")/ != /tmp/* ]] && command -v unshare >/dev/null; then
    local tmp=$PWD/build/test-tmp/$name
    rm -rf "$tmp" && mkdir -p "$tmp" && chmod 1777 "$tmp"
    unshare --mount --propagation private bash -c '
      mount --bind "$1" /tmp || exit 1
      bash "$2" $4
      status=$?
      left=$(find /tmp -mindepth 1 -maxdepth 1 -printf "%f\n" | sort | head -n 20)
      if [[ -n $left ]]; then
        echo "test stage $3 left files in /tmp (kept in $1):"
        printf "  %s\n" $left
        status=1
      fi
      exit $status' _ "$tmp" "$stage" "$name" "$phase"
    return
  fi
  local before
  before=$(find /tmp -mindepth 1 -maxdepth 1 -printf "%f\n" | sort)
  bash "$stage" $phase
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

# Stages that build a tree of their own have a build and a test phase (scripts/lib/stage.sh).
has_phases() { grep -q '^run_stage_phases' "$1"; }

# Builds the given stages' trees one after another at the lowest priority, while the
# foreground runs tests (JITUNWIND_CI_OVERLAP=0: not at all). A failure here is met again, with
# its output, when the stage's own build phase runs.
prebuild() {
  local stage
  # The compilers' temporary files go to a directory of the builds' own: /tmp is the stages' to
  # check, and a stage compared by snapshot would count them as its leftovers.
  mkdir -p build/prebuild-tmp
  for stage in "$@"; do
    TMPDIR=$PWD/build/prebuild-tmp nice -n 19 ionice -c 3 bash "$stage" build \
      >"$logs/$(basename "$stage" .sh).prebuild.log" 2>&1 || true
  done
}

stages=()
for stage in scripts/test.d/*.sh; do
  name=$(basename "$stage" .sh)
  if [[ -n "${JITUNWIND_TEST_STAGES:-}" ]]; then
    selected=0
    for s in $JITUNWIND_TEST_STAGES; do [[ $name == "$s"* ]] && selected=1; done
    ((selected)) || continue
  fi
  stages+=("$stage")
done

failed=()
summary=()
prebuild_pid=
for i in "${!stages[@]}"; do
  stage=${stages[$i]}
  name=$(basename "$stage" .sh)
  echo "=== test stage $name"
  : >"$logs/$name.log"
  start=$(date +%s)
  phases=("")
  has_phases "$stage" && phases=(build test)
  result=passed
  times=""
  for phase in "${phases[@]}"; do
    phase_start=$(date +%s)
    if ! run_stage "$stage" "$name" "$phase" 2>&1 | tee -a "$logs/$name.log"; then
      result=FAILED
    fi
    [[ -n $phase ]] && times+="$(printf ' %s %4d s' "$phase" $(($(date +%s) - phase_start)))"
    # After the first build phase, the later stages' trees are built while these tests run.
    if [[ $phase == build && -z $prebuild_pid && ${JITUNWIND_CI_OVERLAP:-1} != 0 ]]; then
      later=()
      for next in "${stages[@]:$((i + 1))}"; do has_phases "$next" && later+=("$next"); done
      if ((${#later[@]})); then
        prebuild "${later[@]}" &
        prebuild_pid=$!
      fi
    fi
    [[ $result == passed ]] || break
  done
  [[ $result == passed ]] || failed+=("$name")
  seconds=$(($(date +%s) - start))
  echo "=== test stage $name: $result ($seconds s)"
  summary+=("$(printf '%-24s %-7s %6d s%s' "$name" "$result" "$seconds" "$times")")
done
[[ -n $prebuild_pid ]] && wait "$prebuild_pid"

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
