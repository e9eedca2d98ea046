from __future__ import annotations

from llmtrace.analysis.compare import compare
from llmtrace.analysis.report import build_report
from tests.analysis.test_report import rag_trace, traceset


def test_slower_stage_is_called_slower_and_unchanged_stage_not() -> None:
    before = build_report(traceset([rag_trace(retrieval_ms=30 + i % 5) for i in range(60)]))
    after = build_report(traceset([rag_trace(retrieval_ms=80 + i % 5) for i in range(60)]))
    result = compare(before, after, resamples=200)
    verdicts = {item.name: item.verdict for item in result.series}
    assert verdicts["retrieval"] == "slower"
    assert verdicts["end_to_end"] == "slower"
    assert verdicts["generation"] == "no significant change"
    assert compare(after, before, resamples=200).series[0].verdict == "faster"


def test_runs_that_differ_in_concurrency_are_flagged() -> None:
    before = build_report(
        traceset([rag_trace(**{"llmtrace.bench.run": "a", "llmtrace.bench.concurrency": 1})])
    )
    after = build_report(
        traceset([rag_trace(**{"llmtrace.bench.run": "b", "llmtrace.bench.concurrency": 8})])
    )
    warnings = compare(before, after, resamples=50).warnings
    assert any("concurrency: 1 vs 8" in w for w in warnings)


def test_tail_percentiles_of_few_traces_never_decide_a_verdict() -> None:
    # 20 traces each: only the median can be judged; a tail-only shift is no significant change
    before = build_report(traceset([rag_trace() for _ in range(20)]))
    after = build_report(traceset([rag_trace() for _ in range(19)] + [rag_trace(ttft_ms=400)]))
    result = compare(before, after, resamples=100)
    end_to_end = result.series[0]
    assert [d.enough_traces for d in end_to_end.deltas] == [True, False, False]
    assert end_to_end.verdict == "no significant change"
