"""The Mistral instrumentation with the real ``mistralai`` client over real HTTP.

Against the simulated server speaking Mistral's wire format (``tests/servers/mistral.py``), and
replaying every recorded Mistral exchange (``mistral/`` of the recorded fixtures). All eleven
recordings are sent by the current client (mistralai 3.7): they were recorded with the 1.x SDK
(``mistral-client-python/1.9.10``) and openinference's tests, and their request bodies map onto
today's keyword arguments (``input`` is the ``inputs`` argument). None is an error response;
errors are tested against the simulated server.

``llmtrace.init()`` instruments mistralai whether the application imported it before or after
init(): from 2.0 on ``mistralai`` is a namespace package (the SDK is ``mistralai.client``), and
wrapt's post-import hook on a namespace package never fires, so the registry's row waits for
``mistralai.client`` as well as ``mistralai`` (1.x).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mistralai.client import Mistral, errors
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
from tests.providers.table import MESSAGES, MISTRALAI
from tests.servers import mistral as mistral_server
from tests.servers.fixtures import sse_events

PROVIDER = MISTRALAI


# --- calls against the simulated server ------------------------------------------------------


@pytest.mark.usefixtures("instrumented")
def test_chat_complete_records_request_response_and_usage(server, spans):
    response = PROVIDER.client(server).chat.complete(
        model="mistral-small-latest",
        messages=MESSAGES,
        temperature=0.3,
        max_tokens=64,
        random_seed=7,
        top_k=40,
        stop=["\n\n"],
    )
    span = only_model_span(spans)
    a = span.attributes
    assert span.name == "chat mistral-small-latest"
    assert span.kind == SpanKind.CLIENT
    assert a[semconv.STAGE] == semconv.LLM_STAGE
    assert a[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert a[semconv.GEN_AI_PROVIDER_NAME] == "mistral_ai"
    assert a[semconv.GEN_AI_REQUEST_MODEL] == "mistral-small-latest"
    assert a[semconv.GEN_AI_REQUEST_TEMPERATURE] == 0.3
    assert a[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 64
    assert a[semconv.GEN_AI_REQUEST_SEED] == 7
    assert a[semconv.GEN_AI_REQUEST_TOP_K] == 40
    assert a[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] == ("\n\n",)
    assert a[semconv.GEN_AI_REQUEST_STREAM] is False
    assert a[semconv.GEN_AI_RESPONSE_ID] == response.id
    assert a[semconv.GEN_AI_RESPONSE_MODEL] == "sim-model-1"
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert a[semconv.SERVER_ADDRESS] == "127.0.0.1"
    assert a[semconv.SERVER_PORT] == server.port
    assert semconv.TIME_TO_HEADERS in a
    assert semconv.HTTP_RESPONSE_HEADERS in a  # the httpx2 phases are on the model span
    assert semconv.GEN_AI_INPUT_MESSAGES not in a
    assert span.status.status_code == StatusCode.OK
    assert_no_secret(span, PROVIDER.api_key)
    traceparent = server.requests[-1].headers["traceparent"]
    assert traceparent.split("-")[2] == format(span.context.span_id, "016x")


@pytest.mark.usefixtures("instrumented")
def test_async_chat_complete_is_one_span(server, spans):
    async def call() -> Any:
        return await PROVIDER.client(server).chat.complete_async(model="m", messages=MESSAGES)

    response = asyncio.run(call())
    span = only_model_span(spans)
    assert span.attributes[semconv.GEN_AI_RESPONSE_ID] == response.id
    assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert semconv.TIME_TO_HEADERS in span.attributes


@pytest.mark.usefixtures("instrumented")
def test_stream_reads_usage_and_finish_reason_from_the_last_chunk(server, spans):
    server.configure(first_token_delay=0.05, token_delay=0.01, tokens=["a", "b", "c"])
    events = list(PROVIDER.client(server).chat.stream(model="m", messages=MESSAGES))
    assert len(events) == 5  # role, 3 content, finish with usage ([DONE] is not an event)
    span = only_model_span(spans)
    a = span.attributes
    assert a[semconv.GEN_AI_REQUEST_STREAM] is True
    assert a[semconv.STREAM_END] == "completed"
    assert a[semconv.CHUNK_COUNT] == 5
    assert a[semconv.TIME_TO_FIRST_TOKEN] >= 0.05
    assert a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] < a[semconv.TIME_TO_FIRST_TOKEN]
    # The last token leaves the server 20 ms after the first (a late first one shortens the rest).
    assert a[semconv.TIME_TO_FIRST_TOKEN] + a[semconv.GENERATION_TIME] >= 0.05 + 0.02
    assert a[semconv.GENERATION_TIME] > 0
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert a[semconv.OUTPUT_TOKENS_PER_SECOND] > 0
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[semconv.GEN_AI_RESPONSE_ID] == events[0].data.id
    assert span.status.status_code == StatusCode.OK


@pytest.mark.usefixtures("instrumented")
def test_async_stream_as_context_manager(server, spans):
    async def consume() -> int:
        stream = await PROVIDER.client(server).chat.stream_async(model="m", messages=MESSAGES)
        async with stream as events:
            return len([event async for event in events])

    assert asyncio.run(consume()) == 6
    span = only_model_span(spans)
    assert span.attributes[semconv.STREAM_END] == "completed"
    assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4


@pytest.mark.usefixtures("instrumented")
def test_stream_left_early_by_its_context_manager_ends_once_closed(server, spans):
    with PROVIDER.client(server).chat.stream(model="m", messages=MESSAGES) as events:
        for _event in events:
            break
    span = only_model_span(spans)
    assert span.attributes[semconv.STREAM_END] == "closed"
    assert span.attributes[semconv.CHUNK_COUNT] == 1
    assert span.status.status_code == StatusCode.UNSET


@pytest.mark.usefixtures("instrumented")
def test_async_stream_left_early_by_its_context_manager_ends_once_closed(server, spans):
    async def consume() -> None:
        stream = await PROVIDER.client(server).chat.stream_async(model="m", messages=MESSAGES)
        async with stream as events:
            async for _event in events:
                break

    asyncio.run(consume())
    span = only_model_span(spans)
    assert span.attributes[semconv.STREAM_END] == "closed"
    assert span.attributes[semconv.CHUNK_COUNT] == 1


@pytest.mark.usefixtures("instrumented")
def test_async_stream_cut_mid_way_ends_failed(server, spans):
    server.configure(fail_after_chunks=1)

    async def consume() -> None:
        async for _event in await PROVIDER.client(server).chat.stream_async(
            model="m", messages=MESSAGES
        ):
            pass

    with pytest.raises(Exception) as raised:
        asyncio.run(consume())
    span = only_model_span(spans)
    assert span.attributes[semconv.STREAM_END] == "error"
    assert span.attributes[semconv.ERROR_TYPE] == type(raised.value).__qualname__


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


@pytest.mark.usefixtures("instrumented")
def test_tool_call_whole_and_streamed(server, spans):
    client = PROVIDER.client(server)
    response = client.chat.complete(model="m", messages=MESSAGES, tools=TOOLS, tool_choice="any")
    assert response.choices[0].message.tool_calls[0].function.name == "get_weather"
    server.configure(first_token_delay=0.03)
    events = list(client.chat.stream(model="m", messages=MESSAGES, tools=TOOLS, tool_choice="any"))
    assert any(event.data.choices[0].delta.tool_calls for event in events)
    whole, streamed = model_spans(spans)
    assert whole.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert streamed.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    # A tool-call delta is output: its arrival is the first token.
    assert streamed.attributes[semconv.TIME_TO_FIRST_TOKEN] >= 0.03


@pytest.mark.usefixtures("instrumented")
def test_embeddings_sync_and_async(server, spans):
    client = PROVIDER.client(server)
    client.embeddings.create(model="mistral-embed", inputs=["a", "b", "c"])

    async def call() -> Any:
        return await client.embeddings.create_async(model="mistral-embed", inputs="a")

    asyncio.run(call())
    sync_span, async_span = model_spans(spans)
    for span, inputs in ((sync_span, 3), (async_span, 1)):
        a = span.attributes
        assert span.name == "embeddings mistral-embed"
        assert a[semconv.STAGE] == "embedding"
        assert a[semconv.GEN_AI_OPERATION_NAME] == "embeddings"
        assert a[semconv.EMBEDDING_INPUT_COUNT] == inputs
        assert a[semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == 16
        assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
        assert semconv.GEN_AI_REQUEST_STREAM not in a
    assert len(spans.get_finished_spans()) == 2


@pytest.mark.usefixtures("instrumented")
def test_fim_completion_whole_and_streamed(server, spans):
    client = PROVIDER.client(server)
    client.fim.complete(model="codestral-latest", prompt="def add(a, b):", suffix="\n")
    list(client.fim.stream(model="codestral-latest", prompt="def add(a, b):"))
    whole, streamed = model_spans(spans)
    assert whole.name == "text_completion codestral-latest"
    assert whole.attributes[semconv.GEN_AI_OPERATION_NAME] == "text_completion"
    assert whole.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert streamed.attributes[semconv.STREAM_END] == "completed"
    assert streamed.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4


@pytest.mark.usefixtures("instrumented")
def test_structured_output_parse_is_the_one_completion_span(server, spans):
    import pydantic

    class Greeting(pydantic.BaseModel):
        text: str

    server.configure(tokens=['{"text": ', '"hi"}'])
    parsed = PROVIDER.client(server).chat.parse(Greeting, model="m", messages=MESSAGES)
    assert parsed.choices[0].message.parsed.text == "hi"
    span = only_model_span(spans)
    assert span.name == "chat m"
    assert span.attributes[semconv.GEN_AI_RESPONSE_ID] == parsed.id


@pytest.mark.parametrize(
    ("status", "error_class"), [(401, errors.SDKError), (422, errors.HTTPValidationError)]
)
def test_errors_pass_unchanged_and_mark_the_span(server, spans, status, error_class):
    server.configure(status=status)
    with pytest.raises(error_class) as plain:
        PROVIDER.client(server).chat.complete(model="m", messages=MESSAGES)
    registry.instrument(list(PROVIDER.libraries))
    try:
        with pytest.raises(error_class) as traced:
            PROVIDER.client(server).chat.complete(model="m", messages=MESSAGES)
        with pytest.raises(error_class):
            PROVIDER.client(server).chat.stream(model="m", messages=MESSAGES)
    finally:
        registry.uninstrument()
    assert type(traced.value) is type(plain.value)
    assert str(traced.value) == str(plain.value)
    assert traced.value.status_code == status
    whole, streamed = model_spans(spans)
    for span in (whole, streamed):
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
    client.chat.complete(model="m", messages=MESSAGES)
    list(client.chat.stream(model="m", messages=MESSAGES))
    whole, streamed = model_spans(spans)
    for span in (whole, streamed):
        assert "Say hello" in span.attributes[semconv.GEN_AI_INPUT_MESSAGES]
        output = json.loads(span.attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
        assert output == [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Hello, world!"}],
                "finish_reason": "stop",
            }
        ]


INIT_CODE = """
client = Mistral(api_key="mistral-key-from-env", server_url=sys.argv[2])
messages = [{"role": "user", "content": "hi"}]
for event in client.chat.stream(model="mistral-small-latest", messages=messages):
    pass
