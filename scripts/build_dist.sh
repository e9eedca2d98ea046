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
# The sdist and wheel are kept ($CACHE/dist/KEY), keyed by the contents of every file the build
# reads, the interpreter and the Rust compiler: the same tree builds once, and a later call copies
# what that build made (two isolated build environments and setuptools' runs saved, 5 s on an
# idle machine, half a minute on a busy one). LLMTRACE_REBUILD=1 always builds.
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
INPUTS=(pyproject.toml MANIFEST.in LICENSE README.md llmtrace native)
key=$( (
  find "${INPUTS[@]}" \( -name target -o -name __pycache__ -o -name '*.egg-info' \) -prune \
    -o -type f ! -name '*.so' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  "$PY" --version
  rustc --version 2>/dev/null || true
) | sha256sum | cut -c1-16)
BUILT=$CACHE/dist/$key
if [ -z "${LLMTRACE_REBUILD:-}" ] && [ -f "$BUILT/done" ]; then
  cp "$BUILT"/llmtrace_otel-*.whl "$BUILT"/llmtrace_otel-*.tar.gz "$OUT"/
  echo "the build of this tree's contents ($key), from $BUILT" >"$OUT/build.log"
  ls "$OUT"/llmtrace_otel-*.whl "$OUT"/llmtrace_otel-*.tar.gz
  exit 0
fi
rm -rf "$SRC"
mkdir -p "$SRC"
tar -C "$ROOT" --exclude=target --exclude=__pycache__ --exclude='*.so' --exclude='*.egg-info' \
  -cf - "${INPUTS[@]}" | tar -C "$SRC" -xf -
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
# Kept for the next call on the same contents; the five most recent builds stay.
rm -rf "$BUILT"
mkdir -p "$BUILT"
cp "$OUT"/llmtrace_otel-*.whl "$OUT"/llmtrace_otel-*.tar.gz "$BUILT"/
touch "$BUILT/done"
ls -dt "$CACHE"/dist/*/ | tail -n +6 | xargs -r rm -rf
ls "$OUT"/llmtrace_otel-*.whl "$OUT"/llmtrace_otel-*.tar.gz
