"""A simulated OpenAI- and Anthropic-compatible model server with exact, settable timing.

Runs an asyncio HTTP/1.1 server (keep-alive, chunked SSE) on a free loopback port in a
background thread. Timing is measured from the moment the request is fully read, on the
monotonic clock, and every delay is a deadline the server never sends before:

- ``headers_delay``: response headers (and, when streaming, the role-only first chunk);
- ``first_token_delay``: the first chunk with content (from the request, not from the headers);
- ``token_delay``: between one content chunk and the next.

So a client's measured time to first token is at least ``first_token_delay`` and exceeds it only
by the client's own overhead and the network (loopback). A non-streamed response is sent whole
when the last token would have been.

Endpoints: ``/v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings``, ``/v1/responses``
(OpenAI), ``/v1/messages`` (Anthropic); streamed or not, with or without the usage chunk
(``stream_options.include_usage``); ``status`` >= 400 answers with the provider's error body.
With ``tool_call`` set, a chat completion that offers tools and does not end with a tool's result
is answered with a call of that tool (its first fragment at the first-token deadline, then the
arguments), so an agent's loop runs: model, tool, model.
Any other path answers ``{"ok": true}`` (a downstream service for propagation tests).
``play_cassette(interaction)`` answers every request with one recorded interaction instead
(gzip bodies served compressed, as recorded; server-sent events, NDJSON lines and AWS event-stream
frames sent one by one, so a client sees the stream arrive in pieces).
Every request is recorded (``requests``) with its headers, for traceparent checks.

Other providers' wire formats live in modules of their own beside this one: each registers its
paths with ``add_route(name, matches, handler)`` (kept across ``reset()``) and reuses the timing
helpers here (``sleep_until``, ``Reply``, ``emit_tokens``, ``Abort``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_HOP_BY_HOP = {
    "content-length",
    "transfer-encoding",
    "connection",
    "content-encoding",
    "keep-alive",
}


@dataclass
class Behaviour:
    """How the next responses are produced (``ModelServer.configure`` sets these)."""

    headers_delay: float = 0.0
    first_token_delay: float = 0.0
    token_delay: float = 0.0
    tokens: list[str] = field(default_factory=lambda: ["Hello", ",", " world", "!"])
    input_tokens: int = 10
    model: str = "sim-model-1"
    status: int = 200
    error_message: str = "simulated failure"
    # (tool name, JSON arguments): the call a chat completion offering tools answers with, until
    # the conversation ends with a tool's result (see the module docstring); None: always text.
    tool_call: tuple[str, str] | None = None
    # Cut the connection after this many content chunks (a stream failing mid-way); None: never.
    fail_after_chunks: int | None = None
    # Send each response in one write once it is complete (the delays still pass first): the
    # client then receives it the same way whatever else the machine is doing, as instruction
    # counts need (a stream read in more pieces costs the client more); a stream loses its timing.
    whole_writes: bool = False
    # Answers to refuse the next requests with, one per request, in order: (status, extra
    # headers), e.g. (429, {"retry-after-ms": "400"}); requests after them are answered as usual.
    refusals: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    # A tool call to answer every request with after the text, (id, name, arguments as JSON
    # text): chat completions end with finish reason "tool_calls", Messages with a tool_use block;
    # streamed, the arguments arrive in two pieces. None: answer with text only. (``tool_call``
    # above answers with a tool call only until the tool's result comes back, as agents need.)
    tool_use: tuple[str, str, str] | None = None


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    arrived_at: float
    # When the first token left the server: the scheduling overshoot of its sleep is visible.
    first_token_sent_at: float | None = None
    # When the last one did: with the first, the generation the server really took.
    last_token_sent_at: float | None = None
    # When a refusal (``Behaviour.refusals``) began to be sent: the earliest its client could
    # have it. (Taken after sending, a client thread reading it at once could be seen to get it
    # before the server thread, waiting for the interpreter's lock, reads the clock.)
    refused_at: float | None = None

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


async def _sleep_until(deadline: float) -> None:
    """Never return before ``deadline``; the last two milliseconds are spun to keep the overshoot small."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        await asyncio.sleep(remaining - 0.002 if remaining > 0.003 else 0)


