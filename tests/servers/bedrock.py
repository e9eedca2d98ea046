"""Amazon Bedrock Runtime's wire format on the simulated model server.

Paths (as boto3's ``bedrock-runtime`` client sends them, model id URL-quoted):

- ``POST /model/{modelId}/converse`` and ``/converse-stream``: the Converse API, one shape for
  every model (``usage.inputTokens``/``outputTokens``, ``stopReason``, ``metrics.latencyMs``);
- ``POST /model/{modelId}/invoke`` and ``/invoke-with-response-stream``: the model's own body
  format, chosen by the model id's family (Anthropic Messages, Amazon Nova, Amazon Titan text
  and embeddings, Meta Llama, Mistral, Cohere Command), with the
  ``X-Amzn-Bedrock-*-Token-Count`` and ``-Invocation-Latency`` headers InvokeModel carries;
- ``POST /guardrail/{id}/version/{version}/apply``: ApplyGuardrail, answering action ``NONE``
  after the headers delay.

Streams are AWS event-stream messages (``application/vnd.amazon.eventstream``), encoded here
frame by frame so botocore's own decoder reads them: a prelude (total and headers length, big
endian) and its CRC32, string headers (``:event-type``, ``:content-type``, ``:message-type``),
the JSON payload, and the CRC32 of the whole message. InvokeModelWithResponseStream wraps each
of the model's JSON chunks as ``{"bytes": base64}`` in a ``chunk`` event.

The Behaviour's delays, tokens, status and ``fail_after_chunks`` apply as on the OpenAI paths.
An error status answers AWS's JSON error shape (``{"message": ...}`` with ``x-amzn-ErrorType``).
``server.bedrock_stream_exception`` (a shape name such as ``modelStreamErrorException``), when
set, ends a stream with that exception message after ``fail_after_chunks`` content chunks
instead of cutting the connection. With ``fail_after_chunks`` set, InvokeModel sends its headers
and half its body, then cuts the connection.
"""

from __future__ import annotations

import base64
import json
import struct
import time
import zlib
from typing import Any
from urllib.parse import unquote

from tests.servers.model_server import Abort, ModelServer, RecordedRequest, Reply, sleep_until

EVENTSTREAM = "application/vnd.amazon.eventstream"

# HTTP status -> the x-amzn-ErrorType Bedrock answers with it.
ERROR_TYPES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}


def _header(name: str, value: str) -> bytes:
    encoded_name, encoded_value = name.encode(), value.encode()
    # type 7: string, with a two-byte length
    return (
        bytes([len(encoded_name)])
        + encoded_name
        + b"\x07"
        + struct.pack(">H", len(encoded_value))
        + encoded_value
    )


def eventstream_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message, CRCs included."""
    encoded_headers = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(encoded_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded_headers))
    prelude_crc = struct.pack(">I", zlib.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + prelude_crc + encoded_headers + payload
    return message + struct.pack(">I", zlib.crc32(message) & 0xFFFFFFFF)


def event(event_type: str, payload: Any) -> bytes:
    return eventstream_message(
        {
            ":event-type": event_type,
            ":content-type": "application/json",
            ":message-type": "event",
        },
        json.dumps(payload).encode(),
    )


def exception(exception_type: str, message: str) -> bytes:
    return eventstream_message(
        {
            ":exception-type": exception_type,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps({"message": message}).encode(),
    )


def chunk(payload: Any) -> bytes:
    """An InvokeModelWithResponseStream chunk: the model's JSON, base64 in ``bytes``."""
    data = base64.b64encode(json.dumps(payload).encode()).decode()
    return event("chunk", {"bytes": data})


def family(model_id: str) -> str:
    """``anthropic``, ``nova``, ``titan-embed``, ``titan``, ``meta``, ``mistral``, ``cohere``."""
    name = model_id.rsplit("/", 1)[-1]
    for prefix in ("us.", "eu.", "apac.", "global."):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    if name.startswith("amazon.nova"):
        return "nova"
    if name.startswith("amazon.titan-embed"):
        return "titan-embed"
    if name.startswith("amazon.titan"):
        return "titan"
    return name.split(".", 1)[0]


