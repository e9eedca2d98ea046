"""The comparison of two runs read from histograms (``compare --prometheus``), measured by
simulation (fixed seeds), in the request metrics' default explicit buckets and in the SDK's
exponential ones.

Latencies are lognormal (median 300 ms, sigma 0.25) and a ``queue`` stage is zero in 60% of the
requests, as in test_compare_statistics.py; each run is 40 requests, as a fleet window of a quiet
service. Pairs of runs from one distribution must be called "faster" or "slower" at most at 5%
plus three binomial standard errors; a 30% cut must be found in most draws and never called
slower.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter

import pytest

from llmtrace import semconv as sc
from llmtrace.analysis.compare import ALPHA, FASTER, NOT_ENOUGH_DATA, SLOWER, compare
from llmtrace.analysis.histograms import (
    Buckets,
    from_native,
    quantile,
    quantile_interval,
    shared_layout,
)
from llmtrace.analysis.prometheus import QUANTILES, Histograms, report_from_histograms
from llmtrace.analysis.render.json import comparison_json, report_json
from llmtrace.analysis.report_model import Report
from tests.analysis.simulated_runs import LAYOUTS, bucketed_run

pytestmark = pytest.mark.computes

REQUESTS = 40
NULL_DRAWS = 200
CHANGE_DRAWS = 100


def _draw(rng: random.Random, scale: float, layout: str, *, with_queue: bool) -> Report:
    end_to_end = [scale * 0.3 * rng.lognormvariate(0.0, 0.25) for _ in range(REQUESTS)]
    stages = None
    if with_queue:
        queue = [
            0.0 if rng.random() < 0.6 else 0.06 * rng.lognormvariate(0.0, 0.5)
            for _ in range(REQUESTS)
        ]
        stages = {"queue": queue}
    return bucketed_run(end_to_end, stages, layout)


def _verdicts(
    layout: str, scale: float, draws: int, seed: int, *, with_queue: bool
) -> dict[tuple[str, str], Counter[str]]:
    rng = random.Random(seed)
    counts: dict[tuple[str, str], Counter[str]] = {}
    for _ in range(draws):
        before = _draw(rng, 1.0, layout, with_queue=with_queue)
        after = _draw(rng, scale, layout, with_queue=with_queue)
        comparison = compare(before, after)
        assert comparison.bucketed is not None
        for row in comparison.series:
            counts.setdefault((row.name, "row"), Counter())[row.verdict] += 1
            for delta in row.deltas:
                counts.setdefault((row.name, delta.statistic), Counter())[delta.verdict] += 1
    return counts


def _rate(counter: Counter[str], *verdicts: str) -> float:
    return sum(counter[v] for v in verdicts) / sum(counter.values())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_same_distribution_is_rarely_called_faster_or_slower(layout: str) -> None:
    counts = _verdicts(layout, 1.0, NULL_DRAWS, seed=40, with_queue=True)
    limit = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / NULL_DRAWS)
    for row in ("end_to_end", "queue"):
        for statistic in ("row", "mean", "p50"):
            counter = counts[(row, statistic)]
            assert _rate(counter, FASTER, SLOWER) <= limit, (row, statistic, counter)
        # 40 requests bound neither a P90 nor a P95 at 97.5% (42 and 86 needed): not judged
        for statistic in ("p90", "p95"):
            assert counts[(row, statistic)] == Counter({NOT_ENOUGH_DATA: NULL_DRAWS}), statistic


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_thirty_percent_cut_is_found_and_never_called_slower(layout: str) -> None:
    counts = _verdicts(layout, 0.7, CHANGE_DRAWS, seed=41, with_queue=False)
    for statistic in ("row", "mean"):
        assert _rate(counts[("end_to_end", statistic)], FASTER) >= 0.8, statistic
    for statistic in ("row", "mean", "p50"):
        assert counts[("end_to_end", statistic)][SLOWER] == 0, statistic
    if layout == "exponential":  # fine buckets: the median's interval is narrow enough
        assert _rate(counts[("end_to_end", "p50")], FASTER) >= 0.8


def test_a_percentiles_interval_holds_its_buckets_and_excludes_zero_only_when_found() -> None:
    rng = random.Random(3)
    before = _draw(rng, 1.0, "explicit", with_queue=False)
    after = _draw(rng, 0.3, "explicit", with_queue=False)
    row = compare(before, after).series[0]
    p50 = row.delta("p50")
    assert p50.verdict == FASTER and p50.buckets is not None
    (base_low, base_high), (cand_low, cand_high) = p50.buckets
    assert base_low <= p50.baseline <= base_high and cand_low <= p50.candidate <= cand_high
    # at least the two buckets' whole width either way
    assert p50.interval.low <= cand_low - base_high and p50.interval.high >= cand_high - base_low
    assert p50.interval.high < 0


def test_the_comparison_says_its_figures_are_histograms_and_how_wide() -> None:
    rng = random.Random(4)
    comparison = compare(
        _draw(rng, 1.0, "explicit", with_queue=True), _draw(rng, 1.0, "explicit", with_queue=True)
    )
    data = json.loads(comparison_json(comparison))
    assert data["method"]["figures"] == "histograms"
    widths = data["method"]["histograms"]
    assert widths["baseline"]["layout"] == widths["candidate"]["layout"] == "explicit"
    # lognormal around 300 ms falls in buckets 17-25% wide
    assert 0.1 < widths["baseline"]["relative_width"] < 0.3
    assert data["series"]["end_to_end"]["p50"]["buckets"]["baseline"][1] >= 0.25
    assert data["warnings"] == []  # no "no per-trace samples": histograms are tested


def test_native_buckets_with_gaps_become_empty_buckets() -> None:
    buckets = from_native([[3, "-0.0", "0.0", "2"], [0, "1", "2", "3"], [0, "4", "8", "1"]], 9.0)
    assert buckets.bounds == [0.0, 1.0, 2.0, 4.0, 8.0]
    assert buckets.cumulative == [2.0, 2.0, 5.0, 5.0, 6.0]
    assert quantile(0.9, buckets)[1] == (4.0, 8.0)


def test_two_exponential_scales_meet_at_the_coarser_bounds() -> None:
    fine = from_native(
        [[0, "1", "1.4142135623730951", "1"], [0, "1.4142135623730951", "2", "1"]], 3
    )
    coarse = from_native([[0, "1", "2", "2"], [0, "2", "4", "1"]], 5)
    a, b = shared_layout(fine, coarse)
    assert a.bounds == b.bounds == [0.0, 1.0, 2.0, 4.0]
    assert a.cumulative == [0.0, 0.0, 2.0, 2.0] and b.cumulative == [0.0, 0.0, 2.0, 3.0]


def test_a_percentiles_interval_covers_it_from_the_buckets_out() -> None:
    bounds = [0.1, 0.2, 0.3, 0.4, math.inf]
    buckets = Buckets(bounds, [5, 15, 30, 40, 40])
    low, high = quantile_interval(buckets, 0.5, ALPHA / 2)
    figure, (bucket_low, bucket_high) = quantile(0.5, buckets)
    assert low <= bucket_low <= figure <= bucket_high <= high
    assert low in (0.0, *bounds) and high in bounds
    # too few requests: the P95 of 40 has no upper bound
    assert quantile_interval(buckets, 0.95, ALPHA / 2)[1] == math.inf


def _stage_histograms() -> Histograms:
    """Every stage of the vocabulary at its own time, in 10 of 20 requests; the request-level
    time to first token later than the stage's."""
    bounds = [0.01 * (i + 1) for i in range(40)] + [math.inf]

    def around(seconds: float, count: int) -> Buckets:
        return Buckets(bounds, [float(count) if b >= seconds else 0.0 for b in bounds], seconds)

    stages = {stage: around(0.01 * (i + 1) + 0.005, 10) for i, stage in enumerate(sc.STAGES)}
    return Histograms(around(0.395, 20), stages, around(0.255, 20))


def test_figures_from_names_every_stages_own_bucket_and_survives_saving() -> None:
    report = report_from_histograms(_stage_histograms(), source="test")
    resolution = report.figures_from["resolution"] if report.figures_from else {}
    assert set(resolution["stages"]) == set(report.stages) == set(sc.STAGES)
    for stage, summary in report.stages.items():
        for name, q in QUANTILES:
            low, high = resolution["stages"][stage][name]
            assert (low, high) == quantile(q, report.histograms[stage])[1], (stage, name)
            assert low <= summary.distribution.at(name) <= high, (stage, name)
    for name, _ in QUANTILES:
        low, high = resolution["ttft"][name]
        assert report.ttft is not None and low <= report.ttft.at(name) <= high
        # the stage ttft's bucket is its own, not the request-level one's
        assert resolution["stages"]["ttft"][name] != resolution["ttft"][name]
    saved = Report.from_json(json.loads(report_json(report)))
    assert saved.figures_from is not None
    assert (
        saved.figures_from["resolution"]
        == json.loads(report_json(report))["figures_from"]["resolution"]
    )
    assert saved.histograms == report.histograms
    again = compare(saved, saved)
    assert again.bucketed is not None
    assert {row.verdict for row in again.series} == {"no significant change"}
