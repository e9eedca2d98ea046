#!/usr/bin/env bash
# Builds what llmtrace publishes into OUTDIR:
#   bash scripts/build_dist.sh OUTDIR
#   llmtrace_otel-VERSION.tar.gz                                                      the sdist
#   llmtrace_otel-VERSION-cp311-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl    the wheels,
#   llmtrace_otel-VERSION-cp311-abi3-manylinux2014_aarch64.manylinux_2_17_aarch64.whl  with the
#                                                                                      native reader
# A package index takes only wheels tagged manylinux (a linux_x86_64 wheel is refused), and a
# manylinux_2_17 wheel installs on every Linux with glibc 2.17 or newer. The wheels are made here,
# without a manylinux container, by the project's one build (pyproject.toml: setuptools with
# setuptools-rust), with zig as the linker: setuptools-rust runs the cargo that CARGO names for the
# target CARGO_BUILD_TARGET names, so CARGO is cargo-zigbuild and the target a triple with a glibc
# version (x86_64-unknown-linux-gnu.2.17): zig links the reader against glibc 2.17's symbols
# whatever this machine's glibc is, and cross-links it for aarch64 (rustup's standard library
# for aarch64-unknown-linux-gnu). The build tags each wheel linux_ARCH (--plat-name); `auditwheel
# show` then checks it against the manylinux policies (the glibc symbol versions it needs, the
# libraries it links), this script stops unless that says manylinux_2_17 with no library outside
# the policy, and `wheel tags` retags it. (`auditwheel repair` would retag it too, but it needs
# patchelf, and refuses --plat manylinux_2_17_aarch64 on an x86_64 machine.)
# The tools (build, ziglang, cargo-zigbuild, auditwheel, wheel; pinned below) live in the build's
# virtualenv in the cache, zig's and cargo-zigbuild's own caches beside it; rustup adds the
# aarch64 standard library when it is missing. All of it once: a second call installs nothing.
# The build runs on a copy of the working tree at a fixed place in the cache, so that cargo (its
# target directories cached too, one per architecture and this script's own) recompiles only what
# changed. The wheels come from that copy, not from the unpacked sdist, whose directory changes
# every time and would make cargo rebuild the crate. A lock serialises builds started at the
# same time (two test runs).
# PYO3_PYTHON is pinned to the base interpreter: pyo3 recompiles when it changes, and every
# virtualenv of one Python shares it.
# The sdist and wheels are kept ($CACHE/dist/KEY), keyed by the contents of every file the build
# reads, this script, the interpreter and the Rust compiler: the same tree builds once, and a
# later call copies what that build made. LLMTRACE_REBUILD=1 always builds.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=$(realpath -m "${1:?usage: build_dist.sh OUTDIR}")
CACHE=${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}
PY=${PYTHON:-python3}
SRC=$CACHE/dist-src
ARCHES=(x86_64 aarch64)
GLIBC=2.17  # manylinux2014
TOOLS=("build==1.6.1" "ziglang==0.17.1" "cargo-zigbuild==0.24.1" "auditwheel==6.8.2" "wheel==0.48.0")
log() { printf '\033[1m[dist]\033[0m %s\n' "$*" >&2; }
mkdir -p "$CACHE" "$OUT"

exec 9>"$CACHE/dist-src.lock"
flock 9
INPUTS=(pyproject.toml MANIFEST.in LICENSE README.md CHANGELOG.md llmtrace native)
key=$( (
  find "${INPUTS[@]}" \( -name target -o -name __pycache__ -o -name '*.egg-info' \) -prune \
    -o -type f ! -name '*.so' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  sha256sum scripts/build_dist.sh
  "$PY" --version
  rustc --version 2>/dev/null || true
) | sha256sum | cut -c1-16)
BUILT=$CACHE/dist/$key
made() { ls "$1"/llmtrace_otel-*.tar.gz "$1"/llmtrace_otel-*.whl; }
if [ -z "${LLMTRACE_REBUILD:-}" ] && [ -f "$BUILT/done" ]; then
  cp "$BUILT"/llmtrace_otel-* "$OUT"/
  echo "the build of this tree's contents ($key), from $BUILT" >"$OUT/build.log"
  log "this tree's contents were built before ($key): copied from $BUILT"
  made "$OUT"
  exit 0
fi

BUILD_VENV=$CACHE/venvs/build
if [ ! -x "$BUILD_VENV/bin/python" ]; then
  "$PY" -m venv "$BUILD_VENV"
fi
if [ "$(cat "$BUILD_VENV/.dist-tools" 2>/dev/null)" != "${TOOLS[*]}" ]; then
  log "installing the build's tools into $BUILD_VENV: ${TOOLS[*]}"
  "$BUILD_VENV/bin/python" -m pip install -q --disable-pip-version-check "${TOOLS[@]}"
  echo "${TOOLS[*]}" >"$BUILD_VENV/.dist-tools"
