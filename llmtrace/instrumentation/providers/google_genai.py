"""``google-genai``: one span per model request of ``client.models`` and ``client.aio.models``,
for the Gemini Developer API (``gcp.gemini``) and Vertex AI (``gcp.vertex_ai``, ``vertexai=True``),
and per model interaction of the Interactions API (``client.interactions.create``).

Where it wraps: the methods of ``Models`` / ``AsyncModels`` that send exactly one request,
``_generate_content``, ``_generate_content_stream`` and ``_embed_content`` (``embed_content`` in
versions without it). The public methods above them can send several: automatic function calling
calls the model again after running the tools, and automatic continuation follows a continuation
token with another request; each request is a span of its own, and the tools run between them,
outside any model span. Chats (``client.chats.create(...).send_message[_stream]``) call the same
public methods, so they are covered too. Below these methods the SDK speaks HTTP through
``httpx2`` (or ``httpx``, or ``aiohttp`` for async clients when it is installed); llmtrace's HTTP
hooks see the model call in flight and enrich its span (time to headers, phases) instead of
adding a span of their own. ``aiohttp`` (which async clients use when it is installed) has no llmtrace
hooks of its own: the session the SDK creates gets aiohttp trace callbacks that give the model
call its time to headers and connect time, and the trace context is written into the request's
headers before it is sent; the other HTTP phases are not recorded for it.

What the span records, beside the request (model, sampling parameters, streaming):

- ``gen_ai.operation.name``: ``generate_content`` (the GenAI conventions' name for Gemini's
  operation), span ``generate_content {model}``; embeddings are ``embeddings {model}``, stage
  ``embedding``.
- usage from ``usageMetadata``: ``promptTokenCount`` is ``gen_ai.usage.input_tokens``;
  ``cachedContentTokenCount`` is ``gen_ai.usage.cache_read.input_tokens``; ``thoughtsTokenCount``
  is ``gen_ai.usage.reasoning.output_tokens``. Gemini's ``candidatesTokenCount`` leaves the
  thinking tokens out (``totalTokenCount`` adds them back), while the GenAI conventions say
  reasoning tokens SHOULD be included in ``gen_ai.usage.output_tokens`` (as OpenAI's
  ``completion_tokens`` includes them): so ``gen_ai.usage.output_tokens`` is
  ``candidatesTokenCount + thoughtsTokenCount``, and the reported ``candidatesTokenCount`` is that
  minus the reasoning tokens. A count Gemini did not report is never written.
- ``gen_ai.response.finish_reasons``: each candidate's ``finishReason`` lower-cased, in candidate
  order (``STOP`` is ``stop``, ``MAX_TOKENS`` is ``max_tokens``); the conventions define no
  mapping of Gemini's values for this attribute, so none is made up. A function call is
  reported by Gemini with ``STOP`` and is recorded so.
- ``gen_ai.response.id`` from ``responseId``, ``gen_ai.response.model`` from ``modelVersion``.
- streams: the first chunk with content (text, a function call, inline data, code) is the first
  token. A chunk carrying only thought text (``includeThoughts``) counts too: it is output the
  caller receives, as OpenAI's streamed ``reasoning_content`` is.
- a stream the caller leaves early (``break``, ``close()`` / ``aclose()``): the caller holds the
  SDK's own generator, above the stream llmtrace wraps; leaving it closes the SDK's loop over the
  wrapped stream, and the span ends then with ``llmtrace.stream.end=closed`` at its last chunk
  (async: once the event loop has closed the SDK's inner generators). A stream never iterated sent nothing and has no span.

Interactions (``/v1beta/interactions``): a model interaction is a ``chat {model}`` span (as
OpenAI's Responses API is) with the same usage rules (``total_input_tokens``,
``total_output_tokens`` + ``total_thought_tokens``, ``total_thought_tokens``,
``total_cached_tokens``), the interaction id and model, and ``stop`` for a ``completed`` status
(other final statuses as reported). An agent interaction (``agent=``) starts a job on the server
and is no model call: no span.

The API key (``x-goog-api-key`` or ``key=``) is never recorded: no header is, and ``url.full``
has secret-looking query values removed by the HTTP hooks.

Why one module of over 800 lines: the project keeps one module per instrumented library (its
patch rows, parsers and plans in one place, as every other provider); its sections (what a
response says, the plans, the Interactions API) share the response parsers and the capture
mapping, so split they would import each other's private helpers.
"""

