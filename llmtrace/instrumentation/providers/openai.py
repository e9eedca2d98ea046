"""``openai`` (3.x): one span per chat completion, completion, embeddings and Responses API call.

Covers sync and async clients, streaming or not, ``.with_raw_response``,
``.with_streaming_response`` and the ``stream()``/``parse()`` helpers (they all go through the
client's ``request``, see :mod:`llmtrace.instrumentation.model_call`), and every OpenAI-compatible
server the client is pointed at (``gen_ai.provider.name`` from the base URL, see
:mod:`llmtrace.instrumentation.provider`).

With ``inject_stream_usage`` on (``LLMTRACE_INJECT_STREAM_USAGE=1``), a streamed chat or text
completion that did not ask for usage is sent with ``stream_options={"include_usage": true}``
so token counts are known; the extra usage-only chunk is read by llmtrace and never handed to
the caller, who sees exactly the chunks they would have seen.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace._checks import is_int
from llmtrace._urls import default_port
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.chat_format import chat_input_messages, chat_message
from llmtrace.instrumentation.model_call import (
    Plan,
    _model_fields,
    base_url_of,
    field_of,
    fields_of,
    request_patches,
)
from llmtrace.instrumentation.provider import configured_provider_name, provider_name
from llmtrace.instrumentation.response_summary import ResponseSummary
from llmtrace.sdk import content
from llmtrace.sdk.gate import capture_settings
from llmtrace.sdk.streaming import StreamedText

logger = logging.getLogger(__name__)


# Request path suffix -> (gen_ai.operation.name, llmtrace.stage)
_OPERATIONS: dict[str, tuple[str, str]] = {
    "/chat/completions": (semconv.OP_CHAT, semconv.LLM_STAGE),
    "/completions": (semconv.OP_TEXT_COMPLETION, semconv.LLM_STAGE),
    "/embeddings": (semconv.OP_EMBEDDINGS, "embedding"),
    "/responses": (semconv.OP_CHAT, semconv.LLM_STAGE),
}

_REQUEST_PARAMETERS: dict[str, str] = {
    "max_tokens": semconv.GEN_AI_REQUEST_MAX_TOKENS,
    "max_completion_tokens": semconv.GEN_AI_REQUEST_MAX_TOKENS,
    "max_output_tokens": semconv.GEN_AI_REQUEST_MAX_TOKENS,
    "temperature": semconv.GEN_AI_REQUEST_TEMPERATURE,
    "top_p": semconv.GEN_AI_REQUEST_TOP_P,
    "seed": semconv.GEN_AI_REQUEST_SEED,
    "frequency_penalty": semconv.GEN_AI_REQUEST_FREQUENCY_PENALTY,
    "presence_penalty": semconv.GEN_AI_REQUEST_PRESENCE_PENALTY,
}


# Exact classes: bool is an int subclass and is not a sampling parameter value.
_NUMBERS = (int, float)


@functools.lru_cache(maxsize=256)
def _operation_of(url: str) -> tuple[str, str, str] | None:
    path = url.split("?", 1)[0].rstrip("/")
    for suffix, (operation, stage) in _OPERATIONS.items():
        if path.endswith(suffix) and not (
            suffix == "/completions" and path.endswith("/chat/completions")
        ):
            return suffix, operation, stage
    return None


# Every body key request_attributes reads: most requests carry none of them.
_PARAMETER_KEYS = frozenset(_REQUEST_PARAMETERS) | {"stop", "n", "encoding_format"}


def request_attributes(body: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling and output parameters of an OpenAI-shaped request (LiteLLM's arguments too)."""
    attributes: dict[str, Any] = {}
    if _PARAMETER_KEYS.isdisjoint(body):
        return attributes
    for name, attribute in _REQUEST_PARAMETERS.items():
        value = body.get(name)
        if value is not None and value.__class__ in _NUMBERS:
            attributes[attribute] = value
    stop = body.get("stop")
    if isinstance(stop, str):
        attributes[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] = [stop]
    elif isinstance(stop, list) and stop and all(isinstance(item, str) for item in stop):
        attributes[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] = stop
    choices = body.get("n")
    if is_int(choices) and choices != 1:
        attributes[semconv.GEN_AI_REQUEST_CHOICE_COUNT] = choices
    encoding = body.get("encoding_format")
    if isinstance(encoding, str):
        attributes[semconv.GEN_AI_REQUEST_ENCODING_FORMATS] = [encoding]
    return attributes


