"""Groq's wire format on the simulated model server: OpenAI's API under ``/openai/v1``.

What differs from OpenAI's, as Groq sends it (see the recordings in ``groq/``):

- usage carries the server's timings (``queue_time``, ``prompt_time``, ``completion_time``,
  ``total_time``, seconds), and every response an ``x_groq`` object with Groq's request id;
- a stream's first chunk has ``x_groq.id``, and its last chunk (the one with the finish reason)
  has ``x_groq.usage``, unasked;
- an error inside a stream is a ``data: {"error": {...}}`` event (asked for here with a model
  named ``STREAM_ERROR_MODEL``).

A request that offers ``tools`` is answered with a call of the first tool. Embeddings use the
server's OpenAI handler; any other path (audio, models) answers a small JSON object.
Timing follows the server's ``Behaviour`` (headers, first-token and inter-token delays, a cut
after ``fail_after_chunks``, ``status`` >= 400 with Groq's error body).
"""

from __future__ import annotations

import json
import time
from typing import Any

from tests.servers.model_server import ModelServer, RecordedRequest, Reply, sleep_until

PREFIX = "/openai/v1/"
STREAM_ERROR_MODEL = "stream-error-after-first-token"
# The server timings every simulated usage reports (seconds).
TIMINGS = {
    "queue_time": 0.0125,
    "prompt_time": 0.0025,
    "completion_time": 0.0375,
    "total_time": 0.04,
}
TOOL_ARGUMENTS = '{"city": "Paris"}'


def register(server: ModelServer) -> None:
    server.add_route("groq", lambda path: path.startswith(PREFIX), _groq)


def usage(server: ModelServer) -> dict[str, Any]:
    b = server.behaviour
    return {
        "queue_time": TIMINGS["queue_time"],
        "prompt_tokens": b.input_tokens,
        "prompt_time": TIMINGS["prompt_time"],
        "completion_tokens": len(b.tokens),
        "completion_time": TIMINGS["completion_time"],
        "total_tokens": b.input_tokens + len(b.tokens),
        "total_time": TIMINGS["total_time"],
    }


def _tool_call(body: Any) -> dict[str, Any] | None:
    tools = body.get("tools") if isinstance(body, dict) else None
    if not tools:
        return None
    return {
        "id": "call_sim_1",
        "type": "function",
        "function": {"name": tools[0]["function"]["name"], "arguments": TOOL_ARGUMENTS},
    }


async def _groq(server: ModelServer, request: RecordedRequest, body: Any, reply: Reply) -> None:
    b = server.behaviour
    path = request.path.split("?", 1)[0]
    if b.status >= 400:
        await sleep_until(request.arrived_at + b.headers_delay)
        error = {"error": {"message": b.error_message, "type": "invalid_request_error"}}
        await reply.whole(b.status, json.dumps(error).encode(), "application/json")
        return
    if path == PREFIX + "embeddings":
        await server._embeddings(request, body or {}, reply)
        return
    if path != PREFIX + "chat/completions":
        await sleep_until(request.arrived_at + b.headers_delay)
        await reply.whole(200, b'{"text": "simulated transcript"}', "application/json")
        return
    body = body or {}
    if body.get("stream"):
        await _stream(server, request, body, reply)
    else:
        await _whole(server, request, body, reply)


async def _whole(server: ModelServer, request: RecordedRequest, body: Any, reply: Reply) -> None:
    b = server.behaviour
    await server.whole_after_generation(request)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(b.tokens)}
    finish_reason = "stop"
    tool_call = _tool_call(body)
    if tool_call is not None:
        message = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
        finish_reason = "tool_calls"
    payload = {
        "id": f"chatcmpl-groq-{len(server.requests)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": b.model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": usage(server),
        "system_fingerprint": "fp_sim",
        "x_groq": {"id": f"req_sim_{len(server.requests)}"},
    }
    await reply.whole(200, json.dumps(payload).encode(), "application/json")


async def _stream(server: ModelServer, request: RecordedRequest, body: Any, reply: Reply) -> None:
    b = server.behaviour
    response_id = f"chatcmpl-groq-{len(server.requests)}"
    request_id = f"req_sim_{len(server.requests)}"
    created = int(time.time())
    tool_call = _tool_call(body)

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": response_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": b.model,
            "system_fingerprint": "fp_sim",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }

    await sleep_until(request.arrived_at + b.headers_delay)
    await reply.start_stream()
    await reply.event({**chunk({"role": "assistant", "content": ""}), "x_groq": {"id": request_id}})

    failed = False

    async def send(index: int, token: str) -> None:
        nonlocal failed
        if failed:
            return
        if index == 1 and body.get("model") == STREAM_ERROR_MODEL:
            failed = True
            error = {"message": "simulated failure mid-stream", "type": "internal_server_error"}
            await reply.event({"error": error})
            return
        if tool_call is not None:
            # The call's name and id with the first piece of its arguments (one per token).
            if index == 0:
                delta = {"index": 0, "id": tool_call["id"], "type": "function"}
                delta["function"] = {"name": tool_call["function"]["name"], "arguments": token}
            else:
                delta = {"index": 0, "function": {"arguments": token}}
            await reply.event(chunk({"tool_calls": [delta]}))
            return
        await reply.event(chunk({"content": token}))

    await server.emit_tokens(request, send)
    if failed:
        await reply.end_stream()
        return
    final = chunk({}, "tool_calls" if tool_call is not None else "stop")
    await reply.event({**final, "x_groq": {"id": request_id, "usage": usage(server)}})
    await reply.event("[DONE]")
    await reply.end_stream()
