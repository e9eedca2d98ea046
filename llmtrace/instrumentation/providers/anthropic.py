"""``anthropic`` (2.x): one span per Messages API call.

Covers ``messages.create`` (sync, async, streaming), ``messages.stream(...)`` with
``text_stream``, ``get_final_message()`` and ``until_done()`` (the helper reads the same raw
event stream llmtrace wraps), ``messages.parse``, ``beta.messages`` and raw responses.

The SDK's own tracing: ``anthropic`` 2.x starts its own CLIENT span per API call
(``anthropic.messages.create``, scope ``com.anthropic.sdk.python``) whenever a tracer provider
is set. llmtrace suppresses that span for the calls it traces, so each call has exactly one model
span, llmtrace's, with the stage, TTFT and generation attributes the report needs. It does so
through the SDK's own hook: ``start_api_call_span`` returning None is the SDK's "no span for this
call" path, taken only while an llmtrace model call is in flight; every other SDK span (tool
runner, other endpoints) is left as it is. The trace context still reaches the server: the
``httpx2`` instrumentation injects the model span's ``traceparent``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace._checks import is_int
from llmtrace._urls import default_port
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.model_call import (
    Plan,
    base_url_of,
    field_of,
    fields_of,
    request_patches,
)
from llmtrace.instrumentation.provider import provider_name
from llmtrace.instrumentation.response_summary import ResponseSummary
from llmtrace.sdk import content
from llmtrace.sdk.gate import (
    capture_settings,
    current_model_call,
)
from llmtrace.sdk.streaming import StreamedText

logger = logging.getLogger(__name__)

PROVIDER = "anthropic"

_REQUEST_PARAMETERS: dict[str, str] = {
    "max_tokens": semconv.GEN_AI_REQUEST_MAX_TOKENS,
    "temperature": semconv.GEN_AI_REQUEST_TEMPERATURE,
    "top_p": semconv.GEN_AI_REQUEST_TOP_P,
}


def usage_attributes(usage: Any) -> dict[str, int]:
    attributes: dict[str, int] = {}
    for attribute, name in (
        (semconv.GEN_AI_USAGE_INPUT_TOKENS, "input_tokens"),
        (semconv.GEN_AI_USAGE_OUTPUT_TOKENS, "output_tokens"),
        (semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, "cache_read_input_tokens"),
        (semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, "cache_creation_input_tokens"),
    ):
        value = field_of(usage, name)
        if is_int(value):
            attributes[attribute] = value
    return attributes


def _record_message(
    span: Span, message: Any, attributes: dict[str, Any], output_budget: tuple[int, Any] | None
) -> None:
    summary = ResponseSummary()
    if message is None:
        summary.record(span, attributes)
        return
    message_id = field_of(message, "id")
    if isinstance(message_id, str):
        summary.response_id = message_id
    model = field_of(message, "model")
    if isinstance(model, str):
        summary.response_model = model
    stop_reason = field_of(message, "stop_reason")
    if isinstance(stop_reason, str):
        summary.finish_reasons = [stop_reason]
    summary.usage = usage_attributes(field_of(message, "usage"))
    if output_budget is not None:
        parts = block_parts(field_of(message, "content"))
        if parts:
            output = content.message("assistant", parts, stop_reason or "stop")
            summary.output = content.encode_messages([output], *output_budget)
    summary.record(span, attributes)


def block_parts(blocks: Any) -> list[dict[str, Any]]:
    """Parts of a Messages content (a string or a list of blocks: text, tool_use, tool_result,
    thinking; any other block is recorded as a text part of its JSON)."""
    if blocks is None or isinstance(blocks, str):
        return content.plain_parts(blocks)
    parts: list[dict[str, Any]] = []
    for block in blocks if isinstance(blocks, list | tuple) else (blocks,):
        kind = field_of(block, "type")
        if kind == "text":
            parts.append(content.text_part(field_of(block, "text") or ""))
        elif kind in ("tool_use", "server_tool_use"):
            parts.append(
                content.tool_call_part(
                    field_of(block, "id"), field_of(block, "name"), field_of(block, "input")
                )
            )
        elif kind == "tool_result":
            result = field_of(block, "content")
            if isinstance(result, list):
                result = [fields_of(item) for item in result]
            parts.append(content.tool_call_response_part(field_of(block, "tool_use_id"), result))
        elif kind == "thinking":
            parts.append(content.reasoning_part(field_of(block, "thinking") or ""))
        else:
            parts.extend(content.plain_parts([fields_of(block)]))
    return parts


class MessageEventParser(ResponseSummary):
    """Raw Messages stream events: deltas count as content; usage arrives at start and end."""

    __slots__ = ("_thinking", "stop_reason")

    def __init__(self, text_budget: int = 0, redact: Callable[[str], str] | None = None) -> None:
        ResponseSummary.__init__(
            self, StreamedText(text_budget, redact) if text_budget > 0 else None
        )
        self.stop_reason: str | None = None
        self.usage = {}
        self._thinking: list[str] = []

    def has_content(self, event: Any) -> bool:
        return getattr(event, "type", None) == "content_block_delta"

    def observe(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "content_block_delta":
            if self.text is not None:
                delta = event.delta
                delta_type = getattr(delta, "type", None)
                if delta_type == "input_json_delta":
                    self.text.add_tool_call(
                        event.index, None, None, getattr(delta, "partial_json", None)
                    )
                elif delta_type == "thinking_delta":
                    self._thinking.append(getattr(delta, "thinking", "") or "")
                elif self.text.bytes_left > 0:
                    self.text.add(getattr(delta, "text", None))
        elif kind == "content_block_start":
            block = getattr(event, "content_block", None)
            if self.text is not None and getattr(block, "type", None) == "tool_use":
                self.text.add_tool_call(
                    event.index, field_of(block, "id"), field_of(block, "name"), None
                )
        elif kind == "message_start":
            message = event.message
            self.response_id = message.id
            self.response_model = message.model
            self.usage.update(usage_attributes(message.usage))  # type: ignore[union-attr]
        elif kind == "message_delta":
            reason = getattr(event.delta, "stop_reason", None)
            if reason:
                self.stop_reason = reason
            # message_delta usage is cumulative: it replaces what message_start said.
            self.usage.update(usage_attributes(getattr(event, "usage", None)))  # type: ignore[union-attr]

    def finish(self, span: Span) -> None:
        self.response_id = self.response_id or None
        self.response_model = self.response_model or None
        if self.stop_reason:
            self.finish_reasons = [self.stop_reason]
        text = self.text
        if text is not None and (text.parts or text.tool_call_pieces or self._thinking):
            self.output = text.output_messages(
                finish_reason=self.stop_reason, reasoning="".join(self._thinking)
            )
        self.set_on(span)


def plan_request(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Plan | None:
    """Decide whether ``client.request(cast_to, options, ...)`` is a Messages call."""
    options = args[1] if len(args) > 1 else kwargs.get("options")
    if options is None:
        return None
    path = str(getattr(options, "url", "")).split("?", 1)[0].rstrip("/")
    if not path.endswith("/messages"):
        return None
    body = getattr(options, "json_data", None)
    if not isinstance(body, Mapping):
        body = {}
    model = body.get("model")
    stream = bool(kwargs.get("stream")) or body.get("stream") is True
    base_url = base_url_of(instance)
    port = base_url.port or default_port(base_url.scheme)
    host = base_url.host
    # A self-hosted Anthropic-compatible endpoint is still spoken to in Anthropic's protocol.
    provider = provider_name(host, port, base_url.path)
    attributes: dict[str, Any] = {
        semconv.STAGE: semconv.LLM_STAGE,
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
        semconv.GEN_AI_PROVIDER_NAME: PROVIDER if provider == "openai" else provider,
        semconv.SERVER_ADDRESS: host,
        semconv.SERVER_PORT: port,
        semconv.GEN_AI_REQUEST_STREAM: stream,
    }
    if isinstance(model, str):
        attributes[semconv.GEN_AI_REQUEST_MODEL] = model
    for name, attribute in _REQUEST_PARAMETERS.items():
        value = body.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attributes[attribute] = value
    stop = body.get("stop_sequences")
    if isinstance(stop, list) and all(isinstance(item, str) for item in stop):
        attributes[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] = stop
    capture, max_bytes, redact, _ = capture_settings()
    if capture and "messages" in body:
        messages = body["messages"]
        attributes[semconv.GEN_AI_INPUT_MESSAGES] = content.encode_messages(
            [
                content.message(
                    field_of(item, "role") or "user", block_parts(field_of(item, "content"))
                )
                for item in (messages if isinstance(messages, list | tuple) else ())
            ],
            max_bytes,
            redact,
        )
        system = body.get("system")
        if system is not None:
            attributes[semconv.GEN_AI_SYSTEM_INSTRUCTIONS] = content.encode_parts(
                block_parts(system), max_bytes, redact
            )
    output_budget = (max_bytes, redact) if capture else None
    text_budget = max_bytes if capture else 0
    return Plan(
        span_name=f"chat {model}" if model else "chat",
        attributes=attributes,
        parser_factory=lambda: MessageEventParser(text_budget, redact if capture else None),
        record_response=lambda span, message, attributes: _record_message(
            span, message, attributes, output_budget
        ),
    )


def _quiet_sdk_span(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """The SDK's own call span, except while llmtrace already traces the call."""
    if current_model_call() is not None:
        return None
    return wrapped(*args, **kwargs)


class AnthropicInstrumentor(LibraryInstrumentor):
    """Traces Messages API calls of ``anthropic.Anthropic`` / ``AsyncAnthropic``."""

    package = "anthropic"
    supported = ">= 0.43, < 3"

    def patches(self) -> Iterable[PatchRow]:
        yield from request_patches("anthropic", plan_request)
        # The SDK's own span for a call llmtrace traces is suppressed (one span per call).
        yield "anthropic._base_client", "start_api_call_span", _quiet_sdk_span
