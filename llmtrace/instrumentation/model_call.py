"""The model-call span around a Stainless-generated SDK's ``request`` (``openai``, ``anthropic``).

Both SDKs send every API call through ``SyncAPIClient.request`` / ``AsyncAPIClient.request``
(with retries inside), whatever helper the caller used: ``create``, ``stream()``, ``parse()``,
``.with_raw_response`` or ``.with_streaming_response``. Wrapping that one method gives one span
per call for all of them; the provider module says which paths are model calls (:class:`Plan`),
how to read a response and which :class:`~llmtrace.sdk.streaming.ChunkParser` reads its stream.

A call whose trace is not sampled (the sampler dropped its span, or the gate keeps it untraced)
runs the same way on a :class:`~llmtrace.sdk.counted_span.CountedSpan` while a meter provider is
set, so that the GenAI client metrics count it like any other (:func:`start_model_call`).

What comes back decides when the span ends:

- a parsed response: recorded and ended at once;
- a stream: handed to :class:`~llmtrace.sdk.streaming.TracedStream` (TTFT, chunks, end exactly once);
- a raw response whose body was read: recorded from its JSON and ended at once;
- a raw response still to be read (a raw stream, ``with_streaming_response``): a proxy that
  records what ``parse()`` returns, and ends on ``close()`` or when dropped.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import Tracer as SDKTracer
from opentelemetry.trace import Span, SpanKind

from llmtrace import semconv
from llmtrace._checks import is_int
from llmtrace.sdk import _compat, content, gate
from llmtrace.sdk._safety import log_once
from llmtrace.sdk.counted_span import CountedSpan
from llmtrace.sdk.gate import (
    ModelCall,
    counts_untraced,
    current_model_call,
    current_span,
    direct_method,
    enter_model_call,
    get_tracer,
    leave_model_call,
    note_provider_call,
    traceable_context,
)
from llmtrace.sdk.span_errors import record_error
from llmtrace.sdk.streaming import (
    STATUS_OK,
    ChunkParser,
    GatheredAttributes,
    StreamRecorder,
    TracedAsyncStream,
    TracedStream,
    end_model_call,
    set_span_attributes,
)

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1024)
def _class_has(cls: type, name: str) -> bool:
    # A miss on a pydantic model class goes through its metaclass's __getattr__: remember it.
    return hasattr(cls, name)


# Class -> its pydantic fields, or None when it is not a pydantic model: read through the class
# (and pydantic's metaclass) each time otherwise, several times per model call. A plain dict, read
# by subscription with a miss caught: the interpreter specialises that for a dict, not for a dict
# subclass with ``__missing__`` (twice the cost, on every field read).
_model_fields: dict[type, Any] = {}


def _fields_of_class(cls: type) -> Any:
    fields = getattr(cls, "__pydantic_fields__", None)
    if len(_model_fields) < 1024:
        _model_fields[cls] = fields
    return fields


def field_of(obj: Any, name: str) -> Any:
    """``obj.name`` for SDK models, ``obj[name]`` for decoded JSON; None when absent.

    On the per-call path: the SDKs' pydantic models are read from their field and extra
    dictionaries, because ``getattr(model, missing, None)`` goes through pydantic's
    ``__getattr__`` and a raised AttributeError, several microseconds each (a chat completion
    has no ``data``, no ``timings``, ...).
    """
    if obj is None:
        return None
    # type(), not __class__: the interpreter does not specialise reading an attribute of a class
    # with a __getattr__ hook (a pydantic model), so __class__ costs half again as much there.
    cls: Any = type(obj)
    if cls is dict:
        return obj.get(name)
    try:
        fields = _model_fields[cls]
    except KeyError:
        fields = _fields_of_class(cls)
    if fields is not None:
        if name in fields:
            return obj.__dict__.get(name)
        extra = getattr(obj, "__pydantic_extra__", None)
        if extra and name in extra:
            return extra[name]
        # Not a field: a property (Response.output_text) is still read; anything else is absent.
        return getattr(obj, name, None) if _class_has(cls, name) else None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def base_url_of(client: Any) -> Any:
    """The client's base URL (an ``httpx``/``httpx2`` URL).

    Both SDKs keep it in ``_base_url``; ``openai``'s public ``base_url`` property imports a module
    on every read (several microseconds per model call) only to return that attribute.
    """
    base_url = getattr(client, "_base_url", None)
    return base_url if base_url is not None else client.base_url


class Fields(Protocol):
    """Read-only named values: ``get(name)`` is the value, or None when absent."""

    def get(self, name: str, /) -> Any: ...


_NO_FIELDS: Fields = MappingProxyType({})


class _AttributesOf:
    __slots__ = ("_obj",)

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def get(self, name: str, /) -> Any:
        return getattr(self._obj, name, None)


def fields_of(obj: Any) -> Fields:
    """The named values of an SDK model or decoded JSON object, to read several of them.

    Same values as :func:`field_of`, except properties of a pydantic model (read those with
    :func:`field_of`): a model's field and extra dictionaries are looked up once, not per name,
    which matters on the per-call path. None has no fields.
    """
    # (No typing.cast here: it is a function call at run time, and this runs several times per
    # model call.)
    fields: Fields
    if obj is None:
        fields = _NO_FIELDS
    # (type(), not __class__: see field_of.)
    elif (cls := type(obj)) is dict:
        fields = obj
    elif (_model_fields[cls] if cls in _model_fields else _fields_of_class(cls)) is not None:
        extra = obj.__pydantic_extra__
        # Fields win over extra values of the same name, as in field_of.
        fields = {**extra, **obj.__dict__} if extra else obj.__dict__
    elif isinstance(obj, Mapping):
        fields = obj
    else:
        fields = _AttributesOf(obj)
    return fields


@dataclass(slots=True)
class Plan:
    """What the provider module decided about one request before it is sent."""

    span_name: str
    attributes: dict[str, Any]
    parser_factory: Callable[[], ChunkParser]
    # (span, whole response or None, attributes gathered during the call): sets the response's
    # attributes and the gathered ones on the span, in one call.
    record_response: Callable[[Span, Any, dict[str, Any]], None]
    # Replacement positional/keyword arguments (e.g. stream_options injected), or None.
    args: tuple[Any, ...] | None = None
    kwargs: dict[str, Any] | None = None


# Gets the call's own (instance, args, kwargs), not copies: it must leave them unchanged, and put
# what it wants sent differently in Plan.args / Plan.kwargs.
Planner = Callable[[Any, tuple[Any, ...], dict[str, Any]], Plan | None]


@dataclass(frozen=True)
class SDKTypes:
    """The SDK's stream classes, to tell a stream from a parsed response."""

    streams: tuple[type, ...]
    async_streams: tuple[type, ...]


