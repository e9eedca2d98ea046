"""Delivery accounting: every span llmtrace's exporter took is delivered, failed or counted as
dropped; a closed exporter refuses at once."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from llmtrace.sdk.exporters.delivery import CountingExporter, CountingProcessor


class GatedExporter(SpanExporter):
    """Holds every export until released, then answers with ``result``."""

    def __init__(self, result: SpanExportResult) -> None:
        self.result = result
        self.release = threading.Event()
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(10)
        self.exported += len(spans)
        return self.result

    def shutdown(self) -> None:
        self.release.set()


def _pipeline(
    result: SpanExportResult, queue: int
) -> tuple[TracerProvider, CountingProcessor, GatedExporter]:
    inner = GatedExporter(result)
    counting = CountingExporter(inner)
    processor = CountingProcessor(
        BatchSpanProcessor(counting, max_queue_size=queue, max_export_batch_size=queue), counting
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider, processor, inner


def test_a_full_queue_drops_are_counted_not_silent():
    provider, processor, inner = _pipeline(SpanExportResult.SUCCESS, queue=10)
    tracer = provider.get_tracer("test")
    for number in range(100):
        tracer.start_span(f"span {number}").end()
    inner.release.set()
    processor.force_flush()
    stats = processor.stats()
    assert stats.taken == 100
    assert stats.delivered == inner.exported == stats.handed
    assert stats.queue_dropped == 100 - stats.handed > 0
    assert stats.undelivered == 100 - stats.delivered
    provider.shutdown()


def test_failed_exports_are_counted():
    provider, processor, inner = _pipeline(SpanExportResult.FAILURE, queue=100)
    inner.release.set()
    tracer = provider.get_tracer("test")
    for number in range(7):
        tracer.start_span(f"span {number}").end()
    processor.force_flush()
    stats = processor.stats()
    assert (stats.taken, stats.failed, stats.delivered, stats.queue_dropped) == (7, 7, 0, 0)
    provider.shutdown()


def test_a_closed_exporter_refuses_at_once_and_counts():
    inner = GatedExporter(SpanExportResult.SUCCESS)
    counting = CountingExporter(inner)
    counting.close()
    assert counting.export([object(), object()]) == SpanExportResult.FAILURE  # type: ignore[list-item]
    assert (counting.refused, counting.handed, inner.exported) == (2, 0, 0)


def test_an_exporter_that_raises_is_a_failed_export():
    class Raising(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            raise RuntimeError("broken exporter")

    counting = CountingExporter(Raising())
    assert counting.export([object()]) == SpanExportResult.FAILURE  # type: ignore[list-item]
    assert counting.failed == 1
