"""The breakdown computed at the source equals the report's breakdown of the same spans, counts
every request whatever the sampler keeps, and holds bounded memory."""

from __future__ import annotations

from bisect import bisect_left
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind

from llmtrace import semconv as sc
from llmtrace.sdk import _compat
from llmtrace.sdk.request_metrics import (
    _SDK_SPANS,
    REQUEST_DURATION,
    REQUEST_TOKENS,
    REQUEST_TTFT,
    SPANS_DROPPED,
    STAGE_BUCKETS,
    STAGE_DURATION,
    UNTRACKED,
    RecordUnsampled,
)
from tests.scale.harness import AGGREGATIONS, Request, make_setup, ms, requests


@pytest.fixture(params=AGGREGATIONS)
def aggregation(request: pytest.FixtureRequest) -> str:
    """Each test runs with the SDK aggregating the histograms and with llmtrace aggregating them."""
    return str(request.param)


def _bucket_counts(values: list[float]) -> list[int]:
    counts = [0] * (len(STAGE_BUCKETS) + 1)
    for value in values:
        counts[bisect_left(STAGE_BUCKETS, value)] += 1
    return counts


def test_stage_times_equal_the_reports_breakdown_of_the_same_spans(
    tmp_path: Path, aggregation: str
) -> None:
    setup = make_setup(tmp_path, aggregation=aggregation)
    sent = [request.trace_id for request in requests(setup.tracer, 300)]
    report = setup.report_stages()
    assert sorted(report) == sorted(sent)
    for trace_id, stages in report.items():
        recorded = setup.processor.figures[trace_id]
        at_source = {stage: s for stage, s in recorded.stages.items() if s > 0}
        assert at_source.keys() == stages.keys(), trace_id
        for stage, seconds in stages.items():
            assert at_source[stage] == pytest.approx(seconds, abs=1e-9), (trace_id, stage)
        assert sum(at_source.values()) == pytest.approx(recorded.duration, abs=1e-9)
    # The histograms hold exactly those values: bucket by bucket, per stage.
    points = setup.points(STAGE_DURATION)
    for stage in {stage for stages in report.values() for stage in stages}:
        expected = _bucket_counts([s[stage] for s in report.values() if stage in s])
        counts = [0] * len(expected)
        total = 0.0
        for point in points:
            if point.attributes[sc.STAGE] == stage:
                counts = [a + b for a, b in zip(counts, point.bucket_counts, strict=True)]
                total += point.sum
        assert counts == expected, stage
        assert total == pytest.approx(sum(s.get(stage, 0.0) for s in report.values()), abs=1e-6)
    assert sum(point.count for point in setup.points(REQUEST_DURATION)) == 300
    assert setup.processor.in_flight == 0


def test_request_attributes_name_model_error_ttft_and_tokens(
    tmp_path: Path, aggregation: str
) -> None:
    setup = make_setup(tmp_path, aggregation=aggregation)
    request = Request(setup.tracer, "POST /chat", 0, **{sc.HTTP_ROUTE: "/chat"})
    request.child("search", 0, 40, **{sc.STAGE: "retrieval"})
    common = {sc.GEN_AI_OPERATION_NAME: "chat", sc.STAGE: sc.LLM_STAGE}
    # a short call off the critical path (concurrent with the search) and the main one after it
    request.child(
        "side",
        5,
        30,
        **common,
        **{sc.GEN_AI_REQUEST_MODEL: "small", sc.GEN_AI_USAGE_INPUT_TOKENS: 5},
    )
    request.child(
        "answer",
        40,
        240,
        **common,
        **{
            sc.GEN_AI_REQUEST_MODEL: "large",
            sc.TIME_TO_FIRST_TOKEN: 0.05,
            sc.GEN_AI_USAGE_INPUT_TOKENS: 100,
            sc.GEN_AI_USAGE_OUTPUT_TOKENS: 20,
        },
    )
    request.end(250, error=True)
    (point,) = setup.points(REQUEST_DURATION)
    assert dict(point.attributes) == {
        "llmtrace.request.name": "/chat",
        sc.GEN_AI_REQUEST_MODEL: "large",
        sc.ERROR_TYPE: "TimeoutError",
    }
    assert point.sum == pytest.approx(0.25)
    (ttft,) = setup.points(REQUEST_TTFT)
    assert ttft.sum == pytest.approx(0.09)  # 40 ms before the call, 50 ms into it
    tokens = {p.attributes["gen_ai.token.type"]: p.sum for p in setup.points(REQUEST_TOKENS)}
    assert tokens == {"input": 105, "output": 20}
    stages = {p.attributes[sc.STAGE]: p.sum for p in setup.points(STAGE_DURATION)}
    assert stages == pytest.approx(
        {"retrieval": 0.04, "ttft": 0.05, "generation": 0.15, "other": 0.01}
    )