def start_client_span(
    name: str, attributes: dict[str, Any], context: otel_context.Context | None = None
) -> Span:
    """``get_tracer().start_span(name, context, kind=CLIENT, attributes=attributes)``, for less.

    When the tracer's sampler is one of the SDK's own, which never look at attributes (the
    default parent-based always-on, always on or off, trace-id ratio, and parent-based ones
    made of those), the span starts without them and they are set right after through
    :func:`~llmtrace.sdk.streaming.set_span_attributes`, which skips the SDK's per-value copy; the
    span ends up with the same attributes. Any other sampler gets them to decide on.
    ``context``: the current context, when the caller has it at hand (the SDK reads it twice
    otherwise).
    """
    tracer = get_tracer()
    held = content.start_content(attributes)
    if _attribute_blind(tracer):
        span = tracer.start_span(name, context, kind=SpanKind.CLIENT)
        set_span_attributes(span, attributes)
    else:
        span = tracer.start_span(name, context, kind=SpanKind.CLIENT, attributes=attributes)
    content.remember_input(span, held)
    return span


class Planned(Protocol):
    """What starting a model call needs from a provider's plan (:class:`Plan` and others)."""

    @property
    def span_name(self) -> str: ...

    @property
    def attributes(self) -> dict[str, Any]: ...


