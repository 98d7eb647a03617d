#!/usr/bin/env bash
# The README's first command: install kavka and run the demo on a local cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/kavka demo "$@"