def test_without_a_route_the_root_span_name_names_the_request(
    tmp_path: Path, aggregation: str
) -> None:
    setup = make_setup(tmp_path, aggregation=aggregation)
    request = Request(setup.tracer, "answer_question", 0)
    request.end(10)
    (point,) = setup.points(REQUEST_DURATION)
    assert dict(point.attributes) == {"llmtrace.request.name": "answer_question"}


@pytest.mark.parametrize("record_unsampled", [True, False])
def test_every_request_is_counted_whatever_the_sampler_keeps(
    tmp_path: Path, record_unsampled: bool, aggregation: str
) -> None:
    sampler = ParentBased(TraceIdRatioBased(0.05))
    setup = make_setup(
        tmp_path,
        aggregation=aggregation,
        sampler=RecordUnsampled(sampler) if record_unsampled else sampler,
    )
    sent = 400
    list(requests(setup.tracer, sent))
    exported = setup.report_stages()
    assert 0 < len(exported) < sent / 5  # the sampler kept a few traces in the file
    counted = sum(point.count for point in setup.points(REQUEST_DURATION))
    if record_unsampled:
        assert counted == sent
        # the kept traces are broken down exactly as the report breaks them down
        for trace_id, stages in exported.items():
            recorded = setup.processor.figures[trace_id].stages
            assert {s: v for s, v in recorded.items() if v > 0} == pytest.approx(stages)
    else:
        assert counted == len(exported)


def test_traces_in_flight_are_capped_and_the_overflow_counted(
    tmp_path: Path, aggregation: str
) -> None:
    setup = make_setup(tmp_path, aggregation=aggregation, max_traces=5)
    opened = [Request(setup.tracer, f"r{i}", i) for i in range(8)]
    assert setup.processor.in_flight == 5
    assert setup.counter(UNTRACKED, reason="traces_in_flight") == 3
    for request in opened:
        request.end(100)
    assert sum(point.count for point in setup.points(REQUEST_DURATION)) == 5
    assert setup.processor.in_flight == 0


def test_spans_per_trace_are_capped_and_the_breakdown_still_sums_up(
    tmp_path: Path, aggregation: str
) -> None:
    setup = make_setup(tmp_path, aggregation=aggregation, max_spans=3)
    request = Request(setup.tracer, "r", 0)
    for i in range(10):
        request.child(f"search{i}", i * 10, i * 10 + 10, **{sc.STAGE: "retrieval"})
    request.end(100)
    assert setup.counter(SPANS_DROPPED) == 7
    (figures,) = setup.processor.figures.values()
    # three searches were kept; the time of the others counts as the root's own ("other")
    assert figures.stages == pytest.approx({"retrieval": 0.03, "other": 0.07})


def test_a_root_that_never_ends_is_evicted_after_the_timeout(tmp_path: Path) -> None:
    now = [0.0]
    setup = make_setup(tmp_path, root_timeout=60.0, clock=lambda: now[0])
    stuck = Request(setup.tracer, "stuck", 0)
    stuck.child("work", 0, 10, **{sc.STAGE: "tool"})
    now[0] = 30.0
    Request(setup.tracer, "fresh", 1).end(2)
    assert setup.processor.in_flight == 1  # the stuck one, not yet too old
    now[0] = 61.0
    setup.processor.evict_expired()
    assert setup.processor.in_flight == 0
    assert setup.counter(UNTRACKED, reason="evicted") == 1
    stuck.end(70_000)  # ends after all: nothing is held for it any more, nothing recorded
    assert [p.attributes["llmtrace.request.name"] for p in setup.points(REQUEST_DURATION)] == [
        "fresh"
    ]


