"""Threads: work handed to a ``Thread`` or a ``ThreadPoolExecutor`` stays in the trace (and the
request context) of the code that handed it over.

Python gives a new thread an empty context, so without this a span started in a worker thread
is the root of a trace of its own: a RAG step run in a thread pool, or a framework's tool run in
``run_in_executor``, would split one request into several traces. Only OpenTelemetry's context
and llmtrace's request context are carried, not the caller's other context variables (a thread's
own context is otherwise left as Python makes it).

- ``Thread.start`` notes the starting code's context; the new thread runs in it
  (``Thread._bootstrap_inner`` is wrapped, so subclasses that override ``run`` are covered).
  The executor's own worker threads are left alone: each submitted call brings its context.
- ``ThreadPoolExecutor.submit`` runs the call in the submitting code's context
  (``loop.run_in_executor`` goes through it; ``asyncio.to_thread`` copies the context itself).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry import context as otel_context

from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.request_context import (
    current_attributes,
    reset_current_attributes,
    set_current_attributes,
)

Carried = tuple[otel_context.Context, Mapping[str, Any]]
_CARRIED = "_llmtrace_carried_context"


def _carry() -> Carried | None:
    current = otel_context.get_current()
    attributes = current_attributes()
    if not current and not attributes:
        return None
    return current, attributes


def _run_in(carried: Carried, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    token = otel_context.attach(carried[0])
    attributes_token = set_current_attributes(carried[1])
    try:
        return func(*args, **kwargs)
    finally:
        reset_current_attributes(attributes_token)
        otel_context.detach(token)


def _is_executor_worker(thread: Any) -> bool:
    target = getattr(thread, "_target", None)
    return getattr(target, "__module__", None) == "concurrent.futures.thread"


def _start(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    if not _is_executor_worker(instance):
        carried = _carry()
        if carried is not None:
            instance.__dict__[_CARRIED] = carried
    return wrapped(*args, **kwargs)


def _bootstrap_inner(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    carried = instance.__dict__.pop(_CARRIED, None)
    if carried is None:
        return wrapped(*args, **kwargs)
    return _run_in(carried, wrapped, *args, **kwargs)


def _submit(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    carried = _carry()
    if carried is None or not args:
        return wrapped(*args, **kwargs)
    return wrapped(functools.partial(_run_in, carried, args[0]), *args[1:], **kwargs)


class ThreadingInstrumentor(LibraryInstrumentor):
    """Carries trace and request context into threads and thread pools (standard library)."""

    package = ""
    supported = ""

    def patches(self) -> Iterable[PatchRow]:
        yield "threading", "Thread.start", _start
        yield "threading", "Thread._bootstrap_inner", _bootstrap_inner
        yield "concurrent.futures.thread", "ThreadPoolExecutor.submit", _submit
