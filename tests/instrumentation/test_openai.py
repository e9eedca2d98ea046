"""The OpenAI instrumentation against the real ``openai`` client over real HTTP (simulated server)."""

from __future__ import annotations

import openai
import pytest
from opentelemetry.trace import StatusCode

from llmtrace import semconv
from tests.instrumentation.conftest import model_spans

pytestmark = pytest.mark.usefixtures("instrumented")


def _client(model_server, **kwargs):  # type: ignore[no-untyped-def]
    return openai.OpenAI(base_url=model_server.base_url, api_key="sk-test-secret", max_retries=0, **kwargs)


def _async_client(model_server, **kwargs):  # type: ignore[no-untyped-def]
    return openai.AsyncOpenAI(base_url=model_server.base_url, api_key="sk-test-secret", max_retries=0, **kwargs)


MESSAGES = [{"role": "user", "content": "Say hello"}]


def test_chat_completion_records_request_response_and_usage(model_server, spans):
    completion = _client(model_server).chat.completions.create(
        model="gpt-test", messages=MESSAGES, max_tokens=20, temperature=0.5
    )
    assert completion.choices[0].message.content == "Hello, world!"
    (span,) = model_spans(spans)
    a = span.attributes
    assert span.name == "chat gpt-test"
    assert a[semconv.STAGE] == "ttft"
    assert a[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert a[semconv.GEN_AI_REQUEST_MODEL] == "gpt-test"
    assert a[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 20
    assert a[semconv.GEN_AI_REQUEST_TEMPERATURE] == 0.5
    assert a[semconv.GEN_AI_RESPONSE_MODEL] == "sim-model-1"
    assert a[semconv.GEN_AI_RESPONSE_ID] == completion.id
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert a[semconv.SERVER_ADDRESS] == "127.0.0.1"
    assert a[semconv.SERVER_PORT] == model_server.port
    assert a[semconv.GEN_AI_REQUEST_STREAM] is False
    assert semconv.TIME_TO_HEADERS in a
    assert span.status.status_code == StatusCode.OK
    assert semconv.GEN_AI_INPUT_MESSAGES not in a


def test_streamed_chat_measures_ttft_and_generation(model_server, spans):
    model_server.configure(first_token_delay=0.05, token_delay=0.01, tokens=["a", "b", "c"])
    stream = _client(model_server).chat.completions.create(
        model="gpt-test", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert len(chunks) == 6  # role, 3 content, finish, usage
    (span,) = model_spans(spans)
    a = span.attributes
    assert a[semconv.GEN_AI_REQUEST_STREAM] is True
    assert a[semconv.TIME_TO_FIRST_TOKEN] >= 0.05
    assert a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] < a[semconv.TIME_TO_FIRST_TOKEN]
    assert a[semconv.GENERATION_TIME] >= 0.02
    assert a[semconv.CHUNK_COUNT] == 6
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert a[semconv.OUTPUT_TOKENS_PER_SECOND] > 0
    assert a[semconv.STREAM_END] == "completed"
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)


def test_traceparent_of_the_model_span_reaches_the_server(model_server, spans):
    _client(model_server).chat.completions.create(model="m", messages=MESSAGES)
    (span,) = model_spans(spans)
    traceparent = model_server.requests[-1].headers["traceparent"]
    assert traceparent.split("-")[1] == format(span.context.trace_id, "032x")
    assert traceparent.split("-")[2] == format(span.context.span_id, "016x")
    # No HTTP span is added under the model span: its phases are on the model span.
    assert len(spans.get_finished_spans()) == 1
    assert semconv.HTTP_RESPONSE_HEADERS in span.attributes
