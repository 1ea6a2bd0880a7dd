#!/usr/bin/env bash
# Run the whole test suite (unit, property and end-to-end). Extra arguments go to pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "test: no .venv; run scripts/setup.sh first" >&2; exit 1; }
.venv/bin/python -m pytest -q "$@"
rc=$?
if [ $rc -eq 5 ]; then echo "test: error: pytest collected no tests" >&2; exit 5; fi
exit $rc
