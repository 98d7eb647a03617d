#!/usr/bin/env bash
# Installs what kavka needs on a fresh Debian machine with Python 3.11 and Java 17:
# Debian's kcat (a real librdkafka 2.0 client the tests drive) and a venv in .venv
# with kavka, its Spark connector (pyspark, pyarrow, pandas) and its web console and, when
# asked (--test), its test dependencies and Debian's chromium (the console's end-to-end tests
# drive it with Playwright). Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="[spark,console]"
[ "${1:-}" = "--test" ] && extras="[test]"
SUDO=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
if [ "${1:-}" = "--test" ] && ! command -v kcat >/dev/null; then
  echo "== installing kcat (Debian)"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq kcat >/dev/null
fi
if [ "${1:-}" = "--test" ] && [ ! -x /usr/bin/chromium ]; then
  echo "== installing chromium (Debian) for the console's browser tests"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
echo "== installing kavka$extras into .venv"
.venv/bin/pip install -q --disable-pip-version-check -e ".$extras"
if [ "${1:-}" = "--test" ]; then
  bash scripts/java-deps.sh
fi
