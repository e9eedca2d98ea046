"""The google-genai instrumentation against the real ``google-genai`` client over real HTTP.

The simulated server speaks Gemini's wire format (tests/servers/gemini.py); the Gemini Developer
API client and a Vertex AI client (``vertexai=True`` with a fixed OAuth token, the recorded
project and location) are pointed at it with ``http_options.base_url``.

Every recording in ``recorded/google_genai`` (35) is replayed through the real client, and its
spans carry the recorded ids, models, finish reasons and token counts
(``test_recording_replays_with_recorded_values``); the client sends every one of them. Two are no
model call and make no model span: ``cached_contents_create`` (``client.caches.create`` stores a
context and generates nothing) and ``interactions_agent_background`` (an agent interaction starts
a research job on the server and answers ``in_progress`` at once). The other Interactions API
recordings (``client.interactions.create``, ``/v1beta/interactions``) are model calls, traced
like ``generateContent``.

Async clients send through ``aiohttp`` here (google-genai prefers it when it is installed), sync
ones through ``httpx2``; the OpenTelemetry httpx test (``test_every_provider.py``) forces ``httpx``
and ``httpx2`` in turn.

Kept whole (past 800 lines): every test here is one provider's own behaviour against one
simulated server; what all providers share is in test_every_provider.py.
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import google.oauth2.credentials
import pytest
from google import genai
from google.genai import errors, types
from opentelemetry.trace import SpanKind, StatusCode

from llmtrace import semconv
from llmtrace.instrumentation import registry
from tests.frameworks.timing import assert_ttft
from tests.providers.sdk_checks import (
    assert_no_secret_in,
    body_text,
    cassette_interactions,
    model_spans,
)
from tests.providers.table import GOOGLE_GENAI
from tests.servers import gemini
from tests.servers.fixtures import RECORDED, sse_events

PROVIDER = GOOGLE_GENAI


def _vertex_client(server: Any) -> genai.Client:
    return genai.Client(
        vertexai=True,
        project="test-project",
        location="test-location",
        credentials=google.oauth2.credentials.Credentials(token="vertex-secret-token"),
        http_options=types.HttpOptions(base_url=server.url),
    )


pytestmark = pytest.mark.usefixtures("instrumented")


# --- calls ---------------------------------------------------------------------------------------


def test_generate_content_is_one_span_with_usage_and_response(server, spans):
    client = PROVIDER.client(server)  # held: a dropped Client closes its HTTP client
    response = client.models.generate_content(
        model="gemini-2.0-flash",
        contents="Say hello",
        config=types.GenerateContentConfig(
            temperature=0.3, max_output_tokens=50, top_p=0.9, stop_sequences=["END"]
        ),
    )
    assert response.text == "Hello, world!"
    assert len(spans.get_finished_spans()) == 1
    (span,) = model_spans(spans)
    a = span.attributes
    assert span.name == "generate_content gemini-2.0-flash"
    assert span.kind == SpanKind.CLIENT
    assert span.status.status_code == StatusCode.OK
    assert a[semconv.STAGE] == semconv.LLM_STAGE
    assert a[semconv.GEN_AI_OPERATION_NAME] == "generate_content"
    assert a[semconv.GEN_AI_PROVIDER_NAME] == "gcp.gemini"
    assert a[semconv.GEN_AI_REQUEST_MODEL] == "gemini-2.0-flash"
    assert a[semconv.GEN_AI_REQUEST_STREAM] is False
    assert a[semconv.GEN_AI_REQUEST_TEMPERATURE] == 0.3
    assert a[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 50
    assert a[semconv.GEN_AI_REQUEST_TOP_P] == 0.9
    assert a[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] == ("END",)
    assert a[semconv.SERVER_ADDRESS] == "127.0.0.1"
    assert a[semconv.SERVER_PORT] == server.port
    assert a[semconv.GEN_AI_RESPONSE_ID] == response.response_id
    assert a[semconv.GEN_AI_RESPONSE_MODEL] == "sim-model-1"
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS not in a  # not reported
    assert semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS not in a
    # The server joins the trace under the model span.
    traceparent = server.requests[-1].headers["traceparent"]
    assert traceparent.split("-")[2] == format(span.context.span_id, "016x")
    assert server.requests[-1].headers["x-goog-api-key"] == PROVIDER.api_key
    assert_no_secret_in(spans, PROVIDER.api_key)


def test_calls_record_the_genai_client_metrics(server, spans, metric_reader):
    from tests.instrumentation.test_metrics import histograms, points_for

    server.configure(first_token_delay=0.03, tokens=["a", "b", "c"])
    client = PROVIDER.client(server)
    client.models.generate_content(model="metrics-gemini", contents="x")
    list(client.models.generate_content_stream(model="metrics-gemini-stream", contents="x"))
    found = histograms(metric_reader)
    (duration,) = points_for(found, "gen_ai.client.operation.duration", "metrics-gemini")
    assert duration.attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert duration.attributes["gen_ai.operation.name"] == "generate_content"
    tokens = points_for(found, "gen_ai.client.token.usage", "metrics-gemini")
    assert sorted(p.attributes["gen_ai.token.type"] for p in tokens) == ["input", "output"]
    (first_chunk,) = points_for(
        found, "gen_ai.client.operation.time_to_first_chunk", "metrics-gemini-stream"
    )
    assert first_chunk.count == 1 and first_chunk.sum >= 0.03


def test_a_config_dict_is_read_in_either_spelling(server, spans):
    client = PROVIDER.client(server)  # held: a dropped Client closes its HTTP client
    client.models.generate_content(
        model="m", contents="x", config={"temperature": 0.5, "maxOutputTokens": 7}
    )
    (span,) = model_spans(spans)
    assert span.attributes[semconv.GEN_AI_REQUEST_TEMPERATURE] == 0.5
    assert span.attributes[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 7


def test_stream_records_ttft_chunks_and_usage(server, spans):
    server.configure(first_token_delay=0.05, token_delay=0.01, tokens=["a", "b", "c"])
    client = PROVIDER.client(server)  # held: a dropped Client closes its HTTP client
    chunks = list(client.models.generate_content_stream(model="m", contents="x"))
    assert [c.text for c in chunks] == ["a", "b", "c"]
    (span,) = model_spans(spans)
    a = span.attributes
    assert span.status.status_code == StatusCode.OK
    assert a[semconv.GEN_AI_REQUEST_STREAM] is True
    assert a[semconv.STREAM_END] == "completed"
    assert a[semconv.CHUNK_COUNT] == 3
    assert a[semconv.TIME_TO_FIRST_TOKEN] >= 0.05
    assert a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0.05
    # The last token leaves the server 20 ms after the first (a late first one shortens the rest).
    assert a[semconv.TIME_TO_FIRST_TOKEN] + a[semconv.GENERATION_TIME] >= 0.05 + 0.02
    assert a[semconv.TIME_TO_HEADERS] < a[semconv.TIME_TO_FIRST_TOKEN]
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[semconv.GEN_AI_RESPONSE_ID] == chunks[0].response_id
    assert a[semconv.OUTPUT_TOKENS_PER_SECOND] > 0
    assert_no_secret_in(spans, PROVIDER.api_key)


async def test_async_calls_are_traced_like_sync_ones(server, spans):
    server.configure(first_token_delay=0.03, tokens=["a", "b"])
    client = PROVIDER.client(server)
    response = await client.aio.models.generate_content(model="m", contents="x")
    stream = await client.aio.models.generate_content_stream(model="m", contents="x")
    texts = [chunk.text async for chunk in stream]
    embedded = await client.aio.models.embed_content(model="e", contents=["p", "q", "r"])
    assert texts == ["a", "b"] and response.text == "ab" and len(embedded.embeddings) == 3
    whole, streamed, embedding = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert whole.attributes[semconv.GEN_AI_RESPONSE_ID] == response.response_id
    assert whole.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 2
    assert streamed.attributes[semconv.STREAM_END] == "completed"
    assert streamed.attributes[semconv.TIME_TO_FIRST_TOKEN] >= 0.03
    assert streamed.attributes[semconv.TIME_TO_HEADERS] < 0.03
    assert streamed.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 2
    assert embedding.name == "embeddings e"
    assert embedding.attributes[semconv.STAGE] == "embedding"
    assert embedding.attributes[semconv.EMBEDDING_INPUT_COUNT] == 3
    assert len(spans.get_finished_spans()) == 3
    assert_no_secret_in(spans, PROVIDER.api_key)


async def test_async_calls_over_aiohttp_have_time_to_headers_and_trace_context(server, spans):
    """google-genai sends async calls with aiohttp when it is installed (it is here)."""
    server.configure(headers_delay=0.06, first_token_delay=0.1, tokens=["a", "b"])
    client = PROVIDER.client(server)
    assert client._api_client._use_aiohttp()
    await client.aio.models.generate_content(model="m", contents="x")
    stream = await client.aio.models.generate_content_stream(model="m", contents="x")
    assert [chunk.text async for chunk in stream] == ["a", "b"]
    whole, streamed = sorted(model_spans(spans), key=lambda s: s.start_time)
    for span, request in zip((whole, streamed), server.requests, strict=True):
        assert span.attributes[semconv.TIME_TO_HEADERS] >= 0.06
        assert request.headers["traceparent"].split("-")[2] == format(span.context.span_id, "016x")
    # The whole answer waits for the last token; the stream's headers do not.
    assert whole.attributes[semconv.TIME_TO_HEADERS] >= 0.1
    assert streamed.attributes[semconv.TIME_TO_HEADERS] < 0.1
    assert semconv.HTTP_CONNECT in whole.attributes  # the first request opened the connection


def test_embed_content_is_an_embeddings_span(server, spans):
    client = PROVIDER.client(server)  # held: a dropped Client closes its HTTP client
    result = client.models.embed_content(model="gemini-embedding-001", contents=["a", "b"])
    assert len(result.embeddings) == 2
    (span,) = spans.get_finished_spans()
    a = span.attributes
    assert span.name == "embeddings gemini-embedding-001"
    assert a[semconv.STAGE] == "embedding"
    assert a[semconv.GEN_AI_OPERATION_NAME] == "embeddings"
    assert a[semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == gemini.DIMENSIONS
    assert a[semconv.EMBEDDING_INPUT_COUNT] == 2
    # batchEmbedContents reports no usage: none is written.
    assert not [name for name in a if name.startswith("gen_ai.usage.")]
    assert semconv.GEN_AI_REQUEST_STREAM not in a


def test_vertex_ai_client_is_gcp_vertex_ai_and_its_token_is_not_recorded(server, spans):
    client = _vertex_client(server)
    client.models.generate_content(model="gemini-2.5-flash", contents="x")
    list(client.models.generate_content_stream(model="gemini-2.5-flash", contents="x"))
    client.models.embed_content(model="text-embedding-005", contents=["a", "b"])
    paths = [r.path for r in server.requests]
    assert paths[0].startswith("/v1beta1/projects/test-project/locations/test-location/")
    assert paths[2].endswith(":predict")
    whole, streamed, embedding = sorted(model_spans(spans), key=lambda s: s.start_time)
    for span in (whole, streamed, embedding):
        assert span.attributes[semconv.GEN_AI_PROVIDER_NAME] == "gcp.vertex_ai"
    assert whole.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert streamed.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    # Vertex AI's predict reports tokens per embedding (3 each here).
    assert embedding.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 6
    assert server.requests[-1].headers["authorization"] == "Bearer vertex-secret-token"
    assert_no_secret_in(spans, "vertex-secret-token")


def test_vertex_ai_embed_content_reports_its_input_tokens(server, spans):
    client = _vertex_client(server)
    client.models.embed_content(model="gemini-embedding-001", contents=["a"])
    client.models.embed_content(model="gemini-embedding-001", contents=["a", "b"])
    assert [r.path.rsplit(":", 1)[1] for r in server.requests] == [
        "embedContent",
        "batchEmbedContents",
    ]
    one, batch = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert one.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10  # usageMetadata
    assert semconv.GEN_AI_USAGE_INPUT_TOKENS not in batch.attributes  # none reported
    assert batch.attributes[semconv.EMBEDDING_INPUT_COUNT] == 2


def test_chat_messages_are_one_span_each(server, spans):
    client = PROVIDER.client(server)  # held: a dropped Client closes its HTTP client
    chat = client.chats.create(model="gemini-2.0-flash")
    chat.send_message("hello")
    list(chat.send_message_stream("again"))
    first, second = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert first.attributes[semconv.GEN_AI_REQUEST_STREAM] is False
    assert second.attributes[semconv.GEN_AI_REQUEST_STREAM] is True
    assert len(spans.get_finished_spans()) == 2
    # The second request carried the history.
    assert len(server.requests[-1].json()["contents"]) == 3


async def test_async_chat_messages_are_one_span_each(server, spans):
    client = PROVIDER.client(server)  # held: a dropped Client closes its HTTP client
    chat = client.aio.chats.create(model="gemini-2.0-flash")
    await chat.send_message("hello")
    stream = await chat.send_message_stream("again")
    assert [chunk.text async for chunk in stream]
    first, second = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert first.attributes[semconv.GEN_AI_REQUEST_STREAM] is False
    assert second.attributes[semconv.STREAM_END] == "completed"
    assert len(spans.get_finished_spans()) == 2


def test_automatic_function_calling_is_a_span_per_request_with_the_tool_run_between(server, spans):
    recorded = cassette_interactions(
        RECORDED / "google_genai" / "generate_content_automatic_tool_calling.yaml"
    )
    gemini.replay(server, recorded, "application/json")
    ran_under: list[Any] = []

    def get_weather(location: str) -> str:
        """The weather at a location."""
        from opentelemetry import trace

        ran_under.append(trace.get_current_span())
        return "sunny"

    client = PROVIDER.client(server)  # held: a dropped Client closes its HTTP client
    response = client.models.generate_content(
        model="gemini-2.0-flash",
        contents="What's the weather in Paris?",
        config=types.GenerateContentConfig(tools=[get_weather]),
    )
    assert response.text
    first, second = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert first.end_time <= second.start_time
    assert len(ran_under) == 1 and not ran_under[0].get_span_context().is_valid
    assert gemini.replayed_all(server)


# --- errors --------------------------------------------------------------------------------------


def _raised(call: Any) -> BaseException:
    try:
        call()
    except BaseException as exc:
        return exc
    raise AssertionError("no exception")


def test_errors_pass_unchanged_with_error_type(server, spans, instrumented):
    server.configure(status=429)
    client = PROVIDER.client(server)
    traced = _raised(lambda: client.models.generate_content(model="m", contents="x"))
    traced_stream = _raised(
        lambda: list(client.models.generate_content_stream(model="m", contents="x"))
    )
    registry.uninstrument()
    plain = _raised(lambda: client.models.generate_content(model="m", contents="x"))
    for exc in (traced, traced_stream):
        assert type(exc) is type(plain) is errors.ClientError
        assert (exc.code, exc.status, exc.message) == (plain.code, plain.status, plain.message)
    whole, streamed = sorted(model_spans(spans), key=lambda s: s.start_time)
    for span, exc in ((whole, traced), (streamed, traced_stream)):
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes[semconv.ERROR_TYPE] == "ClientError"
        assert span.events[0].attributes["exception.message"] == str(exc)
        assert span.attributes[semconv.HTTP_RESPONSE_STATUS_CODE] == 429
    assert streamed.attributes[semconv.STREAM_END] == "error"


async def test_async_errors_pass_unchanged(server, spans):
    server.configure(status=503)
    client = PROVIDER.client(server, retry_options=types.HttpRetryOptions(attempts=1))
    with pytest.raises(errors.ServerError) as whole:
        await client.aio.models.generate_content(model="m", contents="x")
    stream = await client.aio.models.generate_content_stream(model="m", contents="x")
    with pytest.raises(errors.ServerError):  # sent when the first chunk is asked for
        await stream.__anext__()
    assert whole.value.code == 503
    spans_ = model_spans(spans)
    assert len(spans_) == 2
    for span in spans_:
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes[semconv.ERROR_TYPE] == "ServerError"
        assert span.attributes[semconv.HTTP_RESPONSE_STATUS_CODE] == 503


# --- every way a stream ends ---------------------------------------------------------------------


def test_stream_failing_mid_way_ends_its_span_with_the_error(server, spans):
    server.configure(fail_after_chunks=2, tokens=["a", "b", "c", "d"])
    seen: list[str] = []
    with pytest.raises(Exception) as raised:
        client = PROVIDER.client(server)  # held: a dropped Client closes its HTTP client
        for chunk in client.models.generate_content_stream(model="m", contents="x"):
            seen.append(chunk.text)
    assert seen == ["a", "b"]
    (span,) = model_spans(spans)
    assert span.attributes[semconv.STREAM_END] == "error"
    assert span.attributes[semconv.CHUNK_COUNT] == 2
    assert span.attributes[semconv.ERROR_TYPE] == type(raised.value).__qualname__
    assert span.status.status_code == StatusCode.ERROR


def test_stream_left_early_ends_its_span_once(server, spans):
    """The caller holds the SDK's own generator: leaving it (break, close) closes the SDK's loop
    over the stream llmtrace wraps below it, which ends the span then, as closed."""
    server.configure(tokens=["a", "b", "c"], token_delay=0.01)
    client = PROVIDER.client(server)
    for _chunk in client.models.generate_content_stream(model="m", contents="x"):
        break
    (span,) = model_spans(spans)
    assert span.attributes[semconv.STREAM_END] == "closed"
    assert span.attributes[semconv.CHUNK_COUNT] == 1
    stream = client.models.generate_content_stream(model="m", contents="x")
    next(stream)
    stream.close()
    assert len(model_spans(spans)) == 2
    never_read = client.models.generate_content_stream(model="m", contents="x")
    del never_read  # nothing was sent: no span either
    gc.collect()
    assert len(model_spans(spans)) == 2
    assert len(server.requests) == 2


async def test_async_stream_left_early_or_cancelled_ends_once(server, spans):
    """Leaving the SDK's async generator (break then ``aclose()``) closes the SDK's loop over the
    stream llmtrace wraps below it: the span ends as closed once the event loop has closed the
    SDK's inner generators; a cancelled reader ends it as cancelled."""
    server.configure(tokens=["a", "b", "c"], token_delay=0.05)
    client = PROVIDER.client(server)
    stream = await client.aio.models.generate_content_stream(model="m", contents="x")
    async for _chunk in stream:
        break
    await stream.aclose()
    # The SDK's inner async generators are closed by the event loop's finalizer hook, as tasks.
    for _ in range(5):
        await asyncio.sleep(0.01)
    (left,) = model_spans(spans)
    assert left.attributes[semconv.STREAM_END] == "closed"
    assert left.attributes[semconv.CHUNK_COUNT] == 1
    dropped = await client.aio.models.generate_content_stream(model="m", contents="x")
    del dropped  # never iterated: nothing was sent, no span
    gc.collect()
    assert len(server.requests) == 1

    async def read() -> None:
        stream = await client.aio.models.generate_content_stream(model="m", contents="x")
        async for _chunk in stream:
            pass

    task = asyncio.ensure_future(read())
    await asyncio.sleep(0.07)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    ends = [s.attributes[semconv.STREAM_END] for s in model_spans(spans)]
    assert sorted(ends) == ["cancelled", "closed"]
    assert len(spans.get_finished_spans()) == 2