def test_a_downstream_process_records_its_own_view_and_the_caller_counts_the_call(
    tmp_path: Path,
) -> None:
    caller = make_setup(tmp_path / "caller")
    callee = make_setup(tmp_path / "callee")
    request = Request(caller.tracer, "POST /ask", 0)
    client = caller.tracer.start_span(
        "POST retriever",
        context=request.context,
        kind=SpanKind.CLIENT,
        start_time=ms(10),
        attributes={sc.STAGE: "network"},
    )
    carrier: dict[str, str] = {}
    inject(carrier, context=trace.set_span_in_context(client))
    # the downstream service: its server span continues the trace, as a local root there
    server = callee.tracer.start_span(
        "POST /search", context=extract(carrier), kind=SpanKind.SERVER, start_time=ms(12)
    )
    Request.around(callee.tracer, server).child("search", 13, 53, **{sc.STAGE: "retrieval"})
    server.end(end_time=ms(55))
    client.end(end_time=ms(60))
    request.end(70)
    (downstream,) = callee.processor.figures.values()
    assert downstream.stages == pytest.approx({"retrieval": 0.04, "other": 0.003})
    (upstream,) = caller.processor.figures.values()
    assert upstream.stages == pytest.approx({"network": 0.05, "other": 0.02})
    assert callee.processor.in_flight == caller.processor.in_flight == 0


def test_the_tracers_spans_are_read_through_their_fields(tmp_path: Path) -> None:
    """The processor reads an SDK span's fields directly, not through its properties (a property
    call per child span was most of what it did for one): the tracer's spans must be of a class it
    knows, which is not the SDK's public ``Span`` but a subclass of it. With the fast path off
    (``LLMTRACE_FAST_PATHS=off``) none is, and every span is read through its properties."""
    setup = make_setup(tmp_path)
    span = setup.tracer.start_span("x")
    assert (span.__class__ in _SDK_SPANS) is _compat.enabled("span-fields")
    span.end()


def test_two_local_roots_of_one_trace_are_each_a_request(tmp_path: Path) -> None:
    """A remote caller fanning out to this process twice in one trace: two requests here."""
    setup = make_setup(tmp_path)
    upstream = make_setup(tmp_path / "up")
    caller = upstream.tracer.start_span("fan-out", start_time=ms(0))
    carrier: dict[str, str] = {}
    inject(carrier, context=trace.set_span_in_context(caller))
    first = setup.tracer.start_span("a", context=extract(carrier), start_time=ms(1))
    second = setup.tracer.start_span("b", context=extract(carrier), start_time=ms(2))
    Request.around(setup.tracer, first).child("search", 1, 21, **{sc.STAGE: "retrieval"})
    first.end(end_time=ms(25))
    assert setup.processor.in_flight == 1
    second.end(end_time=ms(40))
    caller.end(end_time=ms(50))
    a, b = setup.processor.recorded_in_order
    assert (a.name, b.name) == ("a", "b")
    assert a.stages == pytest.approx({"retrieval": 0.02, "other": 0.004})
    assert b.stages == pytest.approx({"other": 0.038})
    assert setup.processor.in_flight == 0


def test_exponential_histograms_when_configured(tmp_path: Path) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ExponentialHistogramDataPoint,
        InMemoryMetricReader,
    )

    from llmtrace.sdk.request_metrics import RequestMetricsProcessor, views

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader], views=views("exponential"))
    setup = make_setup(tmp_path)
    setup.provider.add_span_processor(RequestMetricsProcessor(meters))
    list(requests(setup.tracer, 20))
    data = reader.get_metrics_data()
    assert data is not None
    kinds = {
        metric.name: type(metric.data.data_points[0])
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    assert kinds[STAGE_DURATION] is ExponentialHistogramDataPoint
    assert kinds[REQUEST_DURATION] is ExponentialHistogramDataPoint
    assert views("explicit") == []


def test_concurrent_requests_on_many_threads_are_each_counted_once(
    tmp_path: Path, aggregation: str
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    setup = make_setup(tmp_path, aggregation=aggregation)
    processor = setup.processor
    tracer = setup.tracer

    def handle(i: int) -> None:
        with tracer.start_as_current_span("threaded", attributes={sc.HTTP_ROUTE: "/t"}):
            for stage in ("embedding", "retrieval", "postprocess"):
                with tracer.start_as_current_span(stage, attributes={sc.STAGE: stage}):
                    pass

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(handle, range(400)))
    assert processor.recorded == 400
    assert processor.in_flight == 0
    stage_counts = {
        point.attributes[sc.STAGE]: point.count
        for point in setup.points(STAGE_DURATION)
        if point.attributes.get("llmtrace.request.name") == "/t"
    }
    assert stage_counts.get("retrieval") == 400
