"""``ollama`` (0.4 to 0.x): one span per ``chat``, ``generate``, ``embed`` and ``embeddings`` call.

Covers ``ollama.Client`` and ``ollama.AsyncClient``, streamed or not, and the module-level
functions (``ollama.chat(...)``: bound methods of a default client made at import, so the wrapper
sits on the clients' ``_request``, which every one of those methods calls, and not on the methods
themselves). Other requests of the client (``pull``, ``list``, ``show``, ...) are not model calls
and are left to the HTTP layer.

What a call records, besides the attributes every model span has (``gen_ai.provider.name`` is
``ollama``):

- ``chat`` is ``chat``, ``generate`` is ``text_completion``, ``embed`` and the older
  ``embeddings`` are ``embeddings`` (stage ``embedding``);
- usage as the server reports it: ``prompt_eval_count`` is ``gen_ai.usage.input_tokens``,
  ``eval_count`` is ``gen_ai.usage.output_tokens`` (Ollama leaves ``prompt_eval_count`` out when
  the whole prompt was cached: then no input count is written);
- ``done_reason`` is the finish reason (Ollama says ``stop`` for an answer that calls tools too);
- the server's own timings, nanoseconds in the final response or the last stream line, as
  ``llmtrace.server.*`` seconds: ``load_duration`` is ``load_time`` (Ollama times it from the
  request's arrival until a loaded model is ready for it: loading, and waiting for the
  scheduler), ``prompt_eval_duration`` is ``prompt_time``, ``eval_duration`` is
  ``generation_time``, ``total_duration`` is ``processing_time``. The report counts the load
  time as stage ``load``, out of the call's ``ttft``.

A streamed call's request is sent when its iteration starts (the client returns a generator): the
span starts at the call, like every other stream's, and the model call is in flight (so the HTTP
layer below times the headers and adds no span of its own) during that first step only, never
across a ``yield``. Its times (to headers, to the first token) count from the call, so a caller
who waits before iterating sees that wait in them; a stream never iterated sent no request and
ends ``abandoned``.

``thinking`` output (a thinking model's reasoning) counts as output for the time to first token,
as reasoning content does for OpenAI-compatible servers; its text is recorded only when content
capture is on, as the output message's ``reasoning_content`` (the name OpenAI-compatible servers
use) in ``gen_ai.output.messages``. Tool calls count as output too, and with capture on they are
part of the output message, in OpenAI's shape (the client keeps no tool call id).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace._checks import is_int
from llmtrace._urls import default_port
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.chat_format import messages_of, tool_call_parts
from llmtrace.instrumentation.model_call import (
    Fields,
    acall_model,
    call_model,
    fail_model_call,
    fields_of,
    start_planned_call,
)
from llmtrace.instrumentation.response_summary import ResponseSummary
from llmtrace.instrumentation.server_timings import server_timings_from_ollama
from llmtrace.sdk import content
from llmtrace.sdk._safety import log_once
from llmtrace.sdk.gate import (
    ModelCall,
    capture_settings,
    enter_model_call,
    leave_model_call,
)
from llmtrace.sdk.streaming import (
    STATUS_OK,
    StreamedText,
    StreamRecorder,
    TracedAsyncStream,
    TracedStream,
    end_model_call,
)

logger = logging.getLogger(__name__)

_START_FAILED = "ollama model call span start failed"

PROVIDER = "ollama"

# Request path -> (gen_ai.operation.name, llmtrace.stage)
_OPERATIONS: dict[str, tuple[str, str]] = {
    "/api/chat": (semconv.OP_CHAT, semconv.LLM_STAGE),
    "/api/generate": (semconv.OP_TEXT_COMPLETION, semconv.LLM_STAGE),
    "/api/embed": (semconv.OP_EMBEDDINGS, "embedding"),
    "/api/embeddings": (semconv.OP_EMBEDDINGS, "embedding"),
}

# Ollama ``options`` -> GenAI request attribute (numbers only).
_OPTIONS: dict[str, str] = {
    "num_predict": semconv.GEN_AI_REQUEST_MAX_TOKENS,
    "temperature": semconv.GEN_AI_REQUEST_TEMPERATURE,
    "top_p": semconv.GEN_AI_REQUEST_TOP_P,
    "top_k": semconv.GEN_AI_REQUEST_TOP_K,
    "seed": semconv.GEN_AI_REQUEST_SEED,
    "frequency_penalty": semconv.GEN_AI_REQUEST_FREQUENCY_PENALTY,
    "presence_penalty": semconv.GEN_AI_REQUEST_PRESENCE_PENALTY,
}


def summarize(summary: ResponseSummary, fields: Fields) -> dict[str, Any]:
    """Fill ``summary`` with what Ollama's final response (or last stream line) says about the
    call (model, finish reason, token counts; only what it reported), and return the server's
    timings in seconds, the attributes that follow the summary's."""
    model = fields.get("model")
    if isinstance(model, str) and model:
        summary.response_model = model
    reason = fields.get("done_reason")
    if isinstance(reason, str) and reason:
        summary.finish_reasons = [reason]
    usage: dict[str, Any] = {}
    input_tokens = fields.get("prompt_eval_count")
    if is_int(input_tokens):
        usage[semconv.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
    output_tokens = fields.get("eval_count")
    if is_int(output_tokens):
        usage[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
    summary.usage = usage
    # Every decoded response's fields are a dict (see fields_of).
    return server_timings_from_ollama(cast(Mapping[str, Any], fields))


def _tool_calls(message: Any) -> list[dict[str, Any]]:
    """A message's tool calls in the OpenAI shape (arguments as a JSON string)."""
    calls = []
    for call in fields_of(message).get("tool_calls") or ():
        function = fields_of(fields_of(call).get("function"))
        arguments = function.get("arguments")
        if hasattr(arguments, "items"):
            arguments = dict(arguments.items())
        entry: dict[str, Any] = {
            "type": "function",
            "function": {
                "name": function.get("name"),
                "arguments": json.dumps(arguments, default=str),
            },
        }
        call_id = fields_of(call).get("id")
        if isinstance(call_id, str):
            entry["id"] = call_id
        calls.append(entry)
    return calls


def _output_message(
    text: str, thinking: str, tool_calls: list[dict[str, Any]], finish_reason: Any
) -> dict[str, Any]:
    return content.output_message(text, tool_call_parts(tool_calls), finish_reason, thinking)


@dataclass(slots=True)
class _Plan:
    span_name: str
    attributes: dict[str, Any]
    operation: str
    streamed: bool
    # (max bytes, redaction hook) when content is captured, else None.
    output_budget: tuple[int, Callable[[str], str] | None] | None


def _output_parts(operation: str, fields: Fields) -> tuple[str, str, Any]:
    """(text, thinking, message) of a chat or generate response or chunk."""
    if operation == semconv.OP_CHAT:
        message = fields.get("message")
        get = fields_of(message).get
        return get("content") or "", get("thinking") or "", message
    return fields.get("response") or "", fields.get("thinking") or "", None


def _record_whole(span: Span, plan: _Plan, response: Any, attributes: dict[str, Any]) -> None:
    fields = fields_of(response)
    summary = ResponseSummary()
    timings = summarize(summary, fields)
    if plan.operation == semconv.OP_EMBEDDINGS:
        embeddings = fields.get("embeddings")
        first = embeddings[0] if embeddings else fields.get("embedding")
        if first:
            timings[semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = len(first)
    elif plan.output_budget is not None:
        text, thinking, message = _output_parts(plan.operation, fields)
        tools = _tool_calls(message) if message is not None else []
        reason = fields.get("done_reason")
        summary.output = content.encode_messages(
            [_output_message(text, thinking, tools, reason)], *plan.output_budget
        )
    summary.record(span, attributes, timings)


def _finish_whole(response: Any, call: ModelCall, plan: _Plan) -> Any:
    """End a non-streamed call's span with what its response says."""
    span = call.span
    try:
        collected = call.take_collected()
        if span.is_recording():
            _record_whole(span, plan, response, collected)
        span.set_status(STATUS_OK)
    except Exception:
        log_once(logger, "ollama response recording failed")
    finally:
        end_model_call(call)
    return response


class ChunkParser(ResponseSummary):
    """Ollama's stream lines (``ChatResponse`` / ``GenerateResponse``): text, thinking or tool
    calls count as output; the line with ``done`` carries the counts and timings. O(1) state
    unless content is captured."""

    __slots__ = ("_chat", "_final", "_thinking", "_tools")

    def __init__(self, chat: bool, budget: tuple[int, Callable[[str], str] | None] | None) -> None:
        # With content capture on: the answer's text and its thinking, each within the budget.
        ResponseSummary.__init__(self, StreamedText(*budget) if budget is not None else None)
        self._chat = chat
        self._final: Any = None
        self._thinking = StreamedText(*budget) if budget is not None else None
        self._tools: list[dict[str, Any]] = []

    def has_content(self, chunk: Any) -> bool:
        if self._chat:
            message = chunk.message
            return bool(message.content or message.thinking or message.tool_calls)
        return bool(chunk.response or chunk.thinking)

    def observe(self, chunk: Any) -> None:
        if self.response_model is None:
            self.response_model = chunk.model
        if chunk.done:
            self._final = chunk
        if self.text is not None and self._thinking is not None:
            text, thinking, message = _output_parts(
                semconv.OP_CHAT if self._chat else semconv.OP_TEXT_COMPLETION, fields_of(chunk)
            )
            self.text.add(text)
            self._thinking.add(thinking)
            if message is not None:
                self._tools.extend(_tool_calls(message))

    def output_tokens(self) -> int | None:
        count = getattr(self._final, "eval_count", None)
        return count if is_int(count) else None

    def finish(self, span: Span) -> None:
        timings: dict[str, Any] = {}
        if self._final is not None:
            self.response_model = None
            timings = summarize(self, fields_of(self._final))
        elif not (isinstance(self.response_model, str) and self.response_model):
            self.response_model = None
        if self.text is not None and self._thinking is not None:
            self.output = self.text.output_messages(
                reasoning="".join(self._thinking.parts),
                tool_calls=tool_call_parts(self._tools),
                finish_reason=fields_of(self._final).get("done_reason")
                if self._final is not None
                else None,
            )
        self.set_on(span, timings)


def _note_status(call: ModelCall, exc: BaseException) -> None:
    """An HTTP error's status on the span (``ResponseError.status_code``; -1 for an error line
    in a stream, which has none)."""
    status = getattr(exc, "status_code", None)
    if is_int(status) and status >= 100 and call.span.is_recording():
        call.span.set_attribute(semconv.HTTP_RESPONSE_STATUS_CODE, status)


class _SentOnFirstStep:
    """The client's stream generator, with the model call in flight during its first step (when
    the request is sent and the headers come back), and only then."""

    __slots__ = ("_call", "_generator")

    def __init__(self, generator: Any, call: ModelCall) -> None:
        self._generator = generator
        self._call: ModelCall | None = call

    def __iter__(self) -> _SentOnFirstStep:
        return self

    def __next__(self) -> Any:
        call = self._call
        if call is None:
            return next(self._generator)
        self._call = None
        in_flight = enter_model_call(call)
        try:
            return next(self._generator)
        except StopIteration:
            raise
        except BaseException as exc:
            _note_status(call, exc)
            raise
        finally:
            leave_model_call(in_flight)

    def close(self) -> None:
        self._generator.close()


class _AsyncSentOnFirstStep:
    """:class:`_SentOnFirstStep` for the asynchronous client's async generator."""

    __slots__ = ("_call", "_generator")

    def __init__(self, generator: Any, call: ModelCall) -> None:
        self._generator = generator
        self._call: ModelCall | None = call

    def __aiter__(self) -> _AsyncSentOnFirstStep:
        return self

    async def __anext__(self) -> Any:
        call = self._call
        if call is None:
            return await self._generator.__anext__()
        self._call = None
        in_flight = enter_model_call(call)
        try:
            return await self._generator.__anext__()
        except StopAsyncIteration:
            raise
        except BaseException as exc:
            _note_status(call, exc)
            raise
        finally:
            leave_model_call(in_flight)

    async def aclose(self) -> None:
        await self._generator.aclose()


def _endpoint(instance: Any) -> dict[str, Any]:
    url = instance._client.base_url
    port = url.port or default_port(url.scheme)
    return {
        semconv.GEN_AI_PROVIDER_NAME: PROVIDER,
        semconv.SERVER_ADDRESS: url.host,
        semconv.SERVER_PORT: port,
    }


def _request_attributes(body: Mapping[str, Any]) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    options = body.get("options")
    if isinstance(options, Mapping):
        for name, attribute in _OPTIONS.items():
            value = options.get(name)
            if value is not None and value.__class__ in (int, float):
                attributes[attribute] = value
        stop = options.get("stop")
        if isinstance(stop, list | tuple) and stop and all(isinstance(s, str) for s in stop):
            attributes[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] = list(stop)
    return attributes


def _input_content(path: str, body: Mapping[str, Any]) -> Any:
    if path == "/api/chat":
        return body.get("messages")
    if path == "/api/embed":
        return body.get("input")
    return body.get("prompt")


def _plan(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Plan | None:
    """Whether ``client._request(cls, method, path, json=..., stream=...)`` is a model call."""
    path = args[2] if len(args) > 2 else kwargs.get("url")
    if not isinstance(path, str):
        return None
    matched = _OPERATIONS.get(path)
    if matched is None:
        return None
    operation, stage = matched
    body = kwargs.get("json")
    if not isinstance(body, Mapping):
        body = {}
    model = body.get("model")
    streamed = bool(kwargs.get("stream"))
    attributes: dict[str, Any] = {
        semconv.STAGE: stage,
        semconv.GEN_AI_OPERATION_NAME: operation,
        **_endpoint(instance),
    }
    if isinstance(model, str) and model:
        attributes[semconv.GEN_AI_REQUEST_MODEL] = model
    if operation != semconv.OP_EMBEDDINGS:
        attributes[semconv.GEN_AI_REQUEST_STREAM] = streamed
    else:
        inputs = body.get("input", body.get("prompt"))
        attributes[semconv.EMBEDDING_INPUT_COUNT] = (
            len(inputs) if isinstance(inputs, list | tuple) else 1
        )
    attributes.update(_request_attributes(body))
    capture, max_bytes, redact, _ = capture_settings()
    if capture:
        given = _input_content(path, body)
        if given is not None:
            attributes[semconv.GEN_AI_INPUT_MESSAGES] = content.encode_messages(
                messages_of(given), max_bytes, redact
            )
        system = body.get("system")
        if isinstance(system, str) and system:
            attributes[semconv.GEN_AI_SYSTEM_INSTRUCTIONS] = content.encode_parts(
                [content.text_part(system)], max_bytes, redact
            )
    return _Plan(
        span_name=f"{operation} {model}" if model else operation,
        attributes=attributes,
        operation=operation,
        streamed=streamed,
        output_budget=(max_bytes, redact) if capture else None,
    )


def _traced_stream(generator: Any, call: ModelCall, plan: _Plan, asynchronous: bool) -> Any:
    """The client's stream generator, recorded chunk by chunk (the span ends with it)."""
    try:
        parser = ChunkParser(plan.operation == semconv.OP_CHAT, plan.output_budget)
        recorder = StreamRecorder(call.span, started_at=call.started_at, parser=parser)
        # Set at the stream's end, with the phases that complete while it is read.
        recorder.collected = call.collected
        if asynchronous:
            return TracedAsyncStream(_AsyncSentOnFirstStep(generator, call), recorder)
        return TracedStream(_SentOnFirstStep(generator, call), recorder)
    except Exception:
        log_once(logger, "ollama stream wrapping failed")
        end_model_call(call)
        return generator


def _request(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    started = start_planned_call(_plan, instance, args, kwargs, _START_FAILED)
    if started is None:
        return wrapped(*args, **kwargs)
    plan, call = started
    if plan.streamed:
        # Nothing is sent yet: the client returns a generator that sends on its first step.
        try:
            generator = wrapped(*args, **kwargs)
        except BaseException as exc:
            fail_model_call(call, exc)
            raise
        return _traced_stream(generator, call, plan, asynchronous=False)
    return call_model(call, wrapped, args, kwargs, _finish_whole, plan)


async def _async_request(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    started = start_planned_call(_plan, instance, args, kwargs, _START_FAILED)
    if started is None:
        return await wrapped(*args, **kwargs)
    plan, call = started
    if plan.streamed:
        try:
            generator = await wrapped(*args, **kwargs)
        except BaseException as exc:
            fail_model_call(call, exc)
            raise
        return _traced_stream(generator, call, plan, asynchronous=True)
    return await acall_model(call, wrapped, args, kwargs, _finish_whole, plan)


class OllamaInstrumentor(LibraryInstrumentor):
    """Traces model calls of ``ollama.Client`` / ``ollama.AsyncClient`` and ``ollama.chat`` & co."""

    package = "ollama"
    supported = ">= 0.4, < 1"

    def patches(self) -> Iterable[PatchRow]:
        return [
            ("ollama._client", "Client._request", _request),
            ("ollama._client", "AsyncClient._request", _async_request),
        ]
