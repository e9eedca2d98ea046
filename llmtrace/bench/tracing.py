"""Where a bench run's spans go: always to a trace file the run's report is built from.

The file is written by a span processor attached for the duration of the run (and detached after),
so a process can run several benches, each into its own file, whatever its tracing setup was.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import llmtrace
from llmtrace.sdk._attached import attach, detach
from llmtrace.sdk.exporters.file import OTLPJsonFileExporter

DEFAULT_SERVICE_NAME = "llmtrace-bench"


def ensure_tracing(
    *,
    service_name: str = DEFAULT_SERVICE_NAME,
    otlp_endpoint: str | None = None,
    instrument: bool | Iterable[str] = True,
) -> TracerProvider:
    """``llmtrace.init()`` without a file exporter of its own (the run adds one); OTLP if asked.

    An application that set up its own SDK provider keeps it: ``init()`` reuses it.
    """
    llmtrace.init(
        service_name=service_name,
        exporter="otlp" if otlp_endpoint else "none",
        endpoint=otlp_endpoint,
        instrument=instrument if isinstance(instrument, bool) else list(instrument),
    )
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        raise RuntimeError("llmtrace.init() did not install an SDK TracerProvider")
    return provider


class RunTraceFile:
    """Appends every span finished while open to ``path`` (OTLP JSON lines)."""

    def __init__(self, path: Path, provider: TracerProvider | None = None) -> None:
        self.path = path
        self._provider = provider
        self._processor: SpanProcessor | None = None

    def __enter__(self) -> RunTraceFile:
        provider = self._provider or trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            raise RuntimeError("no SDK TracerProvider to attach the run's trace file to")
        self._provider = provider
        self._processor = BatchSpanProcessor(OTLPJsonFileExporter(self.path))
        attach(provider, self._processor)
        return self

    def flush(self) -> None:
        """Everything finished so far is in the file (and in any other exporter) when this returns."""
        if self._processor is not None:
            self._processor.force_flush()
        llmtrace.force_flush()

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        processor, self._processor = self._processor, None
        if processor is None:
            return
        processor.force_flush()
        processor.shutdown()
        detach(self._provider, processor)
