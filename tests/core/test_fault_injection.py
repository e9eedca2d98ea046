"""Rule 1: when llmtrace's own code fails, the user's call returns or raises exactly as without it,
and the failure is logged once."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import llmtrace
from llmtrace.sdk import decorators
from llmtrace.sdk._safety import reset_logged
from llmtrace.sdk.exporters.file import OTLPJsonFileExporter

RESULT = {"answer": 42}
ERROR = LookupError("user error")


def broken(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("llmtrace internal failure")


@llmtrace.retrieval(data_source="docs")
def returns() -> dict[str, int]:
    return RESULT


@llmtrace.tool(name="t")
def raises() -> None:
    raise ERROR


@llmtrace.llm(model="m")
def streams() -> Any:
    yield "a"
    yield "b"


@llmtrace.llm(model="m")
async def coroutine() -> dict[str, int]:
    return RESULT


@pytest.fixture(autouse=True)
def fresh_log():
    reset_logged()
    yield
    reset_logged()


@pytest.mark.parametrize("hook", ["_on_result", "_begin", "_end_ok", "_end_error", "record_error"])
def test_each_decorator_hook_failing_leaves_user_calls_unchanged(spans, monkeypatch, caplog, hook):
    caplog.set_level(logging.WARNING)
    monkeypatch.setattr(decorators, hook, broken)
    for _ in range(3):
        assert returns() is RESULT
        with pytest.raises(LookupError) as caught:
            raises()
        assert caught.value is ERROR
        assert list(streams()) == ["a", "b"]
        assert asyncio.run(coroutine()) is RESULT
        with llmtrace.stage("queue"):
            pass
    failures = [r for r in caplog.records if "llmtrace" in r.getMessage()]
    assert failures, f"the {hook} failure was not logged"
    messages = [r.getMessage() for r in failures]
    assert len(messages) == len(set(messages)), messages  # each failure once, not per call


def test_tracer_failing_to_start_a_span(spans, monkeypatch, caplog):
    monkeypatch.setattr(decorators._tracer, "start_span", broken)
    assert returns() is RESULT
    assert returns() is RESULT
    assert list(streams()) == ["a", "b"]
    assert caplog.text.count("span start failed for retrieval docs") == 1


def test_span_end_raising_inside_the_sdk(spans, monkeypatch, caplog):
    from opentelemetry.sdk.trace import Span

    monkeypatch.setattr(Span, "end", broken)
    assert returns() is RESULT
    with pytest.raises(LookupError) as caught:
        raises()
    assert caught.value is ERROR
    assert list(streams()) == ["a", "b"]
    assert caplog.text.count("span end failed") == 1


def test_stream_parser_failing(spans, caplog):
    from opentelemetry import trace

    from llmtrace.sdk.streaming import StreamRecorder, TracedStream

    class BrokenParser:
        has_content = observe = finish = output_tokens = staticmethod(broken)

    recorder = StreamRecorder(trace.get_tracer("t").start_span("s"), parser=BrokenParser())
    assert list(TracedStream(iter([1, 2, 3]), recorder)) == [1, 2, 3]
    assert caplog.text.count("stream chunk observation failed") == 1
    assert len(spans.get_finished_spans()) == 1


def test_exporter_failing(tmp_path, monkeypatch, caplog):
    exporter = OTLPJsonFileExporter(tmp_path / "t.jsonl")
    monkeypatch.setattr("llmtrace.sdk.exporters.file.encode_request", broken)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for _ in range(3):
        with tracer.start_as_current_span("s"):
            pass
    assert caplog.text.count("could not write spans") == 1
