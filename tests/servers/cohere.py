"""Cohere's wire format on the simulated model server (point a client at ``base_url=server.url``).

- v2 ``/v2/chat``: a whole answer, or server-sent events (``message-start``, ``content-start``,
  ``content-delta`` per token, ``content-end``, ``message-end`` with the finish reason and usage,
  then ``data: [DONE]``). With ``tools`` and ``tool_choice: REQUIRED`` the answer is a tool call
  (``TOOL_CALL``; streamed as ``tool-plan-delta`` per token, then ``tool-call-start`` /
  ``tool-call-delta`` / ``tool-call-end``).
- v1 ``/v1/chat`` and ``/v1/generate``: a whole answer, or NDJSON lines
  (``application/stream+json``: ``stream-start``, ``text-generation`` per token, ``stream-end``
  with the whole response).
- ``/v1/embed``, ``/v2/embed``, ``/v1/rerank``, ``/v2/rerank``.

Usage is reported as Cohere does, twice and as JSON floats: ``tokens`` (the prompt template
counted: ``TEMPLATE_TOKENS`` more input tokens, one more output token) and ``billed_units`` (the
Behaviour's ``input_tokens`` and one per token). Errors are Cohere's ``{"id", "message"}`` body.
"""

from __future__ import annotations

import json
from typing import Any

from tests.servers.model_server import ModelServer, RecordedRequest, Reply, sleep_until

TEMPLATE_TOKENS = 59
_PATHS = {
    "/v1/chat",
    "/v2/chat",
    "/v1/generate",
    "/v1/embed",
    "/v2/embed",
    "/v1/rerank",
    "/v2/rerank",
}


def register(server: ModelServer) -> None:
    server.add_route("cohere", lambda path: path in _PATHS, _handle)


def counts(server: ModelServer) -> dict[str, Any]:
    """The usage the server reports: ``{"billed_units": ..., "tokens": ...}`` (floats)."""
    b = server.behaviour
    return {
        "billed_units": {
            "input_tokens": float(b.input_tokens),
            "output_tokens": float(len(b.tokens)),
        },
        "tokens": {
            "input_tokens": float(b.input_tokens + TEMPLATE_TOKENS),
            "output_tokens": float(len(b.tokens) + 1),
        },
    }


def _tool(body: Any) -> dict[str, Any] | None:
    tools = body.get("tools") or []
    if not tools or body.get("tool_choice") != "REQUIRED":
        return None
    function = tools[0].get("function") or {}
    return {
        "id": "get_weather_sim1",
        "type": "function",
        "function": {
            "name": function.get("name", "tool"),
            "arguments": json.dumps({"location": "Tokyo"}),
        },
    }


async def _handle(server: ModelServer, request: RecordedRequest, body: Any, reply: Reply) -> None:
    b = server.behaviour
    body = body or {}
    path = request.path.split("?", 1)[0]
    if b.status >= 400:
        await sleep_until(request.arrived_at + b.headers_delay)
        error = {"id": "error-sim", "message": b.error_message}
        await reply.whole(b.status, json.dumps(error).encode(), "application/json")
        return
    if path == "/v2/chat":
        await _chat_v2(server, request, body, reply)
    elif path in ("/v1/chat", "/v1/generate"):
        await _text_v1(server, request, body, reply, chat=path == "/v1/chat")
    elif path.endswith("/embed"):
        await _embed(server, request, body, reply, v2=path.startswith("/v2"))
    else:
        await _rerank(server, request, body, reply, v2=path.startswith("/v2"))


