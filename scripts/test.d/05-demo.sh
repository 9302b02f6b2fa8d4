#!/usr/bin/env bash
# The README's first command, exactly as a user types it from the clone: `bash scripts/demo.sh`.
# It installs and builds only what it runs (stage 10 then builds the rest into the same build
# directory) and fails when any of its steps fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/demo.sh
