"""Traced model calls through every client version llmtrace declares, from the lowest up.

The suite runs these on the versions installed in .venv (the newest); scripts/test_min_deps.sh
(``make test-min-deps``, run by test_packaging.py) runs them again on exactly the lower bounds in
pyproject.toml, so a declared lower bound is a tested one. Only calls every declared version has
are used: no Responses API, no ``stream_options`` argument (openai 1.0 has neither)."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

from llmtrace import semconv
from llmtrace.instrumentation import registry

MESSAGES = [{"role": "user", "content": "Say hello"}]


@pytest.fixture
def model_calls(spans) -> Iterator[object]:  # type: ignore[no-untyped-def]
    assert set(registry.instrument(["openai", "anthropic", "httpx", "httpx2"])) >= {
        "openai",
        "anthropic",
    }
    try:
        yield lambda: [
            s for s in spans.get_finished_spans() if semconv.GEN_AI_OPERATION_NAME in s.attributes
        ]
    finally:
        registry.uninstrument()


def _openai(model_server):  # type: ignore[no-untyped-def]
    return openai.OpenAI(base_url=model_server.base_url, api_key="sk-test", max_retries=0)


def _anthropic(model_server):  # type: ignore[no-untyped-def]
    return anthropic.Anthropic(base_url=model_server.url, api_key="sk-ant-test", max_retries=0)


def test_openai_chat_records_the_response_and_usage(model_server, model_calls):
    completion = _openai(model_server).chat.completions.create(
        model="gpt-test", messages=MESSAGES, max_tokens=20
    )
    (span,) = model_calls()
    assert span.name == "chat gpt-test"
    assert span.attributes[semconv.GEN_AI_RESPONSE_ID] == completion.id
    assert span.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert span.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)


def test_openai_stream_measures_first_token_and_reads_the_usage_chunk(model_server, model_calls):
    model_server.configure(first_token_delay=0.05, tokens=["a", "b", "c"])
    stream = _openai(model_server).chat.completions.create(
        model="gpt-test",
        messages=MESSAGES,
        stream=True,
        extra_body={"stream_options": {"include_usage": True}},
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "abc"
    (span,) = model_calls()
    assert span.attributes[semconv.GEN_AI_REQUEST_STREAM] is True
    assert span.attributes[semconv.TIME_TO_FIRST_TOKEN] >= 0.05
    assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 3


async def test_openai_async_chat_is_traced(model_server, model_calls):
    client = openai.AsyncOpenAI(base_url=model_server.base_url, api_key="sk-test", max_retries=0)
    await client.chat.completions.create(model="gpt-test", messages=MESSAGES)
    (span,) = model_calls()
    assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4


def test_anthropic_create_records_the_response_and_usage(model_server, model_calls):
    message = _anthropic(model_server).messages.create(
        model="claude-x", max_tokens=50, messages=MESSAGES
    )
    (span,) = model_calls()
    assert span.attributes[semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert span.attributes[semconv.GEN_AI_RESPONSE_ID] == message.id
    assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4


@pytest.mark.parametrize("how", ["create", "stream helper"])
def test_anthropic_streams_record_first_token_and_usage(model_server, model_calls, how):
    client = _anthropic(model_server)
    if how == "create":
        events = client.messages.create(
            model="claude-x", max_tokens=50, messages=MESSAGES, stream=True
        )
        assert [event.type for event in events][-1] == "message_stop"
    else:
        with client.messages.stream(model="claude-x", max_tokens=50, messages=MESSAGES) as stream:
            assert "".join(stream.text_stream) == "Hello, world!"
    (span,) = model_calls()
    assert span.attributes[semconv.GEN_AI_REQUEST_STREAM] is True
    assert span.attributes[semconv.TIME_TO_FIRST_TOKEN] > 0
    assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
