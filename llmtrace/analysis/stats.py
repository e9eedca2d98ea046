"""Summary statistics: percentiles by linear interpolation and bootstrap confidence intervals.

Plain Python (no numpy): the report must run wherever the SDK is installed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.50),
    ("p90", 0.90),
    ("p95", 0.95),
    ("p99", 0.99),
)


@dataclass(slots=True)
class Distribution:
    """Mean and percentiles of a sample, in the sample's unit."""

    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    count: int = 0

    def to_json(self) -> dict[str, float | int]:
        return {
            "mean": self.mean,
            "p50": self.p50,
            "p90": self.p90,
            "p95": self.p95,
            "p99": self.p99,
            "count": self.count,
        }

    @classmethod
    def from_json(cls, data: dict[str, float | int]) -> Distribution:
        return cls(
            mean=float(data["mean"]),
            p50=float(data["p50"]),
            p90=float(data["p90"]),
            p95=float(data["p95"]),
            p99=float(data["p99"]),
            count=int(data.get("count", 0)),
        )

    def at(self, name: str) -> float:
        value: float = getattr(self, name)
        return value


def percentile_sorted(ordered: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of an already sorted sample, interpolating linearly between ranks.

    The same definition as numpy's default ("linear"): position (n - 1) * q.
    """
    n = len(ordered)
    if n == 0:
        return math.nan
    position = (n - 1) * q
    lower = math.floor(position)
    upper = min(lower + 1, n - 1)
    fraction = position - lower
    return ordered[lower] + (ordered[upper] - ordered[lower]) * fraction


def percentile(values: Sequence[float], q: float) -> float:
    return percentile_sorted(sorted(values), q)


def distribution(values: Sequence[float]) -> Distribution | None:
    """Mean and P50/P90/P95/P99 of a sample; None when the sample is empty."""
    if not values:
        return None
    ordered = sorted(values)
    return Distribution(
        mean=math.fsum(ordered) / len(ordered),
        p50=percentile_sorted(ordered, 0.50),
        p90=percentile_sorted(ordered, 0.90),
        p95=percentile_sorted(ordered, 0.95),
        p99=percentile_sorted(ordered, 0.99),
        count=len(ordered),
    )


def histogram(values: Sequence[float], bins: int = 20) -> dict[str, list[float] | list[int]]:
    """Equal-width histogram: ``edges`` (bins + 1) and ``counts`` (bins)."""
    if not values:
        return {"edges": [], "counts": []}
    low, high = min(values), max(values)
    if high <= low:
        high = low + max(abs(low) * 0.01, 1e-6)
    width = (high - low) / bins
    counts = [0] * bins
    for value in values:
        index = min(int((value - low) / width), bins - 1)
        counts[index] += 1
    return {"edges": [low + i * width for i in range(bins + 1)], "counts": counts}


@dataclass(slots=True)
class Interval:
    """A point estimate with a confidence interval."""

    estimate: float
    low: float
    high: float

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def bootstrap_difference(
    baseline: Sequence[Sequence[float]],
    candidate: Sequence[Sequence[float]],
    statistics: Sequence[Callable[[list[float]], float]],
    *,
    resamples: int = 400,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[list[Interval]]:
    """Bootstrap CIs of ``statistic(candidate) - statistic(baseline)`` for several series.

    ``baseline[k]`` and ``candidate[k]`` are the k-th series (e.g. one stage) measured on the
    same traces: traces are resampled as a whole, so all series share each resample's indices.
    ``statistics`` take a sorted sample. Returns ``[series][statistic] -> Interval``.
    """
    rng = random.Random(seed)
    series_count = len(baseline)
    n_base = len(baseline[0]) if series_count else 0
    n_cand = len(candidate[0]) if series_count else 0
    diffs: list[list[list[float]]] = [[[] for _ in statistics] for _ in range(series_count)]
    estimates: list[list[float]] = []
    for k in range(series_count):
        base_sorted = sorted(baseline[k])
        cand_sorted = sorted(candidate[k])
        estimates.append([stat(cand_sorted) - stat(base_sorted) for stat in statistics])
    if n_base == 0 or n_cand == 0:
        return [
            [Interval(math.nan, math.nan, math.nan) for _ in statistics]
            for _ in range(series_count)
        ]
    base_range = range(n_base)
    cand_range = range(n_cand)
    for _ in range(resamples):
        base_index = rng.choices(base_range, k=n_base)
        cand_index = rng.choices(cand_range, k=n_cand)
        for k in range(series_count):
            base_values = baseline[k]
            cand_values = candidate[k]
            base_sample = sorted([base_values[i] for i in base_index])
            cand_sample = sorted([cand_values[i] for i in cand_index])
            for s, stat in enumerate(statistics):
                diffs[k][s].append(stat(cand_sample) - stat(base_sample))
    tail = (1 - confidence) / 2
    result: list[list[Interval]] = []
    for k in range(series_count):
        row = []
        for s in range(len(statistics)):
            ordered = sorted(diffs[k][s])
            row.append(
                Interval(
                    estimates[k][s],
                    percentile_sorted(ordered, tail),
                    percentile_sorted(ordered, 1 - tail),
                )
            )
        result.append(row)
    return result
