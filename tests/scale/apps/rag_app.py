"""A RAG-like service with known stage delays, traced by llmtrace and exporting over OTLP.

Usage: python rag_app.py REQUESTS RETRIEVAL_MS [ERROR_EVERY]
Each request: a workflow root, an embedding (5 ms), a retrieval (RETRIEVAL_MS), a model call
with its first token 20 ms in (APP_FIRST_TOKEN_MS) and 30 ms of generation, and 5 ms of post-processing. Every
ERROR_EVERY-th request fails in the model call. The endpoint, service name, file path and the
request metrics options come from the environment (OTEL_*, LLMTRACE_*); APP_TRACE_FILE, when
set, also writes every span to that file (a complete copy, whatever a collector samples);
APP_ROUTE names the workflow (the request's name in the metrics; default ask);
APP_FIRST_TOKEN_MS, the model call's time to its first token (default 20).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import llmtrace
from llmtrace.sdk.exporters.file import OTLPJsonFileExporter


@llmtrace.embedding(model="embedder")
def embed() -> None:
    time.sleep(0.005)


@llmtrace.retrieval(data_source="docs")
def retrieve(milliseconds: float) -> list[str]:
    time.sleep(milliseconds / 1000)
    return ["a", "b"]


FIRST_TOKEN_SECONDS = float(os.environ.get("APP_FIRST_TOKEN_MS", "20")) / 1000


@llmtrace.llm(model="tiny-chat", provider="local")
def answer(fail: bool) -> str:
    time.sleep(FIRST_TOKEN_SECONDS)
    llmtrace.mark_first_token()
    if fail:
        raise TimeoutError("the model stopped answering")
    time.sleep(0.03)
    llmtrace.record_usage(input_tokens=120, output_tokens=30)
    return "answer"


@llmtrace.stage("postprocess")
def tidy() -> None:
    time.sleep(0.005)


@llmtrace.workflow(name=os.environ.get("APP_ROUTE", "ask"))
def ask(retrieval_ms: float, fail: bool) -> None:
    embed()
    retrieve(retrieval_ms)
    answer(fail)
    tidy()


def main() -> None:
    requests, retrieval_ms = int(sys.argv[1]), float(sys.argv[2])
    error_every = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    copy = os.environ.get("APP_TRACE_FILE")
    llmtrace.init(exporters=[OTLPJsonFileExporter(Path(copy))] if copy else None)
    for i in range(requests):
        with contextlib.suppress(TimeoutError):
            ask(retrieval_ms, fail=bool(error_every) and (i + 1) % error_every == 0)
    llmtrace.shutdown()


if __name__ == "__main__":
    main()