def test_interleaved_streams_keep_their_own_spans_and_leak_no_context(server, spans):
    """Each stream's request is sent with its own span current (its traceparent), and that span is
    never left current in the caller between chunks (rule 3 of docs/architecture.md)."""
    from opentelemetry import trace

    server.configure(tokens=["a", "b", "c"])
    client = PROVIDER.client(server)
    first = client.models.generate_content_stream(model="one", contents="x")
    second = client.models.generate_content_stream(model="two", contents="x")
    outside = trace.get_current_span()
    next(first)
    assert trace.get_current_span() is outside
    next(second)
    assert trace.get_current_span() is outside
    rest = list(first) + list(second)
    assert len(rest) == 4
    one, two = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert (
        one.attributes[semconv.GEN_AI_REQUEST_MODEL],
        two.attributes[semconv.GEN_AI_REQUEST_MODEL],
    ) == ("one", "two")
    for span, request in zip((one, two), server.requests, strict=True):
        assert request.path.endswith(
            f"/{span.attributes[semconv.GEN_AI_REQUEST_MODEL]}:streamGenerateContent?alt=sse"
        )
        assert request.headers["traceparent"].split("-")[2] == format(span.context.span_id, "016x")
        assert span.attributes[semconv.CHUNK_COUNT] == 3
    assert one.attributes[semconv.GEN_AI_RESPONSE_ID] != two.attributes[semconv.GEN_AI_RESPONSE_ID]


