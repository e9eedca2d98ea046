from __future__ import annotations

import random

import pytest

from llmtrace.analysis.stats import (
    MEAN,
    Statistic,
    _PooledSample,
    _random_labels,
    distribution,
    histogram,
    midranks,
    percentile,
    permutation_tests,
    requests_needed,
    sign_flip_tests,
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


def test_every_relabelling_gives_exactly_the_percentiles_of_its_two_runs() -> None:
    # The null distribution is built from each run's values picked out of the pooled sample in
    # sorted order; it must equal sorting each relabelled run and reading its percentiles, to the
    # last bit, ties (zeros) and runs of one value included.
    rng = random.Random(5)
    statistics = [MEAN, P50, Statistic("p90", 0.9), P95, Statistic("max", 1.0)]
    for n_base, n_cand in ((1, 1), (1, 7), (7, 5), (40, 60)):
        base = [rng.choice([0.0, rng.lognormvariate(0.0, 1.0)]) for _ in range(n_base)]
        cand = [rng.choice([0.0, rng.lognormvariate(0.0, 1.0)]) for _ in range(n_cand)]
        pooled, values = _PooledSample(base, cand, statistics), [*base, *cand]
        for _ in range(50):
            labels = _random_labels(rng, n_base + n_cand, n_base)
            run_base = [v for v, label in zip(values, labels, strict=True) if label]
            run_cand = [v for v, label in zip(values, labels, strict=True) if not label]
            expected = [
                pooled.differences(labels)[0],
                *(
                    percentile(run_cand, s.quantile) - percentile(run_base, s.quantile)
                    for s in statistics[1:]
                    if s.quantile is not None
                ),
            ]
            assert pooled.differences(labels) == expected
            assert expected[0] == pytest.approx(
                sum(run_cand) / n_cand - sum(run_base) / n_base, abs=1e-12
            )


def test_a_sign_flip_test_counts_the_flipped_pairs_negative() -> None:
    # 6 pairs, every one slower: the most extreme of 2**6 sign patterns, so p is near 2/64; a
    # pair at zero ranks 0 and never moves the sum.
    (test,) = sign_flip_tests([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]], permutations=1999)
    assert test.estimate == 21.0 and 0.02 < test.p_value < 0.05
    (tied,) = sign_flip_tests([[0.0, 0.2, -0.3, 0.4, -0.5, 0.6]], permutations=199)
    assert tied.estimate == 1 - 2 + 3 - 4 + 5  # ranks of |d| among the non-zero pairs, signed
    assert not tied.significant()


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