def _split(path: str) -> tuple[str, str] | None:
    """(model id, action) of ``/model/{modelId}/{action}``."""
    if not path.startswith("/model/"):
        return None
    model, _, action = path[len("/model/") :].rpartition("/")
    return unquote(model), action


def _matches(path: str) -> bool:
    if path.startswith("/guardrail/") and path.endswith("/apply"):
        return True
    split = _split(path)
    return split is not None and split[1] in _HANDLERS and split[1] != "apply"


async def _handle(server: ModelServer, request: RecordedRequest, body: Any, reply: Reply) -> None:
    path = request.path.split("?", 1)[0]
    split = _split(path) or ("", "apply")
    model_id, action = split
    b = server.behaviour
    if b.status >= 400:
        await sleep_until(request.arrived_at + b.headers_delay)
        error_type = ERROR_TYPES.get(b.status, "InternalServerException")
        await reply.whole(
            b.status,
            json.dumps({"message": b.error_message}).encode(),
            "application/json",
            {
                "x-amzn-ErrorType": f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/",
                "x-amzn-RequestId": _request_id(server),
            },
        )
        return
    await _HANDLERS[action](server, request, body or {}, reply, model_id)


def _request_id(server: ModelServer) -> str:
    server._counter += 1
    return f"00000000-0000-4000-8000-{server._counter:012d}"


def _latency_ms(request: RecordedRequest) -> int:
    return int((time.monotonic() - request.arrived_at) * 1000)


async def _converse(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply, model_id: str
) -> None:
    b = server.behaviour
    await server.whole_after_generation(request)
    payload = {
        "output": {"message": {"role": "assistant", "content": [{"text": "".join(b.tokens)}]}},
        "stopReason": "end_turn",
        "usage": {
            "inputTokens": b.input_tokens,
            "outputTokens": len(b.tokens),
            "totalTokens": b.input_tokens + len(b.tokens),
        },
        "metrics": {"latencyMs": _latency_ms(request)},
    }
    await reply.whole(
        200,
        json.dumps(payload).encode(),
        "application/json",
        {"x-amzn-RequestId": _request_id(server)},
    )


async def _stream(
    server: ModelServer,
    request: RecordedRequest,
    reply: Reply,
    before: list[bytes],
    delta: Any,
    after: Any,
) -> None:
    """Headers, the frames before the content, one frame per token (``delta(index, token)``
    returns its frames), then ``after()``'s frames."""
    b = server.behaviour
    await sleep_until(request.arrived_at + b.headers_delay)
    await reply.start_stream(200, {"x-amzn-RequestId": _request_id(server)}, EVENTSTREAM)
    for frame in before:
        await reply.chunk(frame)
    failure = getattr(server, "bedrock_stream_exception", None)
    limit = b.fail_after_chunks

    async def send(index: int, token: str) -> None:
        for frame in delta(index, token):
            await reply.chunk(frame)

    if failure is not None and limit is not None:
        # The exception message comes instead of the cut: the behaviour must not cut.
        server.behaviour.fail_after_chunks = None
        server.behaviour.tokens, rest = b.tokens[:limit], b.tokens
        try:
            await server.emit_tokens(request, send)
        finally:
            server.behaviour.tokens, server.behaviour.fail_after_chunks = rest, limit
        await reply.chunk(exception(failure, "simulated stream failure"))
        await reply.end_stream()
        return
    await server.emit_tokens(request, send)
    for frame in after():
        await reply.chunk(frame)
    await reply.end_stream()


