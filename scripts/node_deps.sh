#!/usr/bin/env bash
# Installs the OpenTelemetry JS packages of the Node.js service the hop tests run
# (tests/hops/node: package.json and package-lock.json pin them) with `npm ci`, into a cache
# outside the repository keyed by the lock's hash:
#
#   ${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}/node-hops/<sha256 of the lock, 16 digits>/node_modules
#
# A second run with the same lock returns at once. Node is the one scripts/backends.sh caches
# (Node 24 from the npm registry) when present, else the system's (Node 20 or newer).
# Progress goes to stderr; the last line on stdout is `node_modules=<path>`, and
# `node=<path>` before it, for programs that call this script.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\033[1m[node-deps]\033[0m %s\n' "$*" >&2; }

cache=${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}
source_dir=tests/hops/node
node_bin=""
for candidate in "$cache"/backends/tools/node-*-linux-*/bin; do
  [[ -x "$candidate/node" && -e "$candidate/npm" ]] && node_bin=$candidate
done
if [[ -n "$node_bin" ]]; then
  export PATH="$node_bin:$PATH"
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  say "no node and npm on PATH, and none cached by scripts/backends.sh: install Node.js 20 or newer"
  exit 1
fi
key=$(sha256sum "$source_dir/package-lock.json" | cut -c1-16)
target="$cache/node-hops/$key"
if [[ -f "$target/.installed" ]]; then
  say "OpenTelemetry JS for tests/hops: up to date ($target)"
else
  say "OpenTelemetry JS for tests/hops: npm ci with node $(node --version) into $target"
  rm -rf "$target.tmp"
  mkdir -p "$target.tmp"
  cp "$source_dir/package.json" "$source_dir/package-lock.json" "$target.tmp/"
  (cd "$target.tmp" && npm ci --no-audit --no-fund --loglevel=http >&2)
  touch "$target.tmp/.installed"
  rm -rf "$target"
  mv "$target.tmp" "$target"
  say "OpenTelemetry JS for tests/hops: installed"
fi
echo "node=$(command -v node)"
echo "node_modules=$target/node_modules"