"""


@pytest.mark.parametrize("imported", ["before init", "after init"])
def test_init_instruments_mistralai_imported_before_or_after_it(server, tmp_path, imported):
    """After init(), the registry's post-import hook sees ``mistralai.client`` load (the
    namespace package ``mistralai`` itself never fires one)."""
    server.configure(first_token_delay=0.1)
    importing = "from mistralai.client import Mistral"
    root, traces_file = run_init_app(
        tmp_path,
        "mistralai",
        INIT_CODE if imported == "before init" else importing + "\n" + INIT_CODE,
        mistral_server.url(server),
        before=importing if imported == "before init" else "",
    )
    written = traces_file.read_text()
    assert root.name == "chat mistral-small-latest"
    assert (
        '"gen_ai.provider.name"' in written and '"mistral_ai"' in written
    )  # not kept by the reader
    assert root.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert root.attributes[semconv.TIME_TO_FIRST_TOKEN] >= 0.1
    assert "mistral-key-from-env" not in written


def test_uninstrument_restores_the_client_methods(server, spans):
    from mistralai.client import chat, embeddings, fim

    originals = {
        (cls, name): cls.__dict__[name]
        for cls in (chat.Chat, fim.Fim, embeddings.Embeddings)
        for name in cls.__dict__
        if name in ("complete", "complete_async", "stream", "stream_async", "create")
    }
    assert registry.instrument(["mistralai"]) == ["mistralai"]
    assert all(hasattr(cls.__dict__[name], "__wrapped__") for cls, name in originals)
    registry.uninstrument(["mistralai"])
    assert all(cls.__dict__[name] is original for (cls, name), original in originals.items())
    PROVIDER.client(server).chat.complete(model="m", messages=MESSAGES)
    assert model_spans(spans) == []


# --- replay of the recorded exchanges ----------------------------------------------------------


def _expected(body: str, streamed: bool) -> dict[str, Any]:
    """Id, model, finish reasons and usage as Mistral sent them (read without llmtrace)."""
    if streamed:
        events = sse_events(body)
        last_usage = next(e["usage"] for e in reversed(events) if e.get("usage"))
        reasons = [c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]]
        first = events[0]
        return {
            "id": first["id"],
            "model": first["model"],
            "reasons": tuple(reasons),
            "usage": last_usage,
        }
    item = json.loads(body)
    return {
        "id": item["id"],
        "model": item["model"],
        "reasons": tuple(c["finish_reason"] for c in item.get("choices", [])),
        "usage": item["usage"],
    }


def _send(client: Mistral, uri: str, sent: dict[str, Any], is_async: bool) -> None:
    kwargs = {k: v for k, v in sent.items() if k != "stream"}
    if uri.endswith("/embeddings"):
        kwargs["inputs"] = kwargs.pop("input")
        if is_async:
            asyncio.run(client.embeddings.create_async(**kwargs))
        else:
            client.embeddings.create(**kwargs)
        return
    if sent.get("stream"):
        if is_async:

            async def consume() -> None:
                async for _event in await client.chat.stream_async(**kwargs):
                    pass

            asyncio.run(consume())
        else:
            list(client.chat.stream(**kwargs))
    elif is_async:
        asyncio.run(client.chat.complete_async(**kwargs))
    else:
        client.chat.complete(**kwargs)


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("path", PROVIDER.cassettes, ids=lambda path: path.stem)
def test_recorded_exchange(path: Path, model_server, spans):
    (interaction,) = cassette_interactions(path)
    request, response = interaction["request"], interaction["response"]
    sent = json.loads(request["body"])
    body = body_text(response["body"]["string"])
    streamed = request["uri"].endswith("#stream")
    expected = _expected(body, streamed)
    model_server.play_cassette(interaction, content_type="application/json")
    client = Mistral(api_key="k", server_url=model_server.url)
    _send(client, request["uri"], sent, path.stem.startswith("async_"))
    (served,) = model_server.requests
    # The fragment the SDK adds to a streaming path is not sent.
    assert served.path == request["uri"].split("api.mistral.ai", 1)[1].split("#", 1)[0]
    span = only_model_span(spans)
    a = span.attributes
    assert span.status.status_code == StatusCode.OK
    assert a[semconv.GEN_AI_PROVIDER_NAME] == "mistral_ai"
    assert a[semconv.GEN_AI_REQUEST_MODEL] == sent["model"]
    assert a[semconv.GEN_AI_RESPONSE_ID] == expected["id"]
    assert a[semconv.GEN_AI_RESPONSE_MODEL] == expected["model"]
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == expected["usage"]["prompt_tokens"]
    if "completion_tokens" in expected["usage"]:
        assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == expected["usage"]["completion_tokens"]
    else:
        assert semconv.GEN_AI_USAGE_OUTPUT_TOKENS not in a  # not reported, not written
    if expected["reasons"]:
        assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == expected["reasons"]
    if streamed:
        assert a[semconv.STREAM_END] == "completed"
        assert a[semconv.TIME_TO_FIRST_TOKEN] >= a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
    else:
        assert a[semconv.GEN_AI_REQUEST_MODEL] in span.name
