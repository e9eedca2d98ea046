"""The request metrics' histograms aggregated by llmtrace, exported by llmtrace's own meter provider.

Recording a point through the OpenTelemetry SDK is costly (the SDK copies, cleans and hashes the
attributes of every point, builds a measurement, takes a lock per point); a request of seven
spans records eleven. The request breakdown knows its attribute sets in advance (one per request
name, model, error type and stage): here each set's series is found once, a request's points are
appended under one lock, and the values are folded into their buckets in bulk (see ``Series``).
Both costs are measured in benchmarks/README.md, overhead_core.py.

The SDK (1.45) has no interface to hand it aggregated data (no ``MetricProducer``), so these
series reach the exporter through ``llmtrace.sdk._compat.RequestMetricsReader`` (the ``metric-reader``
fast path), the periodic reader of the meter provider ``llmtrace.init()`` creates: each collection returns the SDK's own metrics with these
appended to the llmtrace scope of the provider's resource. What is exported is what the SDK would
export for the same points: explicit-bucket histograms with the instruments' bounds, sum, count,
min and max, cumulative (or delta when the exporter prefers it), the same attribute-set limit per
instrument with the SDK's overflow series, and no exemplars (the request metrics record none
either way). Elsewhere (an application's own ``MeterProvider``, exponential histograms, the fast
path off) the processor records through the SDK, with the same result.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from functools import reduce
from operator import add
from time import time_ns
from typing import Any

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from llmtrace import semconv as sc

# Requests recorded between two folds of the pending values (see Series): at most this many
# requests' points wait, a few tens of kilobytes.
FOLD_AFTER = 256
# The SDK's default limit of attribute sets per instrument, and the series past it.
CARDINALITY_LIMIT = 2000
OVERFLOW_ATTRIBUTES: Mapping[str, Any] = {"otel.metric.overflow": True}


class HistogramSpec:
    """One histogram instrument: what the SDK instrument would be created with."""

    __slots__ = ("bounds", "description", "name", "unit")

    def __init__(self, name: str, unit: str, description: str, bounds: Sequence[float]) -> None:
        self.name = name
        self.unit = unit
        self.description = description
        self.bounds = tuple(float(bound) for bound in bounds)


class Series:
    """One attribute set of one histogram: what the SDK's explicit-bucket aggregation holds.

    Values are appended to ``pending`` as requests end and folded into the buckets, count, sum,
    min and max in bulk (``fold``): before each collection, and whenever ``FOLD_AFTER`` requests
    have been recorded since the last fold, which bounds what waits. Value by value, finding the
    bucket (a binary search over the bounds, six comparisons of Python floats) was most of what
    recording a request cost (measured in benchmarks/README.md, overhead_core.py). In bulk the
    values are sorted (in C, comparing floats natively) and each bucket's count is the distance
    between two bounds' positions among them, a few searches for the buckets the values reach. The
    result is the SDK's to the last bit: the same bucket rule (a value equal to a bound is in
    the bucket below it), and the sum added in the order the values came.
    """

    __slots__ = (
        "attributes",
        "bounds",
        "collected_sum",
        "count",
        "counts",
        "max",
        "min",
        "pending",
        "start",
        "sum",
    )

    def __init__(self, attributes: Mapping[str, Any], bounds: tuple[float, ...], now: int) -> None:
        self.attributes = dict(attributes)
        self.bounds = bounds
        self.start = now
        self.pending: list[float] = []
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.sum: float = 0  # since the last collection
        # the sum of the collections before: the SDK adds each collection's sum to it, and so
        # does this, so that a cumulative sum is the same float to the last bit
        self.collected_sum: float = 0
        self.min = float("inf")
        self.max = float("-inf")

    def add(self, value: float) -> None:
        """Called with the histograms' lock held."""
        self.pending.append(value)

    def fold(self) -> None:
        """Called with the histograms' lock held: the pending values into the aggregate."""
        values = self.pending
        if not values:
            return
        self.pending = []
        # one addition after another, in arrival order, as the SDK adds each measurement
        self.sum = reduce(add, values, self.sum)
        ordered = sorted(values)
        low = ordered[0]
        high = ordered[-1]
        if low < self.min:
            self.min = low
        if high > self.max:
            self.max = high
        bounds = self.bounds
        counts = self.counts
        # bucket i holds the values above bounds[i - 1] up to bounds[i] (bisect_left's index)
        last = bisect_left(bounds, high)
        counted = 0  # values in the buckets before the one looked at
        for index in range(bisect_left(bounds, low), last):
            up_to = bisect_right(ordered, bounds[index], counted)
            counts[index] += up_to - counted
            counted = up_to
        counts[last] += len(ordered) - counted
        self.count += len(ordered)


