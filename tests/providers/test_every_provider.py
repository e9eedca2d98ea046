"""The checks every provider's SDK passes alike, one test parametrised over the rows of
``table.py``.

Each provider's own client against the simulated server speaking its wire format: that its
recordings are none left out, every end a stream can come to but the whole read (its events are the
provider's own), nothing traced while instrumentation is suppressed, OpenTelemetry's own HTTP
instrumentation beside llmtrace's, the TTFT of the SDKs traced at their public methods, and
calls under a dropped parent counted in the GenAI client metrics without being traced, and the
retries of every client that retries seen on its model span and in the report. What
differs between providers is in their rows; what one provider alone does stays in its module.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags

from llmtrace import semconv
from llmtrace.analysis.report import build_report
from llmtrace.analysis.sources import load_traces
from llmtrace.sdk.exporters.otlp_json import encode_request
from tests.providers.sdk_checks import (
    FirstTokens,
    assert_http_spans_are_theirs_under_ours,
    assert_no_secret_in,
    model_spans,
    only_model_span,
    sleeps,
)
from tests.providers.table import PROVIDERS, Provider


def each(where: Callable[[Provider], bool] = lambda provider: True) -> list[Any]:
    """The providers ``where`` holds for, as parameters of ``provider`` (with their marks)."""
    return [pytest.param(p, id=p.name, marks=p.marks) for p in PROVIDERS if where(p)]


WITH_ASYNC_CLIENT = each(lambda provider: provider.async_client is not None)
FIRST_TOKEN_TIMED_BY_CALLER = each(lambda provider: provider.first_token_timed_by_caller)
HTTP_LIBRARIES = [
    pytest.param(provider, library, id=f"{provider.name}-{library}", marks=provider.marks)
    for provider in PROVIDERS
    for library in provider.http_libraries
]


@pytest.mark.parametrize("provider", each())
def test_every_recording_is_replayed(provider):
    """Each provider's module replays every recording of its folder: none is left out unseen."""
    assert len(provider.cassettes) == provider.recording_count


# --- every way a stream ends --------------------------------------------------------------------


@pytest.mark.parametrize("provider", each())
def test_stream_read_with_next_then_dropped_ends_at_its_last_chunk(provider, client, spans):
    stream = provider.stream(client)
    next(stream)
    time.sleep(0.3)  # the caller's own work, after its last chunk
    del stream
    gc.collect()
    span = only_model_span(spans)
    assert span.attributes[semconv.STREAM_END] == provider.dropped_stream_end
    if provider.dropped_stream_end == "abandoned":  # ended at its last chunk, not at the drop
        assert (span.end_time - span.start_time) / 1e9 < 0.3


@pytest.mark.parametrize("provider", each())
def test_stream_left_early_and_closed_ends_the_span_once(provider, client, server, spans):
    server.configure(token_delay=0.01, tokens=["t"] * 10)
    stream = provider.stream(client)
    for _chunk in stream:
        break
    stream.close()
    stream.close()
    span = only_model_span(spans)
    assert span.attributes[semconv.STREAM_END] == "closed"
    assert span.attributes[semconv.CHUNK_COUNT] == 1
    assert span.status.status_code == StatusCode.UNSET


@pytest.mark.parametrize("provider", each())
def test_stream_cut_mid_way_raises_the_clients_error_and_ends_failed(
    provider, client, server, spans
):
    server.configure(fail_after_chunks=2, token_delay=0.01)
    with pytest.raises(Exception) as raised:
        list(provider.stream(client))
    span = only_model_span(spans)
    assert span.attributes[semconv.STREAM_END] == "error"
    assert span.attributes[semconv.ERROR_TYPE] == type(raised.value).__qualname__
    assert span.status.status_code == StatusCode.ERROR


