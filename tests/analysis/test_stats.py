from __future__ import annotations

import pytest

from llmtrace.analysis.stats import bootstrap_difference, distribution, histogram, percentile


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


def _p50(values: list[float]) -> float:
    return values[len(values) // 2]


def test_bootstrap_interval_excludes_zero_only_for_a_real_shift() -> None:
    base = [[0.100 + 0.001 * (i % 10) for i in range(200)]]
    slower = [[v + 0.05 for v in base[0]]]
    same = [list(reversed(base[0]))]
    (shifted,) = bootstrap_difference(base, slower, [_p50], resamples=200)
    (unchanged,) = bootstrap_difference(base, same, [_p50], resamples=200)
    assert shifted[0].excludes_zero() and shifted[0].estimate == pytest.approx(0.05)
    assert not unchanged[0].excludes_zero()
