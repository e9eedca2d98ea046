"""Bucketed latencies: a histogram summed over series, its quantiles as Prometheus computes them,
and what a comparison of two histograms needs (a bucket layout both share, the requests as their
buckets).

A histogram read from Prometheus says how many requests fell in each bucket, not when each one
ended: a percentile is known to within the bucket it falls in, and a test of two histograms can
only look at which bucket each request fell in. Both kinds Prometheus stores are read into one
shape, cumulative counts by upper bound: classic (explicit) buckets as they are, and native
histograms (what an OpenTelemetry exponential histogram becomes) with their empty stretches
made into empty buckets.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

EXPLICIT = "explicit"
EXPONENTIAL = "exponential"
_SAME = 1e-9  # relative: two bounds printed from the same float by different queries


@dataclass(slots=True)
class Buckets:
    """A histogram summed over series: cumulative counts by upper bound, ascending.

    Classic buckets end with ``+Inf``; a native histogram has no ``+Inf`` bucket but starts at
    a bound of 0 (its zero bucket), so the zeros a stage adds (requests without it) are zeros.
    """

    bounds: list[float]
    cumulative: list[float]
    total_sum: float = 0.0
    layout: str = EXPLICIT

    @property
    def count(self) -> float:
        return self.cumulative[-1] if self.cumulative else 0.0

    def with_zeros(self, zeros: float) -> Buckets:
        """The histogram with ``zeros`` more observations of 0 (they fall in every bucket)."""
        return Buckets(
            self.bounds, [c + zeros for c in self.cumulative], self.total_sum, self.layout
        )

    def lower(self, index: int) -> float:
        """The lower bound of bucket ``index`` (0 for the first)."""
        return 0.0 if index == 0 else self.bounds[index - 1]

    def to_json(self) -> dict[str, Any]:
        return {
            "layout": self.layout,
            "bounds": ["+Inf" if math.isinf(b) else b for b in self.bounds],
            "cumulative": list(self.cumulative),
            "sum": self.total_sum,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Buckets:
        return cls(
            [math.inf if b == "+Inf" else float(b) for b in data["bounds"]],
            [float(c) for c in data["cumulative"]],
            float(data.get("sum", 0.0)),
            str(data.get("layout", EXPLICIT)),
        )


def from_native(buckets: Sequence[Sequence[Any]], total_sum: float) -> Buckets:
    """A native histogram as Prometheus's query API returns it (``[boundary rule, lower, upper,
    count]`` per populated bucket, ascending) in the cumulative shape: a bucket at 0 for the zero
    bucket, and a gap between two populated buckets as an empty bucket of its own."""
    bounds: list[float] = [0.0]
    cumulative: list[float] = [0.0]
    for _rule, low_text, high_text, count_text in buckets:
        low, high, count = float(low_text), float(high_text), float(count_text)
        if high <= 0:  # the zero bucket (durations are never negative)
            cumulative[0] += count
            continue
        if low > 0 and not _same(low, bounds[-1]):
            bounds.append(low)
            cumulative.append(cumulative[-1])
        bounds.append(high)
        cumulative.append(cumulative[-1] + count)
    return Buckets(bounds, cumulative, total_sum, EXPONENTIAL)


def _same(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= _SAME * max(abs(a), abs(b))


def monotonic(counts: Sequence[float]) -> list[float]:
    """Counts that never decrease with the bound: Prometheus evens out series read at slightly
    different moments, and so does the report."""
    out: list[float] = []
    highest = 0.0
    for count in counts:
        highest = max(highest, count)
        out.append(highest)
    return out


def quantile(q: float, buckets: Buckets) -> tuple[float, tuple[float, float]]:
    """Prometheus's ``histogram_quantile`` over ``buckets``, and the bucket the rank fell in.

    As Prometheus does it for classic buckets: the rank ``q * count`` falls in the first bucket
    whose cumulative count reaches it; the value is interpolated linearly between that bucket's
    lower bound (0 for the first bucket) and its upper bound; in the ``+Inf`` bucket it is the
    highest finite bound. Native histograms are read the same way, bucket by bucket.
    """
    bounds, counts = buckets.bounds, monotonic(buckets.cumulative)
    if not counts or counts[-1] <= 0:
        return math.nan, (math.nan, math.nan)
    rank = q * counts[-1]
    index = next(i for i, count in enumerate(counts) if count >= rank)
    if math.isinf(bounds[index]):
        finite = bounds[index - 1] if index > 0 else math.nan
        return finite, (finite, math.inf)
    start = buckets.lower(index)
    end = bounds[index]
    if index == 0 and end <= 0:
        return end, (end, end)
    before = 0.0 if index == 0 else counts[index - 1]
    in_bucket = counts[index] - before
    if in_bucket <= 0:
        return end, (start, end)
    return start + (end - start) * (rank - before) / in_bucket, (start, end)


def _cumulative_at(buckets: Buckets, bound: float) -> float | None:
    """How many observations lie at or below ``bound``; None when ``bound`` cuts through a bucket
    that holds some (the histogram cannot say)."""
    counts = monotonic(buckets.cumulative)
    index = bisect_left(buckets.bounds, bound)
    if index < len(buckets.bounds) and _same(buckets.bounds[index], bound):
        return counts[index]
    if index > 0 and _same(buckets.bounds[index - 1], bound):
        return counts[index - 1]
    if index == len(buckets.bounds):  # above every bound: a native histogram's whole count
        return counts[-1] if counts else 0.0
    before = counts[index - 1] if index > 0 else 0.0
    return before if counts[index] == before else None


def shared_layout(a: Buckets, b: Buckets) -> tuple[Buckets, Buckets]:
    """Both histograms on the bounds both can be cut at: every bound of either that cuts
    through no populated bucket of the other. Two histograms of the same explicit buckets keep
    them; two native histograms of different scales meet at the coarser one's bounds. A test
    of the two then compares the same buckets on both sides."""
    bounds: list[float] = []
    for bound in sorted({*a.bounds, *b.bounds}):
        if bounds and _same(bounds[-1], bound):
            continue
        if _cumulative_at(a, bound) is not None and _cumulative_at(b, bound) is not None:
            bounds.append(bound)

    def recut(buckets: Buckets) -> Buckets:
        cumulative = [_cumulative_at(buckets, bound) or 0.0 for bound in bounds]
        return Buckets(bounds, cumulative, buckets.total_sum, buckets.layout)

    return recut(a), recut(b)


def representative(buckets: Buckets, index: int) -> float:
    """The value a request in bucket ``index`` stands for in a test: the bucket's middle (0 for a
    bucket at 0, the highest finite bound for ``+Inf``). Any value that keeps the buckets'
    order gives a valid test; the middle also keeps means and quantiles in seconds."""
    high = buckets.bounds[index]
    low = buckets.lower(index)
    if math.isinf(high):
        return low
    return (low + high) / 2 if high > 0 else 0.0


def bucketed_requests(buckets: Buckets, limit: int) -> list[float]:
    """Each request as its bucket's representative value, ascending; above ``limit`` requests, a
    fixed random sample of ``limit`` of them (drawn without replacement, as the file comparison
    samples its traces)."""
    counts = monotonic([round(c) for c in buckets.cumulative])
    total = int(counts[-1]) if counts else 0
    if total <= limit:
        chosen: Sequence[int] = range(total)
    else:
        chosen = sorted(random.Random(0).sample(range(total), limit))
    return [representative(buckets, bisect_left(counts, position + 1)) for position in chosen]


def mean_width(buckets: Buckets) -> float:
    """The average width of the buckets the requests fell in (``inf`` when some are in
    ``+Inf``): how far a request's bucket can be from its own time, on average."""
    counts = monotonic(buckets.cumulative)
    if not counts or counts[-1] <= 0:
        return 0.0
    total = 0.0
    for index, count in enumerate(counts):
        inside = count - (counts[index - 1] if index else 0.0)
        if inside > 0:
            total += inside * (buckets.bounds[index] - buckets.lower(index))
    return total / counts[-1]


