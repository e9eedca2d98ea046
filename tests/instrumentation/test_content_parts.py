"""Captured content follows the GenAI conventions' message-parts shape, tool calls included, for
the real OpenAI and Anthropic clients over HTTP; each part is cut to the byte budget and the
attribute stays valid JSON; each capture mode puts the content where its name says."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

import llmtrace
from llmtrace import semconv
from llmtrace.errors import ConfigError
from llmtrace.instrumentation import registry
from llmtrace.options import Settings, from_environment
from llmtrace.sdk import content
from tests.instrumentation.conftest import CLIENT_LIBRARIES, model_spans

CONTENT = (
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
)
ROLES = {"system", "user", "assistant", "tool"}
PART_TYPES = {"text", "tool_call", "tool_call_response", "reasoning"}
TOOL_CALL = ("call_1", "get_weather", json.dumps({"city": "Paris", "unit": "celsius"}))

OPENAI_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "18C, clear"},
]
ANTHROPIC_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_0", "name": "get_weather", "input": {"city": "Paris"}}
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_0", "content": "18C, clear"}],
    },
]


def _capture(mode: bool | str = True, max_bytes: int | None = None) -> Iterator[None]:
    llmtrace.init(
        exporter="none",
        instrument=False,
        capture_content=mode,
        content_max_bytes=max_bytes,
    )
    registry.instrument(CLIENT_LIBRARIES)
    try:
        yield
    finally:
        llmtrace.shutdown()
        registry.uninstrument()


@pytest.fixture
def capture(request: pytest.FixtureRequest) -> Iterator[None]:
    yield from _capture(getattr(request, "param", True))


@pytest.fixture
def small_budget() -> Iterator[None]:
    yield from _capture(True, 64)


def assert_messages_shape(value: str, output: bool = False) -> list[dict[str, Any]]:
    """The attribute is JSON of messages, each with a known role and parts of known types."""
    messages = json.loads(value)
    assert isinstance(messages, list) and messages
    for message in messages:
        assert message["role"] in ROLES, message
        assert isinstance(message["parts"], list), message
        for part in message["parts"]:
            assert part["type"] in PART_TYPES, part
            if part["type"] in ("text", "reasoning"):
                assert isinstance(part["content"], str)
            elif part["type"] == "tool_call":
                assert {"id", "name", "arguments"} <= part.keys()
            else:
                assert {"id", "response"} <= part.keys()
        if output:
            assert message["role"] == "assistant" and isinstance(message["finish_reason"], str)
    return messages


def _tool_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [part for m in messages for part in m["parts"] if part["type"] == "tool_call"]


def _openai_chat(model_server: Any, stream: bool, messages: Any = None) -> None:
    client = openai.OpenAI(base_url=model_server.base_url, api_key="k", max_retries=0)
    result = client.chat.completions.create(
        model="m", messages=messages or OPENAI_MESSAGES, stream=stream
    )
    if stream:
        list(result)


def _anthropic(model_server: Any, stream: bool, **extra: Any) -> None:
    client = anthropic.Anthropic(base_url=model_server.url, api_key="k", max_retries=0)
    result = client.messages.create(
        model="c", max_tokens=20, messages=extra.pop("messages", ANTHROPIC_MESSAGES), stream=stream
    )
    if stream:
        list(result)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_chat_messages_are_parts_with_tool_calls(model_server, spans, capture, stream):
    model_server.configure(tool_use=TOOL_CALL)
    _openai_chat(model_server, stream)
    (span,) = model_spans(spans)
    inputs = assert_messages_shape(span.attributes[semconv.GEN_AI_INPUT_MESSAGES])
    assert [m["role"] for m in inputs] == ["system", "user", "assistant", "tool"]
    assert inputs[0]["parts"] == [{"type": "text", "content": "Be brief."}]
    assert _tool_calls(inputs) == [
        {"type": "tool_call", "id": "call_0", "name": "get_weather", "arguments": {"city": "Paris"}}
    ]
    assert inputs[3]["parts"] == [
        {"type": "tool_call_response", "id": "call_0", "response": "18C, clear"}
    ]
    (output,) = assert_messages_shape(span.attributes[semconv.GEN_AI_OUTPUT_MESSAGES], output=True)
    assert output["finish_reason"] == "tool_calls"
    assert output["parts"][0] == {"type": "text", "content": "Hello, world!"}
    assert _tool_calls([output]) == [
        {
            "type": "tool_call",
            "id": "call_1",
            "name": "get_weather",
            "arguments": {"city": "Paris", "unit": "celsius"},
        }
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages_are_parts_with_tool_use(model_server, spans, capture, stream):
    model_server.configure(tool_use=TOOL_CALL)
    client = anthropic.Anthropic(base_url=model_server.url, api_key="k", max_retries=0)
    result = client.messages.create(
        model="c",
        max_tokens=20,
        system=[{"type": "text", "text": "Be brief."}],
        messages=ANTHROPIC_MESSAGES,
        stream=stream,
    )
    if stream:
        list(result)
    (span,) = model_spans(spans)
    assert json.loads(span.attributes[semconv.GEN_AI_SYSTEM_INSTRUCTIONS]) == [
        {"type": "text", "content": "Be brief."}
    ]
    inputs = assert_messages_shape(span.attributes[semconv.GEN_AI_INPUT_MESSAGES])
    assert _tool_calls(inputs) == [
        {
            "type": "tool_call",
            "id": "toolu_0",
            "name": "get_weather",
            "arguments": {"city": "Paris"},
        }
    ]
    assert inputs[2]["parts"] == [
        {"type": "tool_call_response", "id": "toolu_0", "response": "18C, clear"}
    ]
    (output,) = assert_messages_shape(span.attributes[semconv.GEN_AI_OUTPUT_MESSAGES], output=True)
    assert output["finish_reason"] == "tool_use"
    assert output["parts"][0] == {"type": "text", "content": "Hello, world!"}
    assert _tool_calls([output]) == [
        {
            "type": "tool_call",
            "id": "call_1",
            "name": "get_weather",
            "arguments": {"city": "Paris", "unit": "celsius"},
        }
    ]


def test_openai_responses_input_and_output_are_parts(model_server, spans, capture):
    client = openai.OpenAI(base_url=model_server.base_url, api_key="k", max_retries=0)
    client.responses.create(model="m", instructions="Be brief.", input="Say hello")
    (span,) = model_spans(spans)
    assert json.loads(span.attributes[semconv.GEN_AI_SYSTEM_INSTRUCTIONS]) == [
        {"type": "text", "content": "Be brief."}
    ]
    (message,) = assert_messages_shape(span.attributes[semconv.GEN_AI_INPUT_MESSAGES])
    assert message == {"role": "user", "parts": [{"type": "text", "content": "Say hello"}]}
    (output,) = assert_messages_shape(span.attributes[semconv.GEN_AI_OUTPUT_MESSAGES], output=True)
    assert output["parts"] == [{"type": "text", "content": "Hello, world!"}]


def _assert_parts_within(value: str, max_bytes: int) -> list[dict[str, Any]]:
    """Valid JSON whose every part's text fits the budget; a cut part says it was cut."""
    messages = json.loads(value)
    for message in messages:
        for part in message["parts"]:
            for key in ("content", "arguments", "response"):
                if isinstance(part.get(key), str):
                    assert len(part[key].encode("utf-8")) <= max_bytes, part
    return messages