async def _chat_v2(server: ModelServer, request: RecordedRequest, body: Any, reply: Reply) -> None:
    b = server.behaviour
    response_id = server._next_id("cohere")
    tool_call = _tool(body)
    finish_reason = "TOOL_CALL" if tool_call is not None else "COMPLETE"
    if not body.get("stream"):
        await server.whole_after_generation(request)
        message: dict[str, Any] = {"role": "assistant"}
        if tool_call is not None:
            message["tool_plan"] = "".join(b.tokens)
            message["tool_calls"] = [tool_call]
        else:
            message["content"] = [{"type": "text", "text": "".join(b.tokens)}]
        payload = {
            "id": response_id,
            "message": message,
            "finish_reason": finish_reason,
            "usage": counts(server),
        }
        await reply.whole(200, json.dumps(payload).encode(), "application/json")
        return
    await sleep_until(request.arrived_at + b.headers_delay)
    await reply.start_stream(content_type="text/event-stream")

    async def event(payload: dict[str, Any]) -> None:
        await reply.event(payload, payload["type"])

    start_message = {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": []}
    await event({"id": response_id, "type": "message-start", "delta": {"message": start_message}})
    if tool_call is None:
        await event(
            {
                "type": "content-start",
                "index": 0,
                "delta": {"message": {"content": {"type": "text", "text": ""}}},
            }
        )

    async def send(index: int, token: str) -> None:
        if tool_call is not None:
            await event({"type": "tool-plan-delta", "delta": {"message": {"tool_plan": token}}})
        else:
            await event(
                {
                    "type": "content-delta",
                    "index": 0,
                    "delta": {"message": {"content": {"text": token}}},
                }
            )

    await server.emit_tokens(request, send)
    if tool_call is None:
        await event({"type": "content-end", "index": 0})
    else:
        start = {**tool_call, "function": {**tool_call["function"], "arguments": ""}}
        await event(
            {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": start}}}
        )
        arguments = {"function": {"arguments": tool_call["function"]["arguments"]}}
        await event(
            {"type": "tool-call-delta", "index": 0, "delta": {"message": {"tool_calls": arguments}}}
        )
        await event({"type": "tool-call-end", "index": 0})
    await event(
        {
            "type": "message-end",
            "delta": {"finish_reason": finish_reason, "usage": counts(server)},
        }
    )
    await reply.event("[DONE]")
    await reply.end_stream()


def _v1_response(server: ModelServer, response_id: str, body: Any, chat: bool) -> dict[str, Any]:
    b = server.behaviour
    text = "".join(b.tokens)
    if chat:
        usage = counts(server)
        return {
            "response_id": response_id,
            "text": text,
            "generation_id": f"{response_id}-generation",
            "chat_history": [
                {"role": "USER", "message": body.get("message", "")},
                {"role": "CHATBOT", "message": text},
            ],
            "finish_reason": "COMPLETE",
            "meta": {"api_version": {"version": "1"}, **usage},
        }
    # v1 generate reports billed units only.
    return {
        "id": response_id,
        "generations": [{"id": f"{response_id}-0", "text": text, "finish_reason": "COMPLETE"}],
        "prompt": body.get("prompt", ""),
        "meta": {
            "api_version": {"version": "1"},
            "billed_units": counts(server)["billed_units"],
        },
    }


async def _text_v1(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply, chat: bool
) -> None:
    b = server.behaviour
    response_id = server._next_id("cohere-v1")
    if not body.get("stream"):
        await server.whole_after_generation(request)
        payload = _v1_response(server, response_id, body, chat)
        await reply.whole(200, json.dumps(payload).encode(), "application/json")
        return
    await sleep_until(request.arrived_at + b.headers_delay)
    await reply.start_stream(content_type="application/stream+json")

    async def line(payload: dict[str, Any]) -> None:
        await reply.chunk((json.dumps(payload) + "\n").encode())

    if chat:
        await line(
            {
                "is_finished": False,
                "event_type": "stream-start",
                "generation_id": f"{response_id}-generation",
            }
        )

    async def send(index: int, token: str) -> None:
        await line({"is_finished": False, "event_type": "text-generation", "text": token})

    await server.emit_tokens(request, send)
    await line(
        {
            "is_finished": True,
            "event_type": "stream-end",
            "finish_reason": "COMPLETE",
            "response": _v1_response(server, response_id, body, chat),
        }
    )
    await reply.end_stream()


async def _embed(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply, v2: bool
) -> None:
    b = server.behaviour
    await sleep_until(request.arrived_at + b.headers_delay)
    texts = body.get("texts") or []
    vectors = [[0.5 * (i + 1)] * 12 for i in range(len(texts))]
    payload: dict[str, Any] = {
        "id": server._next_id("embed"),
        "texts": texts,
        "meta": {
            "api_version": {"version": "2" if v2 else "1"},
            "billed_units": {"input_tokens": float(b.input_tokens)},
        },
    }
    if v2 or body.get("embedding_types"):
        payload["embeddings"] = {"float": vectors}
        payload["response_type"] = "embeddings_by_type"
    else:
        payload["embeddings"] = vectors
        payload["response_type"] = "embeddings_floats"
    await reply.whole(200, json.dumps(payload).encode(), "application/json")


async def _rerank(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply, v2: bool
) -> None:
    b = server.behaviour
    await sleep_until(request.arrived_at + b.headers_delay)
    documents = body.get("documents") or []
    top_n = body.get("top_n") or len(documents)
    results = [
        {"index": index, "relevance_score": round(1.0 - index / (len(documents) + 1), 4)}
        for index in range(min(top_n, len(documents)))
    ]
    payload = {
        "id": server._next_id("rerank"),
        "results": results,
        "meta": {
            "api_version": {"version": "2" if v2 else "1"},
            "billed_units": {"search_units": 1.0},
        },
    }
    await reply.whole(200, json.dumps(payload).encode(), "application/json")
