#!/usr/bin/env bash
# CI extras (run by .ci/run after setup): the real local model server and the real clients
# used by the end-to-end tests. Both installs are cached in ${TOKUNSEBA_CACHE:-$HOME/.cache/tokunseba}.
set -euo pipefail
cd "$(dirname "$0")/.."

run() {  # run LABEL CMD...: time CMD, fail with a clear message
  local label=$1 t0=$SECONDS; shift
  echo "ci-extras: $label ..."
  if ! "$@" >/dev/null; then
    echo "ci-extras: error: $label failed after $((SECONDS - t0)) s (see the messages above)" >&2
    exit 1
  fi
  echo "ci-extras: $label took $((SECONDS - t0)) s"
}

# both local model servers: the e2e tests use llama-server and llama-cpp-python's server
run "local model install (scripts/localmodel.sh install --with-python-server)" \
  scripts/localmodel.sh install --with-python-server
run "Claude Code / Codex install (scripts/install-claude-code.sh)" scripts/install-claude-code.sh

# tmux drives the interactive Claude Code test (Debian's package; root here)
if ! command -v tmux >/dev/null 2>&1; then
  run "tmux install (apt-get)" bash -c 'apt-get update -qq && apt-get install -y -qq tmux'
fi

# Chromium drives the mitmweb browser test (Debian's package, headless, over the DevTools
# protocol; no browser download); the emoji font shows mitmweb's flow marks in its screenshot
if ! command -v chromium >/dev/null 2>&1 || ! dpkg -s fonts-noto-color-emoji >/dev/null 2>&1; then
  run "chromium + emoji font install (apt-get)" bash -c \
    'apt-get update -qq && apt-get install -y -qq chromium fonts-noto-color-emoji'
fi

# PostgreSQL server for the shared-ledger tests (Debian's package; tests/support/pg_server.py runs it
# as the unprivileged `postgres` user it creates, in a temp dir on a free port)
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  run "postgresql install (apt-get)" bash -c 'apt-get update -qq && apt-get install -y -qq postgresql'
fi

# Gemini CLI (pinned) for the Gemini end-to-end tests (tests/e2e/test_gemini_e2e.py)
run "Gemini CLI install (scripts/install-gemini-cli.sh)" scripts/install-gemini-cli.sh