class RequestHistograms:
    """Explicit-bucket histograms keyed by attribute set, collected as the SDK collects them."""

    def __init__(
        self, specs: Sequence[HistogramSpec], cardinality_limit: int = CARDINALITY_LIMIT
    ) -> None:
        self.specs = {spec.name: spec for spec in specs}
        self.cardinality_limit = cardinality_limit
        self.lock = threading.Lock()
        self._series: dict[str, dict[Any, Series]] = {spec.name: {} for spec in specs}
        self._last_collection = time_ns()
        self.unfolded = 0  # requests recorded since the last fold

    def fold(self) -> None:
        """Called with the lock held: every series' pending values into its aggregate."""
        self.unfolded = 0
        for by_key in self._series.values():
            for series in by_key.values():
                if series.pending:
                    series.fold()

    def series(self, name: str, key: Any, attributes: Mapping[str, Any]) -> Series:
        """The series of ``attributes`` (``key``: a hashable that identifies them) in histogram
        ``name``, created on first use; past the attribute-set limit, the overflow series."""
        found = self._series[name].get(key)
        if found is not None:
            return found
        with self.lock:
            return self.series_locked(name, key, attributes)

    def series_locked(self, name: str, key: Any, attributes: Mapping[str, Any]) -> Series:
        """``series`` for a caller that holds the lock."""
        by_key = self._series[name]
        found = by_key.get(key)
        if found is None:
            bounds = self.specs[name].bounds
            if len(by_key) >= self.cardinality_limit:
                overflow = by_key.get(_OVERFLOW_KEY)
                if overflow is None:
                    overflow = by_key[_OVERFLOW_KEY] = Series(
                        OVERFLOW_ATTRIBUTES, bounds, time_ns()
                    )
                return overflow
            found = by_key[key] = Series(attributes, bounds, time_ns())
        return found

    def collect(self, temporality: AggregationTemporality, now: int | None = None) -> list[Metric]:
        """Every histogram with points, as the SDK's reader storage returns them (cumulative: all
        series since they were created; delta: what each series received since the last
        collection, which is then cleared)."""
        now = time_ns() if now is None else now
        delta = temporality is AggregationTemporality.DELTA
        out: list[Metric] = []
        with self.lock:
            self.fold()
            previous, self._last_collection = self._last_collection, now
            for name, by_key in self._series.items():
                points = []
                for series in by_key.values():
                    if not series.count:
                        continue
                    if delta:
                        start, total = max(previous, series.start), series.sum
                    else:
                        start, total = series.start, series.sum + series.collected_sum
                        series.collected_sum = total
                    series.sum = 0
                    points.append(
                        HistogramDataPoint(
                            attributes=series.attributes,
                            start_time_unix_nano=start,
                            time_unix_nano=now,
                            count=series.count,
                            sum=total,
                            bucket_counts=tuple(series.counts),
                            explicit_bounds=series.bounds,
                            min=series.min,
                            max=series.max,
                        )
                    )
                    if delta:
                        series.counts = [0] * len(series.counts)
                        series.count = 0
                        series.min = float("inf")
                        series.max = float("-inf")
                if points:
                    spec = self.specs[name]
                    out.append(
                        Metric(
                            name=name,
                            description=spec.description,
                            unit=spec.unit,
                            data=Histogram(data_points=points, aggregation_temporality=temporality),
                        )
                    )
        return out


_OVERFLOW_KEY = ("otel.metric.overflow",)
# The scope the processor's SDK instruments would have (``get_meter(sc.SCOPE_NAME)``).
SCOPE = InstrumentationScope(sc.SCOPE_NAME)


def joined(data: MetricsData | None, extra: list[Metric], resource: Resource) -> MetricsData | None:
    """``data`` (the SDK's collection, None when it had nothing) with ``extra`` appended to the
    llmtrace scope of the provider's resource."""
    if not extra:
        return data
    resources = list(data.resource_metrics) if data is not None else []
    for index, resource_metrics in enumerate(resources):
        if resource_metrics.resource != resource:
            continue
        scopes = list(resource_metrics.scope_metrics)
        for position, scope_metrics in enumerate(scopes):
            if scope_metrics.scope == SCOPE:
                scopes[position] = ScopeMetrics(
                    scope=scope_metrics.scope,
                    metrics=[*scope_metrics.metrics, *extra],
                    schema_url=scope_metrics.schema_url,
                )
                break
        else:
            scopes.append(ScopeMetrics(scope=SCOPE, metrics=extra, schema_url=""))
        resources[index] = ResourceMetrics(
            resource=resource_metrics.resource,
            scope_metrics=scopes,
            schema_url=resource_metrics.schema_url,
        )
        break
    else:
        resources.append(
            ResourceMetrics(
                resource=resource,
                scope_metrics=[ScopeMetrics(scope=SCOPE, metrics=extra, schema_url="")],
                schema_url=resource.schema_url,
            )
        )
    return MetricsData(resource_metrics=resources)
