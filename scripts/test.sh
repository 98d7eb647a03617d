#!/usr/bin/env bash
# The README's test command: install everything, then run the default test suite.
# Tests marked `slow` (the many-seed simulation runs, soaks) are kept out of CI; run them with:
#   bash scripts/test.sh -m slow
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/python -m pytest -m "not slow" --durations=80 "$@"
