#!/usr/bin/env bash
# The lowest versions llmtrace declares, tested: a virtualenv with exactly the lower bound of every
# dependency in pyproject.toml (OpenTelemetry API/SDK/exporter/instrumentation, httpx, wrapt, rich,
# orjson) and of the openai and anthropic extras, llmtrace installed from its wheel, `pip check`
# clean, then the SDK's core tests and traced openai and anthropic calls against the test suite's
# simulated model server. A lower bound that fails here is raised in pyproject.toml, not hoped for.
#   bash scripts/test_min_deps.sh [pytest arguments]      (make test-min-deps)
# The virtualenv is kept ($LLMTRACE_CACHE/venvs/min-deps) and made again when pyproject.toml's
# requirements change; llmtrace itself is reinstalled from a fresh wheel every run (scripts/build_dist.sh,
# or the one LLMTRACE_WHEEL names).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
CACHE=${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}
PY=${PYTHON:-python3}
VENV=$CACHE/venvs/min-deps
log() { printf '\033[1m[min-deps]\033[0m %s\n' "$*"; }

# name==lower-bound for every requirement written name>=X (and no other lower bound).
lowest=$("$PY" - <<'EOF'
import re, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
lines = project["dependencies"] + [
    line for extra in ("openai", "anthropic") for line in project["optional-dependencies"][extra]
]
for line in lines:
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([^,]+)(,.*)?", line)
    if match is None:
        raise SystemExit(f"no lower bound to test in {line!r}")
    print(f"{match[1]}=={match[2]}")
EOF
)
TEST_TOOLS="pytest>=8 pytest-asyncio>=0.24 pytest-timeout>=2.3"
# With the distribution's name: a virtualenv holding llmtrace under an earlier name is made again.
key=$( (echo "$lowest"; echo "$TEST_TOOLS"; "$PY" --version; grep -m1 '^name = ' pyproject.toml) \
  | sha256sum | cut -c1-12)
if [ "$(cat "$VENV/.key" 2>/dev/null)" != "$key" ]; then
  log "creating $VENV with: ${lowest//$'\n'/ }"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check $lowest $TEST_TOOLS
  echo "$key" > "$VENV/.key"
fi

# LLMTRACE_WHEEL: a wheel already built from this tree (tests/packaging passes its own).
wheel=${LLMTRACE_WHEEL:-}
if [ -z "$wheel" ]; then
  DIST=$CACHE/min-deps-dist
  rm -rf "$DIST"
  bash scripts/build_dist.sh "$DIST" >/dev/null
  wheel=$(ls "$DIST"/llmtrace_otel-*manylinux*_"$(uname -m)".whl)
fi
# The pins again: pip must find them consistent with llmtrace's requirements, and keep them.
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheel"
# shellcheck disable=SC2086
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "${wheel}[openai,anthropic]" $lowest
"$VENV/bin/python" -m pip check
"$VENV/bin/python" -m pip list --disable-pip-version-check 2>/dev/null \
  | grep -i -E '^(opentelemetry-(api|sdk) |openai |anthropic |httpx )'

log "tests on the lowest versions"
# --import-mode=append and pytest's own script (not python -m, which puts the working directory
# first on sys.path): the tests import the installed llmtrace, not the source tree's.
cd "$ROOT"
"$VENV/bin/pytest" -p no:cacheprovider --import-mode=append -q \
  tests/core/test_decorators.py tests/core/test_streaming.py tests/packaging/test_lowest_versions.py "$@"
