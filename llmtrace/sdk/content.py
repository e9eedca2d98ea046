"""Captured message content in the GenAI conventions' message-parts shape (opt-in).

Every provider maps its own message objects to the parts built here, and every captured
``gen_ai.input.messages``, ``gen_ai.output.messages`` and ``gen_ai.system_instructions`` is
encoded by :func:`encode_messages` / :func:`encode_parts`, so that one rule holds for all:

- a message is ``{"role": ..., "parts": [...]}`` (an output message adds ``finish_reason``);
  a part is ``{"type": "text", "content"}``, ``{"type": "tool_call", "id", "name",
  "arguments"}``, ``{"type": "tool_call_response", "id", "response"}``, or
  ``{"type": "reasoning", "content"}``;
- the ``redact`` hook sees each part's text (text and reasoning content, tool-call arguments and
  tool responses as JSON text) before anything is recorded;
- ``content_max_bytes`` bounds each part's text, cut on a UTF-8 boundary with nothing appended;
  a part that was cut says so with ``"llmtrace.truncated": true`` (the conventions have no
  standard marker), and tool-call arguments or a response too large are recorded as the cut text
  of their JSON. The encoded attribute is always valid JSON.

Where the recorded content goes (span attributes, a span event, or both) is decided once, by
:func:`set_call_attributes` and :func:`start_content`, from the capture mode.
"""

from __future__ import annotations

import contextlib
import json
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace.options import settings

Redact = Callable[[str], str] | None

TRUNCATED = "llmtrace.truncated"
"""The key a part carries (``true``) when its text was cut to the byte budget."""

CONTENT_EVENT = "gen_ai.client.inference.operation.details"
"""The span event that carries the content in the ``event_only`` and ``span_and_event`` modes."""

RETRIEVAL_CONTENT_EVENT = "llmtrace.retrieval.details"
"""The span event that carries a retrieval's query text and documents in those modes (the GenAI
conventions define an event for inference only; this one keeps their attribute names)."""

CONTENT_ATTRIBUTES = (
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
)


def text_part(content: Any) -> dict[str, Any]:
    return {"type": "text", "content": content if isinstance(content, str) else str(content)}


def reasoning_part(content: Any) -> dict[str, Any]:
    return {"type": "reasoning", "content": content if isinstance(content, str) else str(content)}