PlanT = TypeVar("PlanT", bound=Planned)
CallT = TypeVar("CallT", bound=ModelCall)


def start_model_call(
    span_name: str,
    attributes: dict[str, Any],
    call_class: type[CallT],
    context: otel_context.Context | None = None,
    deferred: bool = False,
    traced: bool = True,
) -> CallT:
    """Start the CLIENT span of a model call about to be sent (see :func:`start_client_span`),
    count it as a provider call and return it (a ``call_class``), to send with
    :func:`call_model` or under ``enter_model_call``; its start time is taken before the span
    starts. ``context``: the current context, when the caller read it already. May raise: the
    caller decides what a failed start means (:func:`start_planned_call` sends the call
    untraced).

    ``deferred``: when the tracer's sampler does not look at attributes, the start
    ``attributes`` are the first of the call's ``collected`` ones, set with the rest when it
    ends (one call to set them all, not one more at the start), for a caller whose every end
    sets what the call gathered (the span processors' ``on_start`` never sees the start
    attributes with such a sampler either way).

    A call the sampler does not sample, or one the gate keeps untraced (``traced=False``, for a
    caller that found ``gate.counts_untraced()`` true), gets a
    :class:`~llmtrace.sdk.counted_span.CountedSpan` holding the start ``attributes`` while a meter
    provider is set: its end records the GenAI client metrics as a sampled call's would, and no
    trace sees it. The counted span stands for the sampler's dropped span, or under a closed gate
    for the current span, so the call propagates the same context as before.
    """
    started_at = time.monotonic()
    collected: dict[str, Any] = {}
    if not traced:
        span: Span = CountedSpan(current_span().get_span_context(), dict(attributes))
    else:
        tracer = get_tracer() if deferred else None
        if tracer is not None and _attribute_blind(tracer):
            span = tracer.start_span(span_name, context, kind=SpanKind.CLIENT)
            collected = dict(attributes)
        else:
            span = start_client_span(span_name, attributes, context)
        if not span.is_recording() and counts_untraced():
            span = CountedSpan(span.get_span_context(), dict(attributes))
            collected = {}
    note_provider_call()
    call = call_class(span, started_at)
    call.collected = collected
    return call


def start_planned_call(
    planner: Callable[[Any, tuple[Any, ...], dict[str, Any]], PlanT | None],
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    failure: str = "model call span start failed",
    deferred: bool = False,
) -> tuple[PlanT, ModelCall] | None:
    """(plan, model call started) for a call the planner says is a model call, or None to send
    it as it is: no model call already in flight, the gate (``should_trace``) open or the call
    counted in the metrics all the same (``counts_untraced``), the planner answering a plan, and
    nothing failing on the way (logged once as ``failure``). ``deferred``: the plan's attributes
    may be set when the call ends (see :func:`start_model_call`)."""
    if current_model_call() is not None:
        return None
    context = traceable_context()
    if context is None and not counts_untraced():
        return None
    try:
        plan = planner(instance, args, kwargs)
        if plan is None:
            return None
        return plan, start_model_call(
            plan.span_name, plan.attributes, ModelCall, context, deferred, context is not None
        )
    except Exception:
        log_once(logger, failure)
        return None


# (sampler, whether it decides without looking at attributes, generation) for the last one asked:
# one tuple replaced whole, so a reader on another thread never pairs a sampler with another's
# answer. The generation moves at every switch of llmtrace's own sampler (gate.forget_sampler): an
# answer worked out from the sampler in force before a switch that happened meanwhile is never
# taken for the new one's.
_last_sampler: tuple[Any, bool, int] = (None, False, 0)


