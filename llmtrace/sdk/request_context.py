"""Request context: attributes every span of one request carries (session, user, conversation).

``with llmtrace.context(session_id=..., user_id=..., conversation_id=..., **attributes):`` (also
``async with``, and as a decorator) puts those attributes on every span started inside it, by
llmtrace or by any other instrumentation on the same provider, using the standard names
(``session.id``, ``user.id``, ``gen_ai.conversation.id``). Contexts nest: an inner one adds to
and overrides the outer one's attributes.

How the attributes reach spans: a span processor (:class:`RequestContextProcessor`) reads the
current request context when a span starts. It is added once to the global SDK provider (and to
the provider ``init()`` or ``opentelemetry-instrument`` set up) when the first context is entered
in the process: until then no span can carry such attributes, and a processor costs every span of
the provider a Python call as it starts and two as it ends. So it comes after the processors
present then; a processor of the application's that reads a span's attributes in its own
``on_start`` sees the request context's only when it was added after the first context entered.

Across concurrency: asyncio tasks copy the context they are created in, so tasks started inside
carry it; threads do not, so the ``threading`` instrumentation (on by default) hands the
submitting code's request context and trace context to ``Thread`` and ``ThreadPoolExecutor``
work.

A ``user_id`` is personal data: when a ``redact`` hook is configured, it is passed through the
hook before it is set, like captured content.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from types import MappingProxyType
from typing import Any, TypeVar, cast

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from llmtrace import semconv
from llmtrace.sdk._async_with import AsyncWithToo

F = TypeVar("F", bound=Callable[..., Any])

# The attributes of the request context in force (empty outside any).
_NONE: Mapping[str, Any] = MappingProxyType({})
_attributes: ContextVar[Mapping[str, Any]] = ContextVar("llmtrace_request_context", default=_NONE)


def current_attributes() -> Mapping[str, Any]:
    """The request context's attributes in force here (empty outside any)."""
    return _attributes.get()


def set_current_attributes(attributes: Mapping[str, Any]) -> Token[Mapping[str, Any]]:
    """Make ``attributes`` the request context here (the threading instrumentation hands it on)."""
    return _attributes.set(attributes)


def reset_current_attributes(token: Token[Mapping[str, Any]]) -> None:
    _attributes.reset(token)


class RequestContextProcessor(SpanProcessor):
    """Sets the request context's attributes on every span as it starts."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        attributes = _attributes.get()
        if attributes and span.is_recording():
            span.set_attributes(attributes)

    def on_end(self, span: ReadableSpan) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_installed_on: set[int] = set()
# Whether a request context was entered in this process yet, and the providers waiting for the
# processor until one is (see the module docstring).
_entered = False
_waiting: list[object] = []


def install(provider: object | None = None) -> None:
    """Add the request-context processor to ``provider`` (default: the global one), once."""
    provider = provider if provider is not None else trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider) or id(provider) in _installed_on:
        return
    _installed_on.add(id(provider))
    provider.add_span_processor(RequestContextProcessor())


def install_when_used(provider: object | None = None) -> None:
    """:func:`install` now if a request context was entered already, else when the first one is."""
    if _entered:
        install(provider)
        return
    provider = provider if provider is not None else trace.get_tracer_provider()
    if isinstance(provider, TracerProvider) and all(p is not provider for p in _waiting):
        _waiting.append(provider)


def _first_entered() -> None:
    global _entered
    _entered = True
    while _waiting:
        install(_waiting.pop())


class RequestContext(AsyncWithToo["RequestContext"]):
    """The attributes of one request: a context manager (sync and async) and a decorator."""

    def __init__(self, attributes: Mapping[str, Any]) -> None:
        self.attributes = dict(attributes)
        self._tokens: list[Token[Mapping[str, Any]]] = []

    def __enter__(self) -> RequestContext:
        if not _entered:
            _first_entered()
        install()
        self._tokens.append(_attributes.set({**_attributes.get(), **self.attributes}))
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if self._tokens:
            _attributes.reset(self._tokens.pop())

    def __call__(self, func: F) -> F:
        """As a decorator: every call runs inside the context (a fresh entry per call)."""
        attributes = self.attributes
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with RequestContext(attributes):
                    return await func(*args, **kwargs)

            return cast(F, async_wrapper)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with RequestContext(attributes):
                return func(*args, **kwargs)

        return cast(F, wrapper)


def context(
    *,
    session_id: str | None = None,
    user_id: str | None = None,
    conversation_id: str | None = None,
    **attributes: Any,
) -> RequestContext:
    """Attributes for every span started inside: ``with llmtrace.context(session_id=...):``."""
    values: dict[str, Any] = {}
    if session_id is not None:
        values[semconv.SESSION_ID] = str(session_id)
    if user_id is not None:
        values[semconv.USER_ID] = _private(str(user_id))
    if conversation_id is not None:
        values[semconv.GEN_AI_CONVERSATION_ID] = str(conversation_id)
    values.update({key: value for key, value in attributes.items() if value is not None})
    return RequestContext(values)


def _private(value: str) -> str:
    from llmtrace.options import settings

    redact = settings().redact
    return redact(value) if redact is not None else value


def current_trace_id() -> str | None:
    """The current trace's id as 32 hex digits (as Jaeger shows it), or None outside a trace."""
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None
    return f"{span_context.trace_id:032x}"


def trace_url(trace_id: str | None = None) -> str | None:
    """The Jaeger UI link of ``trace_id`` (default: the current trace), when a Jaeger URL is
    configured (``init(jaeger_url=...)`` or ``LLMTRACE_JAEGER_URL``); else None."""
    from llmtrace._urls import jaeger_trace_url
    from llmtrace.options import settings

    base = settings().jaeger_url
    trace_id = trace_id or current_trace_id()
    if not base or not trace_id:
        return None
    return jaeger_trace_url(base, trace_id)
