#!/usr/bin/env bash
# Set up tokunseba: find a Python >= 3.12, create .venv, install the package with its test extras.
# Usage: scripts/setup.sh            (idempotent; re-run after pulling)
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
  local cands=()
  [ -n "${TOKUNSEBA_PYTHON:-}" ] && cands+=("$TOKUNSEBA_PYTHON")
  if command -v pyenv >/dev/null 2>&1; then
    local root; root=$(pyenv root 2>/dev/null || true)
    if [ -n "$root" ]; then
      for p in "$root"/versions/3.13*/bin/python "$root"/versions/3.12*/bin/python; do
        [ -x "$p" ] && cands+=("$p")
      done
    fi
  fi
  for n in python3.13 python3.12 python3; do
    command -v "$n" >/dev/null 2>&1 && cands+=("$(command -v "$n")")
  done
  for p in "${cands[@]}"; do
    # a pyenv shim may exist and still fail: really run it and check the version
    if "$p" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; then
      echo "$p"; return 0
    fi
  done
  return 1
}

if [ -x .venv/bin/python ] && .venv/bin/python -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
  echo "setup: using existing .venv ($(.venv/bin/python --version))"
else
  PY=$(find_python) || {
    echo "setup: error: no Python >= 3.12 found (mitmproxy 12 needs it)." >&2
    echo "setup: install one (e.g. 'pyenv install 3.12') or set TOKUNSEBA_PYTHON=/path/to/python3.12" >&2
    exit 1
  }
  echo "setup: creating .venv with $PY ($("$PY" --version))"
  rm -rf .venv
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
echo "setup: installing tokunseba and its test extras into .venv"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]" 2>&1 | grep -v "^WARNING: Location" || true
# a protocol shipped as its own package, found through the entry-point group tokunseba.protocols
# (tests/suites/test_echo_plugin.py). It goes beside the venv, not into it: only the tests put that folder
# on the path (tests/conftest.py), so `tokunseba run` never lists a test protocol
echo "setup: installing the test protocol plugin (tests/plugins/tokunseba_echo_protocol) into .venv/test-plugins"
.venv/bin/python -m pip uninstall -q -y tokunseba-echo-protocol >/dev/null 2>&1 || true  # an older setup put it in the venv
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --upgrade --target .venv/test-plugins \
  tests/plugins/tokunseba_echo_protocol 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c 'import tokunseba, mitmproxy, yaml' || { echo "setup: error: install failed" >&2; exit 1; }
echo "setup: done. Run the proxy with: .venv/bin/tokunseba run"
