"""Other instrumentations' traces read back from a real Jaeger (through a real Collector) give the
report their file gives: scope names, attributes and events survive the trip."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmtrace.analysis.native import NativeTraces
from llmtrace.analysis.report import build_report
from llmtrace.analysis.sources import load_traces
from tests.analysis.conftest import run_llmtrace
from tests.analysis.peer_shapes import request_lines, shapes
from tests.backends.fixtures import wait_for_spans

pytestmark = pytest.mark.integration

REQUESTS = 6
WINDOW = ("--since", "2023-11-14T22:00:00Z", "--until", "2023-11-14T23:00:00Z")


def _documents(peer: str, service: str) -> list[dict[str, Any]]:
    """The peer's requests with trace ids of their own (Jaeger keeps every test's traces)."""
    prefix = uuid.uuid4().hex[:8]
    documents = []
    for line in request_lines(peer, REQUESTS, service=service):
        document = json.loads(line)
        for scope in document["resourceSpans"][0]["scopeSpans"]:
            for span in scope["spans"]:
                span["traceId"] = prefix + span["traceId"][8:]
        documents.append(document)
    return documents


def _report(*args: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(run_llmtrace("report", *args, "--format", "json").stdout)
    for key in ("generated_at", "source", "service", "jaeger_url", "slowest", "samples"):
        data.pop(key)
    for traces in data["exemplars"].values():
        for trace in traces:
            trace.pop("url")  # a link into Jaeger, when read from there
    return data


def test_each_peers_traces_from_jaeger_give_the_files_report(  # type: ignore[no-untyped-def]
    tracing_stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = {peer: f"{peer}-{uuid.uuid4().hex[:8]}" for peer in sorted(shapes())}
    files = {}
    sent = {}
    for peer, service in services.items():
        documents = _documents(peer, service)
        path = tmp_path / f"{peer}.jsonl"
        path.write_text("".join(json.dumps(document) + "\n" for document in documents))
        files[peer] = path
        sent[peer] = sum(
            len(scope["spans"]) for d in documents for scope in d["resourceSpans"][0]["scopeSpans"]
        )
        for document in documents:
            response = httpx.post(
                f"{tracing_stack.otlp_http_endpoint}/v1/traces", json=document, timeout=10
            )
            assert response.status_code == 200, response.text
    for peer, service in services.items():
        wait_for_spans(tracing_stack.jaeger_url, service, sent[peer])
        from_file = _report(str(files[peer]))
        from_jaeger = _report(tracing_stack.jaeger_url, "--service", service, *WINDOW)
        assert from_file["traces"] == REQUESTS
        assert from_jaeger == from_file, peer
        assert from_jaeger["bottleneck"]["stage"] == "ttft"
        assert from_jaeger["instrumentations"][shapes()[peer].family] >= REQUESTS
        # Jaeger's answers are OTLP JSON: the native reader reads them as the Python one does
        both = []
        for flag in ("1", "0"):
            monkeypatch.setenv("LLMTRACE_NATIVE", flag)
            traceset = load_traces(
                tracing_stack.jaeger_url, service=service, since=WINDOW[1], until=WINDOW[3]
            )
            assert isinstance(traceset.collector, NativeTraces) == (flag == "1")
            report = build_report(traceset).to_json()
            report.pop("generated_at")
            both.append(report)
        assert both[0] == both[1]
