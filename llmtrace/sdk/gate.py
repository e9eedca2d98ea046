"""What every llmtrace instrumentor shares: safe patching, the model call in flight, settings.

Patching (rules 1 and 5 of docs/architecture.md): :class:`Patches` wraps one attribute at a
time. An attribute this version of a library lacks is skipped with a debug log, never aborting
the rest; an attribute llmtrace already wrapped is left alone (never wrapped twice);
``restore()`` puts every original back.

The gate (rule 7 of docs/architecture.md): :func:`should_trace` is the one answer to "should this
be traced?", asked by the decorators and by every instrumentation before it does any work. No
other module decides it. Metrics are not traces: :func:`counts_untraced` answers whether a model
call the gate keeps untraced (or whose span the sampler drops) is still counted in the GenAI
client metrics (on a :class:`~llmtrace.sdk.counted_span.CountedSpan`).

The model call in flight: a model-client instrumentation (OpenAI, Anthropic) publishes its
:class:`ModelCall` in a context variable while the SDK sends the request. The HTTP layer below
reads it to enrich that span with transport phases instead of adding a second span (rule 4), and
the Anthropic SDK's own tracing reads it to stay quiet.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import time
import types
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.utils import (
    is_http_instrumentation_enabled,
    is_instrumentation_enabled,
)
from opentelemetry.trace import Span, Tracer

from llmtrace import semconv
from llmtrace._version import __version__
from llmtrace.options import settings
from llmtrace.sdk import _compat, _context_keys
from llmtrace.sdk.content import route_content
from llmtrace.sdk.metrics import meter_provider_set

logger = logging.getLogger("llmtrace.instrumentation")

# The gate's state, set by init() and shutdown() (llmtrace.sdk.config) and read on every call:
# True only while llmtrace's own provider samples nothing (everything is dropped here, first).
drop_all = False
# True while llmtrace's own provider records the traces its sampler drops (for the request
# breakdown): spans may then start under an unsampled parent.
record_unsampled = False
# Moves at every switch of llmtrace's own sampler: what a model call learnt about the sampler
# (whether it reads a span's attributes, llmtrace.instrumentation.model_call) is asked again.
sampler_generation = 0


def forget_sampler() -> None:
    """The sampler in force decides otherwise now (llmtrace's switchable sampler was given
    another): what was learnt about it is asked again."""
    global sampler_generation
    sampler_generation += 1


# Set on llmtrace's FunctionWrappers (a wrapt proxy keeps ``_self_*`` attributes to itself), so
# a second patch can tell. Not a subclass: for a subclass, wrapt finds the type of the bound
# wrapper through a Python attribute lookup on every method call, which on a model call's
# request and HTTP send costs more than the rest of the wrapper.
_MARK = "_self_llmtrace_wrapper"


# Set by OpenTelemetry's span and metric processors while they export, and by
# ``opentelemetry.instrumentation.utils.suppress_instrumentation()``; the HTTP key by
# instrumentations that own the HTTP call below them (and ``suppress_http_instrumentation()``).
# Found through the public API (see llmtrace.sdk._context_keys); the plain key is the first again
# when the setter sets one.
_KEYS_FOUND = bool(_context_keys.SUPPRESS and _context_keys.SUPPRESS_HTTP and _context_keys.SPAN)
_SUPPRESS_KEY, _SUPPRESS_PLAIN_KEY, _SUPPRESS_HTTP_KEY = (
    (_context_keys.SUPPRESS[0], _context_keys.SUPPRESS[-1], _context_keys.SUPPRESS_HTTP[0])
    if _KEYS_FOUND
    else ("", "", "")
)
_SPAN_KEY = _context_keys.SPAN or ""

# The context variable OpenTelemetry keeps the current context in, when the fast path may read
# it (see llmtrace.sdk._compat.context_variable); None: its public API.
_CONTEXT = _compat.context_variable()

# The current OpenTelemetry context (``otel_context.get_current()``, for less).
current_context: Callable[[], otel_context.Context] = (
    _CONTEXT.get if _CONTEXT is not None else otel_context.get_current
)


def _suppressed(current: otel_context.Context) -> bool:
    if _KEYS_FOUND:
        return bool(current.get(_SUPPRESS_KEY) or current.get(_SUPPRESS_PLAIN_KEY))
    return not is_instrumentation_enabled()


def _http_suppressed(current: otel_context.Context) -> bool:
    if _KEYS_FOUND:
        return bool(current.get(_SUPPRESS_HTTP_KEY))
    return not is_http_instrumentation_enabled()


def should_trace() -> bool:
    """Whether anything started here may be recorded: the one gate every instrumentation asks.

    False while OpenTelemetry suppresses instrumentation (the SDK sets this around every export,
    so an exporter's own requests are never traced), while llmtrace's provider samples nothing
    (``drop_all``), and under an unsampled parent (a parent-based sampler drops every child),
    except while ``request_metrics_unsampled`` records unsampled requests for their breakdown.
    Reads the context once, directly: it runs on every decorated call and every HTTP request.
    """
    if drop_all:
        return False
    current = current_context()
    if _KEYS_FOUND:
        if current.get(_SUPPRESS_KEY) or current.get(_SUPPRESS_PLAIN_KEY):
            return False
    elif _suppressed(current):
        return False
    return record_unsampled or _parent_allows(current)


def traceable_context() -> otel_context.Context | None:
    """:func:`should_trace` that answers with the current context when it is open (None when
    not), for a caller that starts a span in that context next (one read of it for both)."""
    if drop_all:
        return None
    current = current_context()
    # (_suppressed inlined: this runs on every model call)
    if _KEYS_FOUND:
        if current.get(_SUPPRESS_KEY) or current.get(_SUPPRESS_PLAIN_KEY):
            return None
    elif _suppressed(current):
        return None
    if not (record_unsampled or _parent_allows(current)):
        return None
    return current


def should_trace_http() -> bool:
    """:func:`should_trace`, and the HTTP layer is not suppressed by an instrumentation above it
    (the same one read of the context)."""
    if drop_all:
        return False
    current = current_context()
    if _KEYS_FOUND:
        # (_suppressed and _http_suppressed inlined: this runs on every HTTP request)
        if (
            current.get(_SUPPRESS_KEY)
            or current.get(_SUPPRESS_PLAIN_KEY)
            or current.get(_SUPPRESS_HTTP_KEY)
        ):
            return False
    elif _suppressed(current) or _http_suppressed(current):
        return False
    return record_unsampled or _parent_allows(current)


def counts_untraced() -> bool:
    """Whether a model call that is not traced (the gate closed, or the sampler dropped its span)
    still records the GenAI client metrics: yes whenever a meter provider is set, since metrics
    count every call whatever the trace sampler decides; no while OpenTelemetry suppresses
    instrumentation (nothing an exporter does is counted either) or while ``OTEL_SDK_DISABLED``
    turns llmtrace off."""
    if not meter_provider_set():
        return False
    if drop_all and settings().disabled:
        return False
    return not _suppressed(current_context())


def current_span() -> Span:
    """The current span (``trace.get_current_span()``, for less), INVALID_SPAN when none."""
    current = current_context()
    span: Span | None = (
        current.get(_SPAN_KEY) if _SPAN_KEY else trace.get_current_span(current)  # type: ignore[assignment]
    )
    return span if span is not None else trace.INVALID_SPAN


def _parent_allows(current: otel_context.Context) -> bool:
    """No current span, or a sampled one (children of an unsampled span are never sampled)."""
    # (No typing.cast: it is a Python call at run time, on every model call.)
    parent: Span | None = (
        current.get(_SPAN_KEY) if _SPAN_KEY else trace.get_current_span(current)  # type: ignore[assignment]
    )
    if parent is None:
        return True
    parent_context = parent.get_span_context()
    return not (parent_context.is_valid and not parent_context.trace_flags & 0x01)


def is_suppressed() -> bool:
    """True while OpenTelemetry suppresses instrumentation (an export in progress, or asked)."""
    current = current_context()
    return _suppressed(current) or _http_suppressed(current)


def is_wrapped_by_llmtrace(value: object) -> bool:
    return bool(getattr(value, _MARK, False))


def _resolve(module_name: str, path: str) -> tuple[Any, str] | None:
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError:
        logger.debug("llmtrace: module %s is not installed; skipped", module_name)
        return None
    *parents, attribute = path.split(".")
    for name in parents:
        owner = getattr(owner, name, None)
        if owner is None:
            logger.debug("llmtrace: %s.%s is missing in this version; skipped", module_name, path)
            return None
    if attribute not in getattr(owner, "__dict__", {}) and not hasattr(owner, attribute):
        logger.debug("llmtrace: %s.%s is missing in this version; skipped", module_name, path)
        return None
    return owner, attribute


class DirectWrapper:
    """A wrapt-style wrapper that can also build the replacement of a plain function itself:
    ``make(original)`` returns a function taking what the method ``original`` takes (``self``
    first) and calling ``original`` directly. For the methods every model call goes through:
    a generic replacement packs and unpacks the arguments and binds the method on every call,
    several times the cost of the call itself. Anything but a plain function is wrapped with
    ``wrapper`` by wrapt; calling a DirectWrapper calls ``wrapper``."""

    __slots__ = ("make", "wrapper")

    def __init__(
        self, wrapper: Callable[..., Any], make: Callable[[Any], Callable[..., Any]]
    ) -> None:
        self.wrapper = wrapper
        self.make = make

    def __call__(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return self.wrapper(wrapped, instance, args, kwargs)


def direct_method(make: Callable[[Any], Callable[..., Any]]) -> DirectWrapper:
    """A :class:`DirectWrapper` of a method from ``make`` alone: the wrapt-style form (for a
    method that is not a plain function) calls what ``make`` builds around the bound method."""

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return make(lambda _instance, *a, **k: wrapped(*a, **k))(instance, *args, **kwargs)

    return DirectWrapper(wrapper, make)


_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def _plain_replacement(
    original: Any, wrapper: Callable[..., Any], in_class: bool
) -> Callable[..., Any] | None:
    """A plain function standing in for a plain Python function or method, calling the wrapt-style
    ``wrapper(wrapped, instance, args, kwargs)`` as wrapt would; None for anything else (wrapt
    wraps that). A wrapt proxy costs about twice what a function frame does on every call of the
    method, and the request and HTTP send of every model call go through two of them.

    ``__wrapped__`` is the original (``functools.wraps``), and a coroutine function stays one
    (``inspect.iscoroutinefunction`` answers as for the original).
    """
    if (
        # type(), not __class__: a wrapt proxy (another instrumentation's) reports the class
        # of what it wraps.
        type(original) is not types.FunctionType or original.__code__.co_flags & _GENERATOR_FLAGS
    ):
        return None
    if in_class and isinstance(wrapper, DirectWrapper):
        return functools.wraps(original)(wrapper.make(original))
    bind = types.MethodType
    replacement: Callable[..., Any]
    if inspect.iscoroutinefunction(original):
        if in_class:

            async def replacement(self: Any, /, *args: Any, **kwargs: Any) -> Any:
                return await wrapper(bind(original, self), self, args, kwargs)

        else:

            async def replacement(*args: Any, **kwargs: Any) -> Any:
                return await wrapper(original, None, args, kwargs)

    elif in_class:

        def replacement(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            return wrapper(bind(original, self), self, args, kwargs)

    else:

        def replacement(*args: Any, **kwargs: Any) -> Any:
            return wrapper(original, None, args, kwargs)

    return functools.wraps(original)(replacement)


class Patches:
    """The attributes one instrumentor replaced, with their originals, to restore them."""

    def __init__(self) -> None:
        self._originals: list[tuple[Any, str, Any]] = []

    def wrap(self, module_name: str, path: str, wrapper: Callable[..., Any]) -> bool:
        """Wrap ``module.path`` with a wrapt-style ``wrapper(wrapped, instance, args, kwargs)``:
        a plain function replaces a plain function or method, a wrapt proxy anything else."""
        resolved = _resolve(module_name, path)
        if resolved is None:
            return False
        owner, attribute = resolved
        original = owner.__dict__.get(attribute) if isinstance(owner, type) else None
        if original is None:
            original = getattr(owner, attribute)
        if is_wrapped_by_llmtrace(original):
            logger.debug("llmtrace: %s.%s is already wrapped; left alone", module_name, path)
            return False
        if isinstance(original, (staticmethod, classmethod)):
            logger.debug("llmtrace: %s.%s is a static/class method; skipped", module_name, path)
            return False
        replacement = _plain_replacement(original, wrapper, isinstance(owner, type))
        if replacement is None:
            replacement = wrapt.FunctionWrapper(original, wrapper)
        setattr(replacement, _MARK, True)
        setattr(owner, attribute, replacement)
        self._originals.append((owner, attribute, original))
        return True

    def replace(self, module_name: str, path: str, value: Any) -> bool:
        """Replace ``module.path`` with ``value`` (for what wrapt cannot wrap, e.g. properties)."""
        resolved = _resolve(module_name, path)
        if resolved is None:
            return False
        owner, attribute = resolved
        original = owner.__dict__.get(attribute, None)
        if original is None:
            return False
        setattr(owner, attribute, value)
        self._originals.append((owner, attribute, original))
        return True

    def restore(self) -> None:
        while self._originals:
            owner, attribute, original = self._originals.pop()
            try:
                setattr(owner, attribute, original)
            except Exception:
                logger.debug("llmtrace: could not restore %s", attribute, exc_info=True)

    def __len__(self) -> int:
        return len(self._originals)


# The tracer provider given to instrument() (the OpenTelemetry instrumentor contract); None: the
# global one.
_tracer_provider: Any = None


@functools.cache
def get_tracer() -> Tracer:
    """The tracer of every instrumentation: from the ``tracer_provider`` given to
    ``instrument()``, else from the global provider.

    Taken once (a cached call costs next to nothing on every model call): the global provider can
    be set only once, and a tracer taken before it is set is a proxy that follows it."""
    provider = _tracer_provider
    if provider is None:
        return trace.get_tracer(semconv.SCOPE_NAME, __version__)
    return provider.get_tracer(semconv.SCOPE_NAME, __version__)  # type: ignore[no-any-return]


def use_tracer_provider(provider: Any) -> None:
    """Make the instrumentations' spans go to ``provider`` (None: the global provider)."""
    global _tracer_provider
    _tracer_provider = provider
    get_tracer.cache_clear()


class ModelCall:
    """One model call in flight: its span and when its request was issued (monotonic clock).

    ``collected``: when not None, attributes known during the call (the HTTP phases, the time to
    headers) are gathered there, for the call's end to set together with the response's (each
    call to set attributes on a span costs more than an attribute in it); the end takes them
    with :meth:`take_collected`. None: they are set as they are known.
    """

    __slots__ = (
        "answer",
        "answered_at",
        "attempt_started_at",
        "collected",
        "headers_at",
        "retry_errors",
        "span",
        "started_at",
    )

    def __init__(self, span: Span, started_at: float) -> None:
        self.span = span
        self.started_at = started_at
        self.headers_at: float | None = None
        self.collected: dict[str, Any] | None = None
        # How the HTTP layer's last attempt of this call was answered: its status code, or the
        # class of the exception it failed with; None before any. ``answered_at``: when that
        # answer was read to its end, or the attempt failed.
        self.answer: int | str | None = None
        self.answered_at: float | None = None
        self.attempt_started_at = started_at
        self.retry_errors: list[str] | None = None

    def refused(self) -> bool:
        """Whether the last attempt failed, so that another request in this call is a retry."""
        answer = self.answer
        return answer is not None and (answer.__class__ is str or answer >= 400)  # type: ignore[operator]

    def retrying(self, now: float) -> None:
        """The client sends the request again after the last attempt failed (a 429 or 503, a
        failed connection): that attempt becomes a ``llmtrace.retry`` event on the span (its
        error type, status code, own time to headers, and the wait before this retry), the
        call's retry time and error types grow, and what the earlier attempt measured (phases,
        time to headers, server timings) is dropped, for the last attempt's to describe the
        answer the caller gets."""
        answer = self.answer
        error_type = answer if answer.__class__ is str else str(answer)
        answered_at = self.answered_at if self.answered_at is not None else self.headers_at
        errors = self.retry_errors
        if errors is None:
            errors = self.retry_errors = []
        errors.append(error_type)
        event: dict[str, Any] = {
            semconv.HTTP_REQUEST_RESEND_COUNT: len(errors),
            semconv.ERROR_TYPE: error_type,
        }
        if answer.__class__ is int:
            event[semconv.HTTP_RESPONSE_STATUS_CODE] = answer
        if self.headers_at is not None:
            event[semconv.ATTEMPT_TIME_TO_HEADERS] = self.headers_at - self.attempt_started_at
        if answered_at is not None:
            event[semconv.RETRY_WAIT] = max(now - answered_at, 0.0)
        span = self.span
        if span.is_recording():
            span.add_event(semconv.RETRY_EVENT, event)
        collected = self.collected
        if collected is not None:
            for name in _ATTEMPT_ATTRIBUTES:
                collected.pop(name, None)
        self.add_attributes(
            {
                semconv.HTTP_REQUEST_RESEND_COUNT: len(errors),
                semconv.RETRY_TIME: now - self.started_at,
                semconv.RETRY_ERROR_TYPES: tuple(errors),
            }
        )
        self.answer = None
        self.answered_at = None
        self.headers_at = None
        self.attempt_started_at = now

    def attempt_failed(self, exc: BaseException) -> None:
        """An attempt failed without an answer (a refused or broken connection, a timeout): the
        client may try again, and its next request is then a retry."""
        self.answer = type(exc).__qualname__
        self.answered_at = time.monotonic()

    def add_attributes(self, attributes: dict[str, Any]) -> None:
        """Attributes known during the call: gathered for its end, or else set now."""
        collected = self.collected
        if collected is not None:
            collected.update(attributes)
        elif self.span.is_recording():
            self.span.set_attributes(attributes)

    def take_collected(self) -> dict[str, Any]:
        """What was gathered for the end (emptied: anything known later is set directly)."""
        collected = self.collected
        self.collected = None
        return collected if collected is not None else {}

    def set_collected(self) -> None:
        """Set what was gathered now (a call that does not end with a whole response)."""
        collected = self.take_collected()
        if self.span.is_recording():
            # The call's content goes where the capture mode says, even when it failed.
            route_content(self.span, collected)
            if collected:
                self.span.set_attributes(collected)

    def headers_received(self, at: float | None = None) -> None:
        """Record the first moment the response headers were known (later reports are ignored)."""
        if self.headers_at is not None:
            # Known already (the HTTP layer saw them first): no clock read, nothing to record.
            return
        time_to_headers = self.note_headers(time.monotonic() if at is None else at)
        if time_to_headers is not None:
            self.add_attributes({semconv.TIME_TO_HEADERS: time_to_headers})

    def note_headers(self, at: float) -> float | None:
        """The time to headers if ``at`` is the first moment they were known, for the caller to
        set with other attributes at once; None when they were known already."""
        if self.headers_at is not None:
            return None
        self.headers_at = at
        return at - self.started_at


# What one attempt of a model call measured, dropped when the client tries again.
_ATTEMPT_ATTRIBUTES = (
    semconv.TIME_TO_HEADERS,
    semconv.HTTP_CONNECT,
    semconv.HTTP_TLS,
    semconv.HTTP_REQUEST_SENT,
    semconv.HTTP_RESPONSE_HEADERS,
    semconv.HTTP_BODY_COMPLETE,
    semconv.SERVER_QUEUE_TIME,
    semconv.SERVER_PROMPT_TIME,
    semconv.SERVER_GENERATION_TIME,
    semconv.SERVER_PROCESSING_TIME,
    semconv.SERVER_TIME_TO_FIRST_TOKEN,
    semconv.SERVER_INFERENCE_TIME,
)

_current_model_call: ContextVar[ModelCall | None] = ContextVar("llmtrace_model_call", default=None)

# The model call in flight in this context, or None. (The variable's own method: asked twice per
# model call and once per HTTP request, where a function around it would cost a call each.)
current_model_call: Callable[[], ModelCall | None] = _current_model_call.get


InFlight = tuple[Token[ModelCall | None], Token[otel_context.Context]]


def enter_model_call(call: ModelCall) -> InFlight:
    """Make ``call`` (and its span) current while the SDK sends the request, never across a yield;
    :func:`leave_model_call` undoes it. (Two plain calls, not a context manager: they run on every
    model call, and a generator-based context manager costs more than the work it wraps.)"""
    if _CONTEXT is None or not _SPAN_KEY:
        return (
            _current_model_call.set(call),
            otel_context.attach(trace.set_span_in_context(call.span)),
        )
    # What ``attach(set_span_in_context(span))`` does, without its four Python calls.
    values = _CONTEXT.get().copy()
    values[_SPAN_KEY] = call.span
    return _current_model_call.set(call), _CONTEXT.set(otel_context.Context(values))


def leave_model_call(tokens: InFlight) -> None:
    if _CONTEXT is None or not _SPAN_KEY:
        otel_context.detach(tokens[1])
    else:
        try:
            _CONTEXT.reset(tokens[1])
        except Exception:
            # As ``otel_context.detach`` reports it.
            otel_context.detach(tokens[1])
    _current_model_call.reset(tokens[0])


# Model-call spans of a framework (LangChain's chat model run) that a provider model call may be
# made under, by id: a framework watches its span, the provider's request wrapper notes a call
# started beneath it, and the framework asks at the end whether the provider owned the timing
# (rule 8 of docs/architecture.md). Empty unless a framework is instrumented: one truth test per
# model call.
_watched_model_spans: dict[int, int] = {}


def watch_provider_calls(span: Span) -> None:
    """Count provider model calls started while ``span`` is the current span, until forgotten."""
    _watched_model_spans[id(span)] = 0


def note_provider_call() -> None:
    """Called by a provider instrumentation as its model span starts, under the current span."""
    if _watched_model_spans:
        parent = current_context().get(_SPAN_KEY)
        if parent is not None and id(parent) in _watched_model_spans:
            _watched_model_spans[id(parent)] += 1


def provider_calls_under(span: Span) -> int:
    """How many provider model calls started beneath ``span``; stops watching it."""
    return _watched_model_spans.pop(id(span), 0)


CaptureSettings = tuple[bool, int, Callable[[str], str] | None, bool]
# The settings object last read and what it said (settings are frozen: one object, one answer).
_last_capture: tuple[object, CaptureSettings] = (None, (False, 0, None, False))


def capture_settings() -> CaptureSettings:
    """(capture_content, content_max_bytes, redact, inject_stream_usage) from the active settings."""
    global _last_capture
    try:
        active = settings()
        last = _last_capture
        if last[0] is active:
            return last[1]
        answer = (
            # A budget of 0 bytes captures nothing, streamed or not.
            active.capture_content and active.content_max_bytes > 0,
            active.content_max_bytes,
            active.redact,
            active.inject_stream_usage,
        )
        _last_capture = (active, answer)
        return answer
    except Exception:
        logger.debug("llmtrace: settings unavailable; content capture off", exc_info=True)
        return False, 0, None, False


def bounded_content(text: str, max_bytes: int, redact: Callable[[str], str] | None) -> str:
    """Content as it may be recorded: redacted first, then cut to ``max_bytes`` bytes of UTF-8
    (never splitting a character); a budget of 0 records nothing."""
    if max_bytes <= 0:
        return ""
    if redact is not None:
        text = redact(text)
    encoded = text.encode("utf-8")
    if len(encoded) > max_bytes:
        return encoded[:max_bytes].decode("utf-8", errors="ignore")
    return text
