"""What the framework test modules share: LangChain's instrumentation for one test, a
``ChatOpenAI`` on the simulated server, and the checks of a run's traces and report (the
LlamaIndex tests use the checks too)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
from langchain_openai import ChatOpenAI
from opentelemetry import trace as otel_trace

from llmtrace.analysis.report import Report, build_report
from llmtrace.analysis.sources import load_traces
from llmtrace.instrumentation import registry
from llmtrace.sdk.exporters.otlp_json import encode_request


@contextmanager
def langchain_traced(*others: str) -> Iterator[None]:
    """LangChain (and thread, and ``others``) instrumentation; afterwards no run is left in
    flight and no span is left current in the caller."""
    names = ["langchain", "threading", *others]
    registry.instrument(names)
    handler = registry._active["langchain"].handler
    try:
        yield
        assert handler._runs == {}
        assert handler._parents == {}
        assert handler._model_ended == {}
        assert not otel_trace.get_current_span().get_span_context().is_valid
    finally:
        registry.uninstrument(names)


def chat_model(model_server: Any, **kwargs: Any) -> ChatOpenAI:
    """A streaming ``ChatOpenAI`` on the simulated server, its connection already open."""
    model = ChatOpenAI(
        model="sim-model-1",
        base_url=model_server.base_url,
        api_key="k",
        streaming=True,
        max_retries=0,
        # Its own async connections: LangChain shares one per base URL, bound to the event loop
        # of its first use, and each test runs its own loop.
        http_async_client=openai.DefaultAsyncHttpxClient(),
        **kwargs,
    )
    # The first request of a client pays for connecting and lazy imports: not the model's TTFT.
    model.invoke("warm up")
    return model


def by_trace(spans: Any) -> dict[int, list[Any]]:
    """The finished spans, by trace id."""
    traces: dict[int, list[Any]] = defaultdict(list)
    for span in spans.get_finished_spans():
        traces[span.context.trace_id].append(span)
    return dict(traces)


def report_of(spans: Any, tmp_path: Any) -> Report:
    """The report on the finished spans, read back from an OTLP JSON file."""
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(encode_request(spans.get_finished_spans())) + "\n")
    return build_report(load_traces(str(path)))


def one(trace: list[Any], name: str) -> Any:
    """The trace's only span of that name."""
    matches = [span for span in trace if span.name == name]
    assert len(matches) == 1, (name, [span.name for span in trace])
    return matches[0]


def assert_tree(trace: list[Any]) -> Any:
    """One root; every other span's parent is in the trace. Returns the root."""
    ids = {span.context.span_id for span in trace}
    roots = [span for span in trace if span.parent is None]
    assert len(roots) == 1, [span.name for span in roots]
    for span in trace:
        assert span.parent is None or span.parent.span_id in ids, span.name
    return roots[0]


def assert_bottleneck(
    report: Report, stage: str, seconds: float, measured: float | None = None
) -> None:
    """The report names ``stage`` the bottleneck, its mean within 10% of ``seconds``; or, given
    ``measured`` (what the stage's spans themselves lasted, which on a busy machine can run past
    the injected delay by more than that), between ``seconds`` and ``measured``."""
    assert report.bottleneck is not None and report.bottleneck.stage == stage
    mean = report.stages[stage].distribution.mean
    if measured is None:
        assert abs(mean - seconds) <= 0.1 * seconds, mean
    else:
        assert 0.99 * seconds <= mean <= measured + 0.001, (mean, seconds, measured)
