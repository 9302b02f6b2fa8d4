# Sourced by the stage scripts of scripts/test.d/ that build a tree of their own: a stage defines
# stage_build and stage_test, then calls run_stage_phases "$@". `bash STAGE` runs both phases;
# `bash STAGE build` or `bash STAGE test` only one. scripts/test.sh runs the later stages' build
# phases in the background (nice 19) while stage 10's tests run: those tests mostly wait on the
# programs they drive, and the builds are where the rest of CI's time goes.
#
# A build phase holds build/locks/NAME.lock, so that a stage run in the foreground waits for its
# tree while a background build of it is under way instead of building the same tree at once.
run_stage_phases() {
  local phase=${1:-all}
  local name
  name=$(basename "$0" .sh)
  case $phase in
    build | test | all) ;;
    *)
      echo "usage: $0 [build|test]" >&2
      return 2
      ;;
  esac
  if [[ $phase != test ]]; then
    mkdir -p build/locks
    (
      flock 9
      stage_build
    ) 9>"build/locks/$name.lock"
  fi
  if [[ $phase != build ]]; then
    stage_test
  fi
}
