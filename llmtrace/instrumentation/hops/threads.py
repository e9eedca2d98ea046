"""Threads: work handed to a ``Thread`` or a ``ThreadPoolExecutor`` stays in the trace (and the
request context) of the code that handed it over.

Python gives a new thread an empty context, so without this a span started in a worker thread
is the root of a trace of its own: a RAG step run in a thread pool, or a framework's tool run in
``run_in_executor``, would split one request into several traces. Only OpenTelemetry's context
and llmtrace's request context are carried, not the caller's other context variables (a thread's
own context is otherwise left as Python makes it).

- ``Thread.start`` notes the starting code's context and gives the thread object a ``run`` of
  its own that runs the thread's ``run`` in it (an instance attribute over the class's method, so
  subclasses that override ``run`` are covered; only public names are used). The executor's own
  worker threads, started inside ``ThreadPoolExecutor.submit``, are left alone: each submitted
  call brings its context.
- ``ThreadPoolExecutor.submit`` runs the call in the submitting code's context
  (``loop.run_in_executor`` goes through it; ``asyncio.to_thread`` copies the context itself).

A thread started during a request belongs to that request **while the request's span is open**,
and no longer: once the span that was current at ``Thread.start`` has ended, the thread's later
spans start traces of their own, and the request context's attributes are no longer set on
them. So a long-lived worker that a request happens to start lazily (a client's background
flusher, a connection pool's reaper, a cache warmer) does not parent its work under that
finished request forever, while a thread started for the request and joined before it ends
(the common fan-out) is wholly in its trace. The carried span is not held in a thread-safe way
beyond what the SDK gives: its end is read from ``ReadableSpan.end_time`` (public). A span whose
end cannot be seen (an unsampled request's non-recording span) is carried for the thread's whole
life, as before: nothing is recorded under it, and docs/behaviour.md says so.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN_CONTEXT, NonRecordingSpan, Span, SpanContext

from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.sdk.request_context import (
    current_attributes,
    reset_current_attributes,
    set_current_attributes,
)

Carried = tuple[otel_context.Context, Mapping[str, Any]]


def _carry() -> Carried | None:
    current = otel_context.get_current()
    attributes = current_attributes()
    if not current and not attributes:
        return None
    return current, attributes


class _WhileOpen(NonRecordingSpan):
    """The starting code's span as a thread started during it sees it: itself until it ends,
    then no span at all (the thread's later spans start traces of their own)."""

    def __init__(self, span: Span) -> None:
        super().__init__(span.get_span_context())
        self._span = span

    def _open(self) -> bool:
        # only spans whose end can be seen are bound (see _for_thread)
        return self._span.end_time is None  # type: ignore[attr-defined]

    def get_span_context(self) -> SpanContext:
        return self._span.get_span_context() if self._open() else INVALID_SPAN_CONTEXT

    def is_recording(self) -> bool:
        return self._open() and self._span.is_recording()

    def set_attributes(self, attributes: Any) -> None:
        if self._open():
            self._span.set_attributes(attributes)

    def set_attribute(self, key: str, value: Any) -> None:
        if self._open():
            self._span.set_attribute(key, value)

    def add_event(self, name: str, attributes: Any = None, timestamp: Any = None) -> None:
        if self._open():
            self._span.add_event(name, attributes, timestamp)

    def set_status(self, status: Any, description: Any = None) -> None:
        if self._open():
            self._span.set_status(status, description)

    def record_exception(self, exception: BaseException, *args: Any, **kwargs: Any) -> None:
        if self._open():
            self._span.record_exception(exception, *args, **kwargs)


class _AttributesWhileOpen(Mapping[str, Any]):
    """The request context's attributes, as long as ``span`` has not ended (then none)."""

    def __init__(self, attributes: Mapping[str, Any], span: _WhileOpen) -> None:
        self._attributes = attributes
        self._span = span

    def _live(self) -> Mapping[str, Any]:
        return self._attributes if self._span._open() else {}

    def __getitem__(self, key: str) -> Any:
        return self._live()[key]

    def __iter__(self) -> Any:
        return iter(self._live())

    def __len__(self) -> int:
        return len(self._live())


def _for_thread(carried: Carried) -> Carried:
    """What a new thread runs in: the carried context, bound to the life of its span."""
    current, attributes = carried
    span = trace.get_current_span(current)
    if not hasattr(span, "end_time"):
        # no span, or one whose end cannot be seen (not an SDK span, or not recording)
        return carried
    bound = _WhileOpen(span)
    context = trace.set_span_in_context(bound, current)
    return context, _AttributesWhileOpen(attributes, bound) if attributes else attributes


def _run_in(carried: Carried, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    token = otel_context.attach(carried[0])
    attributes_token = set_current_attributes(carried[1])
    try:
        return func(*args, **kwargs)
    finally:
        reset_current_attributes(attributes_token)
        otel_context.detach(token)


# Set on a thread while it is inside ThreadPoolExecutor.submit: a thread started then is one of
# the executor's workers, which outlive the submitted call (each call carries its own context).
_submitting = threading.local()


def _start(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    if not getattr(_submitting, "active", False):
        carried = _carry()
        if carried is not None:
            _run_carried(instance, _for_thread(carried))
    return wrapped(*args, **kwargs)


def _run_carried(thread: threading.Thread, carried: Carried) -> None:
    """Make ``thread.run`` run in ``carried``: the thread's own ``run`` (its class's, or one set
    on it), shadowed by an instance attribute that removes itself when the thread starts, so
    the thread object holds the context no longer than needed."""
    run = thread.run
    instance_run = thread.__dict__.get("run")

    def run_in_context() -> Any:
        if instance_run is None:
            thread.__dict__.pop("run", None)
        else:
            thread.__dict__["run"] = instance_run
        return _run_in(carried, run)

    thread.__dict__["run"] = run_in_context


def _submit(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    carried = _carry()
    if carried is None or not args:
        return wrapped(*args, **kwargs)
    outer = getattr(_submitting, "active", False)
    _submitting.active = True
    try:
        return wrapped(functools.partial(_run_in, carried, args[0]), *args[1:], **kwargs)
    finally:
        _submitting.active = outer


class ThreadingInstrumentor(LibraryInstrumentor):
    """Carries trace and request context into threads and thread pools (standard library)."""

    package = ""
    supported = ""

    def patches(self) -> Iterable[PatchRow]:
        yield "threading", "Thread.start", _start
        yield "concurrent.futures.thread", "ThreadPoolExecutor.submit", _submit
