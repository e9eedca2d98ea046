"""The GenAI client metrics count every model call, whatever the trace sampler decides.

A real application process: ``llmtrace.init(sample_ratio=0.1)`` on llmtrace's own tracer provider
with the embedded file exporter, an in-memory metric reader installed by the application first,
and 200 calls of the real ``openai`` client over HTTP to the simulated model server. About a
tenth of the traces reach the file; every call reaches the histograms, with the attributes and
values a sampled call has (one point per histogram: sampled and unsampled calls are alike).
The SDK draws trace ids from ``random``, seeded here, so the sampled share is the same each run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from opentelemetry import trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from tests.core.test_config import run_script, spans_in
from tests.instrumentation.test_metrics import histograms, points_for
from tests.servers.model_server import ModelServer

CALLS = 200

_APPLICATION = """
import json, random, sys
random.seed(20)
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
import openai
import llmtrace

llmtrace.init(service_name="every-call", exporter="file", file_path="traces.jsonl",
              sample_ratio=0.1)
client = openai.OpenAI(base_url={base_url!r}, api_key="k", max_retries=0)
messages = [{{"role": "user", "content": "hi"}}]


def call():
    try:
        if {stream!r}:
            stream = client.chat.completions.create(
                model="every-call-model", messages=messages, stream=True,
                stream_options={{"include_usage": True}})
            for _ in stream:
                pass
        else:
            client.chat.completions.create(model="every-call-model", messages=messages)
    except openai.APIStatusError:
        pass


@llmtrace.workflow(name="answer")
def answer():
    call()


for _ in range({calls}):
    answer() if {under_workflow!r} else call()
points = [
    {{"name": m.name, "count": p.count, "sum": p.sum, "attributes": dict(p.attributes)}}
    for rm in reader.get_metrics_data().resource_metrics
    for sm in rm.scope_metrics for m in sm.metrics for p in m.data.data_points
]
print(json.dumps(points))
"""


def _run(
    model_server: ModelServer,
    tmp_path: Path,
    *,
    stream: bool,
    under_workflow: bool,
    calls: int = CALLS,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The application's histogram points and the spans it exported."""
    code = _APPLICATION.format(
        base_url=model_server.base_url, stream=stream, under_workflow=under_workflow, calls=calls
    )
    result = run_script(code, tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1]), spans_in(tmp_path / "traces.jsonl")


def _only(points: list[dict[str, Any]], name: str, **attributes: Any) -> dict[str, Any]:
    found = [
        point
        for point in points
        if point["name"] == name
        and all(point["attributes"].get(key) == value for key, value in attributes.items())
    ]
    assert len(found) == 1, (name, attributes, points)
    return found[0]


def _a_tenth_exported(spans: list[dict[str, Any]], spans_per_trace: int) -> int:
    """The traces in the file: about a tenth, each whole."""
    traces: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        traces.setdefault(span["traceId"], []).append(span)
    # Binomial(200, 0.1): fewer than 6 or more than 39 happens once in tens of thousands
    assert 6 <= len(traces) <= 39
    assert all(len(members) == spans_per_trace for members in traces.values())
    return len(traces)


@pytest.mark.parametrize("under_workflow", [False, True], ids=["root-call", "under-workflow"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_every_call_is_in_the_histograms_at_a_tenth_sampled(
    model_server: ModelServer, tmp_path: Path, stream: bool, under_workflow: bool
) -> None:
    """A root call the sampler drops and a call under a workflow span it dropped (the gate then
    keeps the call untraced) are both counted, with a sampled call's attributes and values."""
    model_server.configure(headers_delay=0.002, first_token_delay=0.003, token_delay=0.001)
    points, spans = _run(model_server, tmp_path, stream=stream, under_workflow=under_workflow)

    _a_tenth_exported(spans, 2 if under_workflow else 1)
    call_attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "every-call-model",
        "gen_ai.response.model": "sim-model-1",
        "server.address": "127.0.0.1",
        "server.port": model_server.port,
    }
    duration = _only(points, "gen_ai.client.operation.duration")
    assert duration["count"] == CALLS
    assert duration["attributes"] == call_attributes
    # the simulated server reports 10 input tokens and one output token per token sent (4)
    input_tokens = _only(points, "gen_ai.client.token.usage", **{"gen_ai.token.type": "input"})
    output_tokens = _only(points, "gen_ai.client.token.usage", **{"gen_ai.token.type": "output"})
    assert (input_tokens["count"], input_tokens["sum"]) == (CALLS, 10 * CALLS)
    assert (output_tokens["count"], output_tokens["sum"]) == (CALLS, 4 * CALLS)
    first_chunk = [p for p in points if p["name"].endswith("time_to_first_chunk")]
    per_chunk = [p for p in points if p["name"].endswith("time_per_output_chunk")]
    if stream:
        (ttfc,) = first_chunk
        assert ttfc["count"] == CALLS
        assert ttfc["attributes"] == call_attributes
        # every call's first chunk (the role-only chunk the server sends with its headers) came
        # after the server's headers delay, sampled or not
        assert ttfc["sum"] / CALLS >= 0.002
        assert per_chunk[0]["count"] == CALLS
    else:
        assert first_chunk == per_chunk == []


def test_failed_calls_are_counted_with_their_error_type(
    model_server: ModelServer, tmp_path: Path
) -> None:
    model_server.configure(status=500)
    points, spans = _run(model_server, tmp_path, stream=False, under_workflow=True, calls=40)

    duration = _only(points, "gen_ai.client.operation.duration")
    assert duration["count"] == 40
    assert duration["attributes"]["error.type"] == "InternalServerError"
    assert "gen_ai.response.model" not in duration["attributes"]
    assert not [p for p in points if p["name"] == "gen_ai.client.token.usage"]
    # at a tenth, 40 calls may leave no trace at all, never more than a few
    assert len(spans) <= 2 * 15


def _count(reader: InMemoryMetricReader, model: str) -> int:
    return sum(
        p.count for p in points_for(histograms(reader), "gen_ai.client.operation.duration", model)
    )


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_call_under_a_dropped_parent_is_counted_and_propagates_that_parent(
    model_server: ModelServer,
    spans: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    sdk: str,
) -> None:
    """In the suite's process (a parent-based sampler): the gate keeps the call untraced under
    an unsampled parent, the metrics count it, no span is exported, and the server gets the
    parent's context as it did before calls were counted; a call while instrumentation is
    suppressed (an exporter's own) is not counted."""
    model = f"dropped-parent-{sdk}"
    parent = NonRecordingSpan(SpanContext(0xABC, 0xDEF, is_remote=False, trace_flags=TraceFlags(0)))
    messages: Any = [{"role": "user", "content": "hi"}]

    def call() -> None:
        if sdk == "openai":
            client = openai.OpenAI(base_url=model_server.base_url, api_key="k", max_retries=0)
            client.chat.completions.create(model=model, messages=messages)
        else:
            claude = anthropic.Anthropic(base_url=model_server.url, api_key="k", max_retries=0)
            with claude.messages.stream(model=model, max_tokens=16, messages=messages) as stream:
                for _ in stream.text_stream:
                    pass

    before = _count(metric_reader, model)
    with trace.use_span(parent):
        call()
        traceparent = model_server.requests[-1].headers["traceparent"]
        with suppress_instrumentation():
            call()
    assert _count(metric_reader, model) == before + 1
    assert spans.get_finished_spans() == ()
    assert traceparent == f"00-{0xABC:032x}-{0xDEF:016x}-00"