class _Reply:
    """Writes one HTTP response: plain, or chunked (server-sent events by default); with
    ``whole``, everything at once in :meth:`flush`."""

    def __init__(self, writer: asyncio.StreamWriter, whole: bool = False) -> None:
        self.writer = writer
        self._held: bytearray | None = bytearray() if whole else None

    async def _send(self, data: bytes) -> None:
        if self._held is not None:
            self._held += data
        else:
            self.writer.write(data)
            await self.writer.drain()

    async def flush(self) -> None:
        """Send what ``whole`` held back (nothing otherwise)."""
        if self._held:
            self.writer.write(bytes(self._held))
            self._held.clear()
            await self.writer.drain()

    async def whole(
        self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None
    ) -> None:
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
            f"content-type: {content_type}",
            f"content-length: {len(body)}",
        ]
        head += [f"{name}: {value}" for name, value in (extra or {}).items()]
        await self._send(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    async def start_stream(
        self,
        status: int = 200,
        extra: dict[str, str] | None = None,
        content_type: str = "text/event-stream; charset=utf-8",
    ) -> None:
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
            f"content-type: {content_type}",
            "transfer-encoding: chunked",
            "cache-control: no-cache",
        ]
        head += [f"{name}: {value}" for name, value in (extra or {}).items()]
        await self._send(("\r\n".join(head) + "\r\n\r\n").encode())

    async def chunk(self, data: bytes) -> None:
        await self._send(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    async def event(self, payload: Any, name: str | None = None) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        prefix = f"event: {name}\n" if name else ""
        await self.chunk(f"{prefix}data: {text}\n\n".encode())

    async def end_stream(self) -> None:
        await self._send(b"0\r\n\r\n")


class _Abort(Exception):
    """Cut the connection (a stream failing mid-way)."""


# The names other provider modules use (see the module docstring).
Reply = _Reply
Abort = _Abort
sleep_until = _sleep_until
# handler(server, request, decoded JSON body or None, reply)
RouteHandler = Callable[["ModelServer", RecordedRequest, Any, _Reply], Awaitable[None]]


def _eventstream_frames(data: bytes) -> list[bytes]:
    """AWS event-stream messages: each starts with its total length (4 bytes, big-endian)."""
    frames = []
    while len(data) >= 4:
        length = int.from_bytes(data[:4], "big")
        if length < 16 or length > len(data):
            break
        frames.append(data[:length])
        data = data[length:]
    if data:
        frames.append(data)
    return frames


def stream_pieces(content_type: str, data: bytes) -> list[bytes] | None:
    """How a recorded streamed body is sent: one piece per event, line or frame; None when the
    content type is not a stream (sent whole)."""
    if content_type.startswith("text/event-stream"):
        return [event + b"\n\n" for event in data.split(b"\n\n") if event.strip()]
    if "ndjson" in content_type or content_type.startswith("application/stream+json"):
        return [line + b"\n" for line in data.split(b"\n") if line.strip()]
    if content_type.startswith("application/vnd.amazon.eventstream"):
        return _eventstream_frames(data)
    return None


class ModelServer:
    """The server; use the ``model_server`` fixture, or ``start()`` / ``stop()``."""

    def __init__(self) -> None:
        self.behaviour = Behaviour()
        self.requests: list[RecordedRequest] = []
        self.cassette: dict[str, Any] | None = None
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._counter = 0
        self._routes: dict[str, tuple[Callable[[str], bool], RouteHandler]] = {}
        # The content type to serve a cassette with when it recorded none (headers stripped).
        self.cassette_content_type: str | None = None

    # --- control -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def configure(self, **changes: Any) -> ModelServer:
        for name, value in changes.items():
            if not hasattr(self.behaviour, name):
                raise AttributeError(f"Behaviour has no {name!r}")
            setattr(self.behaviour, name, value)
        return self

    def reset(self) -> None:
        self.behaviour = Behaviour()
        self.requests.clear()
        self.cassette = None
        self.cassette_content_type = None

    def add_route(self, name: str, matches: Callable[[str], bool], handler: RouteHandler) -> None:
        """Answer requests whose path (query left out) ``matches`` with ``handler``; registering
        the same name again replaces it. Routes outlive ``reset()``."""
        self._routes[name] = (matches, handler)

    def play_cassette(self, interaction: dict[str, Any], content_type: str | None = None) -> None:
        """Answer every request with this recorded interaction (its ``response`` part);
        ``content_type`` when the recording has none (openinference strips headers)."""
        self.cassette = interaction
        self.cassette_content_type = content_type

    def start(self) -> ModelServer:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            # A deep accept queue: the load test opens 1,000 connections at once, and asyncio's
            # default backlog (100) lets a burst of connects fail on a busy machine.
            self._server = loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=2048)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            self._server.close()
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=run, name="model-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    # --- HTTP ----------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0") or 0)
                body = await reader.readexactly(length) if length else b""
                request = RecordedRequest(method, target, headers, body, time.monotonic())
                self.requests.append(request)
                reply = _Reply(writer, self.behaviour.whole_writes)
                try:
                    await self._respond(request, reply)
                    await reply.flush()
                except _Abort:
                    await reply.flush()
                    writer.transport.abort()
                    return
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _respond(self, request: RecordedRequest, reply: _Reply) -> None:
        if self.cassette is not None:
            await self._play(request, reply)
            return
        b = self.behaviour
        path = request.path.split("?", 1)[0]
        try:
            body = request.json() if request.body else {}
        except ValueError:  # not JSON (a provider's binary body): the handler reads request.body
            body = {}
        routes: dict[str, Callable[[RecordedRequest, Any, _Reply], Awaitable[None]]] = {
            "/v1/chat/completions": self._chat,
            "/v1/completions": self._completion,
            "/v1/embeddings": self._embeddings,
            "/v1/responses": self._responses,
            "/v1/messages": self._messages,
        }
        route = routes.get(path)
        # A refusal answers the next request on any route, a provider's wire format included.
        refusal: dict[str, str] | None = None
        status = b.status
        if b.refusals:
            status, refusal = b.refusals.pop(0)
        if route is None and refusal is None:
            for matches, handler in list(self._routes.values()):
                if matches(path):
                    await handler(self, request, body if request.body else None, reply)
                    return
        if route is None and refusal is None:
            await _sleep_until(request.arrived_at + b.headers_delay)
            await reply.whole(
                b.status if b.status >= 400 else 200, b'{"ok": true}', "application/json"
            )
            return
        if status >= 400:
            await _sleep_until(request.arrived_at + b.headers_delay)
            if path == "/v1/messages":
                error = {
                    "type": "error",
                    "error": {"type": "api_error", "message": b.error_message},
                }
            else:
                error = {
                    "error": {"message": b.error_message, "type": "server_error", "code": None}
                }
            sending = time.monotonic()
            await reply.whole(status, json.dumps(error).encode(), "application/json", refusal)
            if refusal is not None:
                await reply.flush()
                request.refused_at = sending
            return
        await route(request, body, reply)

    def _next_id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-sim-{self._counter}"

    async def _emit_tokens(
        self,
        request: RecordedRequest,
        send: Callable[[int, str], Awaitable[None]],
        tokens: list[str] | None = None,
    ) -> None:
        b = self.behaviour
        deadline = request.arrived_at + b.first_token_delay
        for index, token in enumerate(b.tokens if tokens is None else tokens):
            if b.fail_after_chunks is not None and index >= b.fail_after_chunks:
                raise _Abort()
            await _sleep_until(deadline)
            if index == 0:
                request.first_token_sent_at = time.monotonic()
            request.last_token_sent_at = time.monotonic()
            await send(index, token)
            deadline = max(deadline, time.monotonic()) + b.token_delay

    # For provider modules: send the behaviour's tokens on its deadlines (first token, between
    # tokens, a cut after ``fail_after_chunks``); and wait until a whole answer would be ready.
    async def emit_tokens(
        self, request: RecordedRequest, send: Callable[[int, str], Awaitable[None]]
    ) -> None:
        await self._emit_tokens(request, send)

    async def whole_after_generation(self, request: RecordedRequest) -> None:
        await self._whole_after_generation(request)

    async def _whole_after_generation(self, request: RecordedRequest) -> None:
        b = self.behaviour
        generation = b.first_token_delay + max(len(b.tokens) - 1, 0) * b.token_delay
        await _sleep_until(request.arrived_at + max(b.headers_delay, generation))

    def _openai_usage(self) -> dict[str, Any]:
        b = self.behaviour
        return {
            "prompt_tokens": b.input_tokens,
            "completion_tokens": len(b.tokens),
            "total_tokens": b.input_tokens + len(b.tokens),
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }

    async def _chat(self, request: RecordedRequest, body: Any, reply: _Reply) -> None:
        await self._openai_text(request, body, reply, chat=True)

    async def _completion(self, request: RecordedRequest, body: Any, reply: _Reply) -> None:
        await self._openai_text(request, body, reply, chat=False)

    def _tool_call_due(self, body: Any) -> tuple[str, str] | None:
        """The tool call to answer a chat completion with (see ``Behaviour.tool_call``)."""
        call = self.behaviour.tool_call
        messages = body.get("messages") or [{}]
        if call is None or not body.get("tools") or messages[-1].get("role") == "tool":
            return None
        return call

    async def _openai_text(
        self, request: RecordedRequest, body: Any, reply: _Reply, chat: bool
    ) -> None:
        b = self.behaviour
        response_id = self._next_id("chatcmpl" if chat else "cmpl")
        obj = "chat.completion" if chat else "text_completion"
        created = int(time.time())
        tool_call = self._tool_call_due(body) if chat else None
        call_id = self._next_id("call") if tool_call is not None else ""
        tool_use = b.tool_use if chat and tool_call is None else None
        finish_reason = "stop" if tool_call is None and tool_use is None else "tool_calls"
        if not body.get("stream"):
            await self._whole_after_generation(request)
            text = "".join(b.tokens)
            choice: dict[str, Any] = {"index": 0, "finish_reason": finish_reason, "logprobs": None}
            if tool_call is not None:
                function = {"name": tool_call[0], "arguments": tool_call[1]}
                choice["message"] = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": call_id, "type": "function", "function": function}],
                }
            elif chat:
                choice["message"] = {"role": "assistant", "content": text}
                if tool_use is not None:
                    call_id, name, arguments = tool_use
                    choice["message"]["tool_calls"] = [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": arguments},
                        }
                    ]
            else:
                choice["text"] = text
            payload = {
                "id": response_id,
                "object": obj,
                "created": created,
                "model": b.model,
                "choices": [choice],
                "usage": self._openai_usage(),
            }
            await reply.whole(200, json.dumps(payload).encode(), "application/json")
            return
        chunk_obj = "chat.completion.chunk" if chat else "text_completion"

        def chunk(choice: dict[str, Any] | None, usage: Any = None) -> dict[str, Any]:
            return {
                "id": response_id,
                "object": chunk_obj,
                "created": created,
                "model": b.model,
                "choices": [choice] if choice is not None else [],
                "usage": usage,
            }

        await _sleep_until(request.arrived_at + b.headers_delay)
        await reply.start_stream()
        if chat:
            await reply.event(
                chunk(
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                )
            )

        async def send(index: int, token: str) -> None:
            delta = (
                {"index": 0, "delta": {"content": token}, "finish_reason": None}
                if chat
                else {"index": 0, "text": token, "finish_reason": None}
            )
            await reply.event(chunk(delta))

        async def send_call(index: int, arguments: str) -> None:
            # the first fragment names the call, the next ones carry its arguments
            fragment: dict[str, Any] = {"index": 0, "function": {"arguments": arguments}}
            if index == 0:
                assert tool_call is not None
                fragment.update(id=call_id, type="function")
                fragment["function"]["name"] = tool_call[0]
            delta = {"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": None}
            await reply.event(chunk(delta))

        if tool_call is None:
            await self._emit_tokens(request, send)
        else:
            await self._emit_tokens(request, send_call, ["", tool_call[1]])
        if tool_use is not None:
            use_id, name, arguments = tool_use
            half = len(arguments) // 2
            for piece, first in ((arguments[:half], True), (arguments[half:], False)):
                call: dict[str, Any] = {"index": 0, "function": {"arguments": piece}}
                if first:
                    call.update(id=use_id, type="function")
                    call["function"]["name"] = name
                delta = {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}
                await reply.event(chunk(delta))
        final = (
            {"index": 0, "delta": {}, "finish_reason": finish_reason}
            if chat
            else {"index": 0, "text": "", "finish_reason": "stop"}
        )
        await reply.event(chunk(final))
        if (body.get("stream_options") or {}).get("include_usage"):
            await reply.event(chunk(None, self._openai_usage()))
        await reply.event("[DONE]")
        await reply.end_stream()

    async def _embeddings(self, request: RecordedRequest, body: Any, reply: _Reply) -> None:
        b = self.behaviour
        await _sleep_until(request.arrived_at + b.headers_delay)
        inputs = body.get("input")
        items = inputs if isinstance(inputs, list) else [inputs]
        data = [
            {"object": "embedding", "index": i, "embedding": [0.1 * (i + 1)] * 8}
            for i in range(len(items))
        ]
        payload = {
            "object": "list",
            "data": data,
            "model": b.model,
            "usage": {"prompt_tokens": b.input_tokens, "total_tokens": b.input_tokens},
        }
        await reply.whole(200, json.dumps(payload).encode(), "application/json")

    def _response_object(self, response_id: str, status: str, text: str | None) -> dict[str, Any]:
        b = self.behaviour
        output = (
            []
            if text is None
            else [
                {
                    "type": "message",
                    "id": "msg-sim",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ]
        )
        usage = (
            None
            if status != "completed"
            else {
                "input_tokens": b.input_tokens,
                "output_tokens": len(b.tokens),
                "total_tokens": b.input_tokens + len(b.tokens),
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            }
        )
        return {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": b.model,
            "output": output,
            "usage": usage,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
        }

    async def _responses(self, request: RecordedRequest, body: Any, reply: _Reply) -> None:
        b = self.behaviour
        response_id = self._next_id("resp")
        if not body.get("stream"):
            await self._whole_after_generation(request)
            payload = self._response_object(response_id, "completed", "".join(b.tokens))
            await reply.whole(200, json.dumps(payload).encode(), "application/json")
            return
        await _sleep_until(request.arrived_at + b.headers_delay)
        await reply.start_stream()
        sequence = 0

        async def event(payload: dict[str, Any]) -> None:
            nonlocal sequence
            payload["sequence_number"] = sequence
            sequence += 1
            await reply.event(payload, payload["type"])

        await event(
            {
                "type": "response.created",
                "response": self._response_object(response_id, "in_progress", None),
            }
        )

        async def send(index: int, token: str) -> None:
            await event(
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg-sim",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": token,
                    "logprobs": [],
                }
            )

        await self._emit_tokens(request, send)
        await event(
            {
                "type": "response.completed",
                "response": self._response_object(response_id, "completed", "".join(b.tokens)),
            }
        )
        await reply.end_stream()

    async def _messages(self, request: RecordedRequest, body: Any, reply: _Reply) -> None:
        b = self.behaviour
        message_id = self._next_id("msg")
        usage = {
            "input_tokens": b.input_tokens,
            "output_tokens": len(b.tokens),
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
        if not body.get("stream"):
            await self._whole_after_generation(request)
            payload = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": b.model,
                "content": [{"type": "text", "text": "".join(b.tokens)}]
                + (
                    [
                        {
                            "type": "tool_use",
                            "id": b.tool_use[0],
                            "name": b.tool_use[1],
                            "input": json.loads(b.tool_use[2]),
                        }
                    ]
                    if b.tool_use is not None
                    else []
                ),
                "stop_reason": "end_turn" if b.tool_use is None else "tool_use",
                "stop_sequence": None,
                "usage": usage,
            }
            await reply.whole(200, json.dumps(payload).encode(), "application/json")
            return
        await _sleep_until(request.arrived_at + b.headers_delay)
        await reply.start_stream()
        start = {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": b.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {**usage, "output_tokens": 1},
            },
        }
        await reply.event(start, "message_start")
        await reply.event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        )

        async def send(index: int, token: str) -> None:
            await reply.event(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": token},
                },
                "content_block_delta",
            )

        await self._emit_tokens(request, send)
        await reply.event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        if b.tool_use is not None:
            call_id, name, arguments = b.tool_use
            block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            await reply.event(
                {"type": "content_block_start", "index": 1, "content_block": block},
                "content_block_start",
            )
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                delta = {"type": "input_json_delta", "partial_json": piece}
                await reply.event(
                    {"type": "content_block_delta", "index": 1, "delta": delta},
                    "content_block_delta",
                )
            await reply.event({"type": "content_block_stop", "index": 1}, "content_block_stop")
        await reply.event(
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "end_turn" if b.tool_use is None else "tool_use",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": len(b.tokens)},
            },
            "message_delta",
        )
        await reply.event({"type": "message_stop"}, "message_stop")
        await reply.end_stream()

    async def _play(self, request: RecordedRequest, reply: _Reply) -> None:
        assert self.cassette is not None
        response = self.cassette["response"]
        status = int(response["status"]["code"])
        raw = response["body"]["string"]
        data = raw.encode() if isinstance(raw, str) else bytes(raw)
        headers: dict[str, str] = {}
        for name, value in (response.get("headers") or {}).items():
            if name.lower() in _HOP_BY_HOP:
                continue
            if isinstance(value, list):
                value = value[0] if value else ""
            if isinstance(value, bytes):
                value = value.decode("latin-1")
            headers[name.lower()] = str(value)
        encoding = _recorded_header(response, "content-encoding")
        if encoding == "gzip" and data[:2] == b"\x1f\x8b":
            # Served compressed, as recorded (a recording can claim gzip over a plain body: then
            # the header is dropped).
            headers["content-encoding"] = "gzip"
        content_type = headers.pop("content-type", self.cassette_content_type or "application/json")
        pieces = None if "content-encoding" in headers else stream_pieces(content_type, data)
        if pieces is None:
            await reply.whole(status, data, content_type, headers)
            return
        await reply.start_stream(status, headers, content_type)
        for piece in pieces:
            await reply.chunk(piece)
        await reply.end_stream()


def _recorded_header(response: dict[str, Any], wanted: str) -> str | None:
    for name, value in (response.get("headers") or {}).items():
        if name.lower() == wanted:
            if isinstance(value, list):
                value = value[0] if value else ""
            if isinstance(value, bytes):
                value = value.decode("latin-1")
            return str(value).strip().lower()
    return None
