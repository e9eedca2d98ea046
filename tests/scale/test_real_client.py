"""The breakdown at the source of a request made with the real ``openai`` client over real HTTP
(the simulated model server streams with known delays), against the report of the same spans."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import llmtrace
from llmtrace import semconv as sc
from llmtrace.analysis.sources import load_traces
from llmtrace.instrumentation import registry
from llmtrace.sdk.exporters.file import OTLPJsonFileExporter
from tests.scale.harness import CapturingProcessor


@pytest.fixture
def breakdown(provider: TracerProvider) -> Iterator[CapturingProcessor]:
    """The processor on the suite's provider for one test, recording into its own meters."""
    names = registry.instrument(["openai", "httpx", "httpx2"])
    processor = CapturingProcessor(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    provider.add_span_processor(processor)
    try:
        yield processor
    finally:
        multi = provider._active_span_processor  # type: ignore[attr-defined]
        multi._span_processors = tuple(p for p in multi._span_processors if p is not processor)
        if names:
            registry.uninstrument()


@llmtrace.retrieval(data_source="docs")
def _search() -> list[str]:
    time.sleep(0.02)
    return ["doc"]


def test_a_streamed_openai_request_breaks_down_as_the_report_breaks_it_down(
    model_server, spans: InMemorySpanExporter, breakdown: CapturingProcessor, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    model_server.configure(first_token_delay=0.05, token_delay=0.01, tokens=["a", "b", "c"])
    client = openai.OpenAI(base_url=model_server.base_url, api_key="sk-test", max_retries=0)

    @llmtrace.workflow(name="answer")
    def answer() -> str:
        _search()
        stream = client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)

    assert answer() == "abc"
    finished = spans.get_finished_spans()
    OTLPJsonFileExporter(tmp_path / "t.jsonl").export(finished)
    columns = load_traces(str(tmp_path / "t.jsonl")).collector.collect(None)
    (trace_id,) = [columns.info(i).trace_id for i in range(len(columns.durations))]
    report = {s: values[0] for s, values in columns.columns.items() if values[0] > 0}
    figures = breakdown.figures[trace_id]
    assert {s: v for s, v in figures.stages.items() if v > 0} == pytest.approx(report, abs=1e-9)
    assert {"retrieval", "ttft", "generation"} <= report.keys()
    assert figures.name == "answer"
    assert figures.model == "gpt-test"
    assert figures.error_type is None
    # the user waited for the search (20 ms) and the model's first token (50 ms)
    assert figures.time_to_first_token is not None
    assert 0.07 <= figures.time_to_first_token < figures.duration
    model_call = next(s for s in finished if s.attributes.get(sc.STAGE) == sc.LLM_STAGE)
    assert model_call.attributes[sc.TIME_TO_FIRST_TOKEN] >= 0.05
