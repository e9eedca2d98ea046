"""Mistral's wire format on the simulated model server, under the path prefix ``/mistral``.

The server answers ``/v1/chat/completions`` and ``/v1/embeddings`` itself in OpenAI's format, so
Mistral's routes live under a prefix: point the client at ``server_url=url(server)``. What differs
from OpenAI: a stream always ends with a chunk carrying the finish reason *and* the usage (no
``stream_options``), then ``data: [DONE]``; tools with ``tool_choice`` ``any``/``required``
answer with a tool call (``finish_reason: tool_calls``); errors are Mistral's
``{"object": "error", ...}`` body, and a 422 is the validation error the SDK raises as
``HTTPValidationError``. FIM (``/v1/fim/completions``) answers like chat.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tests.servers.model_server import ModelServer, RecordedRequest, Reply, sleep_until

PREFIX = "/mistral"


def url(server: ModelServer) -> str:
    """The ``server_url`` a ``Mistral`` client is given."""
    return f"{server.url}{PREFIX}"


def register(server: ModelServer) -> None:
    server.add_route("mistral", lambda path: path.startswith(f"{PREFIX}/v1/"), _handle)


def _usage(server: ModelServer) -> dict[str, int]:
    b = server.behaviour
    return {
        "prompt_tokens": b.input_tokens,
        "completion_tokens": len(b.tokens),
        "total_tokens": b.input_tokens + len(b.tokens),
    }


def _tool_call(body: Any) -> dict[str, Any] | None:
    """The tool call a request forces (``tool_choice`` any/required with tools), else None."""
    tools = body.get("tools") or []
    if not tools or body.get("tool_choice") not in ("any", "required"):
        return None
    name = tools[0].get("function", {}).get("name", "tool")
    return {
        "id": "call-sim-1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"location": "Paris"})},
        "index": 0,
    }


async def _error(server: ModelServer, request: RecordedRequest, reply: Reply) -> None:
    b = server.behaviour
    await sleep_until(request.arrived_at + b.headers_delay)
    if b.status == 422:
        error: dict[str, Any] = {
            "detail": [{"type": "missing", "loc": ["body", "model"], "msg": b.error_message}]
        }
    else:
        error = {
            "object": "error",
            "message": b.error_message,
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    await reply.whole(b.status, json.dumps(error).encode(), "application/json")


async def _handle(server: ModelServer, request: RecordedRequest, body: Any, reply: Reply) -> None:
    if server.behaviour.status >= 400:
        await _error(server, request, reply)
        return
    path = request.path.split("?", 1)[0][len(PREFIX) :]
    body = body or {}
    if path == "/v1/embeddings":
        await _embeddings(server, request, body, reply)
    elif path in ("/v1/chat/completions", "/v1/fim/completions"):
        await _completion(server, request, body, reply)
    else:
        await reply.whole(404, b'{"object": "error", "message": "not found"}', "application/json")


async def _embeddings(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply
) -> None:
    b = server.behaviour
    await sleep_until(request.arrived_at + b.headers_delay)
    inputs = body.get("inputs") or body.get("input")
    items = inputs if isinstance(inputs, list) else [inputs]
    payload = {
        "id": server._next_id("embd"),
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": [0.25 * (i + 1)] * 16}
            for i in range(len(items))
        ],
        "model": b.model,
        "usage": {
            "prompt_tokens": b.input_tokens,
            "completion_tokens": 0,
            "total_tokens": b.input_tokens,
        },
    }
    await reply.whole(200, json.dumps(payload).encode(), "application/json")


async def _completion(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply
) -> None:
    b = server.behaviour
    response_id = server._next_id("mistral")
    created = int(time.time())
    tool_call = _tool_call(body)
    finish_reason = "tool_calls" if tool_call is not None else "stop"
    if not body.get("stream"):
        await server.whole_after_generation(request)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "" if tool_call is not None else "".join(b.tokens),
            "tool_calls": [tool_call] if tool_call is not None else None,
            "prefix": False,
        }
        payload = {
            "id": response_id,
            "object": "chat.completion",
            "created": created,
            "model": b.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": _usage(server),
        }
        await reply.whole(200, json.dumps(payload).encode(), "application/json")
        return

    def chunk(
        delta: dict[str, Any], reason: str | None = None, usage: Any = None
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "id": response_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": b.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
        }
        if usage is not None:
            payload["usage"] = usage
        return payload

    await sleep_until(request.arrived_at + b.headers_delay)
    await reply.start_stream()
    await reply.event(chunk({"role": "assistant", "content": ""}))

    async def send(index: int, token: str) -> None:
        if tool_call is not None and index == 0:
            await reply.event(chunk({"tool_calls": [tool_call]}))
        elif tool_call is None:
            await reply.event(chunk({"content": token}))

    await server.emit_tokens(request, send)
    await reply.event(chunk({"content": ""}, finish_reason, _usage(server)))
    await reply.event("[DONE]")
    await reply.end_stream()