async def _converse_stream(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply, model_id: str
) -> None:
    b = server.behaviour

    def after() -> list[bytes]:
        return [
            event("contentBlockStop", {"contentBlockIndex": 0}),
            event("messageStop", {"stopReason": "end_turn"}),
            event(
                "metadata",
                {
                    "usage": {
                        "inputTokens": b.input_tokens,
                        "outputTokens": len(b.tokens),
                        "totalTokens": b.input_tokens + len(b.tokens),
                    },
                    "metrics": {"latencyMs": _latency_ms(request)},
                },
            ),
        ]

    await _stream(
        server,
        request,
        reply,
        [event("messageStart", {"role": "assistant"})],
        lambda index, token: [
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": token}})
        ],
        after,
    )


def _invocation_metrics(server: ModelServer, request: RecordedRequest) -> dict[str, Any]:
    b = server.behaviour
    first = request.first_token_sent_at
    return {
        "inputTokenCount": b.input_tokens,
        "outputTokenCount": len(b.tokens),
        "invocationLatency": _latency_ms(request),
        "firstByteLatency": int(((first or request.arrived_at) - request.arrived_at) * 1000),
    }


def _invoke_body(server: ModelServer, model_id: str, body: Any) -> dict[str, Any]:
    """A whole InvokeModel answer in the model family's format."""
    b = server.behaviour
    text = "".join(b.tokens)
    kind = family(model_id)
    if kind == "anthropic":
        if "prompt" in body:  # Claude 2 text completion
            return {"type": "completion", "completion": text, "stop_reason": "stop_sequence"}
        return {
            "id": f"msg_bdrk_sim{server._counter}",
            "type": "message",
            "role": "assistant",
            "model": model_id.split(".", 1)[-1].rsplit("-v", 1)[0],
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": b.input_tokens, "output_tokens": len(b.tokens)},
        }
    if kind == "nova":
        return {
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": "end_turn",
            "usage": {
                "inputTokens": b.input_tokens,
                "outputTokens": len(b.tokens),
                "totalTokens": b.input_tokens + len(b.tokens),
            },
        }
    if kind == "titan-embed":
        return {"embedding": [0.125] * 8, "inputTextTokenCount": b.input_tokens}
    if kind == "titan":
        return {
            "inputTextTokenCount": b.input_tokens,
            "results": [
                {"tokenCount": len(b.tokens), "outputText": text, "completionReason": "FINISH"}
            ],
        }
    if kind == "meta":
        return {
            "generation": text,
            "prompt_token_count": b.input_tokens,
            "generation_token_count": len(b.tokens),
            "stop_reason": "stop",
        }
    if kind == "mistral":
        return {"outputs": [{"text": text, "stop_reason": "stop"}]}
    if kind == "cohere":
        return {
            "id": f"cohere-sim-{server._counter}",
            "generations": [{"id": "g-1", "text": text, "finish_reason": "COMPLETE"}],
        }
    return {"completion": text}


