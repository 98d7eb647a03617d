#!/usr/bin/env bash
# The README's test command: install everything, then run the default test suite.
# The `slow` marker is reserved for soak runs kept out of CI (no test carries it today):
#   bash scripts/test.sh -m slow
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/python -m pytest -m "not slow" "$@"
