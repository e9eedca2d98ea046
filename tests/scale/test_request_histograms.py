"""llmtrace's own aggregation of the request histograms exports what the OpenTelemetry SDK exports
for the same requests: same resource, scope, instruments, attributes, bounds, counts, sums,
minima and maxima, cumulative or delta."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics.export import AggregationTemporality, MetricsData

from llmtrace import semconv as sc
from llmtrace.sdk.request_histograms import OVERFLOW_ATTRIBUTES, RequestHistograms
from llmtrace.sdk.request_metrics import HISTOGRAM_SPECS, STAGE_DURATION
from tests.scale.harness import Request, Setup, make_setup, requests


def _exported(data: MetricsData | None) -> dict[Any, Any]:
    """Everything a backend reads from a collection, timestamps aside."""
    assert data is not None
    out: dict[Any, Any] = {}
    for resource_metrics in data.resource_metrics:
        resource = tuple(sorted(resource_metrics.resource.attributes.items()))
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                key = (resource, scope_metrics.scope.name, scope_metrics.scope.version)
                points = {}
                for point in metric.data.data_points:
                    attributes = tuple(sorted(point.attributes.items()))  # type: ignore[union-attr]
                    assert attributes not in points
                    points[attributes] = (
                        point.count,  # type: ignore[union-attr]
                        point.sum,  # type: ignore[union-attr]
                        tuple(point.bucket_counts),  # type: ignore[union-attr]
                        tuple(point.explicit_bounds),  # type: ignore[union-attr]
                        point.min,  # type: ignore[union-attr]
                        point.max,  # type: ignore[union-attr]
                    )
                out[(*key, metric.name, metric.unit, metric.description)] = (
                    getattr(metric.data, "aggregation_temporality", None),
                    points,
                )
    return out


def _both(tmp_path: Path, **options: Any) -> tuple[Setup, Setup]:
    return (
        make_setup(tmp_path / "sdk", aggregation="sdk", **options),
        make_setup(tmp_path / "own", aggregation="llmtrace", **options),
    )


def test_the_same_requests_export_the_same_histograms_as_through_the_sdk(tmp_path: Path) -> None:
    sdk, own = _both(tmp_path)
    for setup in (sdk, own):
        list(requests(setup.tracer, 200, seed=3))
        Request(setup.tracer, "no-model", 0).end(5)  # a request without tokens or TTFT
    expected = _exported(sdk.reader.get_metrics_data())
    assert {name for _, _, _, name, _, _ in expected} == {spec.name for spec in HISTOGRAM_SPECS}
    assert _exported(own.reader.get_metrics_data()) == expected
    # cumulative: a second collection holds the first one's points and the new ones
    for setup in (sdk, own):
        list(requests(setup.tracer, 20, seed=4))
    assert _exported(own.reader.get_metrics_data()) == _exported(sdk.reader.get_metrics_data())


def test_delta_temporality_exports_each_collections_points_once(tmp_path: Path) -> None:
    sdk, own = _both(tmp_path, temporality=AggregationTemporality.DELTA)
    for seed, count in ((5, 50), (6, 10)):
        for setup in (sdk, own):
            list(requests(setup.tracer, count, seed=seed))
        exported = _exported(own.reader.get_metrics_data())
        assert exported == _exported(sdk.reader.get_metrics_data())
        durations = [points for key, (_, points) in exported.items() if "duration" in key[3]]
        assert sum(point[0] for points in durations for point in points.values()) >= count
    # nothing new: nothing exported, as the SDK does
    assert own.reader.get_metrics_data() is sdk.reader.get_metrics_data() is None


def test_attribute_sets_past_the_limit_go_to_the_overflow_series() -> None:
    histograms = RequestHistograms(HISTOGRAM_SPECS, cardinality_limit=3)
    for i in range(5):
        series = histograms.series(STAGE_DURATION, i, {sc.STAGE: f"s{i}"})
        with histograms.lock:
            series.add(0.5)
    (metric,) = histograms.collect(AggregationTemporality.CUMULATIVE)
    by_attributes = {
        tuple(sorted(point.attributes.items())): point.count  # type: ignore[union-attr]
        for point in metric.data.data_points
    }
    assert by_attributes == {
        ((sc.STAGE, "s0"),): 1,
        ((sc.STAGE, "s1"),): 1,
        ((sc.STAGE, "s2"),): 1,
        tuple(OVERFLOW_ATTRIBUTES.items()): 2,
    }


def test_concurrent_requests_lose_no_point(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    own = make_setup(tmp_path, aggregation="llmtrace")

    def handle(i: int) -> None:
        request = Request(own.tracer, "threaded", i)
        request.child("search", i, i + 3, **{sc.STAGE: "retrieval"})
        request.end(i + 5)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(handle, range(2000)))
    stages = {p.attributes[sc.STAGE]: p.count for p in own.points(STAGE_DURATION)}
    assert stages == {"retrieval": 2000, "other": 2000}


def test_values_folded_in_bulk_aggregate_as_the_sdk_does_one_by_one() -> None:
    """Values on bounds, between them, past the last, repeated, ints among floats, folded in
    batches of every size (one value, one bucket, many buckets), several folds between two
    collections: every collection exports what the SDK does for the same values."""
    import random

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    rng = random.Random(7)
    spec = HISTOGRAM_SPECS[1]
    bounds = list(spec.bounds)
    reader = InMemoryMetricReader()
    sdk = (
        MeterProvider(metric_readers=[reader])
        .get_meter("m")
        .create_histogram("h", explicit_bucket_boundaries_advisory=bounds)
    )
    histograms = RequestHistograms(HISTOGRAM_SPECS)
    series = histograms.series(spec.name, "k", {})
    for batch in range(60):
        size = rng.choice((1, 2, 5, 37, 300))
        for _ in range(size):
            value: float = rng.choice(
                (
                    rng.choice(bounds),
                    rng.uniform(0, 1),
                    rng.expovariate(3.0),
                    rng.uniform(600, 1e4),
                    rng.randrange(0, 3),
                    0.0,
                )
            )
            if batch % 7 == 0:
                value = 0.25  # a batch of one value repeated: one bucket
            sdk.record(value)
            series.add(value)
        if batch % 3:
            with histograms.lock:
                series.fold()
            continue
        (own,) = histograms.collect(AggregationTemporality.CUMULATIVE)
        data = reader.get_metrics_data()
        assert data is not None
        (expected,) = data.resource_metrics[0].scope_metrics[0].metrics
        (own_point,) = own.data.data_points
        (expected_point,) = expected.data.data_points
        assert _point(own_point) == _point(expected_point)


def _point(point: Any) -> tuple[Any, ...]:
    return (
        point.count,
        point.sum,
        tuple(point.bucket_counts),
        tuple(point.explicit_bounds),
        point.min,
        point.max,
    )
