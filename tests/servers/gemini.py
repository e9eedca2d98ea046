"""Gemini's wire format on the simulated model server (Gemini Developer API and Vertex AI).

Paths end in the method, as both APIs name it (``.../models/{model}:{method}``):

- ``:generateContent``: one JSON answer, sent when the last token would have been;
- ``:streamGenerateContent?alt=sse``: server-sent events, one ``GenerateContentResponse`` per
  token on the Behaviour's deadlines (first token, between tokens, a cut after
  ``fail_after_chunks``); every chunk carries the prompt count, the last one the finish reason and
  the whole usage, as Gemini sends them;
- ``:batchEmbedContents`` (Gemini), ``:embedContent`` and ``:predict`` (Vertex AI): one vector per
  input, 8 dimensions.

A Behaviour ``status`` >= 400 answers with Google's error JSON
(``{"error": {"code", "message", "status"}}``).

``replay(server, interactions, content_type)`` answers the next requests with recorded
interactions in order (an automatic function call or a chat sends several requests).
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from typing import Any

from tests.servers.model_server import ModelServer, RecordedRequest, Reply, sleep_until

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
_METHODS = (
    ":generateContent",
    ":streamGenerateContent",
    ":batchEmbedContents",
    ":embedContent",
    ":predict",
)
_ids = itertools.count(1)

DIMENSIONS = 8


def _method(path: str) -> str | None:
    for method in _METHODS:
        if path.endswith(method):
            return method
    return None


def _usage(server: ModelServer, tokens: int | None) -> dict[str, Any]:
    b = server.behaviour
    usage: dict[str, Any] = {"promptTokenCount": b.input_tokens}
    if tokens is not None:
        usage["candidatesTokenCount"] = tokens
        usage["totalTokenCount"] = b.input_tokens + tokens
    else:
        usage["totalTokenCount"] = b.input_tokens
    return usage


def _response(
    server: ModelServer, response_id: str, text: str, finish: bool, tokens: int | None
) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"parts": [{"text": text}], "role": "model"},
        "index": 0,
    }
    if finish:
        candidate["finishReason"] = "STOP"
    return {
        "candidates": [candidate],
        "usageMetadata": _usage(server, tokens),
        "modelVersion": server.behaviour.model,
        "responseId": response_id,
    }


async def _error(server: ModelServer, request: RecordedRequest, reply: Reply) -> None:
    b = server.behaviour
    await sleep_until(request.arrived_at + b.headers_delay)
    error = {
        "error": {
            "code": b.status,
            "message": b.error_message,
            "status": _STATUS_NAMES.get(b.status, "UNKNOWN"),
        }
    }
    await reply.whole(b.status, json.dumps(error).encode(), "application/json; charset=UTF-8")


async def _generate_content(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply
) -> None:
    b = server.behaviour
    response_id = f"gemini-sim-{next(_ids)}"
    if _method(request.path.split("?", 1)[0]) == ":generateContent":
        await server.whole_after_generation(request)
        payload = _response(server, response_id, "".join(b.tokens), True, len(b.tokens))
        await reply.whole(200, json.dumps(payload).encode(), "application/json; charset=UTF-8")
        return
    await sleep_until(request.arrived_at + b.headers_delay)
    await reply.start_stream(content_type="text/event-stream")
    last = len(b.tokens) - 1

    async def send(index: int, token: str) -> None:
        done = index == last
        chunk = _response(server, response_id, token, done, len(b.tokens) if done else None)
        # Gemini separates its events with CRLF pairs.
        await reply.chunk(f"data: {json.dumps(chunk)}\r\n\r\n".encode())

    await server.emit_tokens(request, send)
    await reply.end_stream()


def _vector(index: int) -> list[float]:
    return [round(0.1 * (index + 1), 3)] * DIMENSIONS


async def _embed(server: ModelServer, request: RecordedRequest, body: Any, reply: Reply) -> None:
    b = server.behaviour
    await sleep_until(request.arrived_at + b.headers_delay)
    method = _method(request.path.split("?", 1)[0])
    body = body or {}
    payload: dict[str, Any]
    if method == ":batchEmbedContents":
        payload = {"embeddings": [{"values": _vector(i)} for i in range(len(body["requests"]))]}
    elif method == ":embedContent":
        payload = {"embedding": {"values": _vector(0)}, "usageMetadata": _usage(server, None)}
    else:  # Vertex AI :predict
        instances = body.get("instances") or []
        payload = {
            "predictions": [
                {"embeddings": {"values": _vector(i), "statistics": {"token_count": 3}}}
                for i in range(len(instances))
            ],
            "metadata": {"billableCharacterCount": 12},
        }
    await reply.whole(200, json.dumps(payload).encode(), "application/json; charset=UTF-8")


async def _handle(server: ModelServer, request: RecordedRequest, body: Any, reply: Reply) -> None:
    if server.behaviour.status >= 400:
        await _error(server, request, reply)
        return
    method = _method(request.path.split("?", 1)[0])
    if method in (":generateContent", ":streamGenerateContent"):
        await _generate_content(server, request, body, reply)
    else:
        await _embed(server, request, body, reply)


class _Replay:
    """Recorded interactions, answered in order, one per request."""

    def __init__(self) -> None:
        self.queue: deque[tuple[dict[str, Any], str | None]] = deque()

    def matches(self, path: str) -> bool:
        return bool(self.queue)

    async def handle(
        self, server: ModelServer, request: RecordedRequest, body: Any, reply: Reply
    ) -> None:
        interaction, content_type = self.queue.popleft()
        server.play_cassette(interaction, content_type)
        try:
            await server._play(request, reply)
        finally:
            server.cassette = None


_replays: dict[int, _Replay] = {}


def register(server: ModelServer) -> None:
    """Serve Gemini's paths on ``server`` (kept across resets), and recordings queued by
    :func:`replay` before them."""
    if id(server) not in _replays:
        player = _replays[id(server)] = _Replay()
        # First in line: while recordings are queued they answer every path.
        server.add_route("gemini-replay", player.matches, player.handle)
    server.add_route("gemini", lambda path: _method(path) is not None, _handle)


def replay(
    server: ModelServer, interactions: list[dict[str, Any]], content_type: str | None = None
) -> None:
    """Answer the next requests (any path) with ``interactions`` in order; ``content_type`` for
    recordings whose headers were stripped. An empty list stops replaying."""
    register(server)
    player = _replays[id(server)]
    player.queue.clear()
    player.queue.extend((interaction, content_type) for interaction in interactions)


def replayed_all(server: ModelServer) -> bool:
    """Whether every queued recording was answered."""
    player = _replays.get(id(server))
    return player is None or not player.queue
