"""A vLLM llm_request span, as it arrives through the collector, joins the client's trace under
the model span that propagated traceparent to it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import llmtrace
from llmtrace import semconv
from llmtrace.analysis.breakdown import find_server_span, server_timings
from llmtrace.analysis.sources import load_traces
from llmtrace.sdk.exporters.otlp_json import encode_request

RECORDED = Path(__file__).parent / "data" / "vllm_llm_request.json"
MODEL_CALL_SECONDS = 0.2
SERVER_E2E_SECONDS = 0.148


def vllm_document(trace_id: str, parent_span_id: str, start_ns: int) -> dict[str, object]:
    document = json.loads(RECORDED.read_text())
    document.pop("comment")
    (span,) = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    span["traceId"] = trace_id
    span["parentSpanId"] = parent_span_id
    span["startTimeUnixNano"] = str(start_ns)
    span["endTimeUnixNano"] = str(start_ns + int(SERVER_E2E_SECONDS * 1e9))
    return document


def test_the_llm_request_span_is_a_child_of_the_client_model_span(spans, tmp_path) -> None:
    @llmtrace.llm(model="HuggingFaceTB/SmolLM2-135M-Instruct", provider="vllm")
    def chat() -> str:
        time.sleep(MODEL_CALL_SECONDS)
        return "answer"

    @llmtrace.workflow(name="answer")
    def answer() -> str:
        return chat()

    answer()
    client_spans = spans.get_finished_spans()
    model_span = next(s for s in client_spans if s.name.startswith("chat "))
    trace_id = format(model_span.context.trace_id, "032x")
    model_span_id = format(model_span.context.span_id, "016x")
    assert model_span.start_time is not None
    # The server's clock reads a little after the client sent the request.
    server_start = model_span.start_time + 20_000_000

    traces_file = tmp_path / "traces.jsonl"
    lines = [encode_request(client_spans), vllm_document(trace_id, model_span_id, server_start)]
    traces_file.write_text("".join(json.dumps(line) + "\n" for line in lines))

    traceset = load_traces(str(traces_file))

    (joined,) = [t for t in traceset.traces if t.trace_id == trace_id]
    assert not joined.orphan and joined.root.name == "answer"
    model = next(s for s in joined.spans() if s.span_id == model_span_id)
    server = find_server_span(model)
    assert server is not None and server.name == "llm_request"
    assert server.parent_id == model_span_id
    assert server.service == "vllm-server"
    timings = server_timings(model)
    assert timings is not None
    assert timings.queue == pytest.approx(0.042)
    assert timings.time_to_first_token == pytest.approx(0.061)
    assert server.attributes[semconv.GEN_AI_LATENCY_E2E] == pytest.approx(SERVER_E2E_SECONDS)