def test_nothing_is_traced_under_an_unsampled_parent_or_while_suppressed(server, spans):
    from opentelemetry import context, trace
    from opentelemetry.instrumentation.utils import suppress_instrumentation
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    client = PROVIDER.client(server)
    unsampled = NonRecordingSpan(
        SpanContext(trace_id=1, span_id=2, is_remote=True, trace_flags=TraceFlags(0))
    )
    token = context.attach(trace.set_span_in_context(unsampled))
    try:
        client.models.generate_content(model="m", contents="x")
        list(client.models.generate_content_stream(model="m", contents="x"))
    finally:
        context.detach(token)
    with suppress_instrumentation():
        client.models.generate_content(model="m", contents="x")
    assert spans.get_finished_spans() == ()
    assert len(server.requests) == 3


# --- timing --------------------------------------------------------------------------------------


def test_ttft_and_time_to_headers_match_injected_delays(server, spans):
    """The first token the span reports is the one the server sent (within 5 ms, median of six),
    never before the injected delay; the time to headers is at least the headers delay."""
    server.configure(headers_delay=0.1, first_token_delay=0.3, token_delay=0.02, tokens=["t"] * 6)
    client = PROVIDER.client(server)
    client.models.generate_content(model="warm", contents="x")  # connection warm-up
    streamed, requests = [], []
    for _ in range(6):
        spans.clear()
        chunks = list(client.models.generate_content_stream(model="m", contents="x"))
        assert len(chunks) == 6
        (span,) = model_spans(spans)
        streamed.append(span)
        requests.append(server.requests[-1])
        assert span.attributes[semconv.TIME_TO_HEADERS] >= 0.1
        assert (
            span.attributes[semconv.TIME_TO_HEADERS] < span.attributes[semconv.TIME_TO_FIRST_TOKEN]
        )
    assert_ttft(streamed, requests, 0.3)


