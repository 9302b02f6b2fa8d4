#!/usr/bin/env bash
# jitunwind demo, from a fresh clone as root: installs what it needs, builds what it runs, then
#  1. profiles a real JIT (examples/toy-jit) whose code has NO frame pointers with the eBPF
#     profiler jitwalk, which unwinds through the JIT frames with the SFrame tables the SDK
#     published, and writes folded stacks and an SVG flame graph;
#  2. verifies every walked stack against the JIT's ground truth, next to the kernel's
#     frame-pointer walk of the same events;
#  3. single-steps the JIT and checks its published rows at every instruction it executes;
#  4. lists what a running JIT has published, read from outside as a profiler reads it;
#  5. shows the SFrame format itself: a JIT-style description encoded into an ELF image and read
#     back by `jitunwind sframe dump` and by LLVM's independent reader.
# Exits non-zero as soon as a step fails. Outputs stay in $DEMO_OUT (default $BUILD_DIR/demo).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JITUNWIND="$BUILD_DIR/tools/jitunwind/jitunwind"
INPUT=examples/demo/jit-functions.json
JITWALK="$BUILD_DIR/bpf/jitwalk"
TOYJIT="$BUILD_DIR/examples/toy-jit/toy-jit"
DEMO_OUT=${DEMO_OUT:-$BUILD_DIR/demo}
WORK=$(mktemp -d /tmp/jitunwind-demo.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$DEMO_OUT"

step=0
bold='' plain=''
if [[ -t 1 ]]; then bold=$'\033[1m' plain=$'\033[0m'; fi
heading() {
  step=$((step + 1))
  printf '\n%s==== %d. %s%s\n\n' "$bold" "$step" "$*" "$plain"
}
fail() {
  echo "demo: FAILED: $*" >&2
  exit 1
}
# Shows a command, then runs it.
show() {
  printf '$ %s\n' "$*"
  "$@"
}

heading "Dependencies (scripts/install-deps.sh demo)"
bash scripts/install-deps.sh demo

heading "Build what the demo runs into $BUILD_DIR/: jitunwind, jitwalk, toy-jit"
# Tests and benchmarks are left out (scripts/build.sh builds them into the same directory, reusing
# what this builds).
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJITUNWIND_BUILD_TESTS=OFF \
  -DJITUNWIND_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target jitunwind_cli jitwalk toy-jit
[[ -x $JITUNWIND ]] || fail "$JITUNWIND was not built"
show "$JITUNWIND" --version
[[ -x $JITWALK && -x $TOYJIT ]] || fail "jitwalk or toy-jit was not built"
[[ $(id -u) -eq 0 ]] || fail "the profiling steps need root (BPF, perf events, uprobes)"
# The runtime publishes to the registry and the SDK's USDT events only (what jitwalk reads), so
# the demo leaves no perf map or jitdump files behind.
export JITUNWIND_PUBLISH=registry,usdt-events

heading "Profile a JIT without frame pointers: jitwalk profile -- toy-jit --frame-pointers=off"
echo "examples/toy-jit/programs/spin.toy runs 13 toy frames deep and spends its time in a toy loop"
echo "and in two native helpers. With --frame-pointers=off the JIT uses RBP as a general register,"
echo "so a frame-pointer walk (perf -g, bpftrace ustack) cannot get through its frames; jitwalk"
echo "unwinds them in BPF with the SFrame the SDK published for each code window."
echo
show "$JITWALK" profile -F 499 -d 3 --folded "$DEMO_OUT/toy-jit.folded" --svg "$DEMO_OUT/toy-jit.svg" \
  -- "$TOYJIT" --frame-pointers=off examples/toy-jit/programs/spin.toy 0
echo
echo "The heaviest stacks (folded format: frames root first, then the sample count):"
sort -t' ' -k2 -nr "$DEMO_OUT/toy-jit.folded" >"$WORK/sorted.folded"
head -n 3 "$WORK/sorted.folded"
grep -q 'main;toy:main;toy:level;.*toy:compute ' "$DEMO_OUT/toy-jit.folded" ||
  fail "no stack went from main through the toy frames into toy:compute"
echo
echo "Flame graph: $DEMO_OUT/toy-jit.svg (open it in a browser)"

heading "Verify every walked stack: jitwalk verify -- toy-jit --shadow-stack verify.toy"
echo "At each checkpoint() the JIT fires a USDT probe carrying the true chain of return addresses"
echo "(docs/ground-truth.md). jitwalk walks the stack in BPF at that moment and compares; the"
echo "kernel's frame-pointer walk of the same events is shown next to it."
echo
show "$JITWALK" verify -- "$TOYJIT" --frame-pointers=off --shadow-stack \
  examples/toy-jit/programs/verify.toy 5

heading "Check the rows at every instruction: jitunwind unwind check -- toy-jit"
echo "Checkpoints are call sites; a profiler also lands in prologues and epilogues. This single-"
echo "steps the JIT and, at every instruction it executes in published code, unwinds with the"
echo "published rows and compares each JIT frame with what the thread had when it entered it."
echo
show "$JITUNWIND" unwind check -- "$TOYJIT" --frame-pointers=off examples/toy-jit/programs/fib.toy 12 \
  | tee "$WORK/unwind-check.txt"
grep -q 'mismatches: *0 at' "$WORK/unwind-check.txt" || fail "unwind check found mismatches"

heading "What a running JIT has published: jitunwind windows list -p PID --functions"
echo "When a profiler shows [unknown] for JIT code, the first question is what the runtime"
echo "published. This reads a running toy-jit's registry from outside (the process is not"
echo "stopped), copies each window's SFrame and validates it as a profiler would; names come"
echo "from the perf map, which this run writes into the demo's scratch directory (JITUNWIND_DIR"
echo "in the process's environment tells the tool where)."
echo
JITUNWIND_PUBLISH=registry,perfmap JITUNWIND_DIR="$WORK" \
  "$TOYJIT" --frame-pointers=off examples/toy-jit/programs/spin.toy 0 >/dev/null &
spin_pid=$!
# Until its first window is published and named (10 s at most): the perf map is batched, so its
# names reach the file up to 10 ms after the window is in the registry (docs/publishers.md).
for _ in $(seq 100); do
  "$JITUNWIND" windows list -p "$spin_pid" --functions 2>/dev/null | grep -q ' toy:main$' && break
  sleep 0.1
done
status=0
show "$JITUNWIND" windows list -p "$spin_pid" --functions | tee "$WORK/windows.txt" || status=$?
kill "$spin_pid"
wait "$spin_pid" 2>/dev/null || true
((status == 0)) || fail "windows list failed (exit status $status)"
grep -q ' toy:main$' "$WORK/windows.txt" || fail "windows list did not name toy:main"

heading "The format underneath: a JIT describes the functions it emitted ($INPUT)"
echo "Six functions in one code window at 0x7f3a5c000000: a frame-pointer function, an SP-only"
echo "frame (sub rsp), a leaf, an array of 16 call trampolines described once (PCMASK), a"
echo "function with an early return in the middle, and an outermost thread entry."
echo "Row offsets are code offsets right after the instruction that changed the frame."
echo
cat "$INPUT"

heading "Encode it: jitunwind sframe build --elf"
show "$JITUNWIND" sframe build --input "$INPUT" --elf "$WORK/jit-window.so"
echo
show readelf -W --sections --segments "$WORK/jit-window.so"

heading "Decode it: jitunwind sframe dump"
show "$JITUNWIND" sframe dump "$WORK/jit-window.so"

heading "Cross-check with LLVM: llvm-readobj-22 --sframe"
printf '$ %s\n' "llvm-readobj-22 --sframe $WORK/jit-window.so"
llvm-readobj-22 --sframe "$WORK/jit-window.so" 2>"$WORK/llvm.err"
if [[ -s $WORK/llvm.err ]]; then
  cat "$WORK/llvm.err" >&2
  fail "llvm-readobj-22 printed warnings"
fi
echo "(llvm-readobj-22 printed no warnings)"

heading "Validate it: jitunwind sframe check"
show "$JITUNWIND" sframe check "$WORK/jit-window.so"

heading "Round trip: dump --format json gives the description back"
"$JITUNWIND" sframe dump --format json "$WORK/jit-window.so" >"$WORK/dumped.json"
show head -n 20 "$WORK/dumped.json"
echo "  ..."
python3 - "$INPUT" "$WORK/dumped.json" <<'EOF'
import json, sys

def normalize(path):
    doc = json.load(open(path))
    for f in doc["functions"]:
        for key in ("start", "size"):
            if isinstance(f[key], str):
                f[key] = int(f[key], 0)
    return doc["abi"], sorted(doc["functions"], key=lambda f: f["start"])

original, dumped = normalize(sys.argv[1]), normalize(sys.argv[2])
if original != dumped:
    sys.exit("round trip differs:\n%r\n%r" % (original, dumped))
print("dump(build(x)) == x: %d functions, %d rows" %
      (len(original[1]), sum(len(f["rows"]) for f in original[1])))
EOF

heading "A bare section for a live JIT window, and what check says about damage"
show "$JITUNWIND" sframe build --input "$INPUT" --raw "$WORK/window.sframe" --address 0x7f3a5c100000
show "$JITUNWIND" sframe check --raw --address 0x7f3a5c100000 "$WORK/window.sframe"
head -c 60 "$WORK/window.sframe" >"$WORK/truncated.sframe"
printf '$ %s\n' "$JITUNWIND sframe check --raw $WORK/truncated.sframe   # first 60 bytes only"
if "$JITUNWIND" sframe check --raw "$WORK/truncated.sframe"; then
  fail "check accepted a truncated section"
fi
echo "(exit status 1, as expected)"

printf '\n%sdemo: all steps succeeded%s\n' "$bold" "$plain"