from __future__ import annotations

import functools
import logging
import time
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace._checks import is_int
from llmtrace._urls import server_of
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.hops.hop import inject_trace_context
from llmtrace.instrumentation.model_call import (
    Plan,
    SDKTypes,
    fail_model_call,
    field_of,
    fields_of,
    make_request_wrappers,
    start_planned_call,
)
from llmtrace.instrumentation.response_summary import ResponseSummary
from llmtrace.sdk import content
from llmtrace.sdk._safety import log_once
from llmtrace.sdk.content import tool_call_part
from llmtrace.sdk.gate import (
    ModelCall,
    capture_settings,
    current_model_call,
    enter_model_call,
    leave_model_call,
)
from llmtrace.sdk.streaming import StreamedText, StreamRecorder, TracedStream

logger = logging.getLogger(__name__)

PROVIDER_GEMINI = "gcp.gemini"
PROVIDER_VERTEX_AI = "gcp.vertex_ai"

# GenerateContentConfig field -> attribute (a dict config may use either spelling).
_REQUEST_PARAMETERS: tuple[tuple[str, str, str], ...] = (
    ("max_output_tokens", "maxOutputTokens", semconv.GEN_AI_REQUEST_MAX_TOKENS),
    ("temperature", "temperature", semconv.GEN_AI_REQUEST_TEMPERATURE),
    ("top_p", "topP", semconv.GEN_AI_REQUEST_TOP_P),
    ("seed", "seed", semconv.GEN_AI_REQUEST_SEED),
    ("frequency_penalty", "frequencyPenalty", semconv.GEN_AI_REQUEST_FREQUENCY_PENALTY),
    ("presence_penalty", "presencePenalty", semconv.GEN_AI_REQUEST_PRESENCE_PENALTY),
)


class _Options:
    """The values of a ``GenerateContentConfig`` (its field dictionary, read once: reading a
    pydantic model's attributes one by one costs more) or of a dict in either spelling."""

    __slots__ = ("_camel", "_values")

    def __init__(self, config: Any) -> None:
        self._camel = isinstance(config, Mapping)
        self._values: Any = fields_of(config)

    def get(self, name: str, camel: str) -> Any:
        value = self._values.get(name)
        if value is None and self._camel:
            value = self._values.get(camel)
        return value


def _option(config: Any, name: str, camel: str) -> Any:
    """One config value (see :class:`_Options`)."""
    return None if config is None else _Options(config).get(name, camel)


def _endpoint_attributes(models: Any, options: _Options | None) -> dict[str, Any]:
    """Provider (the client's mode, not the host: a proxy or test server speaks the same API) and
    server of a ``Models`` object's client, with a per-request ``http_options.base_url``. The
    caller may change the result (a copy)."""
    api_client = models._api_client
    base_url = None
    if options is not None:
        http_options = options.get("http_options", "httpOptions")
        if http_options is not None:
            base_url = _option(http_options, "base_url", "baseUrl")
    if not base_url:
        base_url = getattr(getattr(api_client, "_http_options", None), "base_url", None)
    vertex_ai = bool(getattr(api_client, "vertexai", False))
    return dict(_endpoint(vertex_ai, base_url if isinstance(base_url, str) else None))


@functools.lru_cache(maxsize=64)
def _endpoint(vertex_ai: bool, base_url: str | None) -> dict[str, Any]:
    # The same few (mode, base URL) pairs on every call of an application: computed once.
    attributes: dict[str, Any] = {
        semconv.GEN_AI_PROVIDER_NAME: PROVIDER_VERTEX_AI if vertex_ai else PROVIDER_GEMINI,
    }
    if base_url:
        host, port = server_of(base_url)
        attributes[semconv.SERVER_ADDRESS] = host
        attributes[semconv.SERVER_PORT] = port
    return attributes


