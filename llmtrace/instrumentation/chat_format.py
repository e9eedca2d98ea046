"""OpenAI's Chat Completions message format (also spoken by Groq, Mistral, LiteLLM, Ollama's
tool calls and many compatible servers) mapped to the GenAI message-parts shape of
:mod:`llmtrace.sdk.content`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llmtrace.instrumentation.model_call import field_of
from llmtrace.sdk import content


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump() if dump is not None else value


def tool_call_parts(tool_calls: Any) -> list[dict[str, Any]]:
    """``tool_calls`` of a chat message (``{"id", "function": {"name", "arguments"}}``) as parts."""
    parts = []
    for call in tool_calls or ():
        function = field_of(call, "function")
        parts.append(
            content.tool_call_part(
                field_of(call, "id"), field_of(function, "name"), field_of(function, "arguments")
            )
        )
    return parts


def chat_message(message: Any, finish_reason: Any = None) -> dict[str, Any]:
    """One Chat Completions message (a request's dict or a response's message object) in the
    parts shape; also what
    any provider speaking this format records."""
    role = field_of(message, "role") or "assistant"
    parts: list[dict[str, Any]] = []
    if role == "tool":
        return content.message(
            "tool",
            [
                content.tool_call_response_part(
                    field_of(message, "tool_call_id"), field_of(message, "content")
                )
            ],
        )
    reasoning = field_of(message, "reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        parts.append(content.reasoning_part(reasoning))
    parts.extend(content.plain_parts(field_of(message, "content")))
    refusal = field_of(message, "refusal")
    if isinstance(refusal, str) and refusal:
        parts.append(content.text_part(refusal))
    parts.extend(tool_call_parts(field_of(message, "tool_calls")))
    function_call = field_of(message, "function_call")
    if function_call is not None:
        parts.append(
            content.tool_call_part(
                None, field_of(function_call, "name"), field_of(function_call, "arguments")
            )
        )
    return content.message(role, parts, finish_reason)


def chat_input_messages(messages: Any) -> list[dict[str, Any]]:
    """A request's chat ``messages`` in the parts shape."""
    if not isinstance(messages, list | tuple):
        return []
    return [chat_message(message) for message in messages]


def as_tool_call_part(call: Any) -> dict[str, Any]:
    """A tool call given as a part already, in the chat format (``{"id", "function": {...}}``)
    or as ``{"id", "name", "arguments"}``, as a part."""
    get = call.get if isinstance(call, Mapping) else lambda name: field_of(call, name)
    if get("type") == "tool_call":
        return dict(call)
    function = get("function")
    if function is not None:
        return content.tool_call_part(
            get("id"), field_of(function, "name"), field_of(function, "arguments")
        )
    return content.tool_call_part(get("id"), get("name"), get("arguments"))


def messages_of(value: Any, dump: Callable[[Any], Any] = _plain) -> list[dict[str, Any]]:
    """A request's input in the parts shape, for providers whose messages are chat-format
    dicts or SDK objects (``dump`` makes one a dict): a string is one user message; a list of
    messages maps each; anything else is one user message holding its JSON as text."""
    if isinstance(value, str):
        return [content.message("user", [content.text_part(value)])]
    if isinstance(value, list | tuple):
        messages = []
        for item in value:
            if isinstance(item, str):
                messages.append(content.message("user", [content.text_part(item)]))
                continue
            plain = item if isinstance(item, Mapping) else dump(item)
            if isinstance(plain, Mapping) and "role" in plain:
                messages.append(chat_message(plain))
            else:
                messages.append(content.message("user", content.plain_parts([plain])))
        return messages
    return [content.message("user", content.plain_parts(value))]
