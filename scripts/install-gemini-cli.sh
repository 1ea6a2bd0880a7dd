#!/usr/bin/env bash
# Install Gemini CLI from npm into the same private prefix as Claude Code and Codex (the cache,
# not global, not the repo), skipping it when the pinned version is already there. Prints the
# `gemini` path as the last line. The version defaults to the one docs/dev/clients.md §5 was measured
# with; override with TOKUNSEBA_GEMINI_CLI_VERSION.
set -euo pipefail

CACHE=${TOKUNSEBA_CACHE:-$HOME/.cache/tokunseba}
PREFIX=$CACHE/npm
VERSION=${TOKUNSEBA_GEMINI_CLI_VERSION:-0.61.0}
GEMINI=$PREFIX/bin/gemini
LOG=$CACHE/logs/npm-install-gemini.log

SELF=install-gemini-cli  # say/die and npm_install_into: scripts/npm-prefix.sh
# shellcheck source=scripts/npm-prefix.sh
. "$(dirname "$0")/npm-prefix.sh"

case "${1:-}" in
  -h|--help)
    echo "usage: scripts/install-gemini-cli.sh   (installs @google/gemini-cli@$VERSION into $PREFIX)"
    exit 0 ;;
  "") ;;
  *) die "unexpected argument '$1' (see --help)" ;;
esac

command -v npm >/dev/null 2>&1 || die "npm not found (install Node.js >= 20 with npm)"
pj=$PREFIX/lib/node_modules/@google/gemini-cli/package.json
have=$([ -f "$pj" ] && node -p "require(process.argv[1]).version" "$pj" 2>/dev/null || true)
if [ "$have" = "$VERSION" ] && [ -x "$GEMINI" ]; then
  say "gemini-cli $VERSION already installed, skipped"
else
  npm_install_into "$PREFIX" "$LOG" "@google/gemini-cli@$VERSION"
fi
"$GEMINI" --version 2>/dev/null | grep -qF -- "$VERSION" || die "$GEMINI --version does not report $VERSION"
echo "$GEMINI"