def _request_attributes(options: _Options | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    if options is None:
        return attributes
    for name, camel, attribute in _REQUEST_PARAMETERS:
        value = options.get(name, camel)
        if value is not None and value.__class__ in (int, float):
            attributes[attribute] = value
    stop = options.get("stop_sequences", "stopSequences")
    if isinstance(stop, list) and stop and all(isinstance(item, str) for item in stop):
        attributes[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] = stop
    choices = options.get("candidate_count", "candidateCount")
    if is_int(choices) and choices != 1:
        attributes[semconv.GEN_AI_REQUEST_CHOICE_COUNT] = choices
    return attributes


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", exclude_none=True)
    return str(value)


# --- what a response says --------------------------------------------------------------------


class Usage:
    """Gemini's ``usageMetadata`` counts as reported; a stream's chunks update what they carry
    (Vertex AI streams send partial metadata, with only ``trafficType``, before the last chunk)."""

    __slots__ = ("cached", "input", "output", "thoughts")

    def __init__(self) -> None:
        self.input: int | None = None
        self.output: int | None = None
        self.cached: int | None = None
        self.thoughts: int | None = None

    def update(self, metadata: Any) -> None:
        if metadata is None:
            return
        get = fields_of(metadata).get
        # Inline exact-class checks, not llmtrace._checks.is_int: this runs for every chunk that
        # carries metadata, and the SDK's counts are plain ints (a bool or int subclass is dropped).
        value = get("prompt_token_count")
        if value.__class__ is int:
            self.input = value
        value = get("candidates_token_count")
        if value.__class__ is int:
            self.output = value
        value = get("cached_content_token_count")
        if value.__class__ is int:
            self.cached = value
        value = get("thoughts_token_count")
        if value.__class__ is int:
            self.thoughts = value

    def attributes(self) -> dict[str, int]:
        attributes: dict[str, int] = {}
        if self.input is not None:
            attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] = self.input
        if self.cached is not None:
            attributes[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = self.cached
        if self.thoughts is not None:
            attributes[semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = self.thoughts
        if self.output is not None or self.thoughts is not None:
            # Reasoning tokens are part of the output (GenAI conventions); Gemini counts them apart.
            attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = (self.output or 0) + (
                self.thoughts or 0
            )
        return attributes


def _finish_reason(candidate: Any) -> str | None:
    reason = fields_of(candidate).get("finish_reason")
    # FinishReason is a str enum (str methods read its value); a value this SDK version does not
    # know comes as a plain str.
    return str.lower(reason) if isinstance(reason, str) and reason else None


def _parts(candidate: Any) -> list[Any]:
    content = getattr(candidate, "content", None)
    parts = getattr(content, "parts", None) if content is not None else None
    return parts or []


def _part_has_content(part: Any) -> bool:
    return bool(
        part.text
        or part.function_call is not None
        or part.inline_data is not None
        or part.executable_code is not None
        or part.code_execution_result is not None
        or part.file_data is not None
    )


class OutputText(StreamedText):
    """The captured output (opt-in): text and function calls, within one byte budget."""

    __slots__ = ("calls",)

    def __init__(self, max_bytes: int, redact: Callable[[str], str] | None) -> None:
        super().__init__(max_bytes, redact)
        self.calls: list[dict[str, Any]] = []

    def add_response(self, response: Any) -> None:
        """A whole response's or a chunk's text (thoughts left out) and function calls."""
        for candidate in getattr(response, "candidates", None) or ():
            for part in _parts(candidate):
                if self.bytes_left <= 0:
                    return
                if not part.thought:
                    self.add(part.text)
                call = part.function_call
                if call is not None:
                    self.calls.append({"name": call.name, "arguments": call.args})
                    self.bytes_left -= len(str(call.args or "")) + len(call.name or "")

    def attribute(self, finish_reasons: Any = None) -> str | None:
        """``gen_ai.output.messages``, or None when nothing was said; ``finish_reasons``: those
        of the response, the first being the message's."""
        if not self.parts and not self.calls:
            return None
        return self.output_messages(
            finish_reason=finish_reasons[0] if finish_reasons else None,
            tool_calls=[
                tool_call_part(None, call["name"], call["arguments"]) for call in self.calls
            ],
        )


def _record_generate_content(
    span: Span, response: Any, attributes: dict[str, Any], output: OutputText | None
) -> None:
    summary = ResponseSummary(output)
    if response is not None:
        get = fields_of(response).get
        response_id = get("response_id")
        if isinstance(response_id, str):
            summary.response_id = response_id
        model = get("model_version")
        if isinstance(model, str):
            summary.response_model = model
        reasons = []
        for candidate in get("candidates") or ():
            reason = _finish_reason(candidate)
            if reason:
                reasons.append(reason)
        if reasons:
            summary.finish_reasons = reasons
        usage = Usage()
        usage.update(get("usage_metadata"))
        summary.usage = usage.attributes()
        if output is not None:
            output.add_response(response)
            summary.output = output.attribute(summary.finish_reasons)
    summary.record(span, attributes)


def _record_embeddings(span: Span, response: Any, attributes: dict[str, Any]) -> None:
    if response is not None:
        embeddings = getattr(response, "embeddings", None) or []
        if embeddings:
            attributes[semconv.EMBEDDING_INPUT_COUNT] = len(embeddings)
            values = getattr(embeddings[0], "values", None)
            if isinstance(values, list):
                attributes[semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = len(values)
        usage = Usage()
        usage.update(getattr(response, "usage_metadata", None))
        attributes.update(usage.attributes())
        if semconv.GEN_AI_USAGE_INPUT_TOKENS not in attributes and embeddings:
            # Vertex AI's predict endpoint reports tokens per embedding, not per request.
            counts = [
                getattr(getattr(e, "statistics", None), "token_count", None) for e in embeddings
            ]
            if all(isinstance(c, int | float) and not isinstance(c, bool) for c in counts):
                attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] = int(sum(counts))  # type: ignore[arg-type]
    if attributes:
        span.set_attributes(attributes)


class ChunkParser(ResponseSummary):
    """``GenerateContentResponse`` chunks of a stream: O(1) state unless output is captured."""

    __slots__ = ("counts", "reasons", "thought_first")

    def __init__(self, output: OutputText | None = None) -> None:
        ResponseSummary.__init__(self, output)
        self.reasons: dict[int, str] = {}
        self.counts = Usage()
        self.thought_first = False

    def has_content(self, chunk: Any) -> bool:
        for candidate in chunk.candidates or ():
            for part in _parts(candidate):
                if _part_has_content(part):
                    self.thought_first = bool(part.thought)
                    return True
        return False

    def observe(self, chunk: Any) -> None:
        if self.response_id is None:
            self.response_id = chunk.response_id
        if chunk.model_version:
            self.response_model = chunk.model_version
        metadata = chunk.usage_metadata
        if metadata is not None:
            self.counts.update(metadata)
        for position, candidate in enumerate(chunk.candidates or ()):
            reason = _finish_reason(candidate)
            if reason:
                index = candidate.index
                self.reasons[index if isinstance(index, int) else position] = reason
        if self.text is not None:
            self.text.add_response(chunk)  # type: ignore[attr-defined]

    def output_tokens(self) -> int | None:
        # For the rate over the generation time: thinking done before the first token shown is
        # not generated in that time, unless the stream began with thought text.
        if self.thought_first:
            return self.counts.attributes().get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS)
        return self.counts.output

    def finish(self, span: Span) -> None:
        self.response_id = self.response_id or None
        self.usage = self.counts.attributes()
        if self.reasons:
            self.finish_reasons = [self.reasons[index] for index in sorted(self.reasons)]
        if self.text is not None:
            self.output = self.text.attribute(self.finish_reasons)  # type: ignore[attr-defined]
        self.set_on(span)


# --- the plans ---------------------------------------------------------------------------------


def _content_parts(given: Any) -> list[dict[str, Any]]:
    """Parts of a Gemini ``Content`` (or its dict), a ``Part``, a string or a list of those."""
    if isinstance(given, str):
        return [content.text_part(given)]
    if isinstance(given, list | tuple):
        return [part for item in given for part in _content_parts(item)]
    plain = _jsonable(given) if not isinstance(given, Mapping) else given
    if not isinstance(plain, Mapping):
        return content.plain_parts(plain)
    if "parts" in plain:
        return _content_parts(plain.get("parts") or [])
    text = plain.get("text")
    call = plain.get("function_call") or plain.get("functionCall")
    response = plain.get("function_response") or plain.get("functionResponse")
    if isinstance(call, Mapping):
        return [content.tool_call_part(call.get("id"), call.get("name"), call.get("args"))]
    if isinstance(response, Mapping):
        return [content.tool_call_response_part(response.get("id"), response.get("response"))]
    if isinstance(text, str):
        if plain.get("thought"):
            return [content.reasoning_part(text)]
        return [content.text_part(text)]
    return content.plain_parts([{k: v for k, v in plain.items() if v is not None}])


def _input_messages(contents: Any) -> list[dict[str, Any]]:
    """``contents`` in the parts shape: a Content's role ``model`` is the assistant."""
    items = contents if isinstance(contents, list | tuple) else [contents]
    messages = []
    for item in items:
        plain = item if isinstance(item, str | Mapping) else _jsonable(item)
        role = plain.get("role") if isinstance(plain, Mapping) else None
        if role == "model":
            role = "assistant"
        messages.append(content.message(role or "user", _content_parts(plain)))
    return messages


def _plan(models: Any, kwargs: Mapping[str, Any], operation: str, stage: str, stream: bool) -> Plan:
    model = kwargs.get("model")
    config = kwargs.get("config")
    options = _Options(config) if config is not None else None
    attributes = _endpoint_attributes(models, options)
    attributes[semconv.STAGE] = stage
    attributes[semconv.GEN_AI_OPERATION_NAME] = operation
    if operation != semconv.OP_EMBEDDINGS:
        attributes[semconv.GEN_AI_REQUEST_STREAM] = stream
    if isinstance(model, str):
        attributes[semconv.GEN_AI_REQUEST_MODEL] = model
    if options is not None:
        attributes.update(_request_attributes(options))
    capture, max_bytes, redact, _ = capture_settings()
    if capture and operation != semconv.OP_EMBEDDINGS:
        contents = kwargs.get("contents")
        if contents is not None:
            attributes[semconv.GEN_AI_INPUT_MESSAGES] = content.encode_messages(
                _input_messages(contents), max_bytes, redact
            )
        system = options.get("system_instruction", "systemInstruction") if options else None
        if system is not None:
            attributes[semconv.GEN_AI_SYSTEM_INSTRUCTIONS] = content.encode_parts(
                _content_parts(system), max_bytes, redact
            )

    def output() -> OutputText | None:
        return OutputText(max_bytes, redact) if capture else None

    if operation == semconv.OP_EMBEDDINGS:
        record: Callable[[Span, Any, dict[str, Any]], None] = _record_embeddings
    else:

        def record(span: Span, response: Any, gathered: dict[str, Any]) -> None:
            _record_generate_content(span, response, gathered, output())

    return Plan(
        span_name=f"{operation} {model}" if isinstance(model, str) else operation,
        attributes=attributes,
        parser_factory=lambda: ChunkParser(output()),
        record_response=record,
    )


def plan_generate_content(models: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Plan:
    return _plan(models, kwargs, semconv.OP_GENERATE_CONTENT, semconv.LLM_STAGE, stream=False)


def plan_generate_content_stream(
    models: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Plan:
    return _plan(models, kwargs, semconv.OP_GENERATE_CONTENT, semconv.LLM_STAGE, stream=True)


def plan_embed_content(models: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Plan:
    return _plan(models, kwargs, semconv.OP_EMBEDDINGS, "embedding", stream=False)


# An async stream method returns an async generator once the response headers are in.
_TYPES = SDKTypes(streams=(), async_streams=(types.AsyncGeneratorType,))


def _status_code(exc: BaseException) -> int | None:
    code = getattr(exc, "code", None)
    return code if is_int(code) else None


def _note_status(exc: BaseException) -> None:
    """An API error's HTTP status on the model call in flight (google-genai's ``APIError`` has it
    as ``code``, where the shared error recording looks for ``status_code``)."""
    call = current_model_call()
    status = _status_code(exc)
    if call is not None and status is not None:
        call.add_attributes({semconv.HTTP_RESPONSE_STATUS_CODE: status})


def _noting_status(wrapper: Any) -> Any:
    """A model-call wrapper whose send notes the HTTP status of an API error it raises."""

    def noting_status(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        def send(*send_args: Any, **send_kwargs: Any) -> Any:
            try:
                return wrapped(*send_args, **send_kwargs)
            except Exception as exc:
                _note_status(exc)
                raise

        return wrapper(send, instance, args, kwargs)

    return noting_status


def _anoting_status(wrapper: Any) -> Any:
    """:func:`_noting_status` for a coroutine method."""

    async def noting_status(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        async def send(*send_args: Any, **send_kwargs: Any) -> Any:
            try:
                return await wrapped(*send_args, **send_kwargs)
            except Exception as exc:
                _note_status(exc)
                raise

        return await wrapper(send, instance, args, kwargs)

    return noting_status


def _sent_in_flight(chunks: Iterator[Any], call: ModelCall) -> Iterator[Any]:
    """The chunks of a sync stream, whose request is sent when the first one is asked for: that
    step runs with the model call in flight (the HTTP hooks record its time to headers), and
    no later one (rule 3 of docs/architecture.md: nothing attached across a yield)."""
    in_flight = enter_model_call(call)
    try:
        first = next(chunks)
    except StopIteration:
        return
    except Exception as exc:
        _note_status(exc)
        raise
    finally:
        leave_model_call(in_flight)
    yield first
    yield from chunks


def _generate_content_stream(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``Models._generate_content_stream``: a generator, called when its caller's generator is
    first iterated; nothing is sent until its first chunk is asked for."""
    started = start_planned_call(plan_generate_content_stream, instance, args, kwargs)
    if started is None:
        return wrapped(*args, **kwargs)
    plan, call = started
    try:
        chunks = wrapped(*args, **kwargs)
    except BaseException as exc:
        fail_model_call(call, exc)
        raise
    try:
        recorder = StreamRecorder(call.span, call.started_at, plan.parser_factory())
        # The HTTP hooks gather into call.collected during the first step; set at the end.
        recorder.collected = call.collected
        return TracedStream(_sent_in_flight(chunks, call), recorder)
    except Exception:
        log_once(logger, "model stream wrapping failed")
        call.span.end()
        return chunks


async def _propagate_over_aiohttp(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``BaseApiClient._async_request_once``: async clients send with ``aiohttp`` when it is
    installed, which llmtrace's HTTP hooks do not see; the model span's trace context is written
    into the request's headers here so the server still joins the trace (under ``httpx2`` the
    HTTP hook writes the same header again)."""
    call = current_model_call()
    if call is not None:
        try:
            request = args[0] if args else kwargs["http_request"]
            inject_trace_context(request.headers, call.span)
        except Exception:
            log_once(logger, "trace context injection failed")
    return await wrapped(*args, **kwargs)


# --- the Interactions API (``client.interactions``, ``/v1beta/interactions``) -------------------
#
# google-genai 3.x sends it through a separate generated client (``google.genai._gaos``), whose
# ``Interactions.create`` sends one request; the public ``client.interactions.create`` above it
# may send several (automatic continuation). A model interaction is a model call like
# ``generateContent`` (same token counts, named alike); an agent interaction (``agent=``, often
# ``background=True``) starts a job on the server and is not one: it gets no model span.

# Interaction status -> finish reason: a completed interaction stopped on its own; any other
# final status (``incomplete``, ``requires_action``, ``failed``) is recorded as Gemini says it.
_INTERACTION_FINISH = {"completed": "stop", "in_progress": None}


def _interaction_usage(usage: Any) -> dict[str, int]:
    get = fields_of(usage).get
    counts = Usage()
    value = get("total_input_tokens")
    counts.input = value if is_int(value) else None
    value = get("total_output_tokens")
    counts.output = value if is_int(value) else None
    value = get("total_cached_tokens")
    counts.cached = value if is_int(value) else None
    value = get("total_thought_tokens")
    counts.thoughts = value if is_int(value) else None
    return counts.attributes()


def _summarize_interaction(summary: ResponseSummary, interaction: Any) -> None:
    """What an interaction says into ``summary``, over what an earlier event of the same call
    said: a field it leaves out keeps its value."""
    get = fields_of(interaction).get
    interaction_id = get("id")
    if isinstance(interaction_id, str):
        summary.response_id = interaction_id
    model = get("model")
    if isinstance(model, str):
        summary.response_model = model
    status = get("status")
    if isinstance(status, str):
        reason = _INTERACTION_FINISH.get(status, status)
        if reason:
            summary.finish_reasons = [reason]
    usage = get("usage")
    if usage is not None:
        summary.usage = {**(summary.usage or {}), **_interaction_usage(usage)}


def _record_interaction(span: Span, interaction: Any, attributes: dict[str, Any]) -> None:
    summary = ResponseSummary()
    _summarize_interaction(summary, interaction)
    summary.record(span, attributes)


class InteractionEventParser(ResponseSummary):
    """Interaction stream events: a step delta with content (text, a thought summary, a call;
    not a bare thought signature) is a token; the last ``interaction.completed`` has the usage."""

    __slots__ = ("output_count",)

    def __init__(self) -> None:
        ResponseSummary.__init__(self)
        self.output_count: int | None = None

    def has_content(self, event: Any) -> bool:
        if getattr(event, "event_type", None) != "step.delta":
            return False
        delta = getattr(event, "delta", None)
        return delta is not None and getattr(delta, "type", None) != "thought_signature"

    def observe(self, event: Any) -> None:
        kind = getattr(event, "event_type", None)
        if kind in ("interaction.created", "interaction.completed"):
            interaction = getattr(event, "interaction", None)
            if interaction is not None:
                _summarize_interaction(self, interaction)
                self.output_count = _is_count_or_none(
                    field_of(field_of(interaction, "usage"), "total_output_tokens")
                )

    def output_tokens(self) -> int | None:
        return self.output_count

    def finish(self, span: Span) -> None:
        self.set_on(span)


def _is_count_or_none(value: Any) -> int | None:
    return value if is_int(value) else None


def plan_interaction(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Plan | None:
    """``Interactions.create(**body)`` or ``create(request=...)``: a span when a model is asked."""
    request = kwargs.get("request")
    body: Any = field_of(request, "body") if request is not None else kwargs
    model = field_of(body, "model")
    if not isinstance(model, str) or field_of(body, "agent") is not None:
        return None
    stream = field_of(body, "stream") is True
    api_client = getattr(instance, "_api_client", None)
    attributes: dict[str, Any] = {
        semconv.STAGE: semconv.LLM_STAGE,
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
        semconv.GEN_AI_REQUEST_MODEL: model,
        semconv.GEN_AI_REQUEST_STREAM: stream,
    }
    if api_client is not None:
        attributes.update(_endpoint_attributes(instance, None))
    else:
        attributes[semconv.GEN_AI_PROVIDER_NAME] = PROVIDER_GEMINI
    generation = field_of(body, "generation_config")
    if generation is not None:
        attributes.update(_request_attributes(_Options(generation)))
    return Plan(
        span_name=f"{semconv.OP_CHAT} {model}",
        attributes=attributes,
        parser_factory=InteractionEventParser,
        record_response=_record_interaction,
    )


def _interaction_types() -> SDKTypes:
    from google.genai._gaos.utils import eventstreaming

    return SDKTypes(streams=(eventstreaming.Stream,), async_streams=(eventstreaming.AsyncStream,))


@functools.cache
def _aiohttp_trace_config() -> Any:
    import aiohttp

    config = aiohttp.TraceConfig()
    config.on_connection_create_start.append(_aiohttp_connect_started)
    config.on_connection_create_end.append(_aiohttp_connected)
    config.on_request_end.append(_aiohttp_headers_received)
    config.freeze()
    return config


async def _aiohttp_connect_started(session: Any, context: Any, params: Any) -> None:
    context.llmtrace_connect_started = time.monotonic()


async def _aiohttp_connected(session: Any, context: Any, params: Any) -> None:
    call = current_model_call()
    started = getattr(context, "llmtrace_connect_started", None)
    if call is not None and started is not None:
        call.add_attributes({semconv.HTTP_CONNECT: time.monotonic() - started})


async def _aiohttp_headers_received(session: Any, context: Any, params: Any) -> None:
    # aiohttp calls this once the response headers are read, in the task sending the request.
    call = current_model_call()
    if call is not None:
        call.headers_received()


async def _watch_aiohttp_session(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``BaseApiClient._get_aiohttp_session``: the session an async client sends with (one per
    event loop) gets llmtrace's aiohttp trace callbacks, which give a model call in flight its
    time to headers and connect time (llmtrace has no aiohttp hooks of its own). Outside a model
    call, and after ``uninstrument()``, they do nothing."""
    session = await wrapped(*args, **kwargs)
    try:
        # aiohttp keeps a session's trace configurations in this list and reads it per request.
        configs = getattr(session, "_trace_configs", None)
        if isinstance(configs, list):
            config = _aiohttp_trace_config()
            if config not in configs:
                configs.append(config)
    except Exception:
        log_once(logger, "aiohttp session hook failed")
    return session


def _embed_method(models_class: type) -> str:
    # ``_embed_content`` sends one request; versions before it sent from ``embed_content``.
    return "_embed_content" if "_embed_content" in vars(models_class) else "embed_content"


class GoogleGenAIInstrumentor(LibraryInstrumentor):
    """Traces model requests of ``google.genai.Client`` (``models``, ``aio.models``, chats)."""

    package = "google-genai"
    supported = ">= 1.0, < 4"

    def patches(self) -> Iterable[PatchRow]:
        from google.genai import models

        generate, agenerate = make_request_wrappers(plan_generate_content, _TYPES)
        _, agenerate_stream = make_request_wrappers(plan_generate_content_stream, _TYPES)
        embed, aembed = make_request_wrappers(plan_embed_content, _TYPES)
        module = "google.genai.models"
        yield module, "Models._generate_content", _noting_status(generate)
        yield module, "Models._generate_content_stream", _generate_content_stream
        yield module, f"Models.{_embed_method(models.Models)}", _noting_status(embed)
        yield module, "AsyncModels._generate_content", _anoting_status(agenerate)
        yield module, "AsyncModels._generate_content_stream", _anoting_status(agenerate_stream)
        yield module, f"AsyncModels.{_embed_method(models.AsyncModels)}", _anoting_status(aembed)
        yield (
            "google.genai._api_client",
            "BaseApiClient._async_request_once",
            _propagate_over_aiohttp,
        )
        yield (
            "google.genai._api_client",
            "BaseApiClient._get_aiohttp_session",
            _watch_aiohttp_session,
        )
        try:
            interaction_types = _interaction_types()
        except ImportError:  # versions before the generated Interactions client
            return
        create, acreate = make_request_wrappers(plan_interaction, interaction_types)
        yield "google.genai._gaos.interactions", "Interactions.create", create
        yield "google.genai._gaos.interactions", "AsyncInteractions.create", acreate
