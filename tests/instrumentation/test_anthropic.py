"""The Anthropic instrumentation against the real ``anthropic`` client over real HTTP."""

from __future__ import annotations

import anthropic
import pytest
from opentelemetry.trace import StatusCode

from llmtrace import semconv
from tests.instrumentation.conftest import model_spans

pytestmark = pytest.mark.usefixtures("instrumented")

MESSAGES = [{"role": "user", "content": "Say hello"}]


def _client(model_server):  # type: ignore[no-untyped-def]
    return anthropic.Anthropic(base_url=model_server.url, api_key="sk-ant-secret", max_retries=0)


def test_create_records_usage_and_exactly_one_span_despite_sdk_tracing(model_server, spans):
    # A global SDK provider is set (root conftest), so the SDK would make its own span too.
    message = _client(model_server).messages.create(
        model="claude-x", max_tokens=50, messages=MESSAGES
    )
    assert len(spans.get_finished_spans()) == 1
    (span,) = model_spans(spans)
    a = span.attributes
    assert span.instrumentation_scope.name == "llmtrace"
    assert a[semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert a[semconv.GEN_AI_RESPONSE_ID] == message.id
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert a[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 50
    assert model_server.requests[-1].headers["traceparent"].split("-")[2] == format(
        span.context.span_id, "016x"
    )


def test_sdk_span_comes_back_after_uninstrument(model_server, spans, instrumented):
    from llmtrace.instrumentation import registry

    registry.uninstrument()
    _client(model_server).messages.create(model="claude-x", max_tokens=5, messages=MESSAGES)
    (span,) = spans.get_finished_spans()
    assert span.instrumentation_scope.name == "com.anthropic.sdk.python"


def test_stream_create_measures_ttft(model_server, spans):
    model_server.configure(first_token_delay=0.05, token_delay=0.01)
    events = list(
        _client(model_server).messages.create(
            model="claude-x", max_tokens=50, messages=MESSAGES, stream=True
        )
    )
    (span,) = model_spans(spans)
    a = span.attributes
    assert a[semconv.CHUNK_COUNT] == len(events)
    assert a[semconv.TIME_TO_FIRST_TOKEN] >= 0.05
    assert a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] < a[semconv.TIME_TO_FIRST_TOKEN]
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)


@pytest.mark.parametrize("how", ["text_stream", "get_final_message", "until_done"])
def test_messages_stream_helper(model_server, spans, how):
    with _client(model_server).messages.stream(
        model="claude-x", max_tokens=50, messages=MESSAGES
    ) as stream:
        if how == "text_stream":
            assert "".join(stream.text_stream) == "Hello, world!"
        elif how == "get_final_message":
            assert stream.get_final_message().usage.output_tokens == 4
        else:
            stream.until_done()
    assert len(spans.get_finished_spans()) == 1
    (span,) = model_spans(spans)
    assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert span.attributes[semconv.TIME_TO_FIRST_TOKEN] > 0
    assert span.attributes[semconv.STREAM_END] in ("completed", "closed")


async def test_async_create_and_stream(model_server, spans):
    client = anthropic.AsyncAnthropic(base_url=model_server.url, api_key="k", max_retries=0)
    await client.messages.create(model="claude-x", max_tokens=5, messages=MESSAGES)
    async with client.messages.stream(model="claude-x", max_tokens=5, messages=MESSAGES) as stream:
        text = "".join([t async for t in stream.text_stream])
    assert text == "Hello, world!"
    whole, streamed = sorted(model_spans(spans), key=lambda s: s.start_time)
    assert len(spans.get_finished_spans()) == 2
    assert whole.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert streamed.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4


def test_error_status_marks_span(model_server, spans):
    model_server.configure(status=500)
    with pytest.raises(anthropic.InternalServerError):
        _client(model_server).messages.create(model="claude-x", max_tokens=5, messages=MESSAGES)
    (span,) = model_spans(spans)
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == "InternalServerError"
