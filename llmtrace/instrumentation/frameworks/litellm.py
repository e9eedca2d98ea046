"""``litellm``: one model span per ``completion``, ``embedding`` or ``responses`` call (and async).

LiteLLM is a framework over many providers; for some (OpenAI, Azure, OpenAI-compatible servers)
it calls the ``openai`` SDK, for others (Anthropic, Gemini, Bedrock, ...) it speaks HTTP itself.
Either way the LiteLLM call is the one model call (rules 4 and 8 of docs/architecture.md): its
span is published as the model call in flight while LiteLLM sends the request, so the ``openai``
instrumentation underneath makes no second span and the HTTP layer puts its transport phases on
this span instead of adding its own (and injects this span's ``traceparent``).

Streams come back as LiteLLM's ``CustomStreamWrapper`` (iterable sync and async); they are handed
to the shared :class:`~llmtrace.sdk.streaming.StreamRecorder` with :class:`StreamChunkParser`, which
knows LiteLLM's ``ModelResponseStream`` chunks (Responses API streams: :class:`ResponsesParser`).
A provider LiteLLM calls lazily, on the first chunk (Vertex AI, Gemini, ...), sends its request
inside the model call too.

The span's clock starts when LiteLLM is called, so its TTFT includes LiteLLM's own preparation
before the request leaves (routing, parameter mapping, client set-up: a few milliseconds), which
the caller waits for too.

``gen_ai.provider.name`` is LiteLLM's resolved provider (``litellm.get_llm_provider``) in the
GenAI conventions' vocabulary (:func:`provider_of`). LiteLLM's own callbacks and OpenTelemetry
integration are left alone.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace._checks import is_int
from llmtrace._urls import default_port
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.chat_format import chat_message, messages_of
from llmtrace.instrumentation.model_call import (
    acall_model,
    call_model,
    field_of,
    fields_of,
    start_model_call,
)
from llmtrace.instrumentation.provider import configured_provider_name, provider_name
from llmtrace.instrumentation.providers.openai import (
    ResponsesEventParser,
    request_attributes,
    summarize_stream,
    usage_attributes,
)
from llmtrace.instrumentation.response_summary import ResponseSummary
from llmtrace.sdk import content
from llmtrace.sdk._safety import log_once
from llmtrace.sdk.gate import (
    ModelCall,
    capture_settings,
    counts_untraced,
    current_model_call,
    enter_model_call,
    leave_model_call,
    should_trace,
)
from llmtrace.sdk.streaming import (
    STATUS_OK,
    ChunkParser,
    StreamedText,
    StreamRecorder,
    TracedAsyncStream,
    TracedStream,
    end_model_call,
)

logger = logging.getLogger(__name__)

# LiteLLM's provider names that the GenAI conventions spell differently; any other name is kept.
_PROVIDER_NAMES: dict[str, str] = {
    "azure": "azure.ai.openai",
    "azure_text": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "bedrock": "aws.bedrock",
    "vertex_ai": "gcp.vertex_ai",
    "vertex_ai_beta": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "mistral": "mistral_ai",
    "codestral": "mistral_ai",
    "text-completion-codestral": "mistral_ai",
    "cohere_chat": "cohere",
    "ollama_chat": "ollama",
    "xai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
    "watsonx_text": "ibm.watsonx.ai",
    "hosted_vllm": "vllm",
    "text-completion-openai": "openai",
}

# Providers that mean "the OpenAI API": with an api_base of their own, the server is named from
# its URL, exactly as the openai instrumentation names it (LLMTRACE_PROVIDER_NAME, port guesses).
_OPENAI_COMPATIBLE = frozenset({"openai", "text-completion-openai", "custom_openai", "openai_like"})


def provider_of(litellm_provider: str, api_base: str | None) -> str:
    """``gen_ai.provider.name`` for a call LiteLLM routes to ``litellm_provider``."""
    if litellm_provider in _OPENAI_COMPATIBLE and api_base:
        parts = urlsplit(api_base)
        if parts.hostname:
            return provider_name(parts.hostname, parts.port, parts.path)
    return _PROVIDER_NAMES.get(litellm_provider, litellm_provider)


@functools.lru_cache(maxsize=256)
def _endpoint(
    model: str, custom_provider: str | None, api_base: str | None, configured_name: str
) -> tuple[str, dict[str, Any]]:
    """(model as sent, provider and server attributes) of one model route and one
    ``LLMTRACE_PROVIDER_NAME``; cached, since an application's calls take a few routes. Never
    raises: a route LiteLLM cannot resolve fails in LiteLLM itself, with its own error. Callers
    copy the attributes; the cached dict never changes."""
    import litellm

    try:
        sent_model, provider, _key, resolved_base = litellm.get_llm_provider(
            model=model, custom_llm_provider=custom_provider, api_base=api_base
        )
    except Exception:
        return model, {}
    base = api_base or resolved_base
    attributes: dict[str, Any] = {semconv.GEN_AI_PROVIDER_NAME: provider_of(provider, base)}
    if base:
        parts = urlsplit(base)
        if parts.hostname:
            attributes[semconv.SERVER_ADDRESS] = parts.hostname
            attributes[semconv.SERVER_PORT] = parts.port or default_port(parts.scheme)
    return sent_model or model, attributes


# The LiteLLM functions traced: name -> (gen_ai.operation.name, position of ``model`` among the
# positional arguments).
_CHAT = "chat"
_EMBEDDINGS = "embeddings"
_RESPONSES = "responses"
_APIS: dict[str, tuple[str, int]] = {
    _CHAT: (semconv.OP_CHAT, 0),
    _EMBEDDINGS: (semconv.OP_EMBEDDINGS, 0),
    _RESPONSES: (semconv.OP_CHAT, 1),  # responses(input, model, ...)
}


# With content capture on: (content_max_bytes, redact hook) for the output.
OutputBudget = tuple[int, Callable[[str], str] | None]


def _start(
    api: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[ModelCall, OutputBudget | None] | None:
    """The model call's span and the output budget, or None when this call is neither traced
    nor counted in the metrics (the gate and ``counts_untraced``), or a model call is already in
    flight (LiteLLM inside another framework's model call adds nothing)."""
    if current_model_call() is not None:
        return None
    traced = should_trace()
    if not traced and not counts_untraced():
        return None
    try:
        operation, model_position = _APIS[api]
        model = kwargs.get("model", args[model_position] if len(args) > model_position else None)
        if not isinstance(model, str):
            return None
        api_base = kwargs.get("api_base") or kwargs.get("base_url")
        custom_provider = kwargs.get("custom_llm_provider")
        sent_model, endpoint = _endpoint(
            model,
            custom_provider if isinstance(custom_provider, str) else None,
            api_base if isinstance(api_base, str) else None,
            configured_provider_name(),
        )
        stage = "embedding" if operation == semconv.OP_EMBEDDINGS else semconv.LLM_STAGE
        attributes: dict[str, Any] = {
            semconv.STAGE: stage,
            semconv.GEN_AI_OPERATION_NAME: operation,
            **endpoint,
            semconv.GEN_AI_REQUEST_MODEL: sent_model,
        }
        output_budget: OutputBudget | None = None
        if api != _EMBEDDINGS:
            attributes[semconv.GEN_AI_REQUEST_STREAM] = kwargs.get("stream") is True
            attributes.update(request_attributes(kwargs))
            capture, max_bytes, redact, _inject_usage = capture_settings()
            if capture:
                messages = kwargs.get("messages" if api == _CHAT else "input")
                if messages is None and api == _RESPONSES and args:
                    messages = args[0]
                if messages is not None:
                    attributes[semconv.GEN_AI_INPUT_MESSAGES] = content.encode_messages(
                        messages_of(messages), max_bytes, redact
                    )
                output_budget = (max_bytes, redact)
        # Counted as a provider call: under a framework's model span (LangChain's ChatLiteLLM)
        # this span is the one closest to the wire, it owns TTFT and usage, and the framework's
        # span becomes structure.
        call = start_model_call(f"{operation} {sent_model}", attributes, ModelCall, traced=traced)
        # LiteLLM's ends set nothing the call gathered: what is known during the call (the HTTP
        # phases) goes onto the span as it comes.
        call.collected = None
        return call, output_budget
    except Exception:
        log_once(logger, "litellm model call span start failed")
        return None


def _record_response(
    span: Span, response: Any, embeddings: bool, output_budget: OutputBudget | None
) -> None:
    """What a whole LiteLLM ``ModelResponse`` or ``EmbeddingResponse`` says, onto the span."""
    get = fields_of(response).get
    attributes: dict[str, Any] = {}
    summary = ResponseSummary()
    response_id = get("id")
    if isinstance(response_id, str) and response_id:
        summary.response_id = response_id
    model = get("model")
    if isinstance(model, str) and model:
        summary.response_model = model
    reasons = []
    for choice in get("choices") or ():
        reason = field_of(choice, "finish_reason")
        if reason:
            reasons.append(str(reason))
    if reasons:
        summary.finish_reasons = reasons
    usage = usage_attributes(get("usage"))
    if embeddings:
        # LiteLLM fills an embedding's completion_tokens with 0: no provider reports it.
        usage.pop(semconv.GEN_AI_USAGE_OUTPUT_TOKENS, None)
        data = get("data")
        if data:
            vector = field_of(data[0], "embedding")
            if isinstance(vector, list):
                attributes[semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = len(vector)
    summary.usage = usage
    if output_budget is not None:
        messages = [
            chat_message(field_of(choice, "message"), field_of(choice, "finish_reason") or "stop")
            for choice in get("choices") or ()
            if field_of(choice, "message") is not None
        ]
        if messages:
            summary.output = content.encode_messages(messages, *output_budget)
    summary.record(span, attributes)


class StreamChunkParser(ResponseSummary):
    """LiteLLM's ``ModelResponseStream`` chunks (OpenAI's chunk shape whatever the provider).

    A chunk without usage may lack the ``usage`` attribute altogether (LiteLLM removes it when the
    caller did not ask for usage), so every field is read with a default.
    """

    __slots__ = ("_reasons", "reported_usage")

    def __init__(self, output_budget: OutputBudget | None = None) -> None:
        ResponseSummary.__init__(
            self, StreamedText(*output_budget) if output_budget is not None else None
        )
        self._reasons: dict[int, str] = {}
        self.reported_usage: Any = None

    def has_content(self, chunk: Any) -> bool:
        for choice in getattr(chunk, "choices", None) or ():
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            if (
                getattr(delta, "content", None)
                or getattr(delta, "tool_calls", None)
                or getattr(delta, "function_call", None)
                or getattr(delta, "reasoning_content", None)
                or getattr(delta, "thinking_blocks", None)
            ):
                return True
        return False

    def observe(self, chunk: Any) -> None:
        if self.response_id is None:
            chunk_id = getattr(chunk, "id", None)
            if isinstance(chunk_id, str) and chunk_id:
                self.response_id = chunk_id
        model = getattr(chunk, "model", None)
        if isinstance(model, str) and model:
            self.response_model = model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.reported_usage = usage
        for choice in getattr(chunk, "choices", None) or ():
            reason = getattr(choice, "finish_reason", None)
            if reason:
                self._reasons[getattr(choice, "index", 0) or 0] = str(reason)
            if self.text is not None and self.text.bytes_left > 0:
                self.text.add(getattr(getattr(choice, "delta", None), "content", None))

    def output_tokens(self) -> int | None:
        value = field_of(self.reported_usage, "completion_tokens")
        return value if is_int(value) else None

    def first_reason(self) -> Any:
        # The captured message's: the first reason that came.
        return next(iter(self._reasons.values()), None)

    def finish(self, span: Span) -> None:
        summarize_stream(self, self._reasons, self.reported_usage)
        self.set_on(span)


def _in_model_call(make_call: Callable[..., Any], call: ModelCall) -> Callable[..., Any]:
    """``make_call`` (a stream's deferred request, sent on its first chunk) made inside the model
    call, so the HTTP layer enriches this span and propagates its context there too."""
    if inspect.iscoroutinefunction(make_call) or inspect.iscoroutinefunction(
        getattr(make_call, "func", None)
    ):

        async def deferred_async(*args: Any, **kwargs: Any) -> Any:
            in_flight = enter_model_call(call)
            try:
                return await make_call(*args, **kwargs)
            finally:
                leave_model_call(in_flight)

        return deferred_async

    def deferred(*args: Any, **kwargs: Any) -> Any:
        in_flight = enter_model_call(call)
        try:
            result = make_call(*args, **kwargs)
        finally:
            leave_model_call(in_flight)
        if inspect.isawaitable(result):
            return _awaited_in(result, call)
        return result

    return deferred


async def _awaited_in(awaitable: Any, call: ModelCall) -> Any:
    in_flight = enter_model_call(call)
    try:
        return await awaitable
    finally:
        leave_model_call(in_flight)


def _finish(
    result: Any,
    call: ModelCall,
    api: str,
    asynchronous: bool,
    output_budget: OutputBudget | None,
) -> Any:
    """A stream is handed to the recorder (the span ends with it); a whole response ends it now."""
    parser = _stream_parser(result, api, output_budget)
    if parser is not None:
        call.headers_received()
        make_call = getattr(result, "make_call", None)
        if make_call is not None and getattr(result, "completion_stream", None) is None:
            result.make_call = _in_model_call(make_call, call)
        recorder = StreamRecorder(call.span, started_at=call.started_at, parser=parser)
        return (TracedAsyncStream if asynchronous else TracedStream)(result, recorder)
    span = call.span
    try:
        if span.is_recording():
            if api == _RESPONSES:
                # A whole Responses API object says what its stream's final event would say.
                whole = ResponsesParser()
                whole.response_id = field_of(result, "id")
                whole.response_model = field_of(result, "model")
                whole.final = result
                whole.finish(span)
            else:
                _record_response(span, result, api == _EMBEDDINGS, output_budget)
        span.set_status(STATUS_OK)
    except Exception:
        log_once(logger, "litellm response recording failed")
    finally:
        end_model_call(call)
    return result


def _provider_response_id(response_id: Any) -> Any:
    """The provider's id of a whole Responses API object: LiteLLM hands the caller an id of its
    own, which encodes the provider and the provider's id (so a later call can be routed back)."""
    if not isinstance(response_id, str):
        return response_id
    try:
        from litellm.responses.utils import ResponsesAPIRequestUtils

        decoded = ResponsesAPIRequestUtils.decode_responses_api_response_id(response_id)
        original = field_of(decoded, "response_id")
        return original if isinstance(original, str) and original else response_id
    except Exception:
        return response_id


class ResponsesParser(ResponsesEventParser):
    """OpenAI's Responses API events, as LiteLLM relays them for every provider, with the
    provider's response id (LiteLLM hands the caller one of its own)."""

    __slots__ = ()

    def finish(self, span: Span) -> None:
        self.response_id = _provider_response_id(self.response_id)
        super().finish(span)


def _stream_parser(result: Any, api: str, output_budget: OutputBudget | None) -> ChunkParser | None:
    """The parser for ``result`` if it is one of LiteLLM's streams, else None."""
    if api == _CHAT:
        from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

        is_stream = isinstance(result, CustomStreamWrapper)
        return StreamChunkParser(output_budget) if is_stream else None
    if api == _RESPONSES:
        from litellm.responses.streaming_iterator import BaseResponsesAPIStreamingIterator

        # LiteLLM's Responses API events have OpenAI's shape, whatever the provider.
        is_stream = isinstance(result, BaseResponsesAPIStreamingIterator)
        return ResponsesParser() if is_stream else None
    return None


def _sync_wrapper(api: str) -> Callable[..., Any]:
    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        started = _start(api, args, kwargs)
        if started is None:
            return wrapped(*args, **kwargs)
        call, output_budget = started
        return call_model(call, wrapped, args, kwargs, _finish, api, False, output_budget)

    return wrapper


def _async_wrapper(api: str) -> Callable[..., Any]:
    async def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        started = _start(api, args, kwargs)
        if started is None:
            return await wrapped(*args, **kwargs)
        call, output_budget = started
        return await acall_model(call, wrapped, args, kwargs, _finish, api, True, output_budget)

    return wrapper


class LiteLLMInstrumentor(LibraryInstrumentor):
    """Traces ``litellm.completion`` / ``embedding`` / ``responses`` and their async twins."""

    package = "litellm"
    supported = ">= 1.70, < 2"

    def patches(self) -> Iterable[PatchRow]:
        # Only the public names: acompletion and aembedding call completion and embedding
        # through litellm.main's own references, which stay unwrapped (one span per call).
        yield ("litellm", "completion", _sync_wrapper(_CHAT))
        yield ("litellm", "acompletion", _async_wrapper(_CHAT))
        yield ("litellm", "embedding", _sync_wrapper(_EMBEDDINGS))
        yield ("litellm", "aembedding", _async_wrapper(_EMBEDDINGS))
        yield ("litellm", "responses", _sync_wrapper(_RESPONSES))
        yield ("litellm", "aresponses", _async_wrapper(_RESPONSES))
