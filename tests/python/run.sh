#!/usr/bin/env bash
# usage: run.sh LIBJITUNWIND_SO SOURCE_DIR [JITWALK]
# The Python package (python/jitunwind) over the real library: its unit tests, the example JIT
# (python/examples/pyjit.py), and, as root, the example profiled: perf report names its JIT
# function and jitwalk unwinds from it through libffi and the interpreter to the process root.
set -euo pipefail
lib=$1 src=$2 jitwalk=${3:-}
label=python
scratch=$(mktemp -d /tmp/jitunwind-python-XXXXXX)
source "$src/tests/support/embedder_checks.sh"
export JITUNWIND_LIBRARY=$lib PYTHONPATH=$src/python JITUNWIND_INCLUDE=$src/sdk/include
export JITUNWIND_DIR=$scratch JITDUMPDIR=$scratch PYTHONDONTWRITEBYTECODE=1
# Debian's interpreter, not whatever `python3` a PATH finds first (a pyenv shim is a shell script
# that execs the interpreter; jitwalk would then profile the shell's objects).
py=/usr/bin/python3
"$py" "$src/tests/python/test_bindings.py"
"$py" "$src/python/examples/pyjit.py"
"$py" "$src/python/examples/pyjit.py" 0 --window
can_profile "$jitwalk" || exit 0

prog=("$py" "$src/python/examples/pyjit.py" 1)
check_perf_names pyjit:spin -- "${prog[@]}"
# Rooted as a native program's main is: from the JIT frame through libffi and the interpreter
# down to the process's first frame.
check_jitwalk_rooted "$jitwalk" pyjit:spin '^[^;]*;_start;(.*;)?ffi_call[^;]*;(.*;)?pyjit:spin' \
  "through libffi to _start" -- "${prog[@]}"
# The same code in an owned window of a session of its own.
prog=("$py" "$src/python/examples/pyjit.py" 1 --window)
check_perf_names pyjit:window_spin -- "${prog[@]}"
check_jitwalk_rooted "$jitwalk" pyjit:window_spin \
  '^[^;]*;_start;(.*;)?ffi_call[^;]*;(.*;)?pyjit:window_spin' "through libffi to _start" \
  -- "${prog[@]}"
