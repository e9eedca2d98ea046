"""How long `llmtrace report` takes on traces read from Jaeger, and how much of it is Jaeger.

    .venv/bin/python -m benchmarks.jaeger_read [TRACES]

Starts the test suite's Collector and Jaeger (collector-config/, in-memory Jaeger), sends TRACES
requests (default 100000) of one peer's shape (OpenInference: four spans and a first-token
event) as OTLP/JSON, then reads them back with the native reader and with the Python one,
timing the time spent waiting for Jaeger's answers apart from the rest (decoding, linking,
breakdown, report).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from llmtrace.analysis import sources
from llmtrace.analysis.report import build_report
from tests.analysis.peer_shapes import request_document, shapes
from tests.backends.fixtures import _build_backends, run_tracing_stack

BATCH = 500
SPACING_NS = 10_000_000  # requests 10 ms apart


def _send(endpoint: str, service: str, traces: int) -> None:
    prefix = uuid.uuid4().hex[:8]
    shape = shapes()["openinference"]
    with httpx.Client(timeout=60) as client:
        for first in range(0, traces, BATCH):
            documents = [
                request_document(shape, index, service=service)
                for index in range(first, min(first + BATCH, traces))
            ]
            merged: dict[str, Any] = documents[0]
            scopes = merged["resourceSpans"][0]["scopeSpans"]
            for document in documents[1:]:
                scopes.extend(document["resourceSpans"][0]["scopeSpans"])
            for scope in scopes:
                for span in scope["spans"]:
                    trace_id = span["traceId"]
                    index = int(trace_id[:8], 16) - 1
                    span["traceId"] = prefix + trace_id[:8] + trace_id[16:]
                    # 1 s apart in the shapes; closer here, so the window stays small
                    shift = index * (1_000_000_000 - SPACING_NS)
                    for key in ("startTimeUnixNano", "endTimeUnixNano"):
                        span[key] = str(int(span[key]) - shift)
                    for event in span.get("events", []):
                        event["timeUnixNano"] = str(int(event["timeUnixNano"]) - shift)
            response = client.post(f"{endpoint}/v1/traces", json=merged)
            response.raise_for_status()


def _timed_read(jaeger_url: str, service: str, traces: int, native: bool) -> dict[str, float]:
    os.environ["LLMTRACE_NATIVE"] = "1" if native else "0"
    waited = [0.0]
    original = sources.JaegerClient._get

    def timed_get(self: sources.JaegerClient, path: str, params: Any = None) -> httpx.Response:
        began = time.perf_counter()
        try:
            return original(self, path, params)
        finally:
            waited[0] += time.perf_counter() - began

    sources.JaegerClient._get = timed_get  # type: ignore[method-assign]
    try:
        began = time.perf_counter()
        traceset = sources.load_traces(
            jaeger_url,
            service=service,
            since="2023-11-14T22:00:00Z",
            until="2023-11-16T00:00:00Z",
            limit=traces,
        )
        report = build_report(traceset)
        total = time.perf_counter() - began
    finally:
        sources.JaegerClient._get = original  # type: ignore[method-assign]
    return {
        "traces": report.traces,
        "total_s": round(total, 2),
        "jaeger_s": round(waited[0], 2),
        "rest_s": round(total - waited[0], 2),
    }


def main() -> None:
    traces = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    os.environ.setdefault("JAEGER_MAX_TRACES", str(max(traces, 100_000)))
    service = f"bench-{uuid.uuid4().hex[:6]}"
    with (
        tempfile.TemporaryDirectory() as directory,
        run_tracing_stack(_build_backends(), Path(directory)) as stack,
    ):
        began = time.perf_counter()
        _send(stack.otlp_http_endpoint, service, traces)
        print(f"sent {traces} traces in {time.perf_counter() - began:.1f} s", flush=True)
        time.sleep(10)  # the collector's queue drains into Jaeger
        for native in (True, False):
            reader = "native" if native else "python"
            result = _timed_read(stack.jaeger_url, service, traces, native)
            print(reader, json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
