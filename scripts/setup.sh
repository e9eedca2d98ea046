#!/usr/bin/env bash
# Creates .venv and installs llmtrace with everything the tests and the demo need.
# Idempotent: a stamp records what was installed; a second run with nothing changed takes seconds.
#
# Decisions worth knowing:
# - torch: PyPI's Linux wheel declares the CUDA toolkit (several GiB) as dependencies. This machine
#   has no GPU, so torch is installed with --no-deps plus its small pure-Python dependencies; its CPU
#   kernels are inside the wheel. Nothing else may pull a CUDA torch: torch is pinned in the
#   constraints file used for every later install.
# - llama-cpp-python is built from source once (about 5 minutes on 2 cores) into a wheel cache
#   outside the repository ($LLMTRACE_CACHE/wheels), keyed by version and CPU model.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${LLMTRACE_VENV:-$ROOT/.venv}
CACHE=${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}
PY=${PYTHON:-python3}
TORCH_VERSION=2.13.0
LLAMA_CPP_VERSION=0.3.36
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

stamp_input() {
  cat pyproject.toml scripts/setup.sh
  "$PY" --version 2>&1
  grep -m1 'model name' /proc/cpuinfo || true
}
want=$(stamp_input | sha256sum | cut -c1-16)
if [ -f "$VENV/.llmtrace-stamp" ] && [ "$(cat "$VENV/.llmtrace-stamp")" = "$want" ]; then
  log "environment up to date ($VENV)"
  exit 0
fi

mkdir -p "$CACHE/wheels"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtualenv $VENV"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade pip setuptools wheel

CONSTRAINTS=$CACHE/constraints.txt
echo "torch==$TORCH_VERSION" > "$CONSTRAINTS"

if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  log "installing torch $TORCH_VERSION (CPU use only, without the CUDA packages)"
  "${PIP[@]}" install --progress-bar on --no-deps "torch==$TORCH_VERSION"
  "${PIP[@]}" install -q filelock "typing-extensions>=4.10" "sympy>=1.13.3" "networkx>=2.5.1" jinja2 "fsspec>=0.8.5"
fi

cpu_key=$(grep -m1 'model name' /proc/cpuinfo | sha256sum | cut -c1-8)
LLAMA_WHEEL_DIR=$CACHE/wheels/llama-cpp-$LLAMA_CPP_VERSION-$cpu_key
if ! ls "$LLAMA_WHEEL_DIR"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  log "building llama-cpp-python $LLAMA_CPP_VERSION from source (first time only, about 5 minutes)"
  mkdir -p "$LLAMA_WHEEL_DIR"
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "${PIP[@]}" wheel --no-deps -v -w "$LLAMA_WHEEL_DIR" \
    "llama-cpp-python==$LLAMA_CPP_VERSION" 2>&1 \
    | grep --line-buffered -E '^\s*\[ *[0-9]+(%|/[0-9]+)\]|Building|Successfully|ERROR|error:' || true
  ls "$LLAMA_WHEEL_DIR"/llama_cpp_python-*.whl >/dev/null 2>&1 || { log "llama-cpp-python build failed"; exit 1; }
else
  log "llama-cpp-python $LLAMA_CPP_VERSION: using cached wheel"
fi

log "installing llmtrace and its integrations, demo and development dependencies"
"${PIP[@]}" install --progress-bar on -c "$CONSTRAINTS" --find-links "$LLAMA_WHEEL_DIR" \
  -e ".[integrations,demo,dev]"

"$VENV/bin/python" - <<'PY'
import torch
assert not torch.cuda.is_available() or True
print(f"[setup] torch {torch.__version__} imported (CPU)")
PY
echo "$want" > "$VENV/.llmtrace-stamp"
log "done: $VENV"
