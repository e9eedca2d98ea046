#!/usr/bin/env bash
# Builds llmtrace's sdist and wheel (the wheel with the native trace reader) into OUTDIR:
#   bash scripts/build_dist.sh OUTDIR
# The build is the project's one build (pyproject.toml: setuptools with setuptools-rust), run with
# `python -m build` on a copy of the working tree. The copy lives at a fixed place in the cache,
# so that cargo (its target directory cached too) recompiles only what changed: a warm build
# takes seconds. A lock serialises builds started at the same time (two test runs).
# PYO3_PYTHON is pinned to the base interpreter: pyo3 recompiles when it changes, and every
# virtualenv of one Python shares it. The target directory is this script's own: a `cargo build`
# in native/ (no PYO3_PYTHON) sharing it would make pyo3 recompile on every switch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=$(realpath -m "${1:?usage: build_dist.sh OUTDIR}")
CACHE=${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}
PY=${PYTHON:-python3}
SRC=$CACHE/dist-src
mkdir -p "$CACHE" "$OUT"

exec 9>"$CACHE/dist-src.lock"
flock 9
rm -rf "$SRC"
mkdir -p "$SRC"
tar -C "$ROOT" --exclude=target --exclude=__pycache__ --exclude='*.so' --exclude='*.egg-info' \
  -cf - pyproject.toml MANIFEST.in LICENSE README.md llmtrace native | tar -C "$SRC" -xf -
# The copy's files keep their times, so cargo sees an unchanged crate as unchanged.

BUILD_VENV=$CACHE/venvs/build
if [ ! -x "$BUILD_VENV/bin/python" ]; then
  "$PY" -m venv "$BUILD_VENV"
fi
"$BUILD_VENV/bin/python" -m pip install -q --disable-pip-version-check "build>=1.2"
export CARGO_TARGET_DIR=$CACHE/cargo-target-dist
PYO3_PYTHON=$("$PY" -c 'import os, sys; print(os.path.realpath(sys._base_executable))')
export PYO3_PYTHON
# --sdist --wheel: both from the copy (not the wheel from the unpacked sdist, whose directory
# name changes every time and would make cargo rebuild the crate).
"$BUILD_VENV/bin/python" -m build --sdist --wheel --outdir "$OUT" "$SRC" >"$OUT/build.log" 2>&1 \
  || { tail -n 40 "$OUT/build.log" >&2; exit 1; }
ls "$OUT"/llmtrace-*.whl "$OUT"/llmtrace-*.tar.gz