async def test_async_ttft_matches_the_injected_delay(server, spans):
    server.configure(headers_delay=0.05, first_token_delay=0.2, tokens=["t"] * 3)
    client = PROVIDER.client(server)
    await client.aio.models.generate_content(model="warm", contents="x")
    streamed, requests = [], []
    for _ in range(6):
        spans.clear()
        stream = await client.aio.models.generate_content_stream(model="m", contents="x")
        assert len([chunk async for chunk in stream]) == 3
        (span,) = model_spans(spans)
        assert span.attributes[semconv.TIME_TO_HEADERS] >= 0.05
        streamed.append(span)
        requests.append(server.requests[-1])
    assert_ttft(streamed, requests, 0.2)


# --- living with other instrumentations ----------------------------------------------------------


def test_uninstrument_restores_every_original(instrumented):
    from google.genai import _api_client, models
    from google.genai._gaos import interactions

    wrapped = models.Models.__dict__["_generate_content"]
    assert hasattr(wrapped, "__wrapped__")
    assert registry.instrument(["google_genai"]) == ["google_genai"]
    assert models.Models.__dict__["_generate_content"] is wrapped  # never wrapped twice
    patched = [
        (cls, name)
        for cls, names in (
            (models.Models, ("_generate_content", "_generate_content_stream", "_embed_content")),
            (
                models.AsyncModels,
                ("_generate_content", "_generate_content_stream", "_embed_content"),
            ),
            (_api_client.BaseApiClient, ("_async_request_once", "_get_aiohttp_session")),
            (interactions.Interactions, ("create",)),
            (interactions.AsyncInteractions, ("create",)),
        )
        for name in names
    ]
    assert all(hasattr(cls.__dict__[name], "__wrapped__") for cls, name in patched)
    registry.uninstrument()
    for cls, name in patched:
        assert not hasattr(cls.__dict__[name], "__wrapped__"), (cls, name)


