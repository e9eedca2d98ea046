from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import Counter

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from llmtrace import semconv
from llmtrace.bench.questions import questions_from_texts
from llmtrace.bench.runner import BenchPlan, BenchRunner, Outcome
from llmtrace.bench.targets import CallableTarget, HTTPTarget

from .conftest import AnswerService
from .spans_util import max_overlap, request_spans

QUESTIONS = questions_from_texts([f"question {i}" for i in range(1, 10)])


def sleeping_target(delay: float = 0.05) -> CallableTarget:
    async def answer(question: str) -> str:
        await asyncio.sleep(delay)
        return question

    return CallableTarget(answer, "sleep")


@pytest.mark.parametrize("concurrency", [1, 3, 9])
async def test_concurrency_is_exactly_n_requests_in_flight(
    spans: InMemorySpanExporter, concurrency: int
) -> None:
    plan = BenchPlan(name="overlap", concurrency=concurrency)
    result = await BenchRunner(QUESTIONS, sleeping_target(), plan).run()
    requests = request_spans(spans.get_finished_spans())
    assert result.requests == len(requests) == 9
    assert max_overlap(requests) == concurrency


def test_sync_callables_also_run_n_at_a_time(spans: InMemorySpanExporter) -> None:
    def blocking_answer(question: str) -> str:
        time.sleep(0.05)
        return question

    plan = BenchPlan(name="sync", concurrency=3)
    asyncio.run(BenchRunner(QUESTIONS, CallableTarget(blocking_answer, "sync"), plan).run())
    assert max_overlap(request_spans(spans.get_finished_spans())) == 3


async def test_each_request_is_a_root_span_with_the_run_attributes(
    spans: InMemorySpanExporter,
) -> None:
    questions = questions_from_texts(["a?", "b?"])
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("caller"):
        await BenchRunner(
            questions, sleeping_target(0), BenchPlan(name="attrs", concurrency=2)
        ).run()
    requests = request_spans(spans.get_finished_spans())
    assert len(requests) == 2
    for span in requests:
        assert span.parent is None
        assert span.name == "bench attrs"
        attributes = span.attributes or {}
        assert attributes[semconv.STAGE] == "other"
        assert attributes[semconv.BENCH_CONCURRENCY] == 2
        assert attributes[semconv.BENCH_QUESTION_SET_HASH] == questions.hash
        assert semconv.BENCH_WARMUP not in attributes
    assert {(s.attributes or {})[semconv.BENCH_QUESTION_ID] for s in requests} == {"1", "2"}
    assert len({s.context.trace_id for s in requests}) == 2


async def test_spans_made_by_the_target_join_the_request_trace(
    spans: InMemorySpanExporter,
) -> None:
    tracer = trace.get_tracer("test")

    def answer(question: str) -> str:
        with tracer.start_as_current_span("inner"):
            return question

    await BenchRunner(
        questions_from_texts(["x?"]), CallableTarget(answer, "inner"), BenchPlan(name="join")
    ).run()
    finished = spans.get_finished_spans()
    (inner,) = [s for s in finished if s.name == "inner"]
    (root,) = request_spans(finished)
    assert inner.parent is not None and inner.parent.span_id == root.context.span_id


async def test_repeat_and_warmup_counts_are_honoured(spans: InMemorySpanExporter) -> None:
    questions = questions_from_texts(["a?", "b?", "c?", "d?"])
    plan = BenchPlan(name="counts", concurrency=2, repeat=3, warmup=5)
    result = await BenchRunner(questions, sleeping_target(0.01), plan).run()
    requests = request_spans(spans.get_finished_spans())
    warmups = [s for s in requests if (s.attributes or {}).get(semconv.BENCH_WARMUP)]
    measured = [s for s in requests if not (s.attributes or {}).get(semconv.BENCH_WARMUP)]
    assert len(warmups) == 5
    assert len(measured) == result.requests == result.total == 12
    assert Counter((s.attributes or {})[semconv.BENCH_QUESTION_ID] for s in measured) == {
        "1": 3,
        "2": 3,
        "3": 3,
        "4": 3,
    }
    # Warmup runs first: every warmup request ends before the first measured one starts.
    assert max(s.end_time or 0 for s in warmups) <= min(s.start_time or 0 for s in measured)


async def test_errors_and_timeouts_are_counted_and_the_run_goes_on(
    spans: InMemorySpanExporter,
) -> None:
    async def flaky(question: str) -> str:
        if question == "question 2":
            raise ValueError("no answer for you")
        if question == "question 3":
            await asyncio.sleep(5)
        return question

    plan = BenchPlan(name="flaky", concurrency=2, timeout=0.2)
    result = await BenchRunner(QUESTIONS, CallableTarget(flaky, "flaky"), plan).run()
    assert (result.requests, result.errors, result.timeouts) == (9, 1, 1)
    by_id = {
        (s.attributes or {})[semconv.BENCH_QUESTION_ID]: s
        for s in request_spans(spans.get_finished_spans())
    }
    assert by_id["2"].status.status_code is StatusCode.ERROR
    assert (by_id["2"].attributes or {})[semconv.ERROR_TYPE] == "ValueError"
    assert (by_id["3"].attributes or {})[semconv.ERROR_TYPE] == "timeout"
    assert by_id["1"].status.status_code is not StatusCode.ERROR