@pytest.mark.parametrize("provider", WITH_ASYNC_CLIENT)
async def test_async_stream_cancelled_while_read_ends_cancelled(
    provider, async_client, server, spans
):
    server.configure(first_token_delay=0.05, token_delay=0.5, tokens=["a", "b", "c"])
    first_token = asyncio.Event()

    async def read() -> None:
        async for event in provider.async_stream(async_client):
            if provider.has_content(event):
                first_token.set()

    task = asyncio.create_task(read())
    await asyncio.wait_for(first_token.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):  # still reading when cancelled
        await task
    span = only_model_span(spans)
    assert span.attributes[semconv.STREAM_END] == "cancelled"
    assert span.status.status_code == StatusCode.UNSET
    assert span.attributes[semconv.TIME_TO_FIRST_TOKEN] >= 0.05


# --- what is not traced, and living with OpenTelemetry's own HTTP instrumentation ----------------------------------------


@pytest.mark.parametrize("provider", each())
def test_nothing_is_traced_while_instrumentation_is_suppressed(provider, client, spans):
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    with suppress_instrumentation():
        provider.whole(client)
        list(provider.stream(client))
    assert spans.get_finished_spans() == ()


def _counts(reader: Any) -> dict[str, int]:
    """Points so far of each GenAI histogram (the session's reader is cumulative)."""
    counts: dict[str, int] = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name.startswith("gen_ai.client."):
                    total = sum(point.count for point in metric.data.data_points)
                    counts[metric.name] = counts.get(metric.name, 0) + total
    return counts


@pytest.mark.parametrize("provider", each())
def test_calls_under_a_dropped_parent_are_counted_once_and_not_traced(
    provider, client, spans, metric_reader
):
    """Metrics count every call: under a parent the sampler dropped, the gate keeps a whole and
    a streamed call untraced, and the GenAI client metrics count each of them once."""
    dropped = NonRecordingSpan(
        SpanContext(0xABC, 0xDEF, is_remote=False, trace_flags=TraceFlags(0))
    )
    before = _counts(metric_reader)
    with trace.use_span(dropped):
        provider.whole(client)
        list(provider.stream(client))
    after = _counts(metric_reader)
    assert spans.get_finished_spans() == ()
    duration, first_chunk = (
        "gen_ai.client.operation.duration",
        "gen_ai.client.operation.time_to_first_chunk",
    )
    assert after[duration] - before.get(duration, 0) == 2
    assert after[first_chunk] - before.get(first_chunk, 0) == 1


@pytest.mark.parametrize(("provider", "library"), HTTP_LIBRARIES)
def test_opentelemetry_http_instrumentation_adds_no_model_span(
    provider, library, server, spans, instrumented, monkeypatch
):
    """OpenTelemetry's own HTTP span sits under the model span (it owns HTTP spans; llmtrace adds
    none of its own there): one model span per call, as with the openai client."""
    from opentelemetry.instrumentation import httpx as otel_httpx

    provider.use_http_library(monkeypatch, library)
    instrumentor = (
        otel_httpx.HTTPXClientInstrumentor()
        if library == "httpx"
        else otel_httpx.HTTPX2ClientInstrumentor()
    )
    instrumentor.instrument()
    try:
        client = provider.client(server)
        provider.whole(client)
        list(provider.stream(client))
    finally:
        instrumentor.uninstrument()
    whole, streamed = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert streamed.attributes[semconv.STREAM_END] == "completed"
    assert_http_spans_are_theirs_under_ours(spans, [whole, streamed])
    for span in (whole, streamed):
        (child,) = [
            s
            for s in spans.get_finished_spans()
            if s.parent and s.parent.span_id == span.context.span_id
        ]
        assert child.kind == SpanKind.CLIENT
    assert_no_secret_in(spans, *provider.secrets)


# --- TTFT, as the caller sees the first token ---------------------------------------------------

FIRST_TOKEN = 0.3