def _attribute_blind(tracer: Any) -> bool:
    # The SDK's tracer keeps its sampler in its public ``sampler`` (two getattr calls with
    # defaults cost more than the rest, on every model call); another tracer (the API's proxy,
    # taken before the provider was set) makes its spans with the global provider's.
    sampler: Any
    if tracer.__class__ is SDKTracer:
        sampler = tracer.sampler
    elif isinstance(tracer, trace.ProxyTracer):
        sampler = getattr(trace.get_tracer_provider(), "sampler", None)
    else:
        sampler = getattr(tracer, "sampler", None)
    if sampler is None:
        return False
    global _last_sampler
    last = _last_sampler
    generation = gate.sampler_generation
    if last[0] is sampler and last[2] == generation:
        return last[1]
    try:
        from opentelemetry.sdk.trace import sampling

        # llmtrace's own wrappers (its provider's switchable sampler, RecordUnsampled) decide as
        # the sampler inside does (the switchable one says when it switches: gate.forget_sampler).
        decider = sampler
        while type(decider).__module__.startswith("llmtrace."):
            inner = getattr(decider, "wrapped_sampler", None)
            if inner is None:
                break
            decider = inner
        blind = (sampling.StaticSampler, sampling.TraceIdRatioBased)
        if isinstance(decider, sampling.ParentBased):
            # its delegates, when the fast path may read them (None: assume they read attributes)
            delegates = _compat.parent_based_delegates(decider)
            if delegates is None:
                raise LookupError("the sampler's delegates are not known")
        else:
            delegates = [decider]
        # The SDK's own classes only: a subclass elsewhere may look at attributes.
        answer = all(
            type(delegate).__module__ == sampling.__name__ and isinstance(delegate, blind)
            for delegate in delegates
        )
    except Exception:
        answer = False
    _last_sampler = (sampler, answer, generation)
    return answer


def _end_with(call: ModelCall, plan: Plan, response: Any) -> None:
    span = call.span
    try:
        collected = call.take_collected()
        if span.is_recording():
            # What the provider sets is gathered, to be set at once with the OK status (see
            # set_span_attributes), unless recording the response failed.
            attributes: dict[str, Any] = {}
            gathered = GatheredAttributes(span, attributes)
            recorded = False
            try:
                plan.record_response(gathered, response, collected)  # type: ignore[arg-type]
                recorded = True
            finally:
                content.route_content(span, attributes)
                set_span_attributes(span, attributes, recorded)
        else:
            span.set_status(STATUS_OK)
    except Exception:
        log_once(logger, "model response recording failed")
    finally:
        end_model_call(call)


# Result class -> whether its instances are raw responses. A parsed response is a pydantic model,
# where a missing attribute costs a raised and caught AttributeError: decided once per class.
_raw_response_classes: dict[type, bool] = {}


def _is_raw_response(result: Any) -> bool:
    cls = result.__class__
    raw = _raw_response_classes.get(cls)
    if raw is None:
        raw = hasattr(result, "http_response") and hasattr(result, "parse")
        if len(_raw_response_classes) < 256:
            _raw_response_classes[cls] = raw
    return raw


def _raw_is_stream(result: Any) -> bool:
    return bool(getattr(result, "_stream", False) or getattr(result, "_is_sse_stream", False))


def _finish(result: Any, call: ModelCall, plan: Plan, types: SDKTypes) -> Any:
    """What the SDK returned, sync or async client: a stream to trace chunk by chunk, a raw
    response, or a parsed response that ends the span now."""
    if isinstance(result, types.streams):
        traced: Any = TracedStream
    elif isinstance(result, types.async_streams):
        traced = TracedAsyncStream
    else:
        traced = None
    if traced is not None:
        call.headers_received()
        recorder = StreamRecorder(call.span, call.started_at, plan.parser_factory())
        # Set at the stream's end, with the phases that complete while it is read.
        recorder.collected = call.collected
        return traced(result, recorder)
    if _is_raw_response(result):
        return _finish_raw(result, call, plan, types)
    _end_with(call, plan, result)
    return result