_AUTO = """
import sys
from llmtrace.instrumentation import registry
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
registry.instrument(None)
assert "google.genai" not in sys.modules
from google import genai  # the post-import hook instruments it now
from google.genai import models, types

assert "google_genai" in registry.instrumented()
client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=sys.argv[1]))
client.models.generate_content(model="m", contents="x")
names = [s.name for s in exporter.get_finished_spans()]
assert names == ["generate_content m"], names
registry.uninstrument()
assert not hasattr(models.Models.__dict__["_generate_content"], "__wrapped__")
print("ok")
"""


def test_auto_instrumentation_picks_google_genai_up_on_import(server):
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _AUTO, server.url],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_content_is_captured_only_when_asked(server, spans, monkeypatch):
    from llmtrace import options

    client = PROVIDER.client(server)
    client.models.generate_content(model="m", contents="secret prompt")
    (span,) = model_spans(spans)
    assert semconv.GEN_AI_INPUT_MESSAGES not in span.attributes
    spans.clear()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    options.reload()
    client.models.generate_content(
        model="m",
        contents="secret prompt",
        config=types.GenerateContentConfig(system_instruction="be brief"),
    )
    list(client.models.generate_content_stream(model="m", contents="again"))
    whole, streamed = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert "secret prompt" in whole.attributes[semconv.GEN_AI_INPUT_MESSAGES]
    assert "be brief" in whole.attributes[semconv.GEN_AI_SYSTEM_INSTRUCTIONS]
    for span in (whole, streamed):
        (message,) = json.loads(span.attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
        assert message["role"] == "assistant"
        assert message["parts"] == [{"type": "text", "content": "Hello, world!"}]


def test_captured_output_has_the_function_calls(server, spans, monkeypatch):
    from llmtrace import options

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    options.reload()
    path = RECORDED / "google_genai" / "generate_content_parallel_tool_calls.yaml"
    (interaction,) = cassette_interactions(path)
    gemini.replay(server, [interaction], "application/json")
    client = PROVIDER.client(server)
    response = client.models.generate_content(model="gemini-2.0-flash", contents="weather?")
    (span,) = model_spans(spans)
    (message,) = json.loads(span.attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
    calls = [part for part in message["parts"] if part["type"] == "tool_call"]
    assert [call["name"] for call in calls] == [call.name for call in response.function_calls]
    assert [call["arguments"] for call in calls] == [call.args for call in response.function_calls]
    assert len(calls) >= 2


# --- recorded traffic ----------------------------------------------------------------------------

_NOT_MODEL_CALLS = ("cached_contents_create", "interactions_agent_background")


def _content_type(uri: str) -> str:
    return "text/event-stream" if "alt=sse" in uri or "stream" in uri else "application/json"


def get_weather(location: str, unit: str = "fahrenheit") -> dict[str, Any]:
    """What the recorded run's tool returned (the second request sends it back)."""
    return {
        "location": location,
        "temperature": 65,
        "unit": unit,
        "condition": "foggy",
        "humidity": "85%",
    }


def _send(client: genai.Client, name: str, request: dict[str, Any]) -> Any:
    """Send what the recording's request asked for, through the public API it was made with."""
    body = json.loads(request["body"]) if request.get("body") else {}
    uri = request["uri"]
    model = uri.split("/models/", 1)[1].split(":", 1)[0] if "/models/" in uri else None
    config: dict[str, Any] = {}
    if "systemInstruction" in body:
        config["system_instruction"] = body["systemInstruction"]
    generation = body.get("generationConfig") or {}
    thinking = generation.get("thinkingConfig")
    if thinking:
        config["thinking_config"] = {
            "include_thoughts": thinking.get("include_thoughts", thinking.get("includeThoughts")),
        }
    if "automatic" in name:
        # Automatic function calling: the SDK runs this and sends its result back.
        config["tools"] = [get_weather]
    elif "tools" in body:
        config["tools"] = body["tools"]
    if ":batchEmbedContents" in uri:
        texts = [p["text"] for r in body["requests"] for p in r["content"]["parts"]]
        return client.models.embed_content(model=model, contents=texts)
    contents = body["contents"]
    if ":streamGenerateContent" in uri:
        return list(
            client.models.generate_content_stream(model=model, contents=contents, config=config)
        )
    return client.models.generate_content(model=model, contents=contents, config=config)


async def _send_async(client: genai.Client, request: dict[str, Any]) -> Any:
    body = json.loads(request["body"])
    uri = request["uri"]
    model = uri.split("/models/", 1)[1].split(":", 1)[0]
    if ":batchEmbedContents" in uri:
        texts = [p["text"] for r in body["requests"] for p in r["content"]["parts"]]
        return await client.aio.models.embed_content(model=model, contents=texts)
    if ":streamGenerateContent" in uri:
        stream = await client.aio.models.generate_content_stream(
            model=model, contents=body["contents"]
        )
        return [chunk async for chunk in stream]
    return await client.aio.models.generate_content(model=model, contents=body["contents"])


def _events(interaction: dict[str, Any]) -> list[Any]:
    """The JSON objects of a recorded response: its body, or each server-sent event's data."""
    text = body_text(interaction["response"]["body"]["string"])
    if not text.lstrip().startswith(("data:", "event:")):
        return [json.loads(text)]
    return sse_events(text)


def _recorded_values(interaction: dict[str, Any]) -> dict[str, Any]:
    """What the recorded response says: id, model, finish reasons, usage (as the spans write it:
    reasoning tokens counted in the output, see the instrumentation's docstring)."""
    if "/interactions" in interaction["request"]["uri"]:
        return _recorded_interaction_values(_events(interaction))
    values: dict[str, Any] = {}
    usage: dict[str, int] = {}
    reasons: dict[int, str] = {}
    for event in _events(interaction):
        if "responseId" in event:
            values.setdefault(semconv.GEN_AI_RESPONSE_ID, event["responseId"])
        if "modelVersion" in event:
            values[semconv.GEN_AI_RESPONSE_MODEL] = event["modelVersion"]
        for position, candidate in enumerate(event.get("candidates") or ()):
            if "finishReason" in candidate:
                reasons[candidate.get("index", position)] = candidate["finishReason"].lower()
        usage.update(event.get("usageMetadata") or {})
    if reasons:
        values[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(reasons[i] for i in sorted(reasons))
    _usage_values(
        values,
        usage.get("promptTokenCount"),
        usage.get("candidatesTokenCount"),
        usage.get("thoughtsTokenCount"),
        usage.get("cachedContentTokenCount"),
    )
    return values


def _recorded_interaction_values(events: list[Any]) -> dict[str, Any]:
    """The interaction that carries the usage: the body, or the last streamed one."""
    final: dict[str, Any] = {}
    for event in events:
        candidate = event.get("interaction", event)
        if "usage" in candidate:
            final = candidate
    values: dict[str, Any] = {
        semconv.GEN_AI_RESPONSE_ID: final["id"],
        semconv.GEN_AI_RESPONSE_MODEL: final["model"],
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: (
            "stop" if final["status"] == "completed" else final["status"],
        ),
    }
    usage = final["usage"]
    _usage_values(
        values,
        usage.get("total_input_tokens"),
        usage.get("total_output_tokens"),
        usage.get("total_thought_tokens"),
        usage.get("total_cached_tokens"),
    )
    return values


def _usage_values(
    values: dict[str, Any],
    input_tokens: int | None,
    output: int | None,
    thoughts: int | None,
    cached: int | None,
) -> None:
    if input_tokens is not None:
        values[semconv.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
    if output is not None or thoughts is not None:
        values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = (output or 0) + (thoughts or 0)
    if thoughts is not None:
        values[semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = thoughts
    if cached is not None:
        values[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = cached


@pytest.mark.parametrize("path", PROVIDER.cassettes, ids=lambda path: path.stem)
def test_recording_replays_with_recorded_values(path, server, spans):
    recorded = cassette_interactions(path)
    request = recorded[0]["request"]
    gemini.replay(server, recorded, _content_type(request["uri"]))
    client = _vertex_client(server) if "vertexai" in path.stem else PROVIDER.client(server)
    if path.stem in _NOT_MODEL_CALLS:
        _send_not_model_call(client, path.stem, request)
        assert gemini.replayed_all(server)
        assert model_spans(spans) == []
        return
    if "/interactions" in request["uri"]:
        _send_interaction(client, path.stem, request)
    elif path.stem.startswith("async_"):
        asyncio.run(_send_async(client, request))
    elif path.stem.startswith("chat_"):
        _send_chat(client, recorded)
    else:
        # One call each (an automatic function call sends the second request itself).
        for interaction in recorded[: 1 if "automatic" in path.stem else None]:
            _send(client, path.stem, interaction["request"])
    assert gemini.replayed_all(server)
    found = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert len(found) == len(recorded), [s.name for s in found]
    assert len(spans.get_finished_spans()) == len(found)  # no HTTP span beside them
    for span, interaction in zip(found, recorded, strict=True):
        assert span.status.status_code == StatusCode.OK
        expected = _recorded_values(interaction)
        assert semconv.GEN_AI_USAGE_OUTPUT_TOKENS in expected or "embed" in path.stem
        for name, value in expected.items():
            assert span.attributes.get(name) == value, (name, span.attributes.get(name), value)
        for name in span.attributes:
            if name.startswith("gen_ai.usage."):
                assert name in expected, name  # nothing unreported is written
        provider = "gcp.vertex_ai" if "vertexai" in path.stem else "gcp.gemini"
        assert span.attributes[semconv.GEN_AI_PROVIDER_NAME] == provider
        if "stream" in path.stem:
            assert span.attributes[semconv.STREAM_END] == "completed"
            assert span.attributes[semconv.TIME_TO_FIRST_TOKEN] > 0
    assert_no_secret_in(spans, PROVIDER.api_key, "vertex-secret-token")


def test_thought_text_counts_as_the_first_token(server, spans):
    """A streamed thought summary (``includeThoughts``) is output the caller receives: the first
    token, as OpenAI's streamed reasoning is; its tokens are the reasoning output tokens."""
    path = RECORDED / "google_genai" / "stream_generate_content_thinking.yaml"
    (interaction,) = cassette_interactions(path)
    gemini.replay(server, [interaction], "text/event-stream")
    client = PROVIDER.client(server)
    chunks = list(
        client.models.generate_content_stream(
            model="gemini-3.5-flash",
            contents="Tell a bedtime story.",
            config={"thinking_config": {"include_thoughts": True}},
        )
    )
    assert chunks[0].candidates[0].content.parts[0].thought
    (span,) = model_spans(spans)
    a = span.attributes
    assert a[semconv.TIME_TO_FIRST_TOKEN] == a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
    last = _events(interaction)[-1]["usageMetadata"]
    assert a[semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == last["thoughtsTokenCount"]
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == (
        last["candidatesTokenCount"] + last["thoughtsTokenCount"]
    )


@pytest.mark.parametrize("name", ["interactions_create", "interactions_create_streaming"])
def test_interaction_raw_response_is_recorded_when_parsed(name, server, spans):
    (interaction,) = cassette_interactions(RECORDED / "google_genai" / f"{name}.yaml")
    gemini.replay(server, [interaction])
    client = PROVIDER.client(server)
    arguments = json.loads(interaction["request"]["body"])
    raw = client.interactions.with_raw_response.create(**arguments)
    assert raw.status_code == 200
    parsed = raw.parse()
    if arguments["stream"]:
        assert list(parsed)
    else:
        assert parsed.id
    (span,) = model_spans(spans)
    expected = _recorded_values(interaction)
    assert {key: span.attributes.get(key) for key in expected} == expected


async def test_async_stream_failing_mid_way_ends_its_span_with_the_error(server, spans):
    server.configure(fail_after_chunks=1, tokens=["a", "b", "c"])
    client = PROVIDER.client(server)
    seen = []
    with pytest.raises(Exception) as raised:
        async for chunk in await client.aio.models.generate_content_stream(model="m", contents="x"):
            seen.append(chunk.text)
    assert seen == ["a"]
    (span,) = model_spans(spans)
    assert span.attributes[semconv.STREAM_END] == "error"
    assert span.attributes[semconv.ERROR_TYPE] == type(raised.value).__qualname__
    assert span.status.status_code == StatusCode.ERROR


def _send_chat(client: genai.Client, interactions: list[dict[str, Any]]) -> None:
    model = interactions[0]["request"]["uri"].split("/models/", 1)[1].split(":", 1)[0]
    chat = client.chats.create(model=model)
    for interaction in interactions:
        body = json.loads(interaction["request"]["body"])
        parts = [types.Part.model_validate(part) for part in body["contents"][-1]["parts"]]
        chat.send_message(parts[0] if len(parts) == 1 else parts)


def _send_interaction(client: genai.Client, name: str, request: dict[str, Any]) -> None:
    """``client.interactions.create`` (or ``client.aio``) with the recorded body's arguments."""
    arguments = json.loads(request["body"])
    if name.startswith("async_"):

        async def send() -> Any:
            result = await client.aio.interactions.create(**arguments)
            return [event async for event in result] if arguments.get("stream") else result

        result = asyncio.run(send())
    else:
        result = client.interactions.create(**arguments)
        if arguments.get("stream"):
            result = list(result)
    assert result


def _send_not_model_call(client: genai.Client, name: str, request: dict[str, Any]) -> None:
    body = json.loads(request["body"])
    if name.startswith("cached_contents"):
        cache = client.caches.create(
            model=body["model"],
            config={
                "contents": body["contents"],
                "system_instruction": body.get("systemInstruction"),
                "ttl": body.get("ttl"),
                "display_name": body.get("displayName"),
            },
        )
        assert cache.name.startswith("cachedContents/")
    else:  # an agent interaction, started in the background
        interaction = client.interactions.create(**body)
        assert interaction.status == "in_progress"
