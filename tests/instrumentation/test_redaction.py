"""The redaction hook sees every captured content, streamed output included, before it is set."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

import llmtrace
from llmtrace import semconv
from llmtrace.instrumentation import registry
from tests.instrumentation.conftest import CLIENT_LIBRARIES, model_spans

MESSAGES = [{"role": "user", "content": "Say hello"}]


@pytest.fixture
def capture_with_redaction() -> Iterator[None]:
    llmtrace.init(
        exporter="none",
        instrument=False,
        capture_content=True,
        redact=lambda text: text.replace("world", "[redacted]").replace("hello", "[redacted]"),
    )
    registry.instrument(CLIENT_LIBRARIES)
    try:
        yield
    finally:
        llmtrace.shutdown()
        registry.uninstrument()


@pytest.mark.parametrize("stream", [False, True])
def test_openai_output_is_redacted(model_server, spans, capture_with_redaction, stream):
    client = openai.OpenAI(base_url=model_server.base_url, api_key="k", max_retries=0)
    result = client.chat.completions.create(model="m", messages=MESSAGES, stream=stream)
    text = (
        "".join(c.choices[0].delta.content or "" for c in result if c.choices)
        if stream
        else result.choices[0].message.content
    )
    assert text == "Hello, world!"  # the caller's result is untouched
    (span,) = model_spans(spans)
    output = span.attributes[semconv.GEN_AI_OUTPUT_MESSAGES]
    assert "[redacted]" in output and "world" not in output
    assert "hello" not in span.attributes[semconv.GEN_AI_INPUT_MESSAGES]


def test_anthropic_streamed_output_is_redacted(model_server, spans, capture_with_redaction):
    client = anthropic.Anthropic(base_url=model_server.url, api_key="k", max_retries=0)
    list(client.messages.create(model="c", max_tokens=20, messages=MESSAGES, stream=True))
    (span,) = model_spans(spans)
    output = span.attributes[semconv.GEN_AI_OUTPUT_MESSAGES]
    assert "[redacted]" in output and "world" not in output
