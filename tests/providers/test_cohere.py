"""The Cohere instrumentation with the real ``cohere`` client over real HTTP.

Against the simulated server speaking Cohere's wire formats (``tests/servers/cohere.py``: v2 SSE,
v1 NDJSON), and replaying every recorded Cohere exchange (``cohere/`` of the recorded fixtures:
17 files, 19 exchanges). All of them are sent by the current client (cohere 5.21): the v1 ones
were recorded with cohere 5.5/5.6, the v2 ones with 5.18, and their request bodies are today's
keyword arguments (``stream`` aside, which the method chosen says). None is an error response;
errors are tested against the simulated server. LangChain's Cohere cassettes are replayed too,
with both instrumentations on: the Cohere span owns the timing and usage, LangChain's is
structure.
"""

from __future__ import annotations

import asyncio
import gc
import json
from pathlib import Path
from typing import Any

import cohere
import cohere.core.http_client as cohere_http_client
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from llmtrace import semconv
from llmtrace.instrumentation import registry
from tests.providers.sdk_checks import (
    assert_no_secret,
    body_text,
    cassette_interactions,
    model_spans,
    only_model_span,
    run_init_app,
)
from tests.providers.table import COHERE, MESSAGES
from tests.servers import cohere as cohere_server
from tests.servers.fixtures import RECORDED, sse_events

PROVIDER = COHERE
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        },
    }
]


def _v1(server: Any) -> cohere.Client:
    return cohere.Client(api_key=PROVIDER.api_key, base_url=server.url)


def _assert_server_usage(span: Any) -> None:
    """The simulated server's counts: ``tokens`` to gen_ai.usage, ``billed_units`` apart."""
    a = span.attributes
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10 + cohere_server.TEMPLATE_TOKENS
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
    assert a[semconv.USAGE_BILLED_INPUT_TOKENS] == 10
    assert a[semconv.USAGE_BILLED_OUTPUT_TOKENS] == 4
    # sent as JSON floats (69.0): recorded as integers
    assert type(a[semconv.GEN_AI_USAGE_INPUT_TOKENS]) is int


