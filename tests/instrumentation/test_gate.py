"""One gate decides whether anything is traced: OpenTelemetry's suppression, an unsampled
parent. Every layer asks it: decorators, model clients, HTTP clients, vector stores."""

from __future__ import annotations

import faiss
import httpx
import httpx2
import numpy as np
import openai
import pytest
import requests
from opentelemetry import trace
from opentelemetry.instrumentation.utils import (
    suppress_http_instrumentation,
    suppress_instrumentation,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

import llmtrace
from llmtrace.instrumentation import registry
from llmtrace.sdk.gate import should_trace, should_trace_http

pytestmark = pytest.mark.usefixtures("instrumented")


@pytest.fixture
def with_faiss(instrumented):
    # Undone with the client libraries by the ``instrumented`` fixture.
    registry.instrument(["faiss"])


@llmtrace.workflow
def answer(model_server_url: str, base_url: str) -> str:
    httpx2.get(f"{model_server_url}/tool")
    httpx.get(f"{model_server_url}/tool")
    requests.get(f"{model_server_url}/tool", timeout=5)
    index = faiss.IndexFlatL2(4)
    index.add(np.ones((3, 4), dtype=np.float32))
    index.search(np.ones((1, 4), dtype=np.float32), 2)
    client = openai.OpenAI(base_url=base_url, api_key="k", max_retries=0)
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    return reply.choices[0].message.content or ""


def test_everything_is_traced_normally(model_server, spans, with_faiss):
    assert should_trace() and should_trace_http()
    assert answer(model_server.url, model_server.base_url) == "Hello, world!"
    names = sorted(s.name for s in spans.get_finished_spans())
    assert names == ["GET", "GET", "GET", "answer", "chat m", "retrieval IndexFlatL2"]


def test_nothing_is_traced_while_instrumentation_is_suppressed(model_server, spans, with_faiss):
    with suppress_instrumentation():
        assert not should_trace()
        assert answer(model_server.url, model_server.base_url) == "Hello, world!"
    assert spans.get_finished_spans() == ()
    assert all("traceparent" not in r.headers for r in model_server.requests)


def test_suppressed_http_keeps_the_other_spans(model_server, spans, with_faiss):
    with suppress_http_instrumentation():
        assert should_trace() and not should_trace_http()
        answer(model_server.url, model_server.base_url)
    names = sorted(s.name for s in spans.get_finished_spans())
    assert names == ["answer", "chat m", "retrieval IndexFlatL2"]


def test_an_unsampled_parent_records_nothing_and_passes_its_decision_on(
    model_server, spans, with_faiss
):
    parent = SpanContext(trace_id=0x1234, span_id=0x5678, is_remote=True, trace_flags=TraceFlags(0))
    with trace.use_span(NonRecordingSpan(parent)):
        assert not should_trace()
        assert answer(model_server.url, model_server.base_url) == "Hello, world!"
    assert spans.get_finished_spans() == ()
    traceparents = [r.headers.get("traceparent") for r in model_server.requests]
    assert traceparents and all(tp is not None for tp in traceparents)
    assert all(tp.split("-")[1] == f"{0x1234:032x}" and tp.endswith("-00") for tp in traceparents)
