"""What the instrumentations that wrap an SDK's public methods share (``mistralai``, ``cohere``).

Those SDKs are generated (Speakeasy, Fern) with one public method per API call and keyword
arguments only: a planner reads the call's keyword arguments, the span starts with the same
attributes for every provider (:func:`call_attributes`), and :func:`make_plan` says how the
response and the stream are recorded. The wrappers themselves are
:func:`llmtrace.instrumentation.model_call.make_request_wrappers`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace._urls import server_of
from llmtrace.instrumentation.chat_format import as_tool_call_part, messages_of
from llmtrace.instrumentation.model_call import Plan
from llmtrace.sdk import content
from llmtrace.sdk.gate import capture_settings
from llmtrace.sdk.streaming import ChunkParser

# (span, whole response or None, attributes gathered, output budget or None)
ResponseRecorder = Callable[[Span, Any, dict[str, Any], tuple[int, Any] | None], None]
# (text budget in bytes, 0 when content is not captured; redaction hook) -> a stream's parser
ParserFactory = Callable[[int, Callable[[str], str] | None], ChunkParser]


def is_number(value: Any) -> bool:
    """An int or float that is not a bool (an SDK's "unset" sentinel is neither)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def reason_text(value: Any) -> str | None:
    """A finish reason as the provider sent it (an SDK enum's value), or None when absent."""
    if value is None or value == "":
        return None
    return value if value.__class__ is str else str(getattr(value, "value", value))


def call_attributes(
    operation: str, stage: str, provider: str, base_url: str, model: Any, streamed: bool | None
) -> dict[str, Any]:
    """A model call's attributes known at its start. ``streamed`` None: the operation never
    streams (embeddings, rerank), and ``gen_ai.request.stream`` is left out."""
    host, port = server_of(base_url)
    attributes: dict[str, Any] = {
        semconv.STAGE: stage,
        semconv.GEN_AI_OPERATION_NAME: operation,
        semconv.GEN_AI_PROVIDER_NAME: provider,
        semconv.SERVER_ADDRESS: host,
        semconv.SERVER_PORT: port,
    }
    if streamed is not None:
        attributes[semconv.GEN_AI_REQUEST_STREAM] = streamed
    if isinstance(model, str):
        attributes[semconv.GEN_AI_REQUEST_MODEL] = model
    return attributes


def numeric_parameters(kwargs: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """The numeric keyword arguments named in ``names`` (argument -> attribute) that were set."""
    attributes: dict[str, Any] = {}
    for name, attribute in names.items():
        value = kwargs.get(name)
        if is_number(value):
            attributes[attribute] = value
    return attributes


def make_plan(
    operation: str,
    model: Any,
    attributes: dict[str, Any],
    input_content: Any,
    parser_factory: ParserFactory,
    record_response: ResponseRecorder,
    system: Any = None,
) -> Plan:
    """The plan of one call; with content capture on, ``input_content`` (and ``system``) are
    recorded now and the output by ``record_response`` or the stream's parser."""
    capture, max_bytes, redact, _ = capture_settings()
    if not capture:
        return Plan(
            span_name=f"{operation} {model}" if isinstance(model, str) and model else operation,
            attributes=attributes,
            parser_factory=lambda: parser_factory(0, None),
            record_response=lambda span, response, gathered: record_response(
                span, response, gathered, None
            ),
        )
    if input_content is not None:
        attributes[semconv.GEN_AI_INPUT_MESSAGES] = content.encode_messages(
            messages_of(input_content), max_bytes, redact
        )
    if isinstance(system, str):
        attributes[semconv.GEN_AI_SYSTEM_INSTRUCTIONS] = content.encode_parts(
            [content.text_part(system)], max_bytes, redact
        )
    budget = (max_bytes, redact)
    return Plan(
        span_name=f"{operation} {model}" if isinstance(model, str) and model else operation,
        attributes=attributes,
        parser_factory=lambda: parser_factory(max_bytes, redact),
        record_response=lambda span, response, gathered: record_response(
            span, response, gathered, budget
        ),
    )


def output_messages(
    text: str,
    budget: tuple[int, Any],
    tool_calls: list[Any] | None = None,
    finish_reason: Any = None,
) -> str:
    """``gen_ai.output.messages`` of one assistant answer (tool calls in any shape
    :func:`~llmtrace.instrumentation.chat_format.as_tool_call_part` takes), each part redacted
    and within the budget."""
    parts = [as_tool_call_part(call) for call in tool_calls or ()]
    return content.encode_messages([content.output_message(text, parts, finish_reason)], *budget)