@pytest.mark.parametrize("provider", FIRST_TOKEN_TIMED_BY_CALLER)
def test_ttft_matches_the_injected_first_token_delay_sync(provider, client, server, spans):
    server.configure(headers_delay=0.1, first_token_delay=FIRST_TOKEN, token_delay=0.02)
    provider.whole(client)  # connection warm-up
    measured = FirstTokens(FIRST_TOKEN, 0.1)
    for _ in range(5):
        spans.clear()
        seen = None
        started = time.monotonic()
        for event in provider.stream(client):
            if seen is None and provider.has_content(event):
                seen = time.monotonic()
        measured.add(spans, server, started, seen)
    measured.check()


@pytest.mark.parametrize("provider", FIRST_TOKEN_TIMED_BY_CALLER)
async def test_ttft_matches_the_injected_first_token_delay_async(
    provider, async_client, server, spans
):
    server.configure(headers_delay=0.1, first_token_delay=FIRST_TOKEN, token_delay=0.02)
    measured = FirstTokens(FIRST_TOKEN, 0.1)
    await provider.async_whole(async_client)  # connection warm-up
    for _ in range(5):
        spans.clear()
        seen = None
        started = time.monotonic()
        async for event in provider.async_stream(async_client):
            if seen is None and provider.has_content(event):
                seen = time.monotonic()
        measured.add(spans, server, started, seen)
    measured.check()


# --- retries inside one model call ----------------------------------------------------------------

# Each provider's own refusal (a 429 with the hint its client reads, if any), and an overloaded
# server's 503 without a hint.
RETRYING = [
    pytest.param(
        p,
        streamed,
        refusal,
        id=f"{p.name}-{'stream' if streamed else 'whole'}-{refusal[0]}",
        marks=p.marks,
    )
    for p in PROVIDERS
    if p.retrying is not None
    for streamed in (False, True)
    if p.retries_streams or not streamed
    for refusal in (p.refusal, (503, {}))
]
# The wait lies inside the gap the server saw between sending the refusal and the retry arriving
# (both of its ends do), give or take the loopback.
LOOPBACK = 0.002


@pytest.mark.parametrize(("provider", "streamed", "refusal"), RETRYING)
def test_a_refused_attempt_and_the_wait_before_its_retry_are_on_the_span(
    provider, server, instrumented, spans, monkeypatch, tmp_path, streamed, refusal
):
    """The provider's own retry loop, its first attempt refused: one model span, the refused
    attempt an event on it with the wait the client slept, and the report's ``retry`` stage."""
    client = provider.retrying(server)
    slept = sleeps(monkeypatch)
    status, headers = refusal
    # (Long enough for the answer to take the server the time its timing headers claim, groq's.)
    server.configure(first_token_delay=0.05, token_delay=0.01, refusals=[(status, headers)])
    if streamed:
        for _ in provider.stream(client):
            pass
    else:
        provider.whole(client)

    span = only_model_span(spans)
    attributes = span.attributes
    assert attributes[semconv.HTTP_REQUEST_RESEND_COUNT] == 1
    assert attributes[semconv.RETRY_ERROR_TYPES] == (str(status),)
    assert semconv.ERROR_TYPE not in attributes
    (event,) = [e for e in span.events if e.name == semconv.RETRY_EVENT]
    assert event.attributes[semconv.HTTP_RESPONSE_STATUS_CODE] == status
    (client_slept,) = slept
    refused, retried = server.requests[-2:]
    assert refused.refused_at is not None
    gap = retried.arrived_at - refused.refused_at
    wait = event.attributes[semconv.RETRY_WAIT]
    assert client_slept <= wait <= gap + LOOPBACK, (client_slept, wait, gap)
    retry_time = attributes[semconv.RETRY_TIME]
    assert client_slept <= retry_time < attributes[semconv.TIME_TO_HEADERS]

    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(encode_request(spans.get_finished_spans())) + "\n")
    report = build_report(load_traces(str(path)))
    assert report.stages["retry"].distribution.mean == pytest.approx(retry_time, abs=0.002)
