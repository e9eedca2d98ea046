"""Delivery accounting for the exporter llmtrace adds: what was sent, what failed, what was lost.

An application must never lose spans silently (queue full, collector down) and must never wait
long at exit for a collector that does not answer. llmtrace's span processor is wrapped in a
:class:`CountingProcessor` and its exporter in a :class:`CountingExporter`, so that:

- every sampled span handed to the processor, every span handed to the exporter, and every
  span the exporter delivered or failed to deliver is counted (:func:`DeliveryStats`);
- spans lost because the export queue was full are the ones the processor took but never
  handed to the exporter (the SDK's batch queue drops the oldest span when full);
- once the exit deadline has passed, the exporter is *closed*: an export still asked for then
  returns failure at once, counted, instead of waiting for a collector that is not there.

The counters are updated under a lock: spans end on the application's threads at once, and a
``+= 1`` is a read and a write another thread can come between (a lost count is a span said
delivered that was dropped). The lock is taken once per span ended and once per export.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from llmtrace.sdk import _compat

logger = logging.getLogger("llmtrace")


@dataclass(frozen=True)
class DeliveryStats:
    """Spans counted since ``init()``: taken by the processor, handed to the exporter, delivered,
    failed in an export, and dropped before any export (queue full, or after the exit deadline)."""

    taken: int
    handed: int
    delivered: int
    failed: int
    refused_after_deadline: int
    queued: int | None
    """Spans still waiting in the batch queue, when the SDK lets us see it (else None)."""

    @classmethod
    def total(cls, parts: list[DeliveryStats]) -> DeliveryStats:
        """The counts of several exporters added up."""
        queued = [part.queued for part in parts]
        return cls(
            taken=sum(part.taken for part in parts),
            handed=sum(part.handed for part in parts),
            delivered=sum(part.delivered for part in parts),
            failed=sum(part.failed for part in parts),
            refused_after_deadline=sum(part.refused_after_deadline for part in parts),
            queued=None if None in queued else sum(q or 0 for q in queued),
        )

    @property
    def queue_dropped(self) -> int:
        """Spans the batch queue dropped because it was full."""
        waiting = self.queued or 0
        return max(self.taken - self.handed - waiting, 0)

    @property
    def in_flight(self) -> int:
        """Spans in an export that had not finished (a collector still being retried)."""
        return max(self.handed - self.delivered - self.failed, 0)

    @property
    def undelivered(self) -> int:
        """Spans taken that did not reach the backend (failed, dropped, refused or still queued)."""
        return max(self.taken - self.delivered, 0)


class CountingExporter(SpanExporter):
    """Passes batches to ``inner``, counting the outcome; refuses everything once closed."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.handed = 0
        self.delivered = 0
        self.failed = 0
        self.refused = 0
        self.closed = False
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        count = len(spans)
        if self.closed:
            with self._lock:
                self.refused += count
            return SpanExportResult.FAILURE
        with self._lock:
            self.handed += count
        try:
            result = self.inner.export(spans)
        except Exception:
            # An exporter that raises must not kill the batch worker: count it as a failure.
            logger.warning(
                "llmtrace: the span exporter raised; %d spans lost", count, exc_info=True
            )
            with self._lock:
                self.failed += count
            return SpanExportResult.FAILURE
        with self._lock:
            if result == SpanExportResult.SUCCESS:
                self.delivered += count
            else:
                self.failed += count
        return result

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if self.closed:
            return False
        return bool(self.inner.force_flush(timeout_millis))

    def close(self) -> None:
        """Refuse every later export, and let the inner exporter stop waiting (its retries)."""
        self.closed = True

    def shutdown(self) -> None:
        self.closed = True
        self.inner.shutdown()


class CountingProcessor(SpanProcessor):
    """Counts the sampled spans ``inner`` takes; everything else is ``inner``'s."""

    def __init__(self, inner: SpanProcessor, exporter: CountingExporter) -> None:
        self.inner = inner
        self.exporter = exporter
        self.taken = 0
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is not None and context.trace_flags.sampled:
            lock = self._lock
            lock.acquire()
            self.taken += 1
            lock.release()
        self.inner.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))

    def shutdown(self) -> None:
        self.inner.shutdown()

    def stats(self) -> DeliveryStats:
        exporter = self.exporter
        return DeliveryStats(
            taken=self.taken,
            handed=exporter.handed,
            delivered=exporter.delivered,
            failed=exporter.failed,
            refused_after_deadline=exporter.refused,
            queued=_compat.queued_spans(self.inner),
        )