def relative_width(buckets: Buckets) -> float:
    """How wide the buckets holding the requests were, as a share of their upper bound: the
    median over the requests in buckets above 0 (nan when there are none)."""
    counts = monotonic(buckets.cumulative)
    widths: list[tuple[float, float]] = []
    for index, count in enumerate(counts):
        inside = count - (counts[index - 1] if index else 0.0)
        high = buckets.bounds[index]
        if inside > 0 and 0 < high < math.inf:
            widths.append(((high - buckets.lower(index)) / high, inside))
    if not widths:
        return math.nan
    widths.sort()
    half = sum(weight for _, weight in widths) / 2
    seen = 0.0
    for width, weight in widths:
        seen += weight
        if seen >= half:
            return width
    return widths[-1][0]


def _order_statistics(n: int, q: float, alpha: float) -> tuple[int, int]:
    """The ranks (1-based) ``l`` and ``u`` for which ``[X_(l), X_(u)]`` holds the q-quantile with
    probability at least ``1 - alpha``, whatever the distribution: ``l`` the highest rank with
    ``P(B < l) <= alpha / 2`` and ``u`` the lowest with ``P(B >= u) <= alpha / 2``, ``B`` the
    number of the n requests below the quantile (binomial). 0 and n + 1 stand for no bound.
    Exact up to 5,000 requests, the normal approximation above."""
    if n > 5000:
        z = NormalDist().inv_cdf(1 - alpha / 2)
        spread = z * math.sqrt(n * q * (1 - q))
        return max(math.floor(n * q - spread), 0), min(math.ceil(n * q + spread) + 1, n + 1)
    log_q, log_p = math.log(q), math.log1p(-q)
    below = 0.0  # P(B <= k - 1) as k rises
    low, high = 0, n + 1
    for k in range(n + 1):
        if below <= alpha / 2:
            low = k
        if below >= 1 - alpha / 2:
            high = k
            break
        below += math.exp(
            math.lgamma(n + 1)
            - math.lgamma(k + 1)
            - math.lgamma(n - k + 1)
            + k * log_q
            + (n - k) * log_p
        )
    return low, high


def quantile_interval(buckets: Buckets, q: float, alpha: float) -> tuple[float, float]:
    """Where the q-quantile of the distribution the requests came from lies, with probability at
    least ``1 - alpha``: the distribution-free interval of order statistics (binomial), read as
    the lower bound of the lower rank's bucket and the upper bound of the upper rank's. Valid
    whatever the buckets (a bucket only widens the interval); ``-inf``/``inf`` where the
    requests are too few to bound it."""
    counts = monotonic([round(c) for c in buckets.cumulative])
    n = int(counts[-1]) if counts else 0
    if n == 0:
        return -math.inf, math.inf
    low_rank, high_rank = _order_statistics(n, q, alpha)
    low = buckets.lower(bisect_left(counts, low_rank)) if low_rank >= 1 else -math.inf
    high = buckets.bounds[bisect_left(counts, high_rank)] if high_rank <= n else math.inf
    return low, high
