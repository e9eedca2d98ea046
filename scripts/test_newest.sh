#!/usr/bin/env bash
# The newest releases, tested: what tells the team that a new release of OpenTelemetry, httpx or
# a provider SDK breaks llmtrace, before a user finds out.
#
# .venv is installed from requirements/dev.lock (the versions of the last green run). This
# resolves everything again at the newest releases the package index serves today and compares
# the packages llmtrace reaches into (WATCHED below). When they are the locked versions, the main
# suite has just tested them and there is nothing more to run (one line says so). When any is
# newer, a virtualenv with the newest resolution ($LLMTRACE_CACHE/venvs/newest, made again when
# the resolution changes) runs the core, instrumentation and analysis tests against this source
# tree; a failure there fails make test, and names the releases that differ.
#   bash scripts/test_newest.sh [pytest arguments]       LLMTRACE_NEWEST=always runs them anyway
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
CACHE=${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}
UV=.venv/bin/uv
VENV=$CACHE/venvs/newest
log() { printf '\033[1m[newest]\033[0m %s\n' "$*"; }
WATCHED='^(opentelemetry-[a-z-]+|httpx|httpcore|httpx2|httpcore2|h11|wrapt|openai|anthropic|google-genai|boto3|botocore|cohere|mistralai|groq|ollama|litellm|langchain-core|langchain-openai|langgraph|llama-index-core|requests)=='

mkdir -p "$CACHE/venvs"
newest=$CACHE/newest.lock
# Not the demo extra: llama-cpp-python has no wheel on the index (it is built once by setup.sh),
# and nothing these tests run needs it.
"$UV" pip compile pyproject.toml --extra all --extra dev -c "$CACHE/constraints.txt" \
  --python .venv/bin/python --no-annotate --no-header -q --upgrade -o "$newest"
differences=$(diff <(grep -E "$WATCHED" requirements/dev.lock) <(grep -E "$WATCHED" "$newest") \
  | grep -E '^[<>]' || true)
if [ -z "$differences" ] && [ "${LLMTRACE_NEWEST:-}" != "always" ]; then
  log "the newest releases of the watched packages are the locked ones: the suite above tested them"
  exit 0
fi
if [ -z "$differences" ]; then
  log "the newest releases are the locked ones; tested anyway (LLMTRACE_NEWEST=always)"
else
  log "newer releases than the lock (< locked, > newest):"
  printf '%s\n' "$differences" | sed 's/^/  /'
fi
key=$( (cat "$newest"; python3 --version) | sha256sum | cut -c1-12)
if [ "$(cat "$VENV/.key" 2>/dev/null)" != "$key" ]; then
  log "creating $VENV with the newest resolution"
  rm -rf "$VENV"
  "$UV" venv -q --python .venv/bin/python "$VENV"
  "$UV" pip install -q --compile-bytecode --python "$VENV/bin/python" -r "$newest"
  echo "$key" > "$VENV/.key"
fi
workers=${LLMTRACE_TEST_WORKERS:-$(n=$(nproc); echo $((n < 4 ? n : 4)))}
log "core, instrumentation and analysis tests on the newest releases ($workers processes)"
# The fast paths past other libraries' public APIs (llmtrace/sdk/_compat.py) run on these releases
# even where they are newer than the range verified: this job is what verifies them. Those past
# their range are named; once this job passes, widen the range in llmtrace/sdk/_compat.py.
PYTHONPATH=$ROOT "$VENV/bin/python" -c '
from llmtrace import _compat
for name, path in _compat.FAST_PATHS.items():
    taken, why = _compat.state(name)
    if not taken and "outside" in why:
        print(f"[newest] fast path {name}: {why}; tested here with LLMTRACE_FAST_PATHS=on")
'
export LLMTRACE_FAST_PATHS=on
# This source tree on the path (its native reader included): the newest packages, today's code.
# test_smollm2 runs the demo's local model (the demo extra, left out above): not an upstream client.
PYTHONPATH=$ROOT "$VENV/bin/python" -m pytest -p no:cacheprovider -n "$workers" --dist loadfile \
  --ignore=tests/instrumentation/test_smollm2.py tests/core tests/instrumentation tests/analysis "$@"