def tool_call_part(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """A tool call; ``arguments`` given as JSON text (OpenAI's way) are recorded as the object."""
    return {
        "type": "tool_call",
        "id": call_id if call_id is None or isinstance(call_id, str) else str(call_id),
        "name": name if isinstance(name, str) else str(name),
        "arguments": _parsed(arguments),
    }


def tool_call_response_part(call_id: Any, response: Any) -> dict[str, Any]:
    return {
        "type": "tool_call_response",
        "id": call_id if call_id is None or isinstance(call_id, str) else str(call_id),
        "response": response,
    }


def message(role: Any, parts: list[dict[str, Any]], finish_reason: Any = None) -> dict[str, Any]:
    """One message; ``finish_reason`` is given for output messages only."""
    built: dict[str, Any] = {"role": role if isinstance(role, str) else str(role), "parts": parts}
    if finish_reason is not None:
        built["finish_reason"] = (
            finish_reason if isinstance(finish_reason, str) else str(finish_reason)
        )
    return built


def output_message(
    text: str = "",
    tool_calls: Iterable[dict[str, Any]] = (),
    finish_reason: Any = None,
    reasoning: str = "",
) -> dict[str, Any]:
    """The assistant's answer: reasoning, text and tool-call parts, in that order."""
    parts: list[dict[str, Any]] = []
    if reasoning:
        parts.append(reasoning_part(reasoning))
    if text:
        parts.append(text_part(text))
    parts.extend(tool_calls)
    return message("assistant", parts, finish_reason if finish_reason is not None else "stop")


def _parsed(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _cut(text: str, max_bytes: int) -> tuple[str, bool]:
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text, False
    # Cutting inside a character leaves a partial sequence at the end only: dropped.
    return encoded[:max_bytes].decode("utf-8", errors="ignore"), True


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def bounded_part(part: Mapping[str, Any], max_bytes: int, redact: Redact) -> dict[str, Any]:
    """``part`` as recorded: its text redacted, then cut to ``max_bytes`` (see the module)."""
    bounded = dict(part)
    for key in ("content", "arguments", "response"):
        if key not in bounded or bounded[key] is None:
            continue
        value = bounded[key]
        text = _as_text(value)
        if redact is not None:
            redacted = redact(text)
            if redacted != text:
                text, value = (
                    redacted,
                    _parsed(redacted) if not isinstance(value, str) else redacted,
                )
        cut, truncated = _cut(text, max_bytes)
        if truncated:
            bounded[key] = cut
            bounded[TRUNCATED] = True
        else:
            bounded[key] = value
    return bounded


def encode_parts(parts: Iterable[Mapping[str, Any]], max_bytes: int, redact: Redact) -> str:
    """``gen_ai.system_instructions``: a JSON list of parts, each bounded (see the module)."""
    return json.dumps(
        [bounded_part(part, max_bytes, redact) for part in parts], default=str, ensure_ascii=False
    )


def encode_messages(messages: Iterable[Mapping[str, Any]], max_bytes: int, redact: Redact) -> str:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages``: a JSON list of messages whose
    every part is bounded (see the module); always valid JSON."""
    encoded = []
    for item in messages:
        copy = dict(item)
        copy["parts"] = [bounded_part(part, max_bytes, redact) for part in item.get("parts", ())]
        encoded.append(copy)
    return json.dumps(encoded, default=str, ensure_ascii=False)


def plain_parts(content: Any) -> list[dict[str, Any]]:
    """Parts of content that is a string or a list of text-like blocks (``{"text": ...}`` or
    ``{"type": "text", ...}``); any other block is recorded as a text part of its JSON."""
    if content is None:
        return []
    if isinstance(content, str):
        return [text_part(content)] if content else []
    if not isinstance(content, list | tuple):
        return [text_part(_as_text(content))]
    parts = []
    for block in content:
        text = block.get("text") if isinstance(block, Mapping) else None
        if isinstance(text, str):
            parts.append(text_part(text))
        elif isinstance(block, str):
            parts.append(text_part(block))
        else:
            parts.append(text_part(_as_text(block)))
    return parts


# Where content goes. "span_only": span attributes; "event_only": one span event named
# CONTENT_EVENT at the end of the call; "span_and_event": both.
_MODES_WITH_SPAN = frozenset(("span_only", "span_and_event"))
_MODES_WITH_EVENT = frozenset(("event_only", "span_and_event"))

# Input content of calls in flight, for the event recorded when each ends (event modes only).
_pending_input: weakref.WeakKeyDictionary[Span, dict[str, Any]] = weakref.WeakKeyDictionary()


def _mode() -> str:
    try:
        return settings().capture_mode
    except Exception:
        return "span_only"


def start_content(attributes: dict[str, Any]) -> dict[str, Any] | None:
    """Take the content out of a call's start ``attributes`` when the mode keeps it off spans,
    and answer it (to pass to :func:`remember_input` once the span exists); else None."""
    # Called at every model call's start: two lookups when nothing is captured.
    if _INPUT not in attributes and _SYSTEM not in attributes:
        return None
    mode = _mode()
    if mode not in _MODES_WITH_EVENT:
        return None
    content = {key: attributes[key] for key in CONTENT_ATTRIBUTES if key in attributes}
    if mode not in _MODES_WITH_SPAN:
        for key in content:
            del attributes[key]
    return content


_INPUT = semconv.GEN_AI_INPUT_MESSAGES
_OUTPUT = semconv.GEN_AI_OUTPUT_MESSAGES
_SYSTEM = semconv.GEN_AI_SYSTEM_INSTRUCTIONS


def _holds_content(gathered: tuple[dict[str, Any], ...]) -> bool:
    for attributes in gathered:
        if _OUTPUT in attributes or _INPUT in attributes or _SYSTEM in attributes:
            return True
    return False


def remember_input(span: Span, content: dict[str, Any] | None) -> None:
    """Keep the input content taken by :func:`start_content` for the event at the call's end."""
    if content:
        with contextlib.suppress(TypeError):  # a span not weakly referable records no input
            _pending_input[span] = content


def route_content(span: Span, *gathered: dict[str, Any]) -> None:
    """Before a model call's end attributes (``gathered``, one dict or several) are set on
    ``span``: in the event modes, add the call's content (its input, kept at its start, and what
    ``gathered`` holds) to ``span`` as one ``gen_ai.client.inference.operation.details`` event,
    and in ``event_only`` take it out of ``gathered``. Nothing to do in ``span_only``."""
    # Called at every model call's end: cheap when nothing is captured.
    pending = _pending_input.pop(span, None) if _pending_input else None
    if pending is None and not _holds_content(gathered):
        return
    mode = _mode()
    if mode not in _MODES_WITH_EVENT:
        return
    event = dict(pending or {})
    for attributes in gathered:
        for key in CONTENT_ATTRIBUTES:
            if key in attributes:
                event[key] = attributes[key] if mode in _MODES_WITH_SPAN else attributes.pop(key)
    if event:
        span.add_event(CONTENT_EVENT, event)


def set_call_attributes(span: Span, attributes: dict[str, Any]) -> None:
    """``span.set_attributes(attributes)`` at the end of a non-streamed model call, with its
    content where the capture mode says (see :func:`route_content`). A stream's parser sets its
    attributes as ever: the stream's end routes them."""
    # A stream parser's gathered attributes (streaming.GatheredAttributes) are routed once, by
    # the stream's end, with the input kept for the real span.
    if not getattr(span, "gathers_attributes", False):
        route_content(span, attributes)
    span.set_attributes(attributes)


def set_retrieval_content(span: Span, content: Mapping[str, str]) -> None:
    """A retrieval's query text or documents (already bounded and redacted) where the capture
    mode says: span attributes, one ``llmtrace.retrieval.details`` span event, or both."""
    mode = _mode()
    if mode in _MODES_WITH_SPAN:
        span.set_attributes(content)
    if mode in _MODES_WITH_EVENT:
        span.add_event(RETRIEVAL_CONTENT_EVENT, content)
