"""User-perceived TTFT: when a bench client first saw a streamed HTTP answer, against a real
streaming ASGI service with injected delays, next to the model's TTFT inside the service."""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import pytest
from opentelemetry import propagate, trace
from rich.console import Console
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from llmtrace import semconv
from llmtrace.analysis.render.html import render_html
from llmtrace.analysis.render.terminal import print_report
from llmtrace.analysis.report_model import Report
from llmtrace.bench.execute import run_bench
from llmtrace.bench.questions import Question, questions_from_texts
from llmtrace.bench.reporting import build_run_report, report_document
from llmtrace.bench.runner import BenchPlan
from llmtrace.bench.targets import FirstEvent, HTTPTarget
from llmtrace.cli import main
from tests.http_server import QuietHandler
from tests.http_server import serving as serving_handler

from .conftest import serving

# The service's steps before its model call (it sends an SSE comment when they are done), then
# the model's time to first token (the first `data:` event follows it).
BEFORE_MODEL = 0.12
MODEL_TTFT = 0.18
TOLERANCE = 0.005


@dataclass
class StreamingService:
    base_url: str = ""
    # When the service actually wrote each part, seconds after the request reached it.
    first_byte_sent: list[float] = field(default_factory=list)
    first_event_sent: list[float] = field(default_factory=list)


async def _sse_answer(
    request: Request, state: StreamingService, received: float
) -> AsyncIterator[bytes]:
    parent = propagate.extract(dict(request.headers))
    await asyncio.sleep(BEFORE_MODEL)
    state.first_byte_sent.append(time.monotonic() - received)
    yield b": retrieved, asking the model\n\n"
    tracer = trace.get_tracer("streaming-service")
    model_call = tracer.start_span(
        "chat tiny",
        context=parent,
        attributes={
            semconv.STAGE: semconv.LLM_STAGE,
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
            semconv.GEN_AI_REQUEST_MODEL: "tiny",
            semconv.GEN_AI_REQUEST_STREAM: True,
        },
    )
    called = time.monotonic()
    await asyncio.sleep(MODEL_TTFT)
    first_token = time.monotonic()
    model_call.set_attribute(semconv.TIME_TO_FIRST_TOKEN, first_token - called)
    state.first_event_sent.append(first_token - received)
    yield b'data: {"token": "Hello"}\n\n'
    await asyncio.sleep(0.02)
    yield b'data: {"token": " there"}\n\ndata: [DONE]\n\n'
    model_call.end()


@pytest.fixture
def streaming_service() -> Iterator[StreamingService]:
    state = StreamingService()

    async def sse(request: Request) -> StreamingResponse:
        received = time.monotonic()
        return StreamingResponse(
            _sse_answer(request, state, received), media_type="text/event-stream"
        )

    async def chunked(request: Request) -> StreamingResponse:
        received = time.monotonic()

        async def body() -> AsyncIterator[bytes]:
            await asyncio.sleep(BEFORE_MODEL)
            state.first_byte_sent.append(time.monotonic() - received)
            yield b"Hello"
            await asyncio.sleep(0.05)
            yield b" there"

        return StreamingResponse(body(), media_type="text/plain")

    async def whole(request: Request) -> JSONResponse:
        await asyncio.sleep(0.02)
        return JSONResponse({"answer": "Hello there"})

    routes = [
        Route("/sse", sse, methods=["POST"]),
        Route("/chunked", chunked, methods=["POST"]),
        Route("/whole", whole, methods=["POST"]),
    ]
    with serving(Starlette(routes=routes)) as base_url:
        state.base_url = base_url
        yield state


