#!/usr/bin/env bash
# The README's test command: install everything, then run the default test suite on two
# pytest-xdist workers, each file whole on one worker, the longest files first (docs/testing.md).
# Tests marked `slow` (the many-seed simulation runs, soaks) are kept out of CI; run them with:
#   bash scripts/test.sh -m slow
# In one process instead (pdb, -x, a clean per-test order): bash scripts/test.sh -n 0
# (or KAVKA_TEST_WORKERS=0 bash scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
export PATH="$PWD/.venv/bin:$PATH"
workers="${KAVKA_TEST_WORKERS:-2}"
exec .venv/bin/python -m pytest -m "not slow" -n "$workers" --dist loadfile --no-loadscope-reorder \
  --durations=80 "$@"
