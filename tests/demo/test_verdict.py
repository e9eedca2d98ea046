"""The demo's closing lines: the end-to-end verdict and how many requests each statistic rests on."""

from __future__ import annotations

from llmtrace.analysis.compare import compare
from llmtrace.analysis.report_model import Report
from llmtrace.analysis.stats import distribution
from llmtrace.demo.verdict import verdict_lines


def run(durations: list[float]) -> Report:
    return Report(
        source="demo",
        service=None,
        traces=len(durations),
        end_to_end=distribution(durations),
        stages={},
        ttft=None,
        bottleneck=None,
        tail=None,
        slowest=[],
        samples={"end_to_end": durations, "stages": {}},
    )


def test_twelve_requests_per_run_judge_the_row_mean_and_p50_but_not_the_tail() -> None:
    before = run([9.0 + 0.25 * i for i in range(12)])
    after = run([4.0 + 0.25 * i for i in range(12)])
    verdict, rests = verdict_lines(compare(before, after), warmup=1)
    assert verdict.startswith("Verdict: end-to-end faster: P50 10.38 s → 5.38 s")
    assert "judged at 5%" in verdict
    assert rests == (
        "Each run measured 12 requests (1 warm-up left out); the verdict, the mean and the P50 "
        "rest on all of them (they need at least 4, 4 and 6 requests per run); the P90 and the "
        "P95 would need 36 and 72 requests per run, so they are marked 'not enough data' rather "
        "than guessed."
    )


def test_three_requests_per_run_are_too_few_for_any_verdict() -> None:
    verdict, rests = verdict_lines(compare(run([9.0, 9.5, 10.0]), run([4.0, 4.5, 5.0])), 1)
    assert verdict.startswith("Verdict: end-to-end not enough data (needs ≥ 4 requests per run)")
    assert "Each run measured 3 requests" in rests
    assert (
        "the verdict, the mean, the P50, the P90 and the P95 would need 4, 4, 6, 36 and 72" in rests
    )


def test_runs_of_the_same_questions_are_judged_question_by_question() -> None:
    before = run([9.0 + 0.25 * i for i in range(12)])
    after = run([8.25 + 0.25 * i for i in range(12)])  # every question 0.75 s faster
    unpaired, _ = verdict_lines(compare(before, after), warmup=1)
    assert unpaired.startswith("Verdict: end-to-end no significant change")
    for report in (before, after):
        report.samples["questions"] = [f"q{i}" for i in range(12)]
    verdict, rests = verdict_lines(compare(before, after), warmup=1)
    assert verdict.startswith("Verdict: end-to-end faster: P50 10.38 s → 9.62 s")
    assert "(signed-rank test over the 12 questions asked in both runs, p = 0.002" in verdict
    assert "(they need at least 6 questions, 4 and 6 requests per run)" in rests
