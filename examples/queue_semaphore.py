"""Queue time made visible: a worker pool guarded by an ``asyncio.Semaphore``.

Six requests share two model slots. Each request's wait for a slot becomes a ``queue``-stage span
(``queue model``), so ``llmtrace report`` attributes it to the queue instead of to the model.
A token-bucket style wait uses ``llmtrace.stage("queue")`` directly.

    .venv/bin/python examples/queue_semaphore.py
    .venv/bin/llmtrace report
"""

from __future__ import annotations

import asyncio
import time

import llmtrace
from llmtrace.server import bounded

SLOTS = 2
REQUESTS = 6
MODEL_SECONDS = 0.3
REQUESTS_PER_SECOND = 20.0


class RateLimiter:
    """At most ``rate`` acquisitions per second, evenly spaced."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.next_free = time.monotonic()
        self.lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self.lock:
            now = time.monotonic()
            wait = self.next_free - now
            self.next_free = max(now, self.next_free) + self.interval
        if wait > 0:
            await asyncio.sleep(wait)


@llmtrace.llm(model="slow-model", provider="local")
async def call_model(prompt: str) -> str:
    await asyncio.sleep(MODEL_SECONDS)  # stands in for the model's work
    return prompt.upper()


@llmtrace.workflow(name="handle_request")
async def handle_request(number: int, slots: asyncio.Semaphore, limiter: RateLimiter) -> float:
    started = time.monotonic()
    with llmtrace.stage("queue", name="queue rate_limit"):
        await limiter.acquire()
    async with bounded(slots, name="model"):
        waited = time.monotonic() - started
        await call_model(f"request {number}")
    return waited


async def main() -> None:
    slots = asyncio.Semaphore(SLOTS)
    limiter = RateLimiter(REQUESTS_PER_SECOND)
    waits = await asyncio.gather(*(handle_request(n, slots, limiter) for n in range(REQUESTS)))
    for number, waited in enumerate(waits):
        print(f"request {number}: waited {waited * 1000:6.1f} ms for capacity")


if __name__ == "__main__":
    llmtrace.init(service_name="queue-example")
    try:
        asyncio.run(main())
    finally:
        llmtrace.shutdown()
