"""Queue-stage spans for waits on capacity: semaphores, locks, worker pools, rate limiters.

The wait for a permit is the ``queue`` stage; the work done while holding it is not, so only the
acquisition is inside the span::

    model_slots = asyncio.Semaphore(2)

    async with bounded(model_slots, name="model"):
        reply = await call_model(prompt)          # runs after the queue span has ended

``bounded_sync`` does the same for ``threading.Semaphore`` / ``threading.Lock``. For any other
wait (a token bucket, a queue.get()), ``with llmtrace.stage("queue"):`` around the wait does it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace.sdk.gate import should_trace
from llmtrace.sdk.span_errors import record_error

DEFAULT_QUEUE_NAME = "semaphore"


class AsyncPermits(Protocol):
    """``asyncio.Semaphore``, ``asyncio.BoundedSemaphore``, ``asyncio.Lock`` and look-alikes."""

    def acquire(self) -> Awaitable[Any]: ...

    def release(self) -> None: ...


class Permits(Protocol):
    """``threading.Semaphore``, ``threading.BoundedSemaphore``, ``threading.Lock``."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


# A proxy until a provider is set, then the provider's tracer: fetched once, not per wait.
_tracer = trace.get_tracer(semconv.SCOPE_NAME)


def _start_queue_span(name: str, started_ns: int) -> Span:
    # The start is taken before the span is made, so the span's own set-up counts as waiting.
    if not should_trace():
        return trace.INVALID_SPAN
    return _tracer.start_span(
        f"queue {name}",
        attributes={semconv.STAGE: "queue", semconv.QUEUE_NAME: name},
        start_time=started_ns,
    )


def _end_failed(span: Span, exc: BaseException) -> None:
    # A wait abandoned by cancellation or a timeout is still a wait: keep its duration.
    # No exception event: the wait did not fail, it was given up.
    record_error(span, exc, exception_event=False)
    span.end()


@contextmanager
def _waiting(name: str) -> Iterator[None]:
    """The ``queue`` span around one wait for capacity: ends when the wait does, whichever way."""
    span = _start_queue_span(name, time.time_ns())
    try:
        yield
    except BaseException as exc:
        _end_failed(span, exc)
        raise
    span.end()


@asynccontextmanager
async def bounded(permits: AsyncPermits, *, name: str = DEFAULT_QUEUE_NAME) -> AsyncIterator[None]:
    """Acquire ``permits`` inside a ``queue`` span named ``queue {name}``, hold them for the body."""
    with _waiting(name):
        await permits.acquire()
    try:
        yield
    finally:
        permits.release()


@contextmanager
def bounded_sync(permits: Permits, *, name: str = DEFAULT_QUEUE_NAME) -> Iterator[None]:
    """``bounded`` for thread-based pools."""
    with _waiting(name):
        permits.acquire()
    try:
        yield
    finally:
        permits.release()
