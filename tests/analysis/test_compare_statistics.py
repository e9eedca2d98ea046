"""The comparison's verdicts, measured by simulation (fixed seeds).

Pairs of runs drawn from one distribution must be called "faster" or "slower" at most at the
stated rate (5%, plus the binomial margin of the number of pairs drawn); a 30% change in 10
requests per run must be found in most draws. Latencies are lognormal with sigma 0.25 (the P95 is
1.5 times the median); a second row, ``queue``, is zero in 60% of the requests, as a stage
that only some requests pass through is, so ties are tested too.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable

import pytest

from llmtrace.analysis.compare import ALPHA, FASTER, SLOWER, compare
from llmtrace.analysis.report_model import Report
from tests.analysis.simulated_runs import simulated_run

pytestmark = pytest.mark.computes

SIGMA = 0.25


def _draw(rng: random.Random, n: int, scale: float, with_queue: bool) -> Report:
    end_to_end = [scale * rng.lognormvariate(0.0, SIGMA) for _ in range(n)]
    if not with_queue:
        return simulated_run(end_to_end)
    queue = [0.0 if rng.random() < 0.6 else 0.2 * rng.lognormvariate(0.0, 0.5) for _ in range(n)]
    return simulated_run(end_to_end, {"queue": queue})


def _verdict_rates(
    n: int, scale: float, draws: int, seed: int, *, with_queue: bool = False
) -> dict[tuple[str, str], Counter[str]]:
    """How often each (row, statistic) got each verdict; statistic "row" is the row's own."""
    rng = random.Random(seed)
    counts: dict[tuple[str, str], Counter[str]] = {}
    for _ in range(draws):
        before = _draw(rng, n, 1.0, with_queue)
        after = _draw(rng, n, scale, with_queue)
        for row in compare(before, after).series:
            counts.setdefault((row.name, "row"), Counter())[row.verdict] += 1
            for delta in row.deltas:
                counts.setdefault((row.name, delta.statistic), Counter())[delta.verdict] += 1
    return counts


def _false_positive_limit(draws: int) -> float:
    # alpha plus three binomial standard deviations of a rate measured on `draws` pairs
    return ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / draws)


def _rate(counter: Counter[str], *verdicts: str) -> float:
    return sum(counter[v] for v in verdicts) / sum(counter.values())


def test_same_distribution_at_ten_requests_is_rarely_called_faster_or_slower() -> None:
    draws = 400
    counts = _verdict_rates(10, 1.0, draws, seed=10, with_queue=True)
    judged = {key: c for key, c in counts.items() if key[1] in ("row", "mean", "p50")}
    assert len(judged) == 6
    for key, counter in judged.items():
        assert _rate(counter, FASTER, SLOWER) <= _false_positive_limit(draws), (key, counter)
    # the tail is not judged at all from 10 requests
    assert counts[("end_to_end", "p95")] == Counter({"not enough data": draws})


def test_same_distribution_at_fifty_requests_is_rarely_called_faster_or_slower() -> None:
    draws = 400
    counts = _verdict_rates(50, 1.0, draws, seed=50, with_queue=True)
    for key in [("end_to_end", s) for s in ("row", "mean", "p50", "p90")] + [("queue", "row")]:
        assert _rate(counts[key], FASTER, SLOWER) <= _false_positive_limit(draws), key
    assert counts[("end_to_end", "p95")] == Counter({"not enough data": draws})


def test_same_distribution_at_a_hundred_requests_keeps_the_p95_honest() -> None:
    draws = 300
    counts = _verdict_rates(100, 1.0, draws, seed=100)
    for statistic in ("p90", "p95"):
        counter = counts[("end_to_end", statistic)]
        assert counter["not enough data"] == 0
        assert _rate(counter, FASTER, SLOWER) <= _false_positive_limit(draws), statistic


def test_thirty_percent_less_time_at_ten_requests_is_found_in_most_draws() -> None:
    counts = _verdict_rates(10, 0.7, 200, seed=7)
    assert _rate(counts[("end_to_end", "row")], FASTER) > 0.7
    assert _rate(counts[("end_to_end", "p50")], FASTER) > 0.6
    assert _rate(counts[("end_to_end", "row")], SLOWER) == 0


def test_thirty_percent_more_time_at_ten_requests_is_found_in_most_draws() -> None:
    counts = _verdict_rates(10, 1.3, 200, seed=13)
    assert _rate(counts[("end_to_end", "row")], SLOWER) > 0.5
    assert _rate(counts[("end_to_end", "mean")], SLOWER) > 0.5
    assert _rate(counts[("end_to_end", "row")], FASTER) == 0


