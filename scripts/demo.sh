#!/usr/bin/env bash
# jitunwind demo: describe the functions a JIT emitted, encode them as SFrame in an ELF image,
# and read the result back with our tool and with LLVM's reader.
#
# Runs from a fresh clone as root: installs dependencies, builds, then walks through
# examples/demo/jit-functions.json. Exits non-zero as soon as a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JITUNWIND="$BUILD_DIR/tools/jitunwind/jitunwind"
INPUT=examples/demo/jit-functions.json
WORK=$(mktemp -d /tmp/jitunwind-demo.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

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

heading "Dependencies (scripts/install-deps.sh)"
bash scripts/install-deps.sh

heading "Build (scripts/build.sh into $BUILD_DIR/)"
BUILD_DIR="$BUILD_DIR" bash scripts/build.sh
[[ -x $JITUNWIND ]] || fail "$JITUNWIND was not built"
show "$JITUNWIND" --version

heading "A JIT describes the functions it emitted ($INPUT)"
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