@pytest.mark.parametrize("stream", [False, True])
def test_each_part_is_cut_on_a_character_and_the_json_stays_valid(
    model_server, spans, small_budget, stream
):
    huge_arguments = json.dumps({"text": "引数" * 500}, ensure_ascii=False)
    model_server.configure(
        tokens=["日本語の", "文章", "です" * 40], tool_use=("c", "f", huge_arguments)
    )
    many = [{"role": "user", "content": f"質問 {i} " + "長い" * 40} for i in range(30)]
    _openai_chat(model_server, stream, many)
    (span,) = model_spans(spans)
    inputs = _assert_parts_within(span.attributes[semconv.GEN_AI_INPUT_MESSAGES], 64)
    assert len(inputs) == 30  # every message is kept, each part cut on its own
    assert all(m["parts"][0][content.TRUNCATED] is True for m in inputs)
    assert inputs[7]["parts"][0]["content"].startswith("質問 7 長い")
    (output,) = _assert_parts_within(span.attributes[semconv.GEN_AI_OUTPUT_MESSAGES], 64)
    text, call = output["parts"]
    assert text[content.TRUNCATED] is True and "日本語の文章です".startswith(text["content"][:8])
    # Arguments too large are recorded as the cut text of their JSON.
    assert call["type"] == "tool_call" and call[content.TRUNCATED] is True
    assert huge_arguments.startswith(call["arguments"])


