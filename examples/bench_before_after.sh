#!/usr/bin/env bash
# Before/after with llmtrace bench: the same questions at the same concurrency, one change between
# the runs (RAG_TOP_K 8 -> 2: fewer passages to rerank), then the CI gate on the two saved runs.
#
#   OPENAI_BASE_URL=http://localhost:8080/v1 OPENAI_API_KEY=unused bash examples/bench_before_after.sh
#
# Runs are saved in .llmtrace/runs/ of the current directory, spans go to .llmtrace/traces.jsonl
# (or $LLMTRACE_FILE_PATH). tests/examples runs this script against the suite's model server.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"  # bench_rag is imported from here
llmtrace=${LLMTRACE:-llmtrace}
questions="$here/bench_questions.txt"

RAG_TOP_K=8 $llmtrace bench bench_rag:answer --questions "$questions" \
    --concurrency 2 --warmup 1 --name before --no-progress
RAG_TOP_K=2 $llmtrace bench bench_rag:answer --questions "$questions" \
    --concurrency 2 --warmup 1 --name after --baseline before --no-progress
# The gate a CI job runs: exit status 1 if the change made the median request 10% slower.
$llmtrace compare .llmtrace/runs/before.json .llmtrace/runs/after.json --format json \
    --fail-if-slower end_to_end:p50:10% > comparison.json