@pytest.fixture
def prompt_thread_handoffs() -> Iterator[None]:
    """The service (a uvicorn thread) and the bench client share one interpreter here, as they
    would not in use: at the default 5 ms switch interval, either can wait that long for the
    other to hand over the interpreter lock, as much as the tolerance itself. A shorter interval
    leaves what is measured to the client and the service."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    yield
    sys.setswitchinterval(interval)


async def test_first_byte_and_first_sse_event_are_timed_within_5_ms(
    streaming_service: StreamingService, prompt_thread_handoffs: None
) -> None:
    target = HTTPTarget(f"{streaming_service.base_url}/sse")
    try:
        # The first request also opens the connection; the service cannot see that part.
        await target(Question("0", "hi"))
        answers = [await target(Question(str(i), "hi")) for i in range(1, 6)]
    finally:
        await target.aclose()
    byte_errors, event_errors = [], []
    service = streaming_service
    sent = zip(service.first_byte_sent[1:], service.first_event_sent[1:], strict=True)
    for answer, (byte_sent, event_sent) in zip(answers, sent, strict=True):
        assert answer.time_to_first_byte is not None and answer.time_to_first_event is not None
        assert answer.time_to_first_byte >= BEFORE_MODEL
        assert answer.time_to_first_event >= BEFORE_MODEL + MODEL_TTFT
        assert 'data: {"token": "Hello"}' in answer.text
        byte_errors.append(abs(answer.time_to_first_byte - byte_sent))
        event_errors.append(abs(answer.time_to_first_event - event_sent))
    # Within 5 ms of the delays the service injected (as it measured them itself); the median
    # of five requests, so one scheduling hiccup of a busy machine does not decide.
    assert statistics.median(byte_errors) < TOLERANCE, byte_errors
    assert statistics.median(event_errors) < TOLERANCE, event_errors


async def test_chunked_bodies_have_a_first_byte_and_whole_bodies_neither(
    streaming_service: StreamingService,
) -> None:
    chunked = HTTPTarget(f"{streaming_service.base_url}/chunked")
    whole = HTTPTarget(f"{streaming_service.base_url}/whole")
    try:
        await chunked(Question("0", "hi"))  # opens the connection
        streamed = await chunked(Question("1", "hi"))
        sent_whole = await whole(Question("1", "hi"))
    finally:
        await chunked.aclose()
        await whole.aclose()
    assert streamed.text == "Hello there"
    assert streamed.time_to_first_byte is not None
    # The first part, not the whole body (the second part follows 50 ms later).
    assert BEFORE_MODEL <= streamed.time_to_first_byte < BEFORE_MODEL + 0.05
    assert streamed.time_to_first_event is None  # not SSE
    assert json.loads(sent_whole.text) == {"answer": "Hello there"}
    assert (sent_whole.time_to_first_byte, sent_whole.time_to_first_event) == (None, None)


def test_a_data_line_split_across_chunks_counts_when_it_is_complete() -> None:
    events = FirstEvent()
    assert not events.feed(b": comment\n\nda")
    assert not events.feed(b'ta: {"a"')
    assert events.feed(b": 1}\r\n\r\n")


async def _bench_sse(service: StreamingService, traces: Path) -> dict[str, Any]:
    """A bench run of four questions against the SSE endpoint: the document bench saves."""
    target = HTTPTarget(f"{service.base_url}/sse")
    try:
        result = await run_bench(
            questions_from_texts(["a?", "b?", "c?", "d?"]),
            target,
            BenchPlan(name="sse", warmup=1),
            traces_file=traces,
            show_progress=False,
        )
    finally:
        await target.aclose()
    assert result.requests == 4 and result.errors == 0
    return report_document(build_run_report(traces, result), result)


async def test_the_report_shows_user_perceived_and_model_ttft_and_the_difference(
    streaming_service: StreamingService, tmp_path: Path
) -> None:
    traces = tmp_path / "traces.jsonl"
    document = await _bench_sse(streaming_service, traces)
    # The bench's request spans carry the client's timings.
    roots = [
        span["attributes"]
        for line in traces.read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
        if span["name"] == "bench sse"
    ]
    keys = {attribute["key"] for attributes in roots for attribute in attributes}
    assert {semconv.CLIENT_TIME_TO_FIRST_BYTE, semconv.CLIENT_TIME_TO_FIRST_EVENT} <= keys

    report = Report.from_json(document)
    user = report.user_ttft
    assert user is not None and user.requests == 4
    assert user.first_event is not None and user.first_byte is not None
    assert user.model_ttft is not None and user.service_adds_p50 is not None
    assert abs(user.first_event.p50 - (BEFORE_MODEL + MODEL_TTFT)) < 0.03
    assert abs(user.model_ttft.p50 - MODEL_TTFT) < 0.03
    # What the service adds before the user sees anything: its steps before the model call.
    assert abs(user.service_adds_p50 - BEFORE_MODEL) < 0.02

    console = Console(record=True, width=120)
    print_report(report, console=console)
    text = console.export_text()
    assert "User-perceived time to first token (first SSE event at the client)" in text
    assert "The model's own TTFT inside the service" in text
    assert "before the user sees anything" in text
    assert "User-perceived time to first token" in render_html(report)


def _report(
    source: str, reader: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *options: str
) -> tuple[dict[str, Any], str]:
    """``llmtrace report SOURCE`` with one reader: its JSON and its text."""
    monkeypatch.setenv("LLMTRACE_NATIVE", "1" if reader == "native" else "0")
    monkeypatch.setenv("COLUMNS", "200")
    data, text = tmp_path / f"{reader}.json", tmp_path / f"{reader}.txt"
    assert main(["report", source, *options, "--format", "json", "--output", str(data)]) == 0
    assert main(["report", source, *options, "--output", str(text)]) == 0
    return json.loads(data.read_text()), text.read_text()


# What differs between bench's saved report and ``llmtrace report`` on the same traces: bench
# adds its run's metadata and its requests' questions, and each says where and when it read the
# traces.
RUN_AND_SOURCE = {"run", "generated_at", "source", "service", "jaeger_url"}


def _assert_as_bench_reports(bench: dict[str, Any], data: dict[str, Any], text: str) -> None:
    assert data["traces"] == bench["traces"] == 4
    assert data["user_ttft"] == bench["user_ttft"]
    for report in (data, bench):
        for one in [*report["slowest"], *(t for row in report["exemplars"].values() for t in row)]:
            one.pop("url")  # a link into Jaeger, when read from there
    # bench knows which question each request asked (compare pairs them); the traces alone do not
    bench = {**bench, "samples": dict(bench["samples"])}
    assert len(bench["samples"].pop("questions")) == 4
    assert {key: value for key, value in data.items() if key not in RUN_AND_SOURCE} == {
        key: value for key, value in bench.items() if key not in RUN_AND_SOURCE
    }
    user = Report.from_json(data).user_ttft
    assert user is not None and user.service_adds_p50 is not None
    assert abs(user.service_adds_p50 - BEFORE_MODEL) < 0.02
    assert "User-perceived time to first token (first SSE event at the client)" in text
    assert "First body byte at the client" in text
    assert "The model's own TTFT inside the service" in text
    assert "before the user sees anything" in text


class _TraceFileJaeger(QuietHandler):
    """Jaeger's query API v3 answering with the spans of one trace file, as one document."""

    services: ClassVar[list[str]] = []
    document: ClassVar[dict[str, Any]] = {}

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/api/v3/services":
            status, body = 200, {"services": self.services}
        elif path == "/api/v3/traces":
            status, body = 200, {"result": self.document}
        else:
            status, body = 404, {"error": {"httpCode": 404, "message": "not found"}}
        self.send_body(status, json.dumps(body).encode(), "application/json")