def test_parts_within_the_budget_are_not_marked(model_server, spans, small_budget):
    _anthropic(model_server, False, messages=[{"role": "user", "content": "Say hello"}])
    (span,) = model_spans(spans)
    for key in (semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES):
        for message in json.loads(span.attributes[key]):
            assert all(content.TRUNCATED not in part for part in message["parts"])


def test_redaction_sees_each_part_and_cannot_break_the_json():
    encoded = content.encode_messages(
        [content.message("user", [content.text_part('say "hi"'), content.text_part("x")])],
        100,
        lambda text: text + '"]}',  # a hook that would break JSON if it saw the whole attribute
    )
    (message,) = json.loads(encoded)
    assert [p["content"] for p in message["parts"]] == ['say "hi""]}', 'x"]}']


def _content_events(span: Any) -> list[Any]:
    return [event for event in span.events if event.name == content.CONTENT_EVENT]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("capture", ["span_only", "SPAN_ONLY", True], indirect=True)
def test_span_only_puts_content_on_the_span_only(model_server, spans, capture, stream):
    _anthropic(model_server, stream)
    (span,) = model_spans(spans)
    assert semconv.GEN_AI_INPUT_MESSAGES in span.attributes
    assert semconv.GEN_AI_OUTPUT_MESSAGES in span.attributes
    assert _content_events(span) == []


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("capture", ["event_only", "Event_Only"], indirect=True)
def test_event_only_puts_nothing_on_the_span(model_server, spans, capture, stream):
    _openai_chat(model_server, stream)
    (span,) = model_spans(spans)
    assert not any(key in span.attributes for key in CONTENT)
    (event,) = _content_events(span)
    assert_messages_shape(event.attributes[semconv.GEN_AI_INPUT_MESSAGES])
    assert_messages_shape(event.attributes[semconv.GEN_AI_OUTPUT_MESSAGES], output=True)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("capture", ["span_and_event"], indirect=True)
def test_span_and_event_records_content_in_both(model_server, spans, capture, stream):
    _anthropic(model_server, stream)
    (span,) = model_spans(spans)
    (event,) = _content_events(span)
    for key in (semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES):
        assert event.attributes[key] == span.attributes[key]


@pytest.mark.parametrize("capture", [False, "no_content"], indirect=True)
def test_no_content_records_none(model_server, spans, capture):
    _openai_chat(model_server, False)
    (span,) = model_spans(spans)
    assert not any(key in span.attributes for key in CONTENT)
    assert _content_events(span) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", (True, "span_only")),
        ("SPAN_ONLY", (True, "span_only")),
        ("event_only", (True, "event_only")),
        ("Span_And_Event", (True, "span_and_event")),
        ("NO_CONTENT", (False, "span_only")),
        ("false", (False, "span_only")),
    ],
)
def test_the_environment_variable_takes_util_genai_modes(monkeypatch, value, expected):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value)
    settings = from_environment(Settings())
    assert (settings.capture_content, settings.capture_mode) == expected


def test_an_unknown_mode_is_a_config_error(monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "spans_please")
    with pytest.raises(ConfigError, match="event_only"):
        from_environment(Settings())


@pytest.mark.parametrize("capture", ["event_only"], indirect=True)
def test_a_failed_call_still_records_its_input_in_the_event(model_server, spans, capture):
    model_server.configure(status=500)
    with pytest.raises(openai.InternalServerError):
        _openai_chat(model_server, False)
    (span,) = model_spans(spans)
    assert not any(key in span.attributes for key in CONTENT)
    (event,) = _content_events(span)
    assert_messages_shape(event.attributes[semconv.GEN_AI_INPUT_MESSAGES])
    assert semconv.GEN_AI_OUTPUT_MESSAGES not in event.attributes
