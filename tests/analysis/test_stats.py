from __future__ import annotations

import pytest

from llmtrace.analysis.stats import (
    MEAN,
    Statistic,
    distribution,
    histogram,
    midranks,
    percentile,
    permutation_tests,
    requests_needed,
)


def test_percentiles_interpolate_linearly_between_ranks() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    # numpy.percentile(values, [50, 90, 95, 99]) with the default linear method
    assert percentile(values, 0.5) == 3.0
    assert percentile(values, 0.9) == pytest.approx(7.6)
    assert percentile(values, 0.95) == pytest.approx(8.8)
    assert percentile(values, 0.99) == pytest.approx(9.76)
    assert percentile([5.0], 0.95) == 5.0


def test_distribution_of_empty_sample_is_none() -> None:
    assert distribution([]) is None
    summary = distribution([0.1, 0.3])
    assert summary is not None and summary.mean == pytest.approx(0.2) and summary.count == 2


def test_histogram_counts_every_value() -> None:
    result = histogram([0.1, 0.2, 0.2, 0.9], bins=4)
    assert sum(result["counts"]) == 4
    assert len(result["edges"]) == 5


P50, P95 = Statistic("p50", 0.5), Statistic("p95", 0.95)


def test_permutation_test_finds_a_real_shift_and_its_interval_agrees() -> None:
    base = [[0.100 + 0.001 * (i % 10) for i in range(200)]]
    slower = [[v + 0.05 for v in base[0]]]
    same = [list(reversed(base[0]))]
    (shifted,) = permutation_tests(base, slower, [[MEAN, P50]])
    (unchanged,) = permutation_tests(base, same, [[MEAN, P50]])
    for test in shifted:
        assert test.estimate == pytest.approx(0.05)
        assert test.significant() and test.p_value <= 0.05 and test.interval().excludes_zero()
    for test in unchanged:
        assert not test.significant() and test.p_value > 0.05
        assert not test.interval().excludes_zero()


def test_permuted_quantiles_equal_the_report_percentiles() -> None:
    base = [[0.3, 0.1, 0.9, 0.5, 0.2, 1.7, 0.4]]
    cand = [[0.25, 0.8, 0.15, 2.5, 0.6]]
    statistics = [MEAN, P50, Statistic("p90", 0.9), P95]
    (tests,) = permutation_tests(base, cand, [statistics], permutations=19)
    for statistic, test in zip(statistics[1:], tests[1:], strict=True):
        q = statistic.quantile
        assert q is not None
        assert test.estimate == pytest.approx(percentile(cand[0], q) - percentile(base[0], q))
    assert tests[0].estimate == pytest.approx(sum(cand[0]) / 5 - sum(base[0]) / 7)


def test_the_same_samples_always_get_the_same_p_values() -> None:
    base = [[0.1 * i for i in range(1, 12)]]
    cand = [[0.1 * i + 0.04 for i in range(1, 12)]]
    first = permutation_tests(base, cand, [[MEAN, P50]])
    again = permutation_tests(base, cand, [[MEAN, P50]])
    other = permutation_tests(base, cand, [[MEAN, P50]], seed=7)
    assert first == again
    assert [t.p_value for t in first[0]] != [t.p_value for t in other[0]]


def test_too_few_requests_for_a_percentile_are_named() -> None:
    # a quantile is estimable when its distribution-free interval lies inside the sample
    assert [requests_needed(s) for s in (MEAN, P50, Statistic("p90", 0.9), P95)] == [4, 6, 36, 72]
    assert requests_needed(P95, alpha=0.10) < 72


def test_midranks_share_ties() -> None:
    assert midranks([0.0, 3.0, 0.0, 1.0, 0.0]) == [2.0, 5.0, 2.0, 4.0, 2.0]


def test_empty_runs_are_not_tested() -> None:
    ((test,),) = permutation_tests([[]], [[0.1]], [[MEAN]])
    assert not test.significant()


def test_a_constant_series_has_no_change_and_no_rounding_noise() -> None:
    base = [[0.1] * 9]
    cand = [[0.1] * 7]  # means differ by 7e-17 in floating point
    ((test,),) = permutation_tests(base, cand, [[MEAN]])
    assert (test.estimate, test.margin) == (0.0, 0.0)
    assert not test.significant() and test.p_value == 1.0