# --- paired runs: the same questions asked before and after -----------------------------------
#
# Each question has a time of its own (lognormal across questions, sigma 0.8: a long answer takes
# several times a short one) and each request of it varies around that by sigma 0.1. Unpaired,
# the spread between questions hides a change; paired, each question is compared with itself.
QUESTION_SIGMA = 0.8
REQUEST_SIGMA = 0.1


def _paired_draw(
    rng: random.Random, question_times: list[float], scales: list[float], repeat: int = 1
) -> Report:
    questions = [f"q{i}" for i in range(len(question_times)) for _ in range(repeat)]
    end_to_end = [
        question_times[i] * scales[i] * rng.lognormvariate(0.0, REQUEST_SIGMA)
        for i in range(len(question_times))
        for _ in range(repeat)
    ]
    report = simulated_run(end_to_end)
    report.samples["questions"] = questions
    report.run = {"question_set_hash": "same-questions"}
    return report


def _paired_rates(n: int, scale_of: Callable[[int], float], draws: int, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    verdicts: Counter[str] = Counter()
    for _ in range(draws):
        times = [rng.lognormvariate(0.0, QUESTION_SIGMA) for _ in range(n)]
        before = _paired_draw(rng, times, [1.0] * n)
        after = _paired_draw(rng, times, [scale_of(i) for i in range(n)])
        comparison = compare(before, after)
        assert comparison.paired_questions == n
        verdicts[comparison.row("end_to_end").verdict] += 1  # type: ignore[union-attr]
    return verdicts


def test_paired_runs_from_one_distribution_are_rarely_called_faster_or_slower() -> None:
    draws = 400
    for n, seed in ((6, 6), (12, 12), (40, 40)):
        verdicts = _paired_rates(n, lambda i: 1.0, draws, seed)
        assert _rate(verdicts, FASTER, SLOWER) <= _false_positive_limit(draws), (n, verdicts)


def test_a_thirty_percent_change_of_ten_paired_questions_is_found_in_almost_every_draw() -> None:
    assert _rate(_paired_rates(10, lambda i: 0.7, 200, seed=70), FASTER) > 0.95
    assert _rate(_paired_rates(10, lambda i: 1.3, 200, seed=130), SLOWER) > 0.95


def test_pairing_finds_what_the_unpaired_test_misses() -> None:
    """Two thirds of 12 questions 40% faster, the rest unchanged (a cap that only the longer
    answers reach): paired, found in most draws; the same runs without their questions, in few."""
    rng = random.Random(12)
    paired = unpaired = 0
    draws = 100
    for _ in range(draws):
        times = [rng.lognormvariate(0.0, QUESTION_SIGMA) for _ in range(12)]
        before = _paired_draw(rng, times, [1.0] * 12)
        after = _paired_draw(rng, times, [0.6 if i % 3 else 1.0 for i in range(12)])
        paired += compare(before, after).row("end_to_end").verdict == FASTER  # type: ignore[union-attr]
        for report in (before, after):
            del report.samples["questions"]
        unpaired += compare(before, after).row("end_to_end").verdict == FASTER  # type: ignore[union-attr]
    assert paired / draws > 0.8
    assert unpaired / draws < 0.3


def test_repeated_questions_are_averaged_and_other_question_sets_are_not_paired() -> None:
    rng = random.Random(3)
    times = [rng.lognormvariate(0.0, QUESTION_SIGMA) for _ in range(8)]
    before = _paired_draw(rng, times, [1.0] * 8, repeat=3)
    after = _paired_draw(rng, times, [0.7] * 8, repeat=3)
    comparison = compare(before, after)
    assert comparison.paired_questions == 8  # 24 requests a run, 8 questions
    assert comparison.row("end_to_end").verdict == FASTER  # type: ignore[union-attr]
    assert comparison.to_json()["method"]["paired_questions"] == 8
    after.run = {"question_set_hash": "other-questions"}
    assert compare(before, after).paired_questions is None
    # fewer than 6 questions in both runs: a sign-flip test cannot reach 5%, so it does not judge
    few_before = _paired_draw(rng, times[:5], [1.0] * 5)
    few_after = _paired_draw(rng, times[:5], [0.5] * 5)
    row = compare(few_before, few_after).row("end_to_end")
    assert row is not None and row.verdict == "not enough data" and row.needs == 6
