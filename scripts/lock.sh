#!/usr/bin/env bash
# The development environment's lock: requirements/dev.lock pins every package .venv holds
# (llmtrace's dependencies with every extra, the demo's and the development tools), so that a
# fresh clone tests exactly the versions of the last green run. scripts/setup.sh installs with
# it as constraints.
#
#   bash scripts/lock.sh            write the lock again, keeping every pin that still fits
#                                   pyproject.toml (after a change to its requirements)
#   bash scripts/lock.sh --upgrade  every package at the newest release the index serves
#                                   (make lock-upgrade; then run make test and commit the lock)
#   bash scripts/lock.sh --check    exit 1 if pyproject.toml needs a package the lock lacks or
#                                   pins outside its range (make test runs this)
#   bash scripts/lock.sh --newest FILE   write the newest resolution to FILE, leave the lock alone
#
# The resolution is uv's (`uv pip compile`, the version scripts/setup.sh pins), for this
# interpreter and platform; torch is forbidden as in scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}
VENV=${LLMTRACE_VENV:-.venv}
LOCK=requirements/dev.lock
UV=$VENV/bin/uv
log() { printf '\033[1m[lock]\033[0m %s\n' "$*" >&2; }
[ -x "$UV" ] || { log "no $UV: run scripts/setup.sh first"; exit 1; }
mkdir -p "$CACHE"
echo "torch==0+never" > "$CACHE/constraints.txt"

compile() {  # compile OUTPUT [uv options]
  local output=$1
  shift
  "$UV" pip compile pyproject.toml --extra all --extra demo --extra dev \
    -c "$CACHE/constraints.txt" --python "$VENV/bin/python" --no-annotate -q \
    --custom-compile-command "bash scripts/lock.sh" -o "$output" "$@"
}

case "${1:-}" in
  "")
    compile "$LOCK"
    log "wrote $LOCK"
    ;;
  --upgrade)
    compile "$LOCK" --upgrade
    log "wrote $LOCK with the newest releases; run make test before committing it"
    ;;
  --newest)
    compile "$2" --upgrade
    ;;
  --check)
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    cp "$LOCK" "$work/dev.lock"
    # Existing pins are kept where they fit: a difference means pyproject.toml changed.
    compile "$work/dev.lock"
    if ! diff -u "$LOCK" "$work/dev.lock" >&2; then
      log "$LOCK does not match pyproject.toml: run 'bash scripts/lock.sh' and commit the lock"
      exit 1
    fi
    log "$LOCK matches pyproject.toml"
    ;;
  *)
    log "unknown argument: $1 (see the top of this script)"
    exit 2
    ;;
esac
