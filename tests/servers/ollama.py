"""Ollama's wire format on the simulated model server: ``/api/chat``, ``/api/generate``,
``/api/embed`` and ``/api/embeddings``.

Streams are NDJSON (``application/x-ndjson``), one JSON object per line; the last line has
``done: true``, ``done_reason``, the token counts (``prompt_eval_count``, ``eval_count``) and the
server's durations in nanoseconds (``total_duration``, ``load_duration``,
``prompt_eval_duration``, ``eval_duration``), as a real Ollama server sends them. The
``Behaviour``'s delays, tokens, status and ``fail_after_chunks`` apply as on the OpenAI paths; an
error status answers ``{"error": "..."}``.

The durations are the ones the server actually took, measured on its clock: ``prompt_eval``
from the request's arrival to the first token, ``eval`` from the first token to the last. A
model load (``set_load_time``) is carved out of the start of that wait, as a real server loads
the model before it evaluates the prompt: a load of 0.2 s with a first-token delay of 0.3 s
reports ``load_duration`` 0.2 s and ``prompt_eval_duration`` about 0.1 s.

A chat request with ``tools`` is answered with a call of the first tool (arguments ``{}``); with
``think`` set, the first token comes as ``thinking`` and the rest as content.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tests.servers.model_server import ModelServer, RecordedRequest, Reply, sleep_until

NDJSON = "application/x-ndjson"
_NANOS = 1_000_000_000

# id(server) -> seconds of model loading to report (see set_load_time).
_load_times: dict[int, float] = {}


def set_load_time(server: ModelServer, seconds: float) -> None:
    """Report ``seconds`` of the first-token wait as model loading (0: the model was loaded)."""
    _load_times[id(server)] = seconds


def register(server: ModelServer) -> None:
    for path, handler in (
        ("/api/chat", _chat),
        ("/api/generate", _generate),
        ("/api/embed", _embed),
        ("/api/embeddings", _embeddings),
    ):
        server.add_route(f"ollama {path}", lambda p, path=path: p == path, handler)


def _created_at() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())


def _durations(
    server: ModelServer, request: RecordedRequest, first_at: float | None, end_at: float
) -> dict[str, int]:
    first = first_at if first_at is not None else end_at
    wait = max(first - request.arrived_at, 0.0)
    load = min(_load_times.get(id(server), 0.0), wait)
    return {
        "total_duration": round((end_at - request.arrived_at) * _NANOS),
        "load_duration": round(load * _NANOS),
        "prompt_eval_duration": round((wait - load) * _NANOS),
        "eval_duration": round(max(end_at - first, 0.0) * _NANOS),
    }


def _final(server: ModelServer, request: RecordedRequest, first_at: float | None) -> dict[str, Any]:
    b = server.behaviour
    return {
        "done": True,
        "done_reason": "stop",
        **_durations(server, request, first_at, time.monotonic()),
        "prompt_eval_count": b.input_tokens,
        "eval_count": len(b.tokens),
    }


async def _error(server: ModelServer, request: RecordedRequest, reply: Reply) -> bool:
    b = server.behaviour
    if b.status < 400:
        return False
    await sleep_until(request.arrived_at + b.headers_delay)
    await reply.whole(b.status, json.dumps({"error": b.error_message}).encode(), "application/json")
    return True


async def _text(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply, chat: bool
) -> None:
    if await _error(server, request, reply):
        return
    b = server.behaviour
    body = body or {}
    thinking = bool(body.get("think"))
    tools = body.get("tools") if chat else None

    def piece(index: int, token: str) -> dict[str, Any]:
        as_thinking = thinking and index == 0
        if chat:
            message: dict[str, Any] = {"role": "assistant", "content": "" if as_thinking else token}
            if as_thinking:
                message["thinking"] = token
            return {"message": message}
        return {
            "response": "" if as_thinking else token,
            **({"thinking": token} if as_thinking else {}),
        }

    def head() -> dict[str, Any]:
        return {"model": b.model, "created_at": _created_at()}

    if not body.get("stream", True):
        await server.whole_after_generation(request)
        text = "".join(b.tokens[1:] if thinking else b.tokens)
        if chat:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if thinking and b.tokens:
                message["thinking"] = b.tokens[0]
            if tools:
                message["content"] = ""
                message["tool_calls"] = [_tool_call(tools[0])]
            payload: dict[str, Any] = {**head(), "message": message}
        else:
            payload = {**head(), "response": text}
            if thinking and b.tokens:
                payload["thinking"] = b.tokens[0]
        # The first token of a whole answer: when the generation would have begun.
        first_at = request.arrived_at + b.first_token_delay
        payload.update(_final(server, request, first_at))
        await reply.whole(200, json.dumps(payload).encode(), "application/json; charset=utf-8")
        return
    await sleep_until(request.arrived_at + b.headers_delay)
    await reply.start_stream(200, content_type=NDJSON)

    async def send(index: int, token: str) -> None:
        await _line(reply, {**head(), **piece(index, token), "done": False})

    await server.emit_tokens(request, send)
    if tools:
        call = {
            "message": {"role": "assistant", "content": "", "tool_calls": [_tool_call(tools[0])]}
        }
        await _line(reply, {**head(), **call, "done": False})
    empty: dict[str, Any] = (
        {"message": {"role": "assistant", "content": ""}} if chat else {"response": ""}
    )
    last = {**head(), **empty, **_final(server, request, request.first_token_sent_at)}
    if not chat:
        last["context"] = [1, 2, 3]
    await _line(reply, last)
    await reply.end_stream()


async def _line(reply: Reply, payload: dict[str, Any]) -> None:
    """One NDJSON line, sent as its own chunk (as Ollama flushes each)."""
    await reply.chunk((json.dumps(payload) + "\n").encode())


def _tool_call(tool: Any) -> dict[str, Any]:
    name = ((tool or {}).get("function") or {}).get("name") or "tool"
    return {"id": "call_sim_1", "function": {"index": 0, "name": name, "arguments": {}}}


async def _chat(server: ModelServer, request: RecordedRequest, body: Any, reply: Reply) -> None:
    await _text(server, request, body, reply, chat=True)


async def _generate(server: ModelServer, request: RecordedRequest, body: Any, reply: Reply) -> None:
    await _text(server, request, body, reply, chat=False)


async def _embed(server: ModelServer, request: RecordedRequest, body: Any, reply: Reply) -> None:
    if await _error(server, request, reply):
        return
    b = server.behaviour
    load = _load_times.get(id(server), 0.0)
    await sleep_until(request.arrived_at + max(b.headers_delay, load))
    inputs = (body or {}).get("input")
    items = inputs if isinstance(inputs, list) else [inputs]
    payload = {
        "model": b.model,
        "embeddings": [[0.1 * (i + 1)] * 8 for i in range(len(items))],
        "total_duration": round((time.monotonic() - request.arrived_at) * _NANOS),
        "load_duration": round(load * _NANOS),
        "prompt_eval_count": b.input_tokens,
    }
    await reply.whole(200, json.dumps(payload).encode(), "application/json; charset=utf-8")


async def _embeddings(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply
) -> None:
    if await _error(server, request, reply):
        return
    await sleep_until(request.arrived_at + server.behaviour.headers_delay)
    await reply.whole(200, json.dumps({"embedding": [0.5] * 8}).encode(), "application/json")
