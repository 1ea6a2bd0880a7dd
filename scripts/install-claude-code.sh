#!/usr/bin/env bash
# Install Claude Code and the Codex CLI from npm into a private prefix in the cache (not global,
# not in the repo), skipping what is already installed. Prints the `claude` path as the last line.
# Versions default to the ones the captured fixtures come from (docs/dev/clients.md); override with
# TOKUNSEBA_CLAUDE_CODE_VERSION / TOKUNSEBA_CODEX_VERSION.
set -euo pipefail

CACHE=${TOKUNSEBA_CACHE:-$HOME/.cache/tokunseba}
PREFIX=$CACHE/npm
CLAUDE_VERSION=${TOKUNSEBA_CLAUDE_CODE_VERSION:-2.1.197}
CODEX_VERSION=${TOKUNSEBA_CODEX_VERSION:-0.171.0}
CLAUDE=$PREFIX/bin/claude
CODEX=$PREFIX/bin/codex
LOG=$CACHE/logs/npm-install.log

SELF=install-claude-code  # say/die and npm_install_into: scripts/npm-prefix.sh
# shellcheck source=scripts/npm-prefix.sh
. "$(dirname "$0")/npm-prefix.sh"

case "${1:-}" in
  -h|--help)
    echo "usage: scripts/install-claude-code.sh   (installs @anthropic-ai/claude-code@$CLAUDE_VERSION and @openai/codex@$CODEX_VERSION into $PREFIX)"
    exit 0 ;;
  "") ;;
  *) die "unexpected argument '$1' (see --help)" ;;
esac

# installed_version PACKAGE: the version in the prefix, or nothing
installed_version() {
  local pj=$PREFIX/lib/node_modules/$1/package.json
  [ -f "$pj" ] && node -p "require(process.argv[1]).version" "$pj" 2>/dev/null || true
}

# works BIN EXPECTED_VERSION: BIN runs and reports the version
works() { "$1" --version 2>/dev/null | grep -qF -- "$2"; }

command -v npm >/dev/null 2>&1 || die "npm not found (install Node.js >= 18 with npm)"

want=()
if [ "$(installed_version @anthropic-ai/claude-code)" = "$CLAUDE_VERSION" ] && works "$CLAUDE" "$CLAUDE_VERSION"; then
  say "claude-code $CLAUDE_VERSION already installed, skipped"
else
  want+=("@anthropic-ai/claude-code@$CLAUDE_VERSION")
fi
if [ "$(installed_version @openai/codex)" = "$CODEX_VERSION" ] && works "$CODEX" "$CODEX_VERSION"; then
  say "codex $CODEX_VERSION already installed, skipped"
else
  want+=("@openai/codex@$CODEX_VERSION")
fi

if ((${#want[@]})); then
  npm_install_into "$PREFIX" "$LOG" "${want[@]}"
fi

works "$CLAUDE" "$CLAUDE_VERSION" || die "$CLAUDE --version does not report $CLAUDE_VERSION"
works "$CODEX" "$CODEX_VERSION" || die "$CODEX --version does not report $CODEX_VERSION"
say "claude: $("$CLAUDE" --version 2>/dev/null | head -n 1); codex: $("$CODEX" --version 2>/dev/null | head -n 1)"
echo "$CLAUDE"