@contextmanager
def _jaeger_holding(traces: Path) -> Iterator[tuple[str, str]]:
    """A Jaeger query service holding the spans of ``traces``: its URL and their service."""
    resource_spans = [
        resource
        for line in traces.read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
    ]
    services = {
        attribute["value"]["stringValue"]
        for resource in resource_spans
        for attribute in resource["resource"]["attributes"]
        if attribute["key"] == "service.name"
    }
    (service,) = services
    handler = type(
        "Jaeger",
        (_TraceFileJaeger,),
        {"services": [service], "document": {"resourceSpans": resource_spans}},
    )
    with serving_handler(handler) as url:
        yield url, service


@pytest.mark.parametrize("reader", ["native", "python"])
@pytest.mark.parametrize("source", ["file", "jaeger"])
async def test_report_on_the_traces_shows_the_user_ttft_bench_showed(
    streaming_service: StreamingService,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    reader: str,
) -> None:
    traces = tmp_path / "traces.jsonl"
    bench = await _bench_sse(streaming_service, traces)
    assert bench["user_ttft"] is not None
    if source == "file":
        data, text = _report(str(traces), reader, tmp_path, monkeypatch)
    else:
        with _jaeger_holding(traces) as (url, service):
            options = ("--service", service, "--lookback", "1h")
            data, text = _report(url, reader, tmp_path, monkeypatch, *options)
    _assert_as_bench_reports(bench, data, text)
    # The warm-up request recorded its times too; like its other figures, they are left out.
    assert data["excluded_warmup"] == 1
