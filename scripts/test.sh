#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what it needs, then lint, types and pytest.
#   1. .venv with llmtrace and every dependency (scripts/setup.sh; llama-cpp-python built once)
#   1b. the sdist and the manylinux wheels that tests/packaging installs (scripts/build_dist.sh,
#      which installs its tools into the cache once; the build is kept, keyed by the tree's
#      contents): here rather than inside the test, whose 600 s timeout a first build of both
#      architectures on 2 cores can exceed
#   2. Jaeger v2, its web UI, the OpenTelemetry Collector and Prometheus built from source
#      (scripts/backends.sh, cached; the UI from ../shared/vendor/ where that holds its source)
#   3. the other instrumentations' virtualenv for tests/peers (scripts/peers.sh, cached)
#   3a. the OpenTelemetry JS packages of the Node.js service in tests/hops (scripts/node_deps.sh:
#      npm ci from the committed lock, cached)
#   3b. Debian's CPU torch and a virtualenv with the real sentence-transformers (scripts/torch_venv.sh,
#      cached); if it cannot be made, the suite goes on and that test fails with the reason
#   4. Debian's Chromium for the HTML report check and its chromedriver for the Jaeger UI tests
#      (tests/browser), when missing
#   5. the lock checked against pyproject.toml; ruff, mypy --strict on the package, the documentation
#      site built in strict mode (mkdocs.yml), pytest (extra arguments go to pytest)
#   6. the core, instrumentation and analysis tests on the newest releases of the packages llmtrace
#      reaches into, when any is newer than the lock (scripts/test_newest.sh)
# pytest runs in LLMTRACE_TEST_WORKERS processes (pytest-xdist; default: one more than the CPUs,
# at most 4; 0 runs it in this process), a test file to a process. Many tests wait on simulated
# servers, model delays and backends, others compute (the comparison's simulations, the demo's
# model): one process per core left the cores idle while a process waited, and on 2 cores three
# processes took 8 min 21 s where two took 11 min 6 s. Each process starts its own Collector and
# Jaeger; a file's module fixtures stay in one process.
# Idempotent: a second run reuses the environment, the binaries and the wheel cache.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\033[1m[test]\033[0m %s\n' "$*"; }

bash scripts/setup.sh
log "the sdist and the manylinux wheels (scripts/build_dist.sh; the first build 8-15 minutes, then cached)"
dist_out=$(mktemp -d)
bash scripts/build_dist.sh "$dist_out" >/dev/null
rm -rf "$dist_out"
log "backends (Jaeger v2 and its UI, OpenTelemetry Collector, Prometheus for tests/scale)"
# Machines that cannot download the Jaeger UI's source from GitHub keep it beside the repository.
vendored_ui=../shared/vendor/jaeger-ui-v1.76.0.tar.gz
if [ -z "${LLMTRACE_JAEGER_UI_SOURCE:-}" ] && [ -f "$vendored_ui" ]; then
  LLMTRACE_JAEGER_UI_SOURCE=$(cd "$(dirname "$vendored_ui")" && pwd)/$(basename "$vendored_ui")
  export LLMTRACE_JAEGER_UI_SOURCE
fi
bash scripts/backends.sh --with-prometheus >/dev/null
log "other instrumentations' virtualenv (OpenLLMetry, OpenInference, OpenLIT, Langfuse, openai-v2)"
bash scripts/peers.sh
log "OpenTelemetry JS for the Node.js service of tests/hops (scripts/node_deps.sh, npm ci, cached)"
bash scripts/node_deps.sh >/dev/null
log "torch virtualenv for the real sentence-transformers test (Debian's python3-torch, cached)"
bash scripts/torch_venv.sh || log "torch virtualenv unavailable: tests/providers/test_sentence_transformers_real.py will fail with the reason above"
# chromium-driver is built from chromium's source package: apt keeps the two at one version.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  log "installing Debian's chromium and chromium-driver for the HTML report and Jaeger UI tests"
  (apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) \
    || { log "could not install chromium (apt-get); the HTML report and Jaeger UI tests need it"; exit 1; }
fi

log "the lock matches pyproject.toml (scripts/lock.sh --check)"
bash scripts/lock.sh --check

log "ruff"
.venv/bin/ruff check llmtrace tests benchmarks examples docs/hooks
.venv/bin/ruff format --check llmtrace tests benchmarks examples docs/hooks
log "mypy --strict"
# mypy's cache outside the checkout: a fresh clone re-checks in seconds instead of half a minute
# (mypy validates every cached module against its source's hash)
.venv/bin/mypy --cache-dir "${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}/mypy" llmtrace
log "documentation (mkdocs build --strict: a broken link or anchor, or a page left out of the nav, fails)"
# Built outside the checkout; the generated pages (options, CLI, supported versions) are written
# from the code at this step (docs/hooks/generated.py), so a change that leaves them stale cannot pass.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet \
  --site-dir "${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}/site"
if command -v cargo >/dev/null 2>&1; then
  log "cargo fmt --check (native reader)"
  (cd native && cargo fmt --check)
  # The reader's Rust unit tests (parsing, values, linking, the critical path; its PyO3 layer is
  # tested from Python, tests/analysis/test_native.py) and clippy, built in the target directory
  # scripts/setup.sh gives the extension's build (debug beside its release), so that a fresh clone
  # finds them compiled. PYO3_PYTHON pinned as there: another interpreter would rerun pyo3's build
  # script and recompile the crate. Measured on 2 cores beside a running suite: cold (empty target
  # directory) cargo test 118 s and clippy 52 s; warm 2 s for both, 9 s after an edit to the
  # reader.
  log "cargo test, cargo clippy -D warnings (native reader; the first run compiles, about 3 minutes)"
  (
    cd native
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}/cargo-target}
    PYO3_PYTHON=$("${PYTHON:-python3}" -c 'import os, sys; print(os.path.realpath(sys._base_executable))')
    export PYO3_PYTHON
    cargo test --locked --quiet
    cargo clippy --locked --quiet --all-targets -- -D warnings
  )
fi
workers=${LLMTRACE_TEST_WORKERS:-$(n=$(nproc); echo $((n + 1 < 4 ? n + 1 : 4)))}
log "pytest ($workers processes)"
# The slowest thirty tests are listed at the end: the warm run is kept under 10 minutes, and these
# are where its time goes.
.venv/bin/python -m pytest -n "$workers" --dist loadfile --durations=30 "$@"
log "the newest releases of OpenTelemetry, httpx and the provider SDKs (scripts/test_newest.sh)"
bash scripts/test_newest.sh -q
