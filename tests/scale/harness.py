"""Real SDK spans with chosen times, the request breakdown processor, and the report's reading of
the same spans from a trace file: what the tests in this directory compare."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    HistogramDataPoint,
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler
from opentelemetry.trace import SpanKind, Status, StatusCode

from llmtrace import semconv as sc
from llmtrace.analysis.sources import load_traces
from llmtrace.sdk._compat import RequestMetricsReader
from llmtrace.sdk.exporters.file import OTLPJsonFileExporter
from llmtrace.sdk.request_metrics import RequestFigures, RequestMetricsProcessor, request_histograms

T0 = 1_800_000_000 * 1_000_000_000


def ms(value: float) -> int:
    return T0 + round(value * 1_000_000)


class CapturingProcessor(RequestMetricsProcessor):
    """The processor, keeping each request's figures by trace id as it records them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.figures: dict[str, RequestFigures] = {}
        self.recorded_in_order: list[RequestFigures] = []
        self._last_trace = ""

    def on_end(self, span: Any) -> None:
        self._last_trace = format(span.context.trace_id, "032x")
        super().on_end(span)

    def _record(self, request: RequestFigures) -> None:
        self.figures[self._last_trace] = request
        self.recorded_in_order.append(request)
        super()._record(request)


class KeepingExporter(MetricExporter):
    """Keeps the last collection a periodic reader exported (the reader is read on demand)."""

    def __init__(self, temporality: AggregationTemporality) -> None:
        super().__init__(preferred_temporality={Histogram: temporality, Counter: temporality})
        self.last: MetricsData | None = None

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self.last = metrics_data
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


class OwnHistogramsReader:
    """llmtrace's own meter provider's reader (request histograms aggregated by llmtrace), read
    like an in-memory reader."""

    def __init__(self, resource: Resource, temporality: AggregationTemporality) -> None:
        self.exporter = KeepingExporter(temporality)
        self.histograms = request_histograms()
        self.reader = RequestMetricsReader(
            self.exporter,
            self.histograms,
            resource,
            temporality,
            export_interval_millis=3_600_000,
        )

    def get_metrics_data(self) -> MetricsData | None:
        self.exporter.last = None
        self.reader.collect()
        return self.exporter.last


@dataclass
class Setup:
    provider: TracerProvider
    processor: CapturingProcessor
    reader: InMemoryMetricReader | OwnHistogramsReader
    trace_file: Path
    tracer: trace.Tracer = field(init=False)

    def __post_init__(self) -> None:
        self.tracer = self.provider.get_tracer("tests.scale")

    def points(self, name: str) -> list[HistogramDataPoint]:
        data = self.reader.get_metrics_data()
        found: list[HistogramDataPoint] = []
        for resource_metrics in data.resource_metrics if data else ():
            for scope in resource_metrics.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)  # type: ignore[arg-type]
        return found

    def counter(self, name: str, **attributes: str) -> int:
        return int(
            sum(
                point.value  # type: ignore[attr-defined]
                for point in self.points(name)
                if all(point.attributes.get(k) == v for k, v in attributes.items())
            )
        )

    def report_stages(self) -> dict[str, dict[str, float]]:
        """Seconds per stage of every trace in the file, as ``llmtrace report`` computes them."""
        self.provider.force_flush()
        columns = load_traces(str(self.trace_file)).collector.collect(None)
        out: dict[str, dict[str, float]] = {}
        for i in range(len(columns.durations)):
            stages = {s: values[i] for s, values in columns.columns.items() if values[i] > 0}
            out[columns.info(i).trace_id] = stages
        return out


RESOURCE = Resource.create({"service.name": "scale-test"})
# How the request histograms are aggregated: by the OpenTelemetry SDK (an application's own
# MeterProvider), or by llmtrace and exported by its own meter provider's reader.
AGGREGATIONS = ("sdk", "llmtrace")


def make_setup(
    tmp_path: Path,
    *,
    sampler: Sampler = ALWAYS_ON,
    aggregation: str = "sdk",
    temporality: AggregationTemporality = AggregationTemporality.CUMULATIVE,
    **limits: Any,
) -> Setup:
    reader: InMemoryMetricReader | OwnHistogramsReader
    if aggregation == "sdk":
        reader = InMemoryMetricReader(preferred_temporality={Histogram: temporality})
        meters = MeterProvider(metric_readers=[reader], resource=RESOURCE)
        histograms = None
    else:
        reader = OwnHistogramsReader(RESOURCE, temporality)
        meters = MeterProvider(metric_readers=[reader.reader], resource=RESOURCE)
        histograms = reader.histograms
    provider = TracerProvider(sampler=sampler, resource=RESOURCE)
    processor = CapturingProcessor(meters, histograms=histograms, **limits)
    provider.add_span_processor(processor)
    trace_file = tmp_path / "traces.jsonl"
    provider.add_span_processor(SimpleSpanProcessor(OTLPJsonFileExporter(trace_file)))
    return Setup(provider, processor, reader, trace_file)


