"""The ``groq`` client (sync and async) against the simulated server speaking Groq's wire format
(tests/servers/groq.py), and every recorded Groq exchange replayed through the current client.

Replay: all 4 recordings in ``fixtures/recorded/groq`` are sent by the current client (1.x) with
the recorded request: ``chat.yaml`` and ``async_chat.yaml`` (groq 0.10.0, sync and async, six
answers each to the same request, every one replayed), ``chat_streaming.yaml`` and
``chat_streaming_via_llamaindex.yaml``. The last was made through LlamaIndex, which sent it with
the ``openai`` client; the same request body is sent here with Groq's own client (its headers were
stripped: it is served as ``text/event-stream``). None is left out.
"""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import groq
import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from llmtrace import options
from llmtrace import semconv as sc
from llmtrace.instrumentation import registry
from tests.frameworks.timing import CLOCK_TOLERANCE, assert_ttft, chat_requests
from tests.providers.sdk_checks import (
    body_text,
    cassette_interactions,
    exported_spans,
    model_spans,
    one_model_span,
    run_init_app,
)
from tests.providers.table import GROQ
from tests.servers import groq as wire
from tests.servers.fixtures import sse_events
from tests.subprocesses import run_instrumented_app

PROVIDER = GROQ
MESSAGES = [{"role": "user", "content": "Tell me a joke about opentelemetry"}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _server_timings_recorded(attributes: Any, usage: dict[str, Any]) -> None:
    assert attributes[sc.SERVER_QUEUE_TIME] == usage["queue_time"]
    assert attributes[sc.SERVER_PROMPT_TIME] == usage["prompt_time"]
    assert attributes[sc.SERVER_GENERATION_TIME] == usage["completion_time"]
    # total_time leaves the queue out: not the server's whole processing time.
    assert sc.SERVER_PROCESSING_TIME not in attributes


# --- what a call records ----------------------------------------------------------------------


def test_chat_records_request_response_usage_and_groqs_server_timings(server, spans, instrumented):
    completion = PROVIDER.client(server).chat.completions.create(
        model="llama-3.1-8b-instant", messages=MESSAGES, max_tokens=20, temperature=0.5
    )
    assert completion.choices[0].message.content == "Hello, world!"
    span = one_model_span(spans)
    a = span.attributes
    assert span.name == "chat llama-3.1-8b-instant"
    assert a[sc.GEN_AI_PROVIDER_NAME] == "groq"
    assert a[sc.STAGE] == sc.LLM_STAGE
    assert a[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert a[sc.GEN_AI_REQUEST_MODEL] == "llama-3.1-8b-instant"
    assert a[sc.GEN_AI_REQUEST_MAX_TOKENS] == 20
    assert a[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.5
    assert a[sc.GEN_AI_REQUEST_STREAM] is False
    assert a[sc.GEN_AI_RESPONSE_MODEL] == "sim-model-1"
    assert a[sc.GEN_AI_RESPONSE_ID] == completion.id
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert a[sc.SERVER_ADDRESS] == "127.0.0.1"
    assert a[sc.SERVER_PORT] == server.port
    assert sc.TIME_TO_HEADERS in a
    _server_timings_recorded(a, wire.TIMINGS)
    assert span.status.status_code == StatusCode.OK
    assert sc.GEN_AI_INPUT_MESSAGES not in a


def test_streamed_chat_reads_usage_from_x_groq_in_the_last_chunk(server, spans, instrumented):
    server.configure(first_token_delay=0.05, token_delay=0.01, tokens=["a", "b", "c"])
    chunks = list(
        PROVIDER.client(server).chat.completions.create(model="m", messages=MESSAGES, stream=True)
    )
    assert len(chunks) == 5  # role, 3 tokens, finish with x_groq.usage: every one delivered
    assert chunks[-1].x_groq.usage.completion_tokens == 3
    a = one_model_span(spans).attributes
    assert a[sc.GEN_AI_REQUEST_STREAM] is True
    assert a[sc.GEN_AI_PROVIDER_NAME] == "groq"
    assert a[sc.TIME_TO_FIRST_TOKEN] >= 0.05
    assert a[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] < a[sc.TIME_TO_FIRST_TOKEN]
    # The last token leaves the server 20 ms after the first (a late first one shortens the rest).
    assert a[sc.TIME_TO_FIRST_TOKEN] + a[sc.GENERATION_TIME] >= 0.05 + 0.02
    assert a[sc.GENERATION_TIME] > 0
    assert a[sc.CHUNK_COUNT] == 5
    assert a[sc.STREAM_END] == "completed"
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert a[sc.OUTPUT_TOKENS_PER_SECOND] > 0
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[sc.GEN_AI_RESPONSE_ID] == chunks[0].id
    _server_timings_recorded(a, wire.TIMINGS)


def test_nothing_is_injected_into_a_stream_request_even_when_asked(
    server, spans, instrumented, monkeypatch
):
    """Groq reports stream usage unasked (its client has no ``stream_options``):
    ``inject_stream_usage`` changes nothing for it."""
    monkeypatch.setenv("LLMTRACE_INJECT_STREAM_USAGE", "1")
    options.reload()
    chunks = list(
        PROVIDER.client(server).chat.completions.create(model="m", messages=MESSAGES, stream=True)
    )
    assert "stream_options" not in server.requests[-1].json()
    assert len(chunks) == 6
    assert one_model_span(spans).attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4


def test_ttft_headers_and_generation_match_injected_delays(server, spans, instrumented):
    """300 ms to the first token: each recorded TTFT is at least that, and the instant it says the
    first token arrived follows the server's sending it within 5 ms (median of six calls; the
    server shares the monotonic clock, see tests/frameworks/timing.py)."""
    server.configure(headers_delay=0.1, first_token_delay=0.3, token_delay=0.02, tokens=["t"] * 6)
    client = PROVIDER.client(server)
    client.chat.completions.create(model="warm", messages=MESSAGES)  # connection warm-up
    spans.clear()
    for _ in range(6):
        list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    streamed = sorted(model_spans(spans), key=lambda s: s.start_time)
    timings = assert_ttft(streamed, chat_requests(server, 6), delay=0.3)
    for span, timing in zip(streamed, timings, strict=True):
        assert 0.1 <= span.attributes[sc.TIME_TO_HEADERS] < span.attributes[sc.TIME_TO_FIRST_TOKEN]
        # The server leaves 5 gaps of 20 ms after the first token, so the last arrives at least
        # 100 ms after the first was sent; the first was seen ``delivery`` after it was sent.
        assert span.attributes[sc.GENERATION_TIME] >= 0.1 - timing.delivery - CLOCK_TOLERANCE
        assert span.attributes[sc.CHUNK_COUNT] == 8


def test_tool_calls_whole_and_streamed(server, spans, instrumented):
    server.configure(first_token_delay=0.06, tokens=['{"city": ', '"Paris"}'])
    client = PROVIDER.client(server)
    completion = client.chat.completions.create(
        model="m", messages=MESSAGES, tools=[WEATHER_TOOL], tool_choice="auto"
    )
    assert completion.choices[0].message.tool_calls[0].function.name == "get_weather"
    chunks = list(
        client.chat.completions.create(
            model="m", messages=MESSAGES, tools=[WEATHER_TOOL], stream=True
        )
    )
    arguments = "".join(
        c.choices[0].delta.tool_calls[0].function.arguments or ""
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls
    )
    assert arguments == wire.TOOL_ARGUMENTS
    whole, streamed = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert whole.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert whole.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 2
    assert streamed.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    # A tool call's first delta is output: it is the first token.
    assert streamed.attributes[sc.TIME_TO_FIRST_TOKEN] >= 0.06
    assert streamed.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 2


def test_reasoning_delta_counts_as_first_token():
    """A reasoning model streams ``delta.reasoning`` before any content (``reasoning_format``
    ``parsed``): that is the model's first output."""
    from groq.types.chat import ChatCompletionChunk

    from llmtrace.instrumentation.providers.groq import GroqChunkParser

    def chunk(delta: dict[str, Any]) -> ChatCompletionChunk:
        return ChatCompletionChunk.model_validate(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "qwen",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            }
        )

    parser = GroqChunkParser()
    assert not parser.has_content(chunk({"role": "assistant", "content": ""}))
    assert parser.has_content(chunk({"reasoning": "Let me think"}))


def test_server_timings_are_read_only_when_reported_and_valid():
    from groq.types import CompletionUsage

    from llmtrace.instrumentation.providers.groq import server_timings

    counts = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    assert server_timings(None) == {}
    assert server_timings(CompletionUsage(**counts)) == {}  # another server, no timings
    assert server_timings({**counts, "queue_time": -1.0, "prompt_time": True}) == {}
    assert server_timings(CompletionUsage(**counts, queue_time=0.5, total_time=0.25)) == {
        sc.SERVER_QUEUE_TIME: 0.5
    }


async def test_async_call_and_stream(server, spans, instrumented):
    client = PROVIDER.async_client(server)
    await client.chat.completions.create(model="m", messages=MESSAGES)
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    chunks = [chunk async for chunk in stream]
    assert len(chunks) == 6
    whole, streamed = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert whole.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert whole.attributes[sc.GEN_AI_PROVIDER_NAME] == "groq"
    _server_timings_recorded(whole.attributes, wire.TIMINGS)
    assert streamed.attributes[sc.STREAM_END] == "completed"
    assert streamed.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert streamed.attributes[sc.TIME_TO_FIRST_TOKEN] > 0
    assert sc.TIME_TO_HEADERS in streamed.attributes
    assert server.requests[-1].headers["traceparent"].split("-")[2] == format(
        streamed.context.span_id, "016x"
    )


def test_embeddings(server, spans, instrumented):
    result = PROVIDER.client(server).embeddings.create(
        model="nomic-embed-text-v1_5", input=["a", "b"]
    )
    assert len(result.data) == 2
    span = one_model_span(spans)
    assert span.name == "embeddings nomic-embed-text-v1_5"
    assert span.attributes[sc.STAGE] == "embedding"
    assert span.attributes[sc.GEN_AI_PROVIDER_NAME] == "groq"
    assert span.attributes[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == 8
    assert span.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 10


def test_audio_and_model_listing_make_no_model_span(server, spans, instrumented):
    client = PROVIDER.client(server)
    transcript = client.audio.transcriptions.create(
        file=("hello.wav", b"RIFF....WAVE"), model="whisper-large-v3"
    )
    assert transcript.text == "simulated transcript"
    client.models.list()
    assert model_spans(spans) == []


def test_raw_and_streaming_responses(server, spans, instrumented):
    client = PROVIDER.client(server)
    completion = client.chat.completions.with_raw_response.create(
        model="m", messages=MESSAGES
    ).parse()
    with client.chat.completions.with_streaming_response.create(
        model="m", messages=MESSAGES, stream=True
    ) as response:
        chunks = list(response.parse())
    assert len(chunks) == 6
    raw, streamed = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert raw.attributes[sc.GEN_AI_RESPONSE_ID] == completion.id
    assert raw.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert streamed.attributes[sc.CHUNK_COUNT] == 6
    assert streamed.attributes[sc.STREAM_END] == "completed"
    assert streamed.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4


# --- every way a stream ends ------------------------------------------------------------------


def test_stream_context_manager_exit_ends_the_span(server, spans, instrumented):
    with PROVIDER.client(server).chat.completions.create(
        model="m", messages=MESSAGES, stream=True
    ) as stream:
        next(iter(stream))
    assert one_model_span(spans).attributes[sc.STREAM_END] == "closed"


def test_error_event_mid_stream_reaches_the_caller_unchanged(server, spans, instrumented):
    stream = PROVIDER.client(server).chat.completions.create(
        model=wire.STREAM_ERROR_MODEL, messages=MESSAGES, stream=True
    )
    received = []
    with pytest.raises(groq.APIError) as raised:
        for chunk in stream:
            received.append(chunk)
    assert type(raised.value) is groq.APIError
    assert raised.value.message == "simulated failure mid-stream"
    assert len(received) == 2  # role, first token
    span = one_model_span(spans)
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[sc.STREAM_END] == "error"
    assert span.attributes[sc.ERROR_TYPE] == "APIError"
    assert span.attributes[sc.TIME_TO_FIRST_TOKEN] > 0


async def test_async_stream_break_and_close(server, spans, instrumented):
    stream = await PROVIDER.async_client(server).chat.completions.create(
        model="m", messages=MESSAGES, stream=True
    )
    async for _chunk in stream:
        break
    await stream.close()
    assert one_model_span(spans).attributes[sc.STREAM_END] == "closed"


async def test_async_stream_failing_midway_ends_with_error(server, spans, instrumented):
    server.configure(fail_after_chunks=1, token_delay=0.01)
    stream = await PROVIDER.async_client(server).chat.completions.create(
        model="m", messages=MESSAGES, stream=True
    )
    with pytest.raises(Exception) as raised:
        async for _chunk in stream:
            pass
    span = one_model_span(spans)
    assert span.attributes[sc.STREAM_END] == "error"
    assert span.attributes[sc.ERROR_TYPE] == type(raised.value).__qualname__


async def test_async_streaming_response_and_error_event(server, spans, instrumented):
    client = PROVIDER.async_client(server)
    async with client.chat.completions.with_streaming_response.create(
        model="m", messages=MESSAGES, stream=True
    ) as response:
        chunks = [chunk async for chunk in await response.parse()]
    assert len(chunks) == 6
    stream = await client.chat.completions.create(
        model=wire.STREAM_ERROR_MODEL, messages=MESSAGES, stream=True
    )
    with pytest.raises(groq.APIError) as raised:
        async for _chunk in stream:
            pass
    assert raised.value.message == "simulated failure mid-stream"
    streamed, failed = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert streamed.attributes[sc.STREAM_END] == "completed"
    assert streamed.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert failed.attributes[sc.STREAM_END] == "error"
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes[sc.ERROR_TYPE] == "APIError"


async def test_async_stream_abandoned_ends_when_collected(server, spans, instrumented):
    stream = await PROVIDER.async_client(server).chat.completions.create(
        model="m", messages=MESSAGES, stream=True
    )
    await stream.__anext__()
    del stream
    gc.collect()
    assert one_model_span(spans).attributes[sc.STREAM_END] == "abandoned"


def test_model_span_is_a_child_of_the_application_span(server, spans, instrumented):
    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("answer") as parent:
        list(
            PROVIDER.client(server).chat.completions.create(
                model="m", messages=MESSAGES, stream=True
            )
        )
        # The stream's span is not left current in the caller between chunks or after them.
        assert trace.get_current_span() is parent
    span = one_model_span(spans)
    assert span.parent.span_id == parent.get_span_context().span_id


def test_no_span_while_instrumentation_is_suppressed(server, spans, instrumented):
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    with suppress_instrumentation():
        completion = PROVIDER.client(server).chat.completions.create(model="m", messages=MESSAGES)
    assert completion.choices[0].message.content == "Hello, world!"
    assert spans.get_finished_spans() == ()


def test_metrics_carry_the_groq_provider(server, spans, instrumented, metric_reader):
    list(
        PROVIDER.client(server).chat.completions.create(
            model="groq-metrics", messages=MESSAGES, stream=True
        )
    )
    data = metric_reader.get_metrics_data()
    points = [
        (metric.name, point)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        for point in metric.data.data_points
        if point.attributes.get(sc.GEN_AI_REQUEST_MODEL) == "groq-metrics"
    ]
    names = {name for name, _ in points}
    assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"} <= names
    assert "gen_ai.client.operation.time_to_first_chunk" in names
    assert all(point.attributes[sc.GEN_AI_PROVIDER_NAME] == "groq" for _, point in points)


def test_groq_and_openai_instrumented_together_each_name_their_provider(
    server, spans, instrumented, monkeypatch
):
    """LLMTRACE_PROVIDER_NAME names unknown OpenAI-compatible endpoints; Groq's client is Groq."""
    import openai

    monkeypatch.setenv("LLMTRACE_PROVIDER_NAME", "vllm")
    options.reload()
    registry.instrument(["openai", "httpx2"])
    PROVIDER.client(server).chat.completions.create(model="g", messages=MESSAGES)
    openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0).chat.completions.create(
        model="o", messages=MESSAGES
    )
    by_model = {s.attributes[sc.GEN_AI_REQUEST_MODEL]: s for s in model_spans(spans)}
    assert set(by_model) == {"g", "o"}
    assert by_model["g"].attributes[sc.GEN_AI_PROVIDER_NAME] == "groq"
    assert by_model["o"].attributes[sc.GEN_AI_PROVIDER_NAME] == "vllm"


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error"),
    [(400, groq.BadRequestError), (404, groq.NotFoundError), (500, groq.InternalServerError)],
)
def test_status_errors_reach_the_caller_unchanged(server, spans, status, error):
    server.configure(status=status, error_message="model `m` does not exist")
    with pytest.raises(error) as plain:
        PROVIDER.client(server).chat.completions.create(model="m", messages=MESSAGES)
    registry.instrument(list(PROVIDER.libraries))
    try:
        with pytest.raises(error) as traced:
            PROVIDER.client(server).chat.completions.create(model="m", messages=MESSAGES)
    finally:
        registry.uninstrument()
    assert type(traced.value) is type(plain.value)
    assert str(traced.value) == str(plain.value)
    assert traced.value.body == plain.value.body
    span = one_model_span(spans)
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[sc.ERROR_TYPE] == error.__qualname__
    assert span.attributes[sc.HTTP_RESPONSE_STATUS_CODE] == status


def test_connection_error_and_timeout_mark_the_span(server, spans, instrumented):
    unreachable = groq.Groq(base_url="http://127.0.0.1:9", api_key=PROVIDER.api_key, max_retries=0)
    with pytest.raises(groq.APIConnectionError):
        unreachable.chat.completions.create(model="m", messages=MESSAGES)
    server.configure(headers_delay=0.5)
    with pytest.raises(groq.APITimeoutError):
        PROVIDER.client(server, timeout=0.1).chat.completions.create(model="m", messages=MESSAGES)
    refused, timed_out = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert refused.attributes[sc.ERROR_TYPE] == "APIConnectionError"
    assert timed_out.attributes[sc.ERROR_TYPE] == "APITimeoutError"


# --- one span, no credentials, coexistence ----------------------------------------------------


def test_one_span_per_call_and_the_traceparent_reaches_the_server(server, spans, instrumented):
    PROVIDER.client(server).chat.completions.create(model="m", messages=MESSAGES)
    (span,) = spans.get_finished_spans()  # no HTTP span under the model span
    traceparent = server.requests[-1].headers["traceparent"]
    assert traceparent.split("-")[1] == format(span.context.trace_id, "032x")
    assert traceparent.split("-")[2] == format(span.context.span_id, "016x")
    assert sc.HTTP_RESPONSE_HEADERS in span.attributes


def test_no_api_key_in_any_span_even_with_content_captured(
    server, spans, instrumented, monkeypatch
):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    options.reload()
    client = PROVIDER.client(server)
    client.chat.completions.create(model="m", messages=MESSAGES)
    list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    whole, streamed = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert "opentelemetry" in whole.attributes[sc.GEN_AI_INPUT_MESSAGES]
    assert "Hello, world!" in whole.attributes[sc.GEN_AI_OUTPUT_MESSAGES]
    assert "Hello, world!" in streamed.attributes[sc.GEN_AI_OUTPUT_MESSAGES]
    assert server.requests[-1].headers["authorization"] == f"Bearer {PROVIDER.api_key}"
    for span in spans.get_finished_spans():
        assert PROVIDER.api_key not in repr(dict(span.attributes)) + span.name


def test_uninstrument_restores_every_original():
    import groq._base_client as base

    originals = (base.SyncAPIClient.__dict__["request"], base.AsyncAPIClient.__dict__["request"])
    assert registry.instrument(["groq"]) == ["groq"]
    try:
        assert base.SyncAPIClient.__dict__["request"] is not originals[0]
        assert registry.instrument(["groq"]) == ["groq"]  # idempotent
    finally:
        registry.uninstrument()
    assert (
        base.SyncAPIClient.__dict__["request"],
        base.AsyncAPIClient.__dict__["request"],
    ) == originals


INIT_CODE = """
assert "groq" not in sys.modules, "imported before the application imported it"
import groq

assert "groq" in registry.instrumented(), registry.instrumented()
client = groq.Groq(base_url=sys.argv[2], api_key="gsk-from-env", max_retries=0)
for chunk in client.chat.completions.create(
    model="llama-3.1-8b-instant", messages=[{"role": "user", "content": "hi"}], stream=True
):
    pass
"""


def test_init_instruments_groq_when_the_app_imports_it(server, tmp_path):
    from llmtrace.analysis.breakdown import model_phases

    server.configure(first_token_delay=0.1)
    root, traces_file = run_init_app(tmp_path, "groq", INIT_CODE, server.url)
    assert root.name == "chat llama-3.1-8b-instant"
    assert root.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert root.attributes[sc.TIME_TO_FIRST_TOKEN] >= 0.1
    assert root.attributes[sc.SERVER_QUEUE_TIME] == wire.TIMINGS["queue_time"]
    # The report's model keeps what it analyses; the provider name is in the exported span.
    exported = [
        attribute
        for _scope, span in exported_spans(traces_file)
        for attribute in span["attributes"]
    ]
    assert {"key": sc.GEN_AI_PROVIDER_NAME, "value": {"stringValue": "groq"}} in exported
    # Groq's own queue time is the call's queue stage; its prompt time ends the server's TTFT.
    phases = model_phases(root)
    assert phases.server_joined
    assert phases.queue == pytest.approx(wire.TIMINGS["queue_time"])
    assert phases.network == pytest.approx(
        root.attributes[sc.TIME_TO_FIRST_TOKEN]
        - wire.TIMINGS["queue_time"]
        - wire.TIMINGS["prompt_time"]
    )
    assert "gsk-from-env" not in traces_file.read_text()


ENTRY_POINT_APP = """
import sys

import groq

client = groq.Groq(base_url=sys.argv[1], api_key="gsk-entry-point", max_retries=0)
messages = [{"role": "user", "content": "hi"}]
client.chat.completions.create(model="m", messages=messages)
for _chunk in client.chat.completions.create(model="m", messages=messages, stream=True):
    pass
"""


def test_unmodified_app_under_opentelemetry_instrument(server, tmp_path):
    """``opentelemetry-instrument`` loads llmtrace's entry point (and OpenTelemetry's own httpx
    instrumentation, installed here): each Groq call has one model span, llmtrace's."""
    done, traces = run_instrumented_app(ENTRY_POINT_APP, tmp_path, "groq-app", server.url)
    assert done.returncode == 0, done.stderr[-3000:]
    spans = exported_spans(traces)
    models = [span for scope, span in spans if scope == "llmtrace"]
    assert [span["name"] for span in models] == ["chat m", "chat m"]
    model_ids = {span["spanId"] for span in models}
    # Any other span (OpenTelemetry's HTTP client span) sits under a model span.
    assert all(span["parentSpanId"] in model_ids for scope, span in spans if scope != "llmtrace")
    for span in models:
        attributes = {a["key"]: a["value"] for a in span["attributes"]}
        assert attributes[sc.GEN_AI_PROVIDER_NAME] == {"stringValue": "groq"}
        assert attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == {"intValue": "4"}
    assert "gsk-entry-point" not in traces.read_text()


# --- replay -----------------------------------------------------------------------------------


RECORDED = [
    (cassette.name, index, interaction)
    for cassette in PROVIDER.cassettes
    for index, interaction in enumerate(cassette_interactions(cassette))
]


def _expected(response: dict[str, Any]) -> dict[str, Any]:
    """What the span must say, read from the recorded body (not through llmtrace's parsers)."""
    text = body_text(response["body"]["string"])
    items = [json.loads(text)] if text.lstrip().startswith("{") else sse_events(text)
    expected: dict[str, Any] = {"id": items[0]["id"], "model": items[0]["model"]}
    reasons = [c["finish_reason"] for i in items for c in i["choices"] if c.get("finish_reason")]
    expected["finish"] = tuple(reasons)
    usage = next(
        u for i in items for u in (i.get("usage"), (i.get("x_groq") or {}).get("usage")) if u
    )
    expected["usage"] = usage
    return expected


def _send(request: dict[str, Any], url: str, asynchronous: bool) -> Any:
    body = json.loads(request["body"])
    if asynchronous:

        async def send() -> Any:
            client = groq.AsyncGroq(base_url=url, api_key=PROVIDER.api_key, max_retries=0)
            result = await client.chat.completions.create(**body)
            if body.get("stream"):
                return [chunk.model_dump() async for chunk in result]
            return result.model_dump()

        return asyncio.run(send())
    result = groq.Groq(
        base_url=url, api_key=PROVIDER.api_key, max_retries=0
    ).chat.completions.create(**body)
    return [chunk.model_dump() for chunk in result] if body.get("stream") else result.model_dump()


@pytest.mark.parametrize(
    ("name", "index", "interaction"),
    RECORDED,
    ids=[f"{name.removesuffix('.yaml')}-{index}" for name, index, _ in RECORDED],
)
def test_recorded_exchange(name, index, interaction, server, spans):
    assert len(RECORDED) == 14  # 6 + 6 + 1 + 1: every answer of every recording
    headers_stripped = not interaction["response"].get("headers")
    server.play_cassette(interaction, "text/event-stream" if headers_stripped else None)
    asynchronous = name.startswith("async_")
    plain = _send(interaction["request"], server.url, asynchronous)
    registry.instrument(list(PROVIDER.libraries))
    try:
        spans.clear()
        traced = _send(interaction["request"], server.url, asynchronous)
    finally:
        registry.uninstrument()
    assert traced == plain  # the caller gets exactly what it got uninstrumented
    span = one_model_span(spans)
    a = span.attributes
    expected = _expected(interaction["response"])
    assert a[sc.GEN_AI_PROVIDER_NAME] == "groq"
    assert a[sc.GEN_AI_RESPONSE_ID] == expected["id"]
    assert a[sc.GEN_AI_RESPONSE_MODEL] == expected["model"]
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == expected["finish"]
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == expected["usage"]["prompt_tokens"]
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == expected["usage"]["completion_tokens"]
    _server_timings_recorded(a, expected["usage"])
    assert span.status.status_code == StatusCode.OK
    if isinstance(traced, list):
        assert a[sc.CHUNK_COUNT] == len(traced)
        assert a[sc.STREAM_END] == "completed"
