"""The report's quantiles from Prometheus buckets follow histogram_quantile's interpolation."""

from __future__ import annotations

import math

import pytest

from llmtrace.analysis.prometheus import Buckets, Filters, Window, grown, quantile


def test_quantiles_interpolate_within_the_bucket_the_rank_falls_in() -> None:
    buckets = Buckets([0.1, 0.2, math.inf], [2, 6, 8])
    assert quantile(0.5, buckets) == (pytest.approx(0.15), (0.1, 0.2))
    assert quantile(0.1, buckets) == (pytest.approx(0.04), (0.0, 0.1))
    # in the +Inf bucket: the highest finite bound, as Prometheus answers
    assert quantile(0.99, buckets) == (0.2, (0.2, math.inf))
    # requests without the stage are zeros: they join every bucket
    assert quantile(0.5, buckets.with_zeros(2))[0] == pytest.approx(0.125)
    assert math.isnan(quantile(0.5, Buckets([0.1, math.inf], [0, 0]))[0])


def test_counts_read_at_different_moments_are_evened_out() -> None:
    assert quantile(0.5, Buckets([0.1, 0.2, math.inf], [4, 3, 8]))[0] == pytest.approx(0.1)


def test_filters_and_window_make_the_promql() -> None:
    from datetime import UTC, datetime, timedelta

    selector = Filters(service="rag", route='say "hi"').selector()
    assert selector == 'job="rag",llmtrace_request_name="say \\"hi\\""'
    window = Window(datetime(2026, 1, 1, tzinfo=UTC), timedelta(minutes=10))
    assert grown('x{a="b"}', window) == (
        '(((last_over_time(x{a="b"}[600s]) - 0) - last_over_time(x{a="b"}[600s] offset 600s)'
        ' >= 0) or (last_over_time(x{a="b"}[600s]) - 0))'
    )
