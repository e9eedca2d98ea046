"""``content_max_bytes`` is a budget in bytes of UTF-8 for each captured part, and 0 captures
nothing, streamed or not."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

import llmtrace
from llmtrace import semconv
from llmtrace.instrumentation import registry
from tests.instrumentation.conftest import CLIENT_LIBRARIES, model_spans

# Three bytes of UTF-8 per character: a character budget would let three times too much through.
TOKENS = ["日本", "語の", "文章", "です", "。" * 40]
MESSAGES = [{"role": "user", "content": "長い質問" * 50}]
CONTENT = (semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES)


@pytest.fixture
def budget(request: pytest.FixtureRequest) -> Iterator[int]:
    llmtrace.init(
        exporter="none", instrument=False, capture_content=True, content_max_bytes=request.param
    )
    registry.instrument(CLIENT_LIBRARIES)
    try:
        yield request.param
    finally:
        llmtrace.shutdown()
        registry.uninstrument()


def _call(model_server: object, stream: bool) -> str:
    model_server.configure(tokens=TOKENS)  # type: ignore[attr-defined]
    client = openai.OpenAI(base_url=model_server.base_url, api_key="k", max_retries=0)  # type: ignore[attr-defined]
    result = client.chat.completions.create(model="m", messages=MESSAGES, stream=stream)
    if stream:
        return "".join(c.choices[0].delta.content or "" for c in result if c.choices)
    return result.choices[0].message.content or ""


@pytest.mark.parametrize("budget", [64], indirect=True)
@pytest.mark.parametrize("stream", [False, True])
def test_content_is_cut_to_the_byte_budget(model_server, spans, budget, stream):
    assert _call(model_server, stream) == "".join(TOKENS)  # the caller's result is whole
    (span,) = model_spans(spans)
    for key in CONTENT:
        (message,) = json.loads(span.attributes[key])  # cut per part, the JSON stays whole
        (part,) = message["parts"]
        assert 0 < len(part["content"].encode("utf-8")) <= budget, (key, part)
        assert part["llmtrace.truncated"] is True


@pytest.mark.parametrize("budget", [0], indirect=True)
@pytest.mark.parametrize("stream", [False, True])
def test_a_zero_budget_captures_nothing(model_server, spans, budget, stream):
    assert _call(model_server, stream) == "".join(TOKENS)
    (span,) = model_spans(spans)
    for key in CONTENT:
        assert key not in span.attributes, key