def usage_attributes(usage: Any) -> dict[str, int]:
    """Token counts from a Chat Completions or Responses ``usage`` object (only those reported)."""
    attributes: dict[str, Any] = {}
    if usage is not None:
        _add_usage(attributes, usage)
    return attributes


def _add_usage(attributes: dict[str, Any], usage: Any) -> None:
    """Add the token counts ``usage`` reports (only counts: plain ints)."""
    get = fields_of(usage).get
    input_tokens = get("prompt_tokens")
    if input_tokens is None:
        input_tokens = get("input_tokens")
    output_tokens = get("completion_tokens")
    if output_tokens is None:
        output_tokens = get("output_tokens")
    if is_int(input_tokens):
        attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
    if is_int(output_tokens):
        attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
    # Most servers other than OpenAI's report no details: nothing more to look into then.
    details = get("prompt_tokens_details") or get("input_tokens_details")
    if details is not None:
        cached = fields_of(details).get("cached_tokens")
        if is_int(cached):
            attributes[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = cached
    details = get("completion_tokens_details") or get("output_tokens_details")
    if details is not None:
        reasoning = fields_of(details).get("reasoning_tokens")
        if is_int(reasoning):
            attributes[semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = reasoning


def _responses_finish_reason(response: Any) -> str | None:
    """The Responses API has a status, not a finish reason: map it to the GenAI vocabulary."""
    status = field_of(response, "status")
    if status == "incomplete":
        reason = field_of(field_of(response, "incomplete_details"), "reason")
        return "length" if reason == "max_output_tokens" else str(reason or "incomplete")
    if status == "completed":
        for item in field_of(response, "output") or ():
            if field_of(item, "type") == "function_call":
                return "tool_calls"
        return "stop"
    return str(status) if status else None


def _server_timings_of(timings: Any) -> dict[str, Any]:
    """The attributes of llama.cpp's ``timings`` object of a response body or its last chunk
    (none when it is not one)."""
    if not isinstance(timings, Mapping):
        return {}
    try:
        from llmtrace.instrumentation.server_timings import server_timings_from_body

        return server_timings_from_body({"timings": timings})
    except Exception:
        logger.debug("llmtrace: server timings unavailable", exc_info=True)
        return {}


def _record_response(
    span: Span,
    response: Any,
    attributes: dict[str, Any],
    output_budget: tuple[int, Any] | None = None,
) -> None:
    """Write what a whole (non-streamed) response says onto the span, with ``attributes``."""
    summary = ResponseSummary()
    if response is None:
        summary.record(span, attributes)
        return
    get = fields_of(response).get
    response_id = get("id")
    if isinstance(response_id, str):
        summary.response_id = response_id
    model = get("model")
    if isinstance(model, str):
        summary.response_model = model
    object_type = get("object")
    if object_type == "response":
        reason = _responses_finish_reason(response)
        if reason is not None:
            summary.finish_reasons = [reason]
    else:
        reasons = []
        for choice in get("choices") or ():
            reason = fields_of(choice).get("finish_reason")
            if reason:
                reasons.append(reason if reason.__class__ is str else str(reason))
        if reasons:
            summary.finish_reasons = reasons
        if object_type == "list":
            data = get("data")
            if data:
                embedding = field_of(data[0], "embedding")
                if isinstance(embedding, list):
                    attributes[semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = len(embedding)
    usage = get("usage")
    if usage is not None:
        summary.usage = usage_attributes(usage)
    if output_budget is not None:
        messages = output_messages_of(response)
        if messages:
            summary.output = content.encode_messages(messages, *output_budget)
    timings = get("timings")
    summary.record(span, attributes, _server_timings_of(timings) if timings is not None else None)


def output_messages_of(response: Any) -> list[dict[str, Any]]:
    """The output messages (parts shape) of a chat completion, a legacy completion or a
    Responses API response."""
    if field_of(response, "object") == "response":
        parts: list[dict[str, Any]] = []
        for item in field_of(response, "output") or ():
            kind = field_of(item, "type")
            if kind == "message":
                for block in field_of(item, "content") or ():
                    text = field_of(block, "text")
                    if text is None:
                        text = field_of(block, "refusal")
                    if isinstance(text, str) and text:
                        parts.append(content.text_part(text))
            elif kind == "function_call":
                parts.append(
                    content.tool_call_part(
                        field_of(item, "call_id"),
                        field_of(item, "name"),
                        field_of(item, "arguments"),
                    )
                )
            elif kind == "reasoning":
                for block in field_of(item, "summary") or ():
                    text = field_of(block, "text")
                    if isinstance(text, str) and text:
                        parts.append(content.reasoning_part(text))
        if not parts:
            return []
        return [content.message("assistant", parts, _responses_finish_reason(response) or "stop")]
    messages = []
    for choice in field_of(response, "choices") or ():
        reason = field_of(choice, "finish_reason") or "stop"
        message = field_of(choice, "message")
        if message is None:
            messages.append(content.output_message(field_of(choice, "text") or "", (), reason))
            continue
        messages.append(chat_message(message, reason))
    return messages


def _responses_input_messages(items: Any) -> list[dict[str, Any]]:
    if isinstance(items, str):
        return [content.message("user", [content.text_part(items)])]
    messages: list[dict[str, Any]] = []
    for item in items if isinstance(items, list | tuple) else ():
        kind = field_of(item, "type")
        if kind == "function_call":
            call = content.tool_call_part(
                field_of(item, "call_id"), field_of(item, "name"), field_of(item, "arguments")
            )
            messages.append(content.message("assistant", [call]))
        elif kind == "function_call_output":
            response = content.tool_call_response_part(
                field_of(item, "call_id"), field_of(item, "output")
            )
            messages.append(content.message("tool", [response]))
        else:
            role = field_of(item, "role") or "user"
            messages.append(content.message(role, content.plain_parts(field_of(item, "content"))))
    return messages


def streamed_reasons(reasons: dict[int, Any]) -> tuple[Any, ...] | None:
    """A stream's finish reasons by choice index, in choice order; None when none came."""
    if not reasons:
        return None
    # (Most streams have one choice: its reason needs no ordering.)
    if len(reasons) == 1:
        return tuple(reasons.values())
    return tuple(reasons[index] for index in sorted(reasons))


def summarize_stream(summary: ResponseSummary, reasons: dict[int, Any], usage: Any) -> None:
    """The finish reasons (by choice index) and the last usage object of a stream of
    OpenAI-shaped chunks into ``summary`` (also used for LiteLLM's and LlamaIndex's)."""
    summary.finish_reasons = streamed_reasons(reasons)
    if usage is not None:
        summary.usage = usage_attributes(usage)


class ChatChunkParser(ResponseSummary):
    """Chat Completions and legacy Completions chunks. O(1) state unless content is captured."""

    __slots__ = ("_reasons", "hides", "reported_usage", "timings")

    def __init__(
        self,
        hide_usage: bool = False,
        text_budget: int = 0,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        ResponseSummary.__init__(
            self, StreamedText(text_budget, redact) if text_budget > 0 else None
        )
        # Looked up once per stream by the recorder: None when every chunk is delivered.
        self.hides: Callable[[Any], bool] | None = self._usage_only if hide_usage else None
        self._reasons: dict[int, str] = {}
        # The last usage object a chunk carried, read at the end.
        self.reported_usage: Any = None
        self.timings: Any = None

    def has_content(self, chunk: Any) -> bool:
        # Asked for every chunk until the first token, where it was the costliest step: an
        # attribute read on a pydantic model goes through its __getattr__ hook (and a field the
        # model lacks, reasoning_content on OpenAI's own deltas or delta on a legacy completion's
        # choice, through a raised AttributeError), while its declared fields sit in its
        # __dict__, read once. Extra fields (a server's reasoning_content) are looked at only
        # when the declared ones say nothing. Other shapes go through field_of / fields_of.
        # (A class field_of has not seen yet, not known to be a pydantic model, takes the
        # general way once: field_of learns it.)
        known = _model_fields.get
        for choice in chunk.choices or ():
            delta = choice.__dict__.get("delta") if known(type(choice)) else None
            if delta is None:
                delta = field_of(choice, "delta")
                if delta is None:
                    if field_of(choice, "text"):
                        return True
                    continue
            if known(type(delta)):
                values = delta.__dict__
                if (
                    values.get("content")
                    or values.get("tool_calls")
                    or values.get("function_call")
                    or values.get("refusal")
                    or values.get("reasoning_content")
                ):
                    return True
                extra = delta.__pydantic_extra__
                if not extra:
                    continue
                # Declared fields win over extra values of the same name, as in fields_of.
                fields: Any = {**extra, **values}
            else:
                fields = fields_of(delta)
            get = fields.get
            if (
                get("content")
                or get("tool_calls")
                or get("function_call")
                or get("refusal")
                or get("reasoning_content")
            ):
                return True
        return False

    def _usage_only(self, chunk: Any) -> bool:
        return not chunk.choices and chunk.usage is not None

    def observe(self, chunk: Any) -> None:
        if self.response_id is None:
            self.response_id = chunk.id
            self.response_model = chunk.model
        usage = chunk.usage
        if usage is not None:
            self.reported_usage = usage
            self._remember_timings(chunk)
        for choice in chunk.choices:
            reason = choice.finish_reason
            if reason is not None:
                self._reasons[choice.index] = reason
                if usage is None:
                    self._remember_timings(chunk)
            text = self.text
            if text is not None:
                delta = field_of(choice, "delta")
                if text.bytes_left > 0:
                    text.add(delta.content if delta is not None else field_of(choice, "text"))
                tool_calls = field_of(delta, "tool_calls") if delta is not None else None
                for call in tool_calls or ():
                    function = field_of(call, "function")
                    text.add_tool_call(
                        field_of(call, "index"),
                        field_of(call, "id"),
                        field_of(function, "name"),
                        field_of(function, "arguments"),
                    )

    def _remember_timings(self, chunk: Any) -> None:
        # llama.cpp's server puts its own prompt/generation timings on the last chunk, beside
        # the fields a chunk declares (its extra values, for an SDK model).
        timings = fields_of(chunk).get("timings")
        if timings is not None:
            self.timings = timings

    def output_tokens(self) -> int | None:
        if self.reported_usage is None:
            return None
        value = field_of(self.reported_usage, "completion_tokens")
        return value if isinstance(value, int) else None

    def first_reason(self) -> Any:
        # The captured message's: the first reason that came.
        return next(iter(self._reasons.values()), None)

    def finish_into(self, plain: dict[str, Any], attributes: dict[str, Any]) -> None:
        """What the stream said, for the recorder (see ChunkParser): the values made plain here
        go where they are not looked at again."""
        # An empty id or model is no answer.
        self.response_id = self.response_id or None
        self.response_model = self.response_model or None
        summarize_stream(self, self._reasons, self.reported_usage)
        self.write(plain, attributes)
        if self.timings is not None:
            attributes.update(_server_timings_of(self.timings))

    def finish(self, span: Span) -> None:
        attributes: dict[str, Any] = {}
        self.finish_into(attributes, attributes)
        span.set_attributes(attributes)


class ResponsesEventParser(ResponseSummary):
    """Responses API stream events: content deltas count; the final event has usage and status."""

    __slots__ = ("budget", "final")

    def __init__(self, budget: tuple[int, Any] | None = None) -> None:
        ResponseSummary.__init__(self)
        self.final: Any = None
        self.budget = budget

    def has_content(self, event: Any) -> bool:
        kind = getattr(event, "type", "")
        return isinstance(kind, str) and kind.endswith(".delta")

    def observe(self, event: Any) -> None:
        kind = getattr(event, "type", "")
        if kind in (
            "response.created",
            "response.completed",
            "response.incomplete",
            "response.failed",
        ):
            response = getattr(event, "response", None)
            if response is not None:
                self.response_id = response.id
                self.response_model = response.model
                if kind != "response.created":
                    self.final = response

    def output_tokens(self) -> int | None:
        value = field_of(field_of(self.final, "usage"), "output_tokens")
        return value if isinstance(value, int) else None

    def finish(self, span: Span) -> None:
        attributes: dict[str, Any] = {}
        self.response_id = self.response_id or None
        self.response_model = self.response_model or None
        final = self.final
        if final is not None:
            reason = _responses_finish_reason(final)
            if reason:
                self.finish_reasons = [reason]
            self.usage = usage_attributes(field_of(final, "usage"))
            if self.budget is not None:
                messages = output_messages_of(final)
                if messages:
                    self.output = content.encode_messages(messages, *self.budget)
        self.record(span, attributes)


def _input_messages(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """A request's input in the parts shape: chat messages, a Responses API input, or a
    completion's prompt (a user message per prompt)."""
    if "messages" in body:
        return chat_input_messages(body["messages"])
    if "input" in body:
        return _responses_input_messages(body["input"])
    prompt = body.get("prompt")
    if prompt is None:
        return None
    prompts = prompt if isinstance(prompt, list) else [prompt]
    return [content.message("user", [content.text_part(item)]) for item in prompts]


# id(base URL) -> (that URL, LLMTRACE_PROVIDER_NAME then, the calls seen: (operation, stage,
# model, stream) -> (span name, start attributes)). Keyed by identity: a client keeps one URL
# object until its base_url is set again, and hashing or comparing URLs costs more than what is
# cached. The URL is held, so its id is not reused while cached.
_Start = tuple[str, dict[str, Any]]
_endpoints: dict[int, tuple[Any, str, dict[tuple[str, str, str | None, bool], _Start]]] = {}


def _start_of(base_url: Any, operation: str, stage: str, model: str | None, stream: bool) -> _Start:
    """(span name, start attributes before the body's parameters) of a call through a client's
    base URL: the same for every call of that client with the same model, operation and stream
    (and the same LLMTRACE_PROVIDER_NAME). Callers copy the attributes; the cached dict never
    changes."""
    configured = configured_provider_name()
    endpoint = _endpoints.get(id(base_url))
    if endpoint is None or endpoint[0] is not base_url or endpoint[1] != configured:
        if len(_endpoints) >= 64:
            _endpoints.clear()
        endpoint = _endpoints[id(base_url)] = (base_url, configured, {})
    calls = endpoint[2]
    key = (operation, stage, model, stream)
    start = calls.get(key)
    if start is not None:
        return start
    port = base_url.port or default_port(base_url.scheme)
    attributes: dict[str, Any] = {
        semconv.STAGE: stage,
        semconv.GEN_AI_OPERATION_NAME: operation,
        semconv.GEN_AI_PROVIDER_NAME: provider_name(base_url.host, port, base_url.path),
        semconv.SERVER_ADDRESS: base_url.host,
        semconv.SERVER_PORT: port,
        semconv.GEN_AI_REQUEST_STREAM: stream,
    }
    if model is not None:
        attributes[semconv.GEN_AI_REQUEST_MODEL] = model
    start = (f"{operation} {model}" if model else operation, attributes)
    if len(calls) < 64:
        calls[key] = start
    return start


def plan_request(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Plan | None:
    """Decide whether ``client.request(cast_to, options, ...)`` is a model call, and how to trace it."""
    options = args[1] if len(args) > 1 else kwargs.get("options")
    if options is None:
        return None
    url = getattr(options, "url", "")
    matched = _operation_of(url if url.__class__ is str else str(url))
    if matched is None:
        return None
    suffix, operation, stage = matched
    body = getattr(options, "json_data", None)
    if body.__class__ is not dict and not isinstance(body, Mapping):
        body = {}
    model = body.get("model")
    stream = bool(kwargs.get("stream")) or body.get("stream") is True
    named = model if isinstance(model, str) else None
    span_name, start_attributes = _start_of(base_url_of(instance), operation, stage, named, stream)
    if model and named is None:
        # Not a model name (not recorded as one), but the span is named after it all the same.
        span_name = f"{operation} {model}"
    attributes = dict(start_attributes)
    attributes.update(request_attributes(body))
    capture, max_bytes, redact, inject_usage = capture_settings()
    if capture:
        messages = _input_messages(body)
        if messages is not None:
            attributes[semconv.GEN_AI_INPUT_MESSAGES] = content.encode_messages(
                messages, max_bytes, redact
            )
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            attributes[semconv.GEN_AI_SYSTEM_INSTRUCTIONS] = content.encode_parts(
                [content.text_part(instructions)], max_bytes, redact
            )
    output_budget = (max_bytes, redact) if capture else None

    plan = Plan(
        span_name=span_name,
        attributes=attributes,
        parser_factory=ChatChunkParser,
        record_response=functools.partial(_record_response, output_budget=output_budget)
        if capture
        else _record_response,
    )
    if suffix == "/responses":
        plan.parser_factory = (
            functools.partial(ResponsesEventParser, output_budget)
            if output_budget is not None
            else ResponsesEventParser
        )
        return plan
    hide_usage = False
    stream_options = body.get("stream_options")
    if (
        stream
        and inject_usage
        and suffix != "/embeddings"
        and not (isinstance(stream_options, Mapping) and stream_options.get("include_usage"))
    ):
        new_options = options.model_copy()
        new_options.json_data = {
            **body,
            "stream_options": {**(stream_options or {}), "include_usage": True},
        }
        if len(args) > 1:
            plan.args = (args[0], new_options, *args[2:])
        else:
            plan.kwargs = {**kwargs, "options": new_options}
        hide_usage = True
    if hide_usage or capture:
        text_budget = max_bytes if capture else 0
        plan.parser_factory = lambda: ChatChunkParser(
            hide_usage=hide_usage, text_budget=text_budget, redact=redact if capture else None
        )
    return plan


class OpenAIInstrumentor(LibraryInstrumentor):
    """Traces model calls of ``openai.OpenAI`` / ``AsyncOpenAI`` (and Azure and compatible servers)."""

    package = "openai"
    supported = ">= 1.0, < 4"

    def patches(self) -> Iterable[PatchRow]:
        yield from request_patches("openai", plan_request)