class Request:
    """Spans of one request started and ended at chosen times (milliseconds after T0)."""

    def __init__(self, tracer: trace.Tracer, name: str, start: float, **attributes: Any) -> None:
        self.tracer = tracer
        self.root = tracer.start_span(
            name, kind=SpanKind.SERVER, start_time=ms(start), attributes=attributes
        )
        self.context = trace.set_span_in_context(self.root)

    @classmethod
    def around(cls, tracer: trace.Tracer, root: Any) -> Request:
        """A request whose root span was started elsewhere (a server span continuing a trace)."""
        request = cls.__new__(cls)
        request.tracer = tracer
        request.root = root
        request.context = trace.set_span_in_context(root)
        return request

    def child(
        self,
        name: str,
        start: float,
        end: float,
        parent: Any = None,
        kind: SpanKind = SpanKind.INTERNAL,
        **attributes: Any,
    ) -> Any:
        context = self.context if parent is None else trace.set_span_in_context(parent)
        attrs = {key.replace("__", "."): value for key, value in attributes.items()}
        span = self.tracer.start_span(
            name, context=context, kind=kind, start_time=ms(start), attributes=attrs
        )
        span.end(end_time=ms(end))
        return span

    def open_child(self, name: str, start: float, **attributes: Any) -> Any:
        attrs = {key.replace("__", "."): value for key, value in attributes.items()}
        return self.tracer.start_span(
            name, context=self.context, start_time=ms(start), attributes=attrs
        )

    def end(self, end: float, error: bool = False) -> None:
        if error:
            self.root.set_status(Status(StatusCode.ERROR))
            self.root.set_attribute(sc.ERROR_TYPE, "TimeoutError")
        self.root.end(end_time=ms(end))

    @property
    def trace_id(self) -> str:
        return format(self.root.get_span_context().trace_id, "032x")


def random_request(tracer: trace.Tracer, rng: random.Random, start: float) -> Request:
    """A RAG-like request with random times: parallel retrievals, nested unstaged spans, a model
    call (streamed or not, sometimes with transport phases), foreign-convention spans,
    post-processing, and children that outlive or precede their siblings."""
    request = Request(tracer, "POST /ask", start, **{sc.HTTP_ROUTE: "/ask"})
    t = start + rng.uniform(0, 3)
    if rng.random() < 0.5:
        request.child("embed", t, t + rng.uniform(1, 20), **{sc.STAGE: "embedding"})
    for _ in range(rng.randint(0, 3)):  # parallel retrievals: only the last to end counts
        s = t + rng.uniform(0, 5)
        request.child("search", s, s + rng.uniform(1, 60), **{sc.STAGE: "retrieval"})
    t += rng.uniform(10, 70)
    if rng.random() < 0.3:  # a foreign instrumentation's retriever (OpenInference)
        request.child("retrieve", t, t + rng.uniform(1, 10), openinference__span__kind="RETRIEVER")
        t += 10
    chain = request.child("chain", t, t + rng.uniform(50, 400))
    inner_start = t + rng.uniform(0, 5)
    duration = rng.uniform(20, 300)
    attributes: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: "chat",
        sc.GEN_AI_REQUEST_MODEL: rng.choice(["small", "large"]),
        sc.GEN_AI_USAGE_INPUT_TOKENS: rng.randint(10, 500),
        sc.GEN_AI_USAGE_OUTPUT_TOKENS: rng.randint(1, 200),
    }
    if rng.random() < 0.8:
        attributes[sc.TIME_TO_FIRST_TOKEN] = duration * rng.uniform(0.05, 0.9) / 1000
    if rng.random() < 0.5:
        attributes[sc.HTTP_CONNECT] = rng.uniform(0, 0.005)
        attributes[sc.HTTP_REQUEST_SENT] = rng.uniform(0, 0.002)
    if rng.random() < 0.8:
        attributes[sc.STAGE] = sc.LLM_STAGE
    else:
        attributes[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = duration * 0.3 / 1000
    request.child("chat", inner_start, inner_start + duration, parent=chain, **attributes)
    end = max(t + 400, inner_start + duration) + rng.uniform(0, 30)
    if rng.random() < 0.5:
        request.child("format", end - 10, end - 1, **{sc.STAGE: "postprocess"})
    request.end(end, error=rng.random() < 0.1)
    return request


def requests(tracer: trace.Tracer, count: int, seed: int = 7) -> Iterator[Request]:
    rng = random.Random(seed)
    for i in range(count):
        yield random_request(tracer, rng, i * 1000.0)
