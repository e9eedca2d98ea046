from __future__ import annotations

import random

import pytest

from llmtrace import semconv as sc
from llmtrace.analysis.compare import NOT_ENOUGH_DATA, compare
from llmtrace.analysis.report import build_report
from llmtrace.analysis.stats import percentile
from tests.analysis.simulated_runs import simulated_run
from tests.analysis.test_report import rag_trace, traceset


def test_slower_stage_is_called_slower_and_unchanged_stage_not() -> None:
    before = build_report(traceset([rag_trace(retrieval_ms=30 + i % 5) for i in range(60)]))
    after = build_report(traceset([rag_trace(retrieval_ms=80 + i % 5) for i in range(60)]))
    result = compare(before, after)
    verdicts = {item.name: item.verdict for item in result.series}
    assert verdicts["retrieval"] == "slower"
    assert verdicts["end_to_end"] == "slower"
    assert verdicts["generation"] == "no significant change"
    assert compare(after, before).series[0].verdict == "faster"


def test_ten_requests_with_a_forty_percent_cut_get_a_verdict_but_not_on_the_tail() -> None:
    # the demo's case: 10 questions, generation cut by 40%: the row, mean and P50 are judged;
    # the P90 and P95 say how many requests they would need instead of "no change"
    before = build_report(traceset([rag_trace(generation_ms=1000 + 150 * i) for i in range(10)]))
    after = build_report(traceset([rag_trace(generation_ms=600 + 90 * i) for i in range(10)]))
    end_to_end = compare(before, after).series[0]
    assert end_to_end.verdict == "faster"
    verdicts = {delta.statistic: delta.verdict for delta in end_to_end.deltas}
    assert verdicts == {
        "mean": "faster",
        "p50": "faster",
        "p90": NOT_ENOUGH_DATA,
        "p95": NOT_ENOUGH_DATA,
    }
    assert end_to_end.delta("p95").verdict_text() == "not enough data (needs ≥ 72 requests per run)"
    assert end_to_end.delta("p50").interval.high < 0
    assert end_to_end.probability_slower < 0.2


def test_three_requests_are_not_enough_for_any_verdict() -> None:
    before = build_report(traceset([rag_trace(generation_ms=1000 + i) for i in range(3)]))
    after = build_report(traceset([rag_trace(generation_ms=100 + i) for i in range(3)]))
    end_to_end = compare(before, after).series[0]
    assert end_to_end.verdict == NOT_ENOUGH_DATA and end_to_end.needs == 4
    assert {delta.verdict for delta in end_to_end.deltas} == {NOT_ENOUGH_DATA}


def test_a_tiny_change_in_many_requests_is_below_the_practical_threshold() -> None:
    before = build_report(traceset([rag_trace(retrieval_ms=100 + i % 7) for i in range(300)]))
    after = build_report(traceset([rag_trace(retrieval_ms=101 + i % 7) for i in range(300)]))
    retrieval = next(item for item in compare(before, after).series if item.name == "retrieval")
    mean = retrieval.delta("mean")
    assert mean.interval.excludes_zero() and retrieval.p_value <= 0.05  # real, but 1 ms of 103
    assert mean.verdict == "no significant change" and retrieval.verdict == "no significant change"


def test_the_same_runs_always_get_the_same_verdicts() -> None:
    before = build_report(traceset([rag_trace(ttft_ms=50 + 7 * (i % 5)) for i in range(12)]))
    after = build_report(traceset([rag_trace(ttft_ms=60 + 7 * (i % 4)) for i in range(12)]))
    first, again = compare(before, after).to_json(), compare(before, after).to_json()
    assert first["series"] == again["series"]


def test_runs_that_differ_in_concurrency_are_flagged() -> None:
    before = build_report(
        traceset([rag_trace(**{"llmtrace.bench.run": "a", "llmtrace.bench.concurrency": 1})])
    )
    after = build_report(
        traceset([rag_trace(**{"llmtrace.bench.run": "b", "llmtrace.bench.concurrency": 8})])
    )
    warnings = compare(before, after).warnings
    assert any("concurrency: 1 vs 8" in w for w in warnings)


def _bench_run(name: str, top_k: int, count: int = 6) -> list[object]:
    attributes = {
        sc.BENCH_RUN: name,
        sc.BENCH_CONCURRENCY: 2,
        sc.BENCH_QUESTION_SET_HASH: "9f86d081884c7d659a2feaa0c55ad015",
    }
    return [rag_trace(returned=top_k, **attributes) for _ in range(count)]


def test_both_sides_are_named_by_their_run_with_the_settings_that_changed() -> None:
    # both runs in one trace file: the source is the same, the run names are not
    before = build_report(traceset(_bench_run("before", 8)), run="before")  # type: ignore[arg-type]
    after = build_report(traceset(_bench_run("after", 3)), run="after")  # type: ignore[arg-type]
    result = compare(before, after)
    assert result.sides is not None
    base, cand = result.sides
    assert (base.name, cand.name) == ("before", "after")
    assert base.source == cand.source == "test"
    assert base.settings["question_set"] == "9f86d081884c7d659a2feaa0c55ad015"
    assert base.settings["concurrency"] == 2 and base.settings["model"] == "m"
    assert [(c.setting, c.baseline, c.candidate) for c in result.changed_settings] == [
        ("top_k", 8, 3)
    ]
    data = result.to_json()
    assert data["schema"] == "llmtrace.comparison/2"
    assert data["baseline"]["name"] == "before" and data["candidate"]["name"] == "after"
    assert data["changed_settings"] == [{"setting": "top_k", "baseline": 8, "candidate": 3}]


def test_traces_without_a_run_are_named_by_their_source() -> None:
    report = build_report(traceset([rag_trace() for _ in range(4)]))
    result = compare(report, report)
    assert result.sides is not None and result.sides[0].name == "test"


def test_large_runs_are_tested_on_a_fixed_sample_and_still_judge_the_tail() -> None:
    rng = random.Random(3)
    before = simulated_run([rng.lognormvariate(0, 0.25) for _ in range(1500)])
    after = simulated_run([1.2 * rng.lognormvariate(0, 0.25) for _ in range(1500)])
    end_to_end = compare(before, after).series[0]
    assert end_to_end.verdict == "slower"
    assert {delta.statistic: delta.verdict for delta in end_to_end.deltas} == dict.fromkeys(
        ("mean", "p50", "p90", "p95"), "slower"
    )
    # the change shown is the report's, on all 1,500 requests
    assert end_to_end.delta("p95").change == pytest.approx(
        percentile(after.samples["end_to_end"], 0.95)
        - percentile(before.samples["end_to_end"], 0.95)
    )