def _finish_raw(result: Any, call: ModelCall, plan: Plan, types: SDKTypes) -> Any:
    http_response = result.http_response
    call.headers_received()
    if not _raw_is_stream(result) and http_response.is_closed:
        body: Any = None
        try:
            body = http_response.json()
        except Exception:
            log_once(logger, "raw model response decoding failed")
        _end_with(call, plan, body)
        return result
    call.set_collected()
    return TracedRawResponse(result, call, plan, types)


class TracedRawResponse(wrapt.ObjectProxy):  # type: ignore[misc,type-arg,unused-ignore]
    """A raw response not read yet: ``parse()`` result is recorded; ends on close or when dropped."""

    def __init__(self, wrapped: Any, call: ModelCall, plan: Plan, types: SDKTypes) -> None:
        super().__init__(wrapped)
        self._self_call = call
        self._self_plan = plan
        self._self_types = types
        self._self_parsed: Any = None
        self._self_done = [False]
        self._self_finalizer = weakref.finalize(self, _end_once, call.span, self._self_done)

    def _self_take(self) -> bool:
        if self._self_done[0]:
            return False
        self._self_done[0] = True
        return True

    def _self_after_parse(self, parsed: Any) -> Any:
        if self._self_parsed is not None:
            return self._self_parsed
        if not self._self_take():
            return parsed
        call, plan = self._self_call, self._self_plan
        if isinstance(parsed, self._self_types.streams):
            recorder = StreamRecorder(call.span, call.started_at, plan.parser_factory())
            self._self_parsed = TracedStream(parsed, recorder)
        elif isinstance(parsed, self._self_types.async_streams):
            recorder = StreamRecorder(call.span, call.started_at, plan.parser_factory())
            self._self_parsed = TracedAsyncStream(parsed, recorder)
        else:
            _end_with(call, plan, parsed)
            self._self_parsed = parsed
        return self._self_parsed

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        result = self.__wrapped__.parse(*args, **kwargs)
        if inspect.isawaitable(result):
            return self._self_await_parse(result)
        return self._self_after_parse(result)

    async def _self_await_parse(self, awaitable: Any) -> Any:
        return self._self_after_parse(await awaitable)

    def close(self) -> Any:
        result = self.__wrapped__.close()
        if inspect.isawaitable(result):
            return self._self_await_close(result)
        self._self_end_closed()
        return result

    async def _self_await_close(self, awaitable: Any) -> Any:
        try:
            return await awaitable
        finally:
            self._self_end_closed()

    def _self_end_closed(self) -> None:
        if self._self_take():
            span = self._self_call.span
            span.set_attribute(semconv.STREAM_END, "closed")
            end_model_call(self._self_call)


def _end_once(span: Span, done: list[bool]) -> None:
    if not done[0]:
        done[0] = True
        span.set_attribute(semconv.STREAM_END, "abandoned")
        span.end()


def request_patches(module_name: str, planner: Planner) -> list[tuple[str, str, Any]]:
    """The patch rows of an SDK whose clients send through ``SyncAPIClient.request`` and
    ``AsyncAPIClient.request`` in ``{module_name}._base_client`` (OpenAI's and Anthropic's)."""
    sdk = importlib.import_module(module_name)
    types = SDKTypes(streams=(sdk.Stream,), async_streams=(sdk.AsyncStream,))
    request, async_request = make_request_wrappers(planner, types)
    base_client = f"{module_name}._base_client"
    return [
        (base_client, "SyncAPIClient.request", request),
        (base_client, "AsyncAPIClient.request", async_request),
    ]