# --- v2 ----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("instrumented")
def test_v2_chat_records_request_response_and_both_counts(server, spans):
    response = PROVIDER.client(server).chat(
        model="command-r", messages=MESSAGES, temperature=0.3, max_tokens=50, p=0.9, k=20, seed=3
    )
    span = only_model_span(spans)
    a = span.attributes
    assert span.name == "chat command-r"
    assert span.kind == SpanKind.CLIENT
    assert a[semconv.STAGE] == semconv.LLM_STAGE
    assert a[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert a[semconv.GEN_AI_PROVIDER_NAME] == "cohere"
    assert a[semconv.GEN_AI_REQUEST_MODEL] == "command-r"
    assert a[semconv.GEN_AI_REQUEST_TEMPERATURE] == 0.3
    assert a[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 50
    assert a[semconv.GEN_AI_REQUEST_TOP_P] == 0.9
    assert a[semconv.GEN_AI_REQUEST_TOP_K] == 20
    assert a[semconv.GEN_AI_REQUEST_SEED] == 3
    assert a[semconv.GEN_AI_REQUEST_STREAM] is False
    assert a[semconv.GEN_AI_RESPONSE_ID] == response.id
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("COMPLETE",)
    assert semconv.GEN_AI_RESPONSE_MODEL not in a  # Cohere's answer names no model
    _assert_server_usage(span)
    assert a[semconv.SERVER_ADDRESS] == "127.0.0.1"
    assert a[semconv.SERVER_PORT] == server.port
    assert semconv.TIME_TO_HEADERS in a
    assert semconv.HTTP_RESPONSE_HEADERS in a  # the httpx phases are on the model span
    assert span.status.status_code == StatusCode.OK
    assert_no_secret(span, PROVIDER.api_key)
    traceparent = server.requests[-1].headers["traceparent"]
    assert traceparent.split("-")[2] == format(span.context.span_id, "016x")


@pytest.mark.usefixtures("instrumented")
def test_v2_async_chat_is_one_span(server, spans):
    async def call() -> Any:
        return await PROVIDER.async_client(server).chat(model="command-r", messages=MESSAGES)

    response = asyncio.run(call())
    span = only_model_span(spans)
    assert span.attributes[semconv.GEN_AI_RESPONSE_ID] == response.id
    _assert_server_usage(span)


@pytest.mark.usefixtures("instrumented")
def test_v2_stream_measures_ttft_and_reads_the_message_end(server, spans):
    server.configure(first_token_delay=0.05, token_delay=0.01, tokens=["a", "b", "c"])
    events = list(PROVIDER.client(server).chat_stream(model="command-r", messages=MESSAGES))
    assert [e.type for e in events][:2] == ["message-start", "content-start"]
    span = only_model_span(spans)
    a = span.attributes
    assert a[semconv.GEN_AI_REQUEST_STREAM] is True
    assert a[semconv.STREAM_END] == "completed"
    assert a[semconv.CHUNK_COUNT] == len(events) == 7
    assert a[semconv.TIME_TO_FIRST_TOKEN] >= 0.05
    assert a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] < a[semconv.TIME_TO_FIRST_TOKEN]
    # The last token leaves the server 20 ms after the first (a late first one shortens the rest).
    assert a[semconv.TIME_TO_FIRST_TOKEN] + a[semconv.GENERATION_TIME] >= 0.05 + 0.02
    assert a[semconv.GENERATION_TIME] > 0
    assert a[semconv.GEN_AI_RESPONSE_ID] == events[0].id
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("COMPLETE",)
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert a[semconv.USAGE_BILLED_OUTPUT_TOKENS] == 3
    assert semconv.TIME_TO_HEADERS in a
    assert span.status.status_code == StatusCode.OK


@pytest.mark.usefixtures("instrumented")
def test_v2_async_stream(server, spans):
    async def consume() -> int:
        return len(
            [
                e
                async for e in PROVIDER.async_client(server).chat_stream(
                    model="m", messages=MESSAGES
                )
            ]
        )

    assert asyncio.run(consume()) == 8
    span = only_model_span(spans)
    assert span.attributes[semconv.STREAM_END] == "completed"
    _assert_server_usage(span)


@pytest.mark.usefixtures("instrumented")
def test_stream_never_iterated_sends_nothing_and_has_no_span(server, spans):
    stream = PROVIDER.client(server).chat_stream(model="m", messages=MESSAGES)
    del stream
    gc.collect()
    assert server.requests == []
    assert spans.get_finished_spans() == ()


@pytest.mark.usefixtures("instrumented")
def test_async_stream_left_early_ends_once_closed(server, spans):
    async def consume() -> None:
        stream = PROVIDER.async_client(server).chat_stream(model="m", messages=MESSAGES)
        async for _event in stream:
            break
        await stream.aclose()

    asyncio.run(consume())
    span = only_model_span(spans)
    assert span.attributes[semconv.STREAM_END] == "closed"
    assert span.attributes[semconv.CHUNK_COUNT] == 1


@pytest.mark.usefixtures("instrumented")
def test_v1_stream_cut_mid_way_ends_failed(server, spans):
    server.configure(fail_after_chunks=2)
    with pytest.raises(Exception) as raised:
        list(_v1(server).chat_stream(model="command", message="hi"))
    span = only_model_span(spans)
    assert span.attributes[semconv.STREAM_END] == "error"
    assert span.attributes[semconv.ERROR_TYPE] == type(raised.value).__qualname__


@pytest.mark.usefixtures("instrumented")
def test_tool_call_whole_and_streamed(server, spans):
    client = PROVIDER.client(server)
    response = client.chat(model="m", messages=MESSAGES, tools=TOOLS, tool_choice="REQUIRED")
    assert response.message.tool_calls[0].function.name == "get_weather"
    server.configure(first_token_delay=0.03)
    events = list(
        client.chat_stream(model="m", messages=MESSAGES, tools=TOOLS, tool_choice="REQUIRED")
    )
    assert "tool-call-start" in [e.type for e in events]
    whole, streamed = model_spans(spans)
    assert whole.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("TOOL_CALL",)
    assert streamed.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("TOOL_CALL",)
    # The tool plan is generated output: its first delta is the first token.
    assert streamed.attributes[semconv.TIME_TO_FIRST_TOKEN] >= 0.03


@pytest.mark.usefixtures("instrumented")
def test_v2_embed_and_rerank_sync_and_async(server, spans):
    client = PROVIDER.client(server)
    client.embed(
        model="embed-v4.0",
        texts=["a", "b"],
        input_type="search_document",
        embedding_types=["float"],
    )
    client.rerank(model="rerank-v3.5", query="q", documents=["a", "b", "c"], top_n=2)

    async def calls() -> None:
        client = PROVIDER.async_client(server)
        await client.embed(
            model="embed-v4.0", texts=["a"], input_type="search_query", embedding_types=["float"]
        )
        await client.rerank(model="rerank-v3.5", query="q", documents=["a", "b"])

    asyncio.run(calls())
    embed, rerank, async_embed, async_rerank = model_spans(spans)
    assert len(spans.get_finished_spans()) == 4
    for span, inputs in ((embed, 2), (async_embed, 1)):
        a = span.attributes
        assert span.name == "embeddings embed-v4.0"
        assert a[semconv.STAGE] == "embedding"
        assert a[semconv.GEN_AI_OPERATION_NAME] == "embeddings"
        assert a[semconv.EMBEDDING_INPUT_COUNT] == inputs
        assert a[semconv.GEN_AI_REQUEST_ENCODING_FORMATS] == ("float",)
        assert a[semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == 12
        # embed reports billed units only: they are the input tokens Cohere counted
        assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
        assert semconv.GEN_AI_REQUEST_STREAM not in a
    for span, documents, returned in ((rerank, 3, 2), (async_rerank, 2, 2)):
        a = span.attributes
        assert span.name == "rerank rerank-v3.5"
        assert a[semconv.STAGE] == "rerank"
        assert a[semconv.GEN_AI_OPERATION_NAME] == "rerank"
        assert a[semconv.RERANK_INPUT_COUNT] == documents
        assert a[semconv.RETRIEVAL_RETURNED] == returned
        assert a[semconv.USAGE_BILLED_SEARCH_UNITS] == 1
        assert semconv.GEN_AI_USAGE_INPUT_TOKENS not in a
    assert rerank.attributes[semconv.RERANK_TOP_N] == 2
    assert semconv.RERANK_TOP_N not in async_rerank.attributes


# --- v1 ----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("instrumented")
def test_v1_chat_whole_and_ndjson_stream(server, spans):
    client = _v1(server)
    response = client.chat(model="command", message="hi", preamble="Be brief.")
    server.configure(first_token_delay=0.04)
    events = list(client.chat_stream(model="command", message="hi"))
    assert events[0].event_type == "stream-start" and events[-1].event_type == "stream-end"
    whole, streamed = model_spans(spans)
    assert whole.attributes[semconv.GEN_AI_RESPONSE_ID] == response.response_id
    assert whole.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("COMPLETE",)
    _assert_server_usage(whole)
    assert streamed.attributes[semconv.GEN_AI_RESPONSE_ID] == events[-1].response.response_id
    assert streamed.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("COMPLETE",)
    assert streamed.attributes[semconv.CHUNK_COUNT] == 6
    assert streamed.attributes[semconv.TIME_TO_FIRST_TOKEN] >= 0.04
    _assert_server_usage(streamed)
    assert semconv.GEN_AI_SYSTEM_INSTRUCTIONS not in whole.attributes  # content not captured


@pytest.mark.usefixtures("instrumented")
def test_v1_async_chat_stream(server, spans):
    async def consume() -> int:
        client = cohere.AsyncClient(api_key=PROVIDER.api_key, base_url=server.url)
        return len([e async for e in client.chat_stream(model="command", message="hi")])

    assert asyncio.run(consume()) == 6
    span = only_model_span(spans)
    assert span.attributes[semconv.STREAM_END] == "completed"
    _assert_server_usage(span)


@pytest.mark.usefixtures("instrumented")
def test_v1_generate_embed_and_rerank(server, spans):
    client = _v1(server)
    client.generate(model="command", prompt="hi")
    list(client.generate_stream(model="command", prompt="hi"))
    client.embed(model="embed-english-v3.0", texts=["a", "b"], input_type="search_document")
    client.rerank(model="rerank-english-v3.0", query="q", documents=["a", "b", "c"], top_n=1)
    generate, generate_stream, embed, rerank = model_spans(spans)
    for span in (generate, generate_stream):
        assert span.name == "text_completion command"
        assert span.attributes[semconv.GEN_AI_OPERATION_NAME] == "text_completion"
        assert span.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("COMPLETE",)
        # generate reports billed units only
        assert span.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
        assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert generate_stream.attributes[semconv.STREAM_END] == "completed"
    assert embed.attributes[semconv.STAGE] == "embedding"
    assert embed.attributes[semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == 12
    assert rerank.attributes[semconv.RETRIEVAL_RETURNED] == 1
    assert rerank.attributes[semconv.RERANK_TOP_N] == 1


def test_v1_embed_of_many_texts_is_one_span_per_request_in_the_callers_trace(server, spans):
    """``Client.embed`` sends 96 texts per request, concurrently from its thread pool: each
    request is a span, under the caller's span (llmtrace carries the context into the pool)."""
    from opentelemetry import trace as otel_trace

    registry.instrument([*PROVIDER.libraries, "threading"])
    try:
        with otel_trace.get_tracer("app").start_as_current_span("index documents") as parent:
            _v1(server).embed(
                model="embed-english-v3.0", texts=["t"] * 100, input_type="search_document"
            )
    finally:
        registry.uninstrument()
    found = model_spans(spans)
    assert sorted(s.attributes[semconv.EMBEDDING_INPUT_COUNT] for s in found) == [4, 96]
    assert all(s.parent.span_id == parent.get_span_context().span_id for s in found)
    assert len(spans.get_finished_spans()) == 3  # no HTTP span beside them


@pytest.mark.usefixtures("instrumented")
def test_client_v2_property_and_the_genai_metrics(server, spans, metric_reader):
    from tests.instrumentation.test_metrics import histograms, points_for

    _v1(server).v2.chat(model="metrics-cohere", messages=MESSAGES)
    list(PROVIDER.client(server).chat_stream(model="metrics-cohere-stream", messages=MESSAGES))
    found = histograms(metric_reader)
    (duration,) = points_for(found, "gen_ai.client.operation.duration", "metrics-cohere")
    assert duration.count == 1
    assert duration.attributes["gen_ai.provider.name"] == "cohere"
    tokens = points_for(found, "gen_ai.client.token.usage", "metrics-cohere")
    assert sorted((p.attributes["gen_ai.token.type"], p.sum) for p in tokens) == [
        ("input", 10 + cohere_server.TEMPLATE_TOKENS),
        ("output", 5),
    ]
    (first_chunk,) = points_for(
        found, "gen_ai.client.operation.time_to_first_chunk", "metrics-cohere-stream"
    )
    assert first_chunk.count == 1


# --- clients made before instrumentation ---------------------------------------------------


def test_clients_made_before_instrumentation_are_traced_through_their_raw_client(server, spans):
    """cohere binds chat and chat_stream on each client when it is made: a client made before
    llmtrace instrumented cohere calls the originals, and is traced one layer down."""
    v2, v1 = PROVIDER.client(server), _v1(server)
    async_v2 = PROVIDER.async_client(server)
    registry.instrument(list(PROVIDER.libraries))
    try:
        server.configure(first_token_delay=0.03)
        v2.chat(model="v2", messages=MESSAGES)
        list(v2.chat_stream(model="v2-stream", messages=MESSAGES))
        v1.chat(model="v1", message="hi")
        list(v1.chat_stream(model="v1-stream", message="hi"))

        async def calls() -> None:
            await async_v2.chat(model="async", messages=MESSAGES)
            async for _event in async_v2.chat_stream(model="async-stream", messages=MESSAGES):
                pass

        asyncio.run(calls())
    finally:
        registry.uninstrument()
    found = model_spans(spans)
    assert len(spans.get_finished_spans()) == len(found) == 6
    for span in found:
        a = span.attributes
        assert a[semconv.GEN_AI_PROVIDER_NAME] == "cohere"
        assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("COMPLETE",)
        assert a[semconv.GEN_AI_RESPONSE_ID]
        _assert_server_usage(span)
        assert semconv.TIME_TO_HEADERS in a
        if a[semconv.GEN_AI_REQUEST_STREAM]:
            assert a[semconv.STREAM_END] == "completed"
            assert a[semconv.TIME_TO_FIRST_TOKEN] >= 0.03
    assert sorted(s.attributes[semconv.GEN_AI_REQUEST_MODEL] for s in found) == sorted(
        ["v2", "v2-stream", "v1", "v1-stream", "async", "async-stream"]
    )


def test_raw_stream_of_an_early_client_left_early_or_failing(server, spans):
    client = PROVIDER.client(server)
    registry.instrument(list(PROVIDER.libraries))
    try:
        stream = client.chat_stream(model="m", messages=MESSAGES)
        next(stream)
        stream.close()
        server.configure(status=429)
        with pytest.raises(cohere.TooManyRequestsError):
            list(client.chat_stream(model="m", messages=MESSAGES))
    finally:
        registry.uninstrument()
    closed, failed = model_spans(spans)
    assert closed.attributes[semconv.STREAM_END] == "closed"
    assert failed.attributes[semconv.ERROR_TYPE] == "TooManyRequestsError"
    assert failed.status.status_code == StatusCode.ERROR


@pytest.mark.usefixtures("instrumented")
def test_raw_responses_are_traced(server, spans):
    client = PROVIDER.client(server)
    raw = client.with_raw_response.chat(model="m", messages=MESSAGES)
    assert raw.data.finish_reason == "COMPLETE"
    with client.with_raw_response.chat_stream(model="m", messages=MESSAGES) as response:
        events = list(response.data)
    whole, streamed = model_spans(spans)
    assert whole.attributes[semconv.GEN_AI_RESPONSE_ID] == raw.data.id
    _assert_server_usage(whole)
    assert streamed.attributes[semconv.CHUNK_COUNT] == len(events)
    _assert_server_usage(streamed)


# --- errors, content, coexistence ----------------------------------------------------------


def _failing_calls(server: Any) -> list[Any]:
    def whole() -> Any:
        return PROVIDER.client(server).chat(model="m", messages=MESSAGES)

    def streamed() -> Any:
        return list(PROVIDER.client(server).chat_stream(model="m", messages=MESSAGES))

    def v1_streamed() -> Any:
        return list(_v1(server).chat_stream(model="m", message="hi"))

    return [whole, streamed, v1_streamed]


@pytest.mark.parametrize(
    ("status", "error_class"),
    [(400, cohere.BadRequestError), (429, cohere.TooManyRequestsError)],
)
def test_errors_pass_unchanged_and_mark_the_span(server, spans, status, error_class, monkeypatch):
    # The SDK retries a 429 twice, after 1 s and 2 s: the same retries, 100 times sooner
    monkeypatch.setattr(cohere_http_client, "INITIAL_RETRY_DELAY_SECONDS", 0.01)
    server.configure(status=status)
    plain = []
    for call in _failing_calls(server):
        with pytest.raises(error_class) as raised:
            call()
        plain.append(raised.value)
    registry.instrument(list(PROVIDER.libraries))
    try:
        traced = []
        for call in _failing_calls(server):
            with pytest.raises(error_class) as raised:
                call()
            traced.append(raised.value)
    finally:
        registry.uninstrument()
    for before, after in zip(plain, traced, strict=True):
        assert type(after) is type(before)
        assert after.status_code == before.status_code == status
        assert after.body == before.body
    # per round of three calls, the SDK's two retries of a 429 made two more requests: they ran
    assert len(server.requests) == 2 * (5 if status == 429 else 3)
    failed = model_spans(spans)
    assert len(failed) == 3
    for span in failed:
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes[semconv.ERROR_TYPE] == error_class.__qualname__
        assert span.attributes[semconv.HTTP_RESPONSE_STATUS_CODE] == status
        assert_no_secret(span, PROVIDER.api_key)


@pytest.mark.usefixtures("instrumented")
def test_content_is_captured_only_when_asked(server, spans, monkeypatch):
    from llmtrace import options

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    options.reload()
    client = PROVIDER.client(server)
    client.chat(model="m", messages=MESSAGES)
    list(client.chat_stream(model="m", messages=MESSAGES))
    client.chat(model="m", messages=MESSAGES, tools=TOOLS, tool_choice="REQUIRED")
    _v1(server).chat(model="m", message="Say hello", preamble="Be brief.")
    whole, streamed, tool, v1 = model_spans(spans)
    for span in (whole, streamed, v1):
        assert "Say hello" in span.attributes[semconv.GEN_AI_INPUT_MESSAGES]
        (message,) = json.loads(span.attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
        # (the finish reason as Cohere reported it, when the span has one)
        reasons = span.attributes.get(semconv.GEN_AI_RESPONSE_FINISH_REASONS) or ("stop",)
        assert message == {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Hello, world!"}],
            "finish_reason": reasons[0],
        }
    (message,) = json.loads(tool.attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
    (call,) = [part for part in message["parts"] if part["type"] == "tool_call"]
    assert call["name"] == "get_weather"
    assert json.loads(v1.attributes[semconv.GEN_AI_SYSTEM_INSTRUCTIONS]) == [
        {"type": "text", "content": "Be brief."}
    ]


INIT_CODE = """
assert "cohere" not in sys.modules, "imported before the application imported it"
import cohere

client = cohere.ClientV2(api_key="cohere-key-from-env", base_url=sys.argv[2])
for event in client.chat_stream(model="command-r", messages=[{"role": "user", "content": "hi"}]):
    pass
"""


def test_init_instruments_cohere_when_the_app_imports_it(server, tmp_path):
    server.configure(first_token_delay=0.1)
    root, traces_file = run_init_app(tmp_path, "cohere", INIT_CODE, server.url)
    written = traces_file.read_text()
    assert root.name == "chat command-r"
    assert '"gen_ai.provider.name"' in written and '"cohere"' in written  # not kept by the reader
    assert root.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
    assert root.attributes[semconv.TIME_TO_FIRST_TOKEN] >= 0.1
    assert "cohere-key-from-env" not in written


def test_uninstrument_restores_the_client_methods(server, spans):
    from cohere import base_client
    from cohere.v2 import client as v2_client

    classes = (
        v2_client.V2Client,
        v2_client.AsyncV2Client,
        base_client.BaseCohere,
        base_client.AsyncBaseCohere,
    )
    names = ("chat", "chat_stream", "embed", "rerank")
    originals = {(cls, name): cls.__dict__[name] for cls in classes for name in names}
    assert registry.instrument(["cohere"]) == ["cohere"]
    assert all(hasattr(cls.__dict__[name], "__wrapped__") for cls, name in originals)
    registry.uninstrument(["cohere"])
    assert all(cls.__dict__[name] is original for (cls, name), original in originals.items())
    PROVIDER.client(server).chat(model="m", messages=MESSAGES)
    assert model_spans(spans) == []


# --- replay of the recorded exchanges ----------------------------------------------------------


def _counts(usage: dict[str, Any]) -> dict[str, Any]:
    """gen_ai.usage as llmtrace reads Cohere: ``tokens``, else ``billed_units``."""
    counts = usage.get("tokens") or usage.get("billed_units") or {}
    return {key: int(counts[key]) for key in ("input_tokens", "output_tokens") if key in counts}


def _expected(path: str, body: str) -> dict[str, Any]:
    """Id, finish reason and counts as Cohere sent them (read without llmtrace)."""
    if body.startswith("event:") or "\ndata:" in body:  # v2 server-sent events
        events = sse_events(body)
        end = events[-1]["delta"]
        return {"id": events[0]["id"], "reason": end["finish_reason"], **_counts(end["usage"])}
    lines = [json.loads(line) for line in body.splitlines() if line.strip()]
    if len(lines) > 1:  # v1 NDJSON
        end = lines[-1]
        return {
            "id": end["response"]["response_id"],
            "reason": end["finish_reason"],
            **_counts(end["response"]["meta"]),
        }
    (item,) = lines
    reason = item.get("finish_reason") or (item.get("generations") or [{}])[0].get("finish_reason")
    usage = item.get("usage") or item.get("meta") or {}
    return {
        "id": item.get("id") or item.get("response_id"),
        "reason": reason,
        "returned": len(item["results"]) if "results" in item else None,
        **_counts(usage),
    }


def _send(server_url: str, uri: str, sent: dict[str, Any], is_async: bool) -> None:
    path = uri.split("api.cohere.com", 1)[1]
    kwargs = {k: v for k, v in sent.items() if k != "stream"}
    streamed = bool(sent.get("stream"))
    method = {"/chat": "chat", "/generate": "generate", "/embed": "embed", "/rerank": "rerank"}[
        path[3:]
    ]
    if streamed:
        method += "_stream"
    v2 = path.startswith("/v2")
    if not is_async:
        client: Any = (cohere.ClientV2 if v2 else cohere.Client)(api_key="k", base_url=server_url)
        result = getattr(client, method)(**kwargs)
        if streamed:
            list(result)
        return

    async def call() -> None:
        client = (cohere.AsyncClientV2 if v2 else cohere.AsyncClient)(
            api_key="k", base_url=server_url
        )
        if streamed:
            async for _event in getattr(client, method)(**kwargs):
                pass
        else:
            await getattr(client, method)(**kwargs)

    asyncio.run(call())


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("path", PROVIDER.cassettes, ids=lambda path: path.stem)
def test_recorded_exchange(path: Path, model_server, spans):
    for interaction in cassette_interactions(path):
        spans.clear()
        model_server.requests.clear()
        request, response = interaction["request"], interaction["response"]
        sent = json.loads(request["body"])
        expected = _expected(request["uri"], body_text(response["body"]["string"]))
        model_server.play_cassette(interaction)
        _send(model_server.url, request["uri"], sent, path.stem.startswith("async_"))
        (served,) = model_server.requests
        assert served.path == request["uri"].split("api.cohere.com", 1)[1]
        span = only_model_span(spans)
        a = span.attributes
        assert span.status.status_code == StatusCode.OK
        assert a[semconv.GEN_AI_PROVIDER_NAME] == "cohere"
        assert a[semconv.GEN_AI_REQUEST_MODEL] == sent["model"]
        assert a[semconv.GEN_AI_RESPONSE_ID] == expected["id"]
        for attribute, key in (
            (semconv.GEN_AI_USAGE_INPUT_TOKENS, "input_tokens"),
            (semconv.GEN_AI_USAGE_OUTPUT_TOKENS, "output_tokens"),
        ):
            if key in expected:
                assert a[attribute] == expected[key]
            else:
                assert attribute not in a  # not reported, not written
        if expected.get("reason"):
            assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == (expected["reason"],)
        if expected.get("returned") is not None:
            assert a[semconv.STAGE] == "rerank"
            assert a[semconv.RETRIEVAL_RETURNED] == expected["returned"]
            assert a[semconv.RERANK_TOP_N] == sent["top_n"]
        if sent.get("stream"):
            assert a[semconv.STREAM_END] == "completed"
            assert a[semconv.TIME_TO_FIRST_TOKEN] >= a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]


# --- LangChain above Cohere --------------------------------------------------------------------

LANGCHAIN_RECORDINGS = [
    "chain_stream_cohere",
    "async_chain_stream_cohere",
    "documents_chain_cohere",
]


@pytest.mark.parametrize("name", LANGCHAIN_RECORDINGS)
def test_langchain_over_cohere_keeps_the_timing_on_the_cohere_span(name, model_server, spans):
    """Rule 8 of docs/architecture.md: LangChain's model span becomes structure, the Cohere span
    beneath owns the first token and the usage (``tokens`` as Cohere reports them, with its
    prompt-cache hits)."""
    from langchain_cohere import ChatCohere

    (interaction,) = cassette_interactions(RECORDED / "langchain" / f"{name}.yaml")
    request, response = interaction["request"], interaction["response"]
    body = body_text(response["body"]["string"])
    # Served decompressed (the server drops a gzip header over a plain body).
    served = {**response, "body": {"string": body}}
    model_server.play_cassette({**interaction, "response": served}, content_type="application/json")
    sent = json.loads(request["body"])
    expected = _expected(request["uri"], body)
    names = registry.instrument(["langchain", "threading", *PROVIDER.libraries])
    assert {"langchain", "cohere"} <= set(names)
    try:
        model = ChatCohere(model=sent["model"], base_url=model_server.url, cohere_api_key="k")
        question = sent["messages"][0]["content"]
        spans.clear()
        if name.startswith("async_"):

            async def consume() -> None:
                async for _chunk in model.astream(question):
                    pass

            asyncio.run(consume())
        elif sent.get("stream"):
            list(model.stream(question))
        else:
            model.invoke(question)
    finally:
        registry.uninstrument()
    finished = spans.get_finished_spans()
    (owner,) = [s for s in finished if s.attributes.get(semconv.STAGE) == semconv.LLM_STAGE]
    assert owner.instrumentation_scope.name == "llmtrace"
    assert owner.attributes[semconv.GEN_AI_PROVIDER_NAME] == "cohere"
    assert owner.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == expected["input_tokens"]
    assert owner.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == expected["output_tokens"]
    assert owner.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == (expected["reason"],)
    usage = (json.loads(body) if body.lstrip().startswith("{") else sse_events(body)[-1]["delta"])[
        "usage"
    ]
    if "cached_tokens" in usage:
        assert owner.attributes[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == int(
            usage["cached_tokens"]
        )
    (structure,) = [s for s in finished if s.context.span_id == owner.parent.span_id]
    assert structure.attributes[semconv.STAGE] == "other"
    assert semconv.TIME_TO_FIRST_TOKEN not in structure.attributes
    # the HTTP request is not a span of its own: its phases are on the Cohere span
    assert not [s for s in finished if s.name.startswith("POST")]
    if sent.get("stream"):
        assert owner.attributes[semconv.STREAM_END] == "completed"