async def test_http_target_requests_overlap_n_at_a_time_on_the_server(
    spans: InMemorySpanExporter, answer_service: AnswerService
) -> None:
    answer_service.fail_on = {"question 4"}
    target = HTTPTarget(f"{answer_service.base_url}/answer")
    try:
        result = await BenchRunner(QUESTIONS, target, BenchPlan(name="http", concurrency=4)).run()
    finally:
        await target.aclose()
    assert (result.requests, result.errors) == (9, 1)
    assert answer_service.max_in_flight == 4
    requests = request_spans(spans.get_finished_spans())
    assert max_overlap(requests) == 4
    # The service received each request's trace context.
    trace_ids = {format(s.context.trace_id, "032x") for s in requests}
    assert {tp.split("-")[1] for tp in answer_service.traceparents} == trace_ids


async def test_rate_spaces_request_starts(spans: InMemorySpanExporter) -> None:
    plan = BenchPlan(name="rate", concurrency=5, rate=20.0)
    await BenchRunner(questions_from_texts(list("abcde")), sleeping_target(0), plan).run()
    starts = sorted(s.start_time or 0 for s in request_spans(spans.get_finished_spans()))
    gaps = [(b - a) / 1e9 for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= 0.04


async def test_stop_lets_requests_in_flight_finish_and_starts_no_more(
    spans: InMemorySpanExporter,
) -> None:
    class StopAfterTwo:
        def __init__(self) -> None:
            self.runner: BenchRunner | None = None

        def run_started(self, total: int, warmup: int) -> None: ...

        def request_finished(self, outcome: Outcome) -> None:
            if self.runner is not None and outcome.question_id == "2":
                self.runner.stop()

        def run_stopping(self) -> None: ...

    listener = StopAfterTwo()
    runner = BenchRunner(
        QUESTIONS, sleeping_target(0.05), BenchPlan(name="stop", concurrency=2), listener
    )
    listener.runner = runner
    result = await runner.run()
    assert result.interrupted
    assert 2 <= result.requests < 9
    assert all(o.status == "ok" for o in result.outcomes)
    assert len(request_spans(spans.get_finished_spans())) == result.requests


async def test_cancel_ends_requests_in_flight_and_leaves_them_out(
    spans: InMemorySpanExporter,
) -> None:
    runner = BenchRunner(QUESTIONS, sleeping_target(10), BenchPlan(name="cancel", concurrency=3))
    task = asyncio.create_task(runner.run())
    await asyncio.sleep(0.1)
    runner.cancel()
    result = await asyncio.wait_for(task, 5)
    assert result.interrupted and result.requests == 0
    cancelled = request_spans(spans.get_finished_spans())
    assert len(cancelled) == 3
    assert all((s.attributes or {})[semconv.ERROR_TYPE] == "cancelled" for s in cancelled)


def test_invalid_plans_are_rejected() -> None:
    for bad in (
        {"concurrency": 0},
        {"repeat": 0},
        {"warmup": -1},
        {"rate": 0},
        {"timeout": 0},
        {"rate": math.nan},
        {"timeout": math.nan},
    ):
        with pytest.raises(ValueError):
            BenchPlan(name="x", **bad)  # type: ignore[arg-type]


def _own_timeout_target(failing: str) -> CallableTarget:
    """Answers after 50 ms, except ``failing``, whose backend gives up at once."""

    async def answer(question: str) -> str:
        if question == failing:
            raise TimeoutError("the backend gave up")
        await asyncio.sleep(0.05)
        return question

    return CallableTarget(answer, "own-timeout")


@pytest.mark.parametrize("bench_timeout", [None, 5.0])
async def test_a_timeout_error_raised_by_the_target_is_an_error_of_that_request(
    spans: InMemorySpanExporter, bench_timeout: float | None
) -> None:
    plan = BenchPlan(name="own-timeout", concurrency=3, timeout=bench_timeout)
    result = await BenchRunner(QUESTIONS, _own_timeout_target("question 1"), plan).run()
    assert (result.requests, result.errors, result.timeouts) == (9, 1, 0)
    (failed,) = [o for o in result.outcomes if o.question_id == "1"]
    assert failed.status == "error"
    assert failed.error == "TimeoutError: the backend gave up"
    requests = request_spans(spans.get_finished_spans())
    (span,) = [s for s in requests if (s.attributes or {})[semconv.BENCH_QUESTION_ID] == "1"]
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})[semconv.ERROR_TYPE] == "TimeoutError"
    # The worker that met the error goes on: three requests stay in flight after it.
    later = [s for s in requests if (s.attributes or {})[semconv.BENCH_QUESTION_ID] != "1"]
    assert max_overlap(later) == 3
