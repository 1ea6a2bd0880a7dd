# Sourced by scripts/install-claude-code.sh and scripts/install-gemini-cli.sh (not run alone):
# npm_install_into PREFIX LOG PACKAGE... installs the pinned packages into the private prefix,
# saying what it does and how long it took, and on failure shows the end of the log and stops.
# The caller sets SELF (its name, for its messages); say and die print as SELF.
say() { printf '%s: %s\n' "$SELF" "$*" >&2; }
die() { printf '%s: error: %s\n' "$SELF" "$*" >&2; exit 1; }

npm_install_into() {
  local prefix=$1 log=$2 t0=$SECONDS; shift 2
  mkdir -p "$prefix" "$(dirname "$log")"
  say "npm install $* into $prefix (log: $log)"
  if ! npm install --global --prefix "$prefix" --no-fund --no-audit --no-update-notifier \
      "$@" >"$log" 2>&1 </dev/null; then
    tail -n 30 "$log" | sed 's/^/    | /' >&2
    die "npm install failed (log: $log)"
  fi
  say "npm install done in $((SECONDS - t0)) s"
}