def make_request_wrappers(planner: Planner, types: SDKTypes) -> tuple[Any, Any]:
    """Wrappers for ``SyncAPIClient.request`` and ``AsyncAPIClient.request``: wrapt-style
    (``wrapper(wrapped, instance, args, kwargs)``), and each builds a direct replacement of the
    plain method (see :class:`~llmtrace.sdk.gate.DirectWrapper`)."""

    def make_request(original: Any) -> Any:
        def request(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            # Every end of such a call (see _finish and fail_model_call) sets what it gathered.
            prepared = start_planned_call(planner, self, args, kwargs, deferred=True)
            if prepared is None:
                return original(self, *args, **kwargs)
            plan, call = prepared
            call_args = plan.args if plan.args is not None else args
            call_kwargs = plan.kwargs if plan.kwargs is not None else kwargs
            return call_model(call, original, (self, *call_args), call_kwargs, _finish, plan, types)

        return request

    def make_async_request(original: Any) -> Any:
        async def async_request(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            prepared = start_planned_call(planner, self, args, kwargs, deferred=True)
            if prepared is None:
                return await original(self, *args, **kwargs)
            plan, call = prepared
            call_args = plan.args if plan.args is not None else args
            call_kwargs = plan.kwargs if plan.kwargs is not None else kwargs
            return await acall_model(
                call, original, (self, *call_args), call_kwargs, _finish, plan, types
            )

        return async_request

    request = direct_method(make_request)
    async_request = direct_method(make_async_request)
    return request, async_request


Finish = Callable[..., Any]
# Ends a model call's span that raised: (call, the exception).
Fail = Callable[[ModelCall, BaseException], None]


def call_model(
    call: ModelCall,
    send: Any,
    args: Any,
    kwargs: Any,
    finish: Finish,
    *extra: Any,
    fail: Fail | None = None,
) -> Any:
    """Send a model call with ``call`` in flight (the HTTP layer enriches its span, no other
    model instrumentation adds one), then ``finish(result, call, *extra)`` records the response
    or hands a stream to its recorder; a call that raised ends its span failed, by ``fail`` when
    the provider's errors say more than their class (default :func:`fail_model_call`)."""
    in_flight = enter_model_call(call)
    try:
        try:
            result = send(*args, **kwargs)
        finally:
            leave_model_call(in_flight)
    except BaseException as exc:
        (fail or fail_model_call)(call, exc)
        raise
    return _finished(result, call, finish, extra)


async def acall_model(
    call: ModelCall, send: Any, args: Any, kwargs: Any, finish: Finish, *extra: Any
) -> Any:
    """:func:`call_model` for a coroutine ``send``."""
    in_flight = enter_model_call(call)
    try:
        try:
            result = await send(*args, **kwargs)
        finally:
            leave_model_call(in_flight)
    except BaseException as exc:
        fail_model_call(call, exc)
        raise
    return _finished(result, call, finish, extra)


def _finished(result: Any, call: ModelCall, finish: Finish, extra: tuple[Any, ...]) -> Any:
    try:
        return finish(result, call, *extra)
    except Exception:
        log_once(logger, "model call span end failed")
        try:
            call.set_collected()
        finally:
            # with its metrics: the call happened, whatever went wrong in recording it
            end_model_call(call)
        return result


def fail_model_call(call: ModelCall, exc: BaseException) -> None:
    """End a model call's span that raised: its HTTP status if the error has one, ``error.type``;
    a cancellation (not an ``Exception``) is recorded as such, not as an error."""
    span = call.span
    try:
        call.set_collected()
        status_code = getattr(exc, "status_code", None)
        if is_int(status_code):
            span.set_attribute(semconv.HTTP_RESPONSE_STATUS_CODE, status_code)
        if isinstance(exc, Exception):
            record_error(span, exc)
        else:
            span.set_attribute(semconv.STREAM_END, "cancelled")
    except Exception:
        log_once(logger, "model call error recording failed")
    finally:
        end_model_call(call)