fi
for arch in "${ARCHES[@]}"; do
  if ! rustup target list --installed 2>/dev/null | grep -qx "$arch-unknown-linux-gnu"; then
    log "adding Rust's standard library for $arch-unknown-linux-gnu (rustup target add)"
    rustup target add "$arch-unknown-linux-gnu" >&2 || {
      log "the $arch wheel needs rustup's $arch-unknown-linux-gnu target; rustup could not add it"
      exit 1
    }
  fi
done
CARGO_ZIGBUILD_ZIG_PATH=$("$BUILD_VENV/bin/python" -c \
  'import pathlib, ziglang; print(pathlib.Path(ziglang.__file__).with_name("zig"))')
export CARGO_ZIGBUILD_ZIG_PATH
export CARGO_ZIGBUILD_CACHE_DIR=$CACHE/cargo-zigbuild ZIG_GLOBAL_CACHE_DIR=$CACHE/zig
PYO3_PYTHON=$("$PY" -c 'import os, sys; print(os.path.realpath(sys._base_executable))')
export PYO3_PYTHON

rm -rf "$SRC.previous"
if [ -d "$SRC" ]; then mv "$SRC" "$SRC.previous"; fi
mkdir -p "$SRC"
tar -C "$ROOT" --exclude=target --exclude=__pycache__ --exclude='*.so' --exclude='*.egg-info' \
  -cf - "${INPUTS[@]}" | tar -C "$SRC" -xf -
# cargo tells what to rebuild by modification times, and every file of a fresh clone is new: a
# file whose contents are the previous copy's keeps that copy's time, so an unchanged crate is
# not compiled again (about 12 s per wheel), and any other file gets the time of this copy, so a
# change is never older than the last build (a checkout's time can be).
"$PY" - "$SRC" "$SRC.previous" <<'EOF'
import filecmp, os, sys, time
from pathlib import Path

copy, previous = Path(sys.argv[1]), Path(sys.argv[2])
now = time.time_ns()
for path in copy.rglob("*"):
    if not path.is_file() or path.is_symlink():
        continue
    before = previous / path.relative_to(copy)
    if before.is_file() and filecmp.cmp(path, before, shallow=False):
        kept = before.stat()
        os.utime(path, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    else:
        os.utime(path, ns=(now, now))
EOF
rm -rf "$SRC.previous"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
rm -f "$OUT"/llmtrace_otel-*.tar.gz "$OUT"/llmtrace_otel-*.whl
: >"$OUT/build.log"
build() {  # build WHAT [python -m build arguments]
  local what=$1
  shift
  "$BUILD_VENV/bin/python" -m build "$@" >>"$OUT/build.log" 2>&1 || {
    tail -n 40 "$OUT/build.log" >&2
    log "building $what failed: the whole log is $OUT/build.log"
    exit 1
  }
}

log "the sdist"
build "the sdist" --sdist --outdir "$OUT" "$SRC"
for arch in "${ARCHES[@]}"; do
  target_dir=$CACHE/cargo-target-dist-$arch
  if [ -d "$target_dir" ]; then
    log "the $arch wheel (the reader linked by zig against glibc $GLIBC)"
  else
    log "the $arch wheel (the reader linked by zig against glibc $GLIBC; the first build compiles" \
      "every crate: about 3 minutes on 2 idle cores, up to 9 on busy ones)"
  fi
  # A fresh build/ each time: setuptools would otherwise pack the other architecture's reader.
  rm -rf "$SRC/build"
  CARGO=$BUILD_VENV/bin/cargo-zigbuild CARGO_BUILD_TARGET=$arch-unknown-linux-gnu.$GLIBC \
    CARGO_TARGET_DIR=$target_dir \
    build "the $arch wheel" --wheel -C--build-option=--plat-name="linux_$arch" \
    --outdir "$WORK/$arch" "$SRC"
  wheel=$(echo "$WORK/$arch"/llmtrace_otel-*.whl)
  policy=manylinux_${GLIBC/./_}_$arch
  "$BUILD_VENV/bin/auditwheel" show --json "$wheel" >"$WORK/$arch.json" 2>>"$OUT/build.log"
  "$BUILD_VENV/bin/python" - "$WORK/$arch.json" "$policy" <<'EOF' || exit 1
import json, sys
shown = json.load(open(sys.argv[1]))
if shown["overall_tag"] != sys.argv[2] or shown["external_libs"] or shown["pure"]:
    sys.exit(f"[dist] the wheel is not {sys.argv[2]}: auditwheel show says {shown}")
EOF
  log "auditwheel show: the $arch wheel is $policy, with no library outside the policy"
  "$BUILD_VENV/bin/python" -m wheel tags --remove --platform-tag "$policy.manylinux2014_$arch" \
    "$wheel" >/dev/null
  mv "$WORK/$arch"/llmtrace_otel-*.whl "$OUT"/
done

# Kept for the next call on the same contents; the five most recent builds stay.
rm -rf "$BUILT"
mkdir -p "$BUILT"
cp "$OUT"/llmtrace_otel-*.tar.gz "$OUT"/llmtrace_otel-*.whl "$BUILT"/
touch "$BUILT/done"
find "$CACHE/dist" -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\n' | sort -rn | tail -n +6 \
  | cut -d' ' -f2- | xargs -r rm -rf
made "$OUT"