async def _invoke(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply, model_id: str
) -> None:
    b = server.behaviour
    if family(model_id) == "titan-embed":
        await sleep_until(request.arrived_at + b.headers_delay)
    else:
        await server.whole_after_generation(request)
    request_id = _request_id(server)
    payload = _invoke_body(server, model_id, body)
    headers = {
        "x-amzn-RequestId": request_id,
        "X-Amzn-Bedrock-Input-Token-Count": str(b.input_tokens),
        "X-Amzn-Bedrock-Invocation-Latency": str(_latency_ms(request)),
    }
    if family(model_id) != "titan-embed":
        headers["X-Amzn-Bedrock-Output-Token-Count"] = str(len(b.tokens))
    data = json.dumps(payload).encode()
    if b.fail_after_chunks is not None:
        # The headers and half the body, then the connection is cut.
        head = [
            "HTTP/1.1 200 OK",
            "content-type: application/json",
            f"content-length: {len(data)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        reply.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data[: len(data) // 2])
        await reply.writer.drain()
        raise Abort()
    await reply.whole(200, data, "application/json", headers)


def _stream_chunks(
    server: ModelServer, request: RecordedRequest, model_id: str
) -> tuple[list[bytes], Any, Any]:
    """(frames before the content, frames of one token, frames after) of one model family."""
    b = server.behaviour
    kind = family(model_id)
    if kind == "anthropic":
        start = {
            "type": "message_start",
            "message": {
                "id": f"msg_bdrk_sim{server._counter}",
                "type": "message",
                "role": "assistant",
                "model": model_id.split(".", 1)[-1].rsplit("-v", 1)[0],
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": b.input_tokens, "output_tokens": 1},
            },
        }
        return (
            [
                chunk(start),
                chunk(
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    }
                ),
            ],
            lambda index, token: [
                chunk(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": token},
                    }
                )
            ],
            lambda: [
                chunk({"type": "content_block_stop", "index": 0}),
                chunk(
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {"output_tokens": len(b.tokens)},
                    }
                ),
                chunk(
                    {
                        "type": "message_stop",
                        "amazon-bedrock-invocationMetrics": _invocation_metrics(server, request),
                    }
                ),
            ],
        )
    if kind == "nova":
        return (
            [chunk({"messageStart": {"role": "assistant"}})],
            lambda index, token: [
                chunk({"contentBlockDelta": {"delta": {"text": token}, "contentBlockIndex": 0}})
            ],
            lambda: [
                chunk({"contentBlockStop": {"contentBlockIndex": 0}}),
                chunk({"messageStop": {"stopReason": "end_turn"}}),
                chunk(
                    {
                        "metadata": {
                            "usage": {
                                "inputTokens": b.input_tokens,
                                "outputTokens": len(b.tokens),
                            },
                            "metrics": {},
                            "trace": {},
                        },
                        "amazon-bedrock-invocationMetrics": _invocation_metrics(server, request),
                    }
                ),
            ],
        )
    if kind == "titan":
        last = len(b.tokens) - 1
        return (
            [],
            lambda index, token: [
                chunk(
                    {
                        "outputText": token,
                        "index": 0,
                        "totalOutputTextTokenCount": index + 1,
                        "completionReason": "FINISH" if index == last else None,
                        "inputTextTokenCount": b.input_tokens if index == 0 else None,
                        **(
                            {
                                "amazon-bedrock-invocationMetrics": _invocation_metrics(
                                    server, request
                                )
                            }
                            if index == last
                            else {}
                        ),
                    }
                )
            ],
            lambda: [],
        )
    # Meta Llama (and the default)
    return (
        [],
        lambda index, token: [
            chunk(
                {
                    "generation": token,
                    "prompt_token_count": b.input_tokens if index == 0 else None,
                    "generation_token_count": index + 1,
                    "stop_reason": None,
                }
            )
        ],
        lambda: [
            chunk(
                {
                    "generation": "",
                    "prompt_token_count": None,
                    "generation_token_count": len(b.tokens),
                    "stop_reason": "stop",
                    "amazon-bedrock-invocationMetrics": _invocation_metrics(server, request),
                }
            )
        ],
    )


async def _invoke_stream(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply, model_id: str
) -> None:
    before, delta, after = _stream_chunks(server, request, model_id)
    await _stream(server, request, reply, before, delta, after)


async def _apply_guardrail(
    server: ModelServer, request: RecordedRequest, body: Any, reply: Reply, model_id: str
) -> None:
    """ApplyGuardrail (``/guardrail/{id}/version/{version}/apply``): nothing to act on."""
    await sleep_until(request.arrived_at + server.behaviour.headers_delay)
    payload = {"action": "NONE", "outputs": [], "assessments": [], "usage": {}}
    await reply.whole(
        200,
        json.dumps(payload).encode(),
        "application/json",
        {"x-amzn-RequestId": _request_id(server)},
    )


_HANDLERS = {
    "apply": _apply_guardrail,
    "converse": _converse,
    "converse-stream": _converse_stream,
    "invoke": _invoke,
    "invoke-with-response-stream": _invoke_stream,
}


def register(server: ModelServer) -> None:
    """Answer Bedrock Runtime's paths on ``server``."""
    server.add_route("bedrock", _matches, _handle)
