#!/usr/bin/env bash
# Creates the virtualenv the overhead benchmarks compare llmtrace against its peers in.
# Idempotent: a stamp keyed on this script and on the client versions it copies from .venv; a
# second run with nothing changed takes a second.
#
# Why a separate environment: the peers pin other OpenTelemetry versions than llmtrace's .venv,
# and an instrumentation cannot be uninstalled cleanly from a process, so each configuration runs
# in its own subprocess of this one environment, which holds all of them:
# - OpenTelemetry's openai-v2 instrumentation (with opentelemetry-util-genai 1.1b0: later
#   releases need an OpenTelemetry the other peers do not accept);
# - OpenLLMetry (traceloop-sdk, with its openai, anthropic, langchain and qdrant
#   instrumentations; qdrant-client for the vector store its RAG application queries);
# - OpenInference's openai, anthropic and langchain instrumentations;
# - Langfuse (its @observe decorator and its openai wrapper);
# - Pydantic Logfire (logfire 5.4.0 accepts OpenTelemetry < 1.46);
# - OpenLIT 1.45.0, installed --no-deps: its declared dependencies pin an older OpenTelemetry and
#   older clients; what it imports at run time is installed by name;
# - not llmtrace itself: the benchmarks put its source on PYTHONPATH (it accepts OpenTelemetry
#   >= 1.30, and needs none of its other dependencies but wrapt, rich and orjson, installed here).
# The model clients, frameworks and vector store client (openai, anthropic, httpx, httpx2,
# langchain-core, langchain-openai, langgraph, llama-index-core, qdrant-client) are pinned to the
# versions in .venv, so every configuration calls the very client llmtrace is tested with.
# (langgraph, part of llmtrace's langchain extra, matters here too: OpenLLMetry turns its LangChain
# instrumentation on only when the package langchain or langgraph is installed, not for
# langchain-core alone.)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
CACHE=${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}
VENV=${LLMTRACE_PEERS_VENV:-$CACHE/peers-venv}
PY=${PYTHON:-python3}
OTEL=1.45.1
log() { printf '\033[1m[peers]\033[0m %s\n' "$*"; }

# The shared libraries at the versions .venv has (scripts/setup.sh creates it); without .venv, the
# versions last checked together.
shared_pins() {
  local names="openai anthropic httpx httpx2 langchain-core langchain-openai langgraph llama-index-core
    qdrant-client"
  if [ -x "$ROOT/.venv/bin/python" ]; then
    # shellcheck disable=SC2086  # one argument per name
    "$ROOT/.venv/bin/python" - $names <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version
for name in sys.argv[1:]:
    try:
        print(f"{name}=={version(name)}")
    except PackageNotFoundError:
        pass
EOF
  else
    printf '%s\n' openai==3.57.0 anthropic==2.14.0 httpx==0.28.1 httpx2==2.16.2 \
      langchain-core==1.8.3 langchain-openai==1.7.4 langgraph==1.2.24 llama-index-core==0.14.25 \
      qdrant-client==1.20.0
  fi
}

pins=$(shared_pins)
want=$( (cat scripts/peers.sh; echo "$pins"; "$PY" --version 2>&1) | sha256sum | cut -c1-16)
if [ -f "$VENV/.peers-stamp" ] && [ "$(cat "$VENV/.peers-stamp")" = "$want" ]; then
  log "peers environment up to date ($VENV)"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtualenv $VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade pip setuptools wheel

CONSTRAINTS=$VENV/constraints.txt
{
  # A version that does not exist: any attempt to install torch fails loudly instead of pulling CUDA.
  echo "torch==0+never"
  echo "opentelemetry-api==$OTEL"
  echo "opentelemetry-sdk==$OTEL"
  echo "opentelemetry-util-genai==1.1b0"
  echo "$pins"
} > "$CONSTRAINTS"
log "pins: $(grep -v torch "$CONSTRAINTS" | tr '\n' ' ')"

log "installing the clients, frameworks and OpenTelemetry $OTEL"
"${PIP[@]}" install --progress-bar off -c "$CONSTRAINTS" \
  "opentelemetry-api==$OTEL" "opentelemetry-sdk==$OTEL" \
  openai anthropic httpx httpx2 langchain-core langchain-openai langgraph llama-index-core \
  wrapt rich orjson

log "installing OpenTelemetry's openai-v2 instrumentation"
"${PIP[@]}" install --progress-bar off -c "$CONSTRAINTS" --pre \
  opentelemetry-instrumentation-openai-v2 opentelemetry-util-genai==1.1b0

log "installing OpenLLMetry (traceloop-sdk) and qdrant-client"
"${PIP[@]}" install --progress-bar off -c "$CONSTRAINTS" traceloop-sdk qdrant-client

log "installing OpenInference's openai, anthropic, langchain and llama-index instrumentations"
"${PIP[@]}" install --progress-bar off -c "$CONSTRAINTS" \
  openinference-instrumentation-openai openinference-instrumentation-anthropic \
  openinference-instrumentation-langchain openinference-instrumentation-llama-index

log "installing Langfuse"
"${PIP[@]}" install --progress-bar off -c "$CONSTRAINTS" langfuse

log "installing Logfire"
"${PIP[@]}" install --progress-bar off -c "$CONSTRAINTS" logfire

log "installing OpenLIT 1.45.0 without its dependencies (pip then lists the ones it declares: expected)"
"${PIP[@]}" install --progress-bar off -c "$CONSTRAINTS" --no-deps openlit==1.45.0
"${PIP[@]}" install --progress-bar off -c "$CONSTRAINTS" \
  opentelemetry-exporter-otlp-proto-http opentelemetry-instrumentation requests pydantic \
  schedule tiktoken xmltodict boto3 botocore

# llmtrace itself is not installed: the benchmarks put the source they measure (this checkout, or
# a commit's) on PYTHONPATH. An install would build the native reader (setuptools-rust, in place in
# the checkout), which the overhead figures do not use.
# (llmtrace is the distribution's former name, and another project's on PyPI: neither stays.)
for distribution in llmtrace-otel llmtrace; do
  if "$VENV/bin/python" -m pip --disable-pip-version-check show -q "$distribution" >/dev/null 2>&1; then
    "${PIP[@]}" uninstall -q -y "$distribution"
  fi
done

log "checking that every configuration imports"
PYTHONPATH=$ROOT "$VENV/bin/python" - <<'EOF'
import importlib

for name in (
    "openai", "anthropic", "langchain_core", "langchain_openai",
    "opentelemetry.instrumentation.openai_v2", "traceloop.sdk", "qdrant_client",
    "openinference.instrumentation.openai", "openinference.instrumentation.anthropic",
    "openinference.instrumentation.langchain", "openinference.instrumentation.llama_index",
    "langfuse", "logfire", "openlit", "llmtrace",
):
    importlib.import_module(name)
EOF
"$VENV/bin/python" -m pip --disable-pip-version-check list 2>/dev/null \
  | grep -iE '^(openai|anthropic|opentelemetry-(api|sdk|instrumentation-openai-v2|util-genai)|openlit|traceloop-sdk|openinference-instrumentation-(openai|anthropic|langchain)|qdrant-client|langfuse|logfire|langchain-core|llama-index-core) ' \
  | sed 's/^/  /'
echo "$want" > "$VENV/.peers-stamp"
log "done: $VENV"
