#!/usr/bin/env bash
# Install Gemini CLI from npm into the same private prefix as Claude Code and Codex (the cache,
# not global, not the repo), skipping it when the pinned version is already there. Prints the
# `gemini` path as the last line. The version defaults to the one docs/clients.md §5 was measured
# with; override with TOKUNSEBA_GEMINI_CLI_VERSION.
set -euo pipefail

CACHE=${TOKUNSEBA_CACHE:-$HOME/.cache/tokunseba}
PREFIX=$CACHE/npm
VERSION=${TOKUNSEBA_GEMINI_CLI_VERSION:-0.61.0}
GEMINI=$PREFIX/bin/gemini
LOG=$CACHE/logs/npm-install-gemini.log

say() { printf 'install-gemini-cli: %s\n' "$*" >&2; }
die() { printf 'install-gemini-cli: error: %s\n' "$*" >&2; exit 1; }

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
  mkdir -p "$PREFIX" "$(dirname "$LOG")"
  t0=$SECONDS
  say "npm install @google/gemini-cli@$VERSION into $PREFIX (log: $LOG)"
  if ! npm install --global --prefix "$PREFIX" --no-fund --no-audit --no-update-notifier \
      "@google/gemini-cli@$VERSION" >"$LOG" 2>&1 </dev/null; then
    tail -n 30 "$LOG" | sed 's/^/    | /' >&2
    die "npm install failed (log: $LOG)"
  fi
  say "npm install done in $((SECONDS - t0)) s"
fi
"$GEMINI" --version 2>/dev/null | grep -qF -- "$VERSION" || die "$GEMINI --version does not report $VERSION"
echo "$GEMINI"
