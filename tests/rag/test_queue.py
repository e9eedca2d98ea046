"""Queue-stage spans around semaphore acquisition."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from opentelemetry.trace import StatusCode

import llmtrace
from llmtrace import semconv
from llmtrace.server import bounded, bounded_sync

from .spans_util import duration


async def test_the_wait_for_a_permit_is_the_queue_span_and_the_work_is_not(spans) -> None:
    permits = asyncio.Semaphore(1)
    waits: dict[str, float] = {}

    async def request(name: str) -> None:
        started = time.monotonic()
        async with bounded(permits, name="model"):
            waits[name] = time.monotonic() - started
            await asyncio.sleep(0.2)

    with llmtrace.span("requests", stage="other"):
        await asyncio.gather(request("first"), request("second"))

    queue_spans = sorted(
        (s for s in spans.get_finished_spans() if s.name == "queue model"), key=duration
    )
    assert len(queue_spans) == 2
    assert all(s.attributes[semconv.STAGE] == "queue" for s in queue_spans)
    assert all(s.attributes[semconv.QUEUE_NAME] == "model" for s in queue_spans)
    assert duration(queue_spans[0]) == pytest.approx(waits["first"], abs=0.005)
    assert duration(queue_spans[1]) == pytest.approx(waits["second"], abs=0.005)
    assert waits["second"] >= 0.19


async def test_a_cancelled_wait_ends_its_span_and_keeps_the_permit_count(spans) -> None:
    permits = asyncio.Semaphore(1)
    await permits.acquire()

    async def waiter() -> None:
        async with bounded(permits):
            raise AssertionError("never acquired")

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    (span,) = spans.get_finished_spans()
    assert span.name == "queue semaphore"
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == "CancelledError"
    permits.release()
    assert not permits.locked()


def test_bounded_sync_times_a_thread_pool_wait(spans) -> None:
    permits = threading.Semaphore(1)
    permits.acquire()
    releaser = threading.Timer(0.1, permits.release)
    releaser.start()

    started = time.monotonic()
    with bounded_sync(permits, name="workers"):
        waited = time.monotonic() - started

    (span,) = spans.get_finished_spans()
    assert span.name == "queue workers"
    assert duration(span) == pytest.approx(waited, abs=0.005)
    assert waited >= 0.09
    assert permits.acquire(blocking=False)
