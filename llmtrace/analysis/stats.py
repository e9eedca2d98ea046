"""Summary statistics: percentiles by linear interpolation, two-sample permutation tests, and
paired sign-flip tests (the same questions asked in both runs).

Plain Python (no numpy): the report must run wherever the SDK is installed. The permutation tests
stay cheap for thousands of traces because every pass over a sample is done by C code
(``itertools.compress``, ``operator.itemgetter``, ``bytes.translate``), never by a Python loop
over the traces.
"""

from __future__ import annotations

import hashlib
import math
import random
import struct
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import itemgetter

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
    return _interpolated(ordered.__getitem__, len(ordered), q)


def _interpolated(kth: Callable[[int], float], n: int, q: float) -> float:
    """The q-quantile of n values given the k-th smallest (0-based) by ``kth``."""
    if n == 0:
        return math.nan
    lower, upper, fraction = _ranks_of(n, q)
    low_value = kth(lower)
    return low_value + (kth(upper) - low_value) * fraction


def _ranks_of(n: int, q: float) -> tuple[int, int, float]:
    """The 0-based ranks of n values between which the q-quantile lies, and its weight."""
    position = (n - 1) * q
    lower = math.floor(position)
    return lower, min(lower + 1, n - 1), position - lower


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


@dataclass(frozen=True, slots=True)
class Statistic:
    """What a test compares between two runs: the mean (``quantile`` None) or a quantile."""

    name: str
    quantile: float | None = None


MEAN = Statistic("mean")


def requests_needed(statistic: Statistic, alpha: float = 0.05) -> int:
    """The fewest requests per run for which a verdict on ``statistic`` can mean anything.

    Two rules, the larger wins. A two-sided permutation test of n against n requests can reach
    ``p <= alpha`` only when ``2 / C(2n, n) <= alpha`` (4 requests at 5%). A quantile q is
    estimable only when its distribution-free ``1 - alpha`` confidence interval (binomial order
    statistics) lies inside the observed values, i.e. ``max(q, 1 - q) ** n <= alpha / 2``: the
    P50 needs 6 requests, the P90 36, the P95 72. Below that, the "P95" of a run is its largest
    request or two, and no test can say more about the tail than that.
    """
    needed = 1
    while 2 / math.comb(2 * needed, needed) > alpha:
        needed += 1
    if statistic.quantile is not None:
        q = max(statistic.quantile, 1 - statistic.quantile)
        estimable = 1
        while q**estimable > alpha / 2:
            estimable += 1
        needed = max(needed, estimable)
    return needed


@dataclass(slots=True)
class PermutationTest:
    """``statistic(candidate) - statistic(baseline)`` against every relabelling of the two runs.

    ``p_value`` is the share of random relabellings (the observed labelling counted once) whose
    difference is at least as large in absolute value: a two-sided test whose false-positive rate
    is at most alpha when both runs come from one distribution, at any sample size. ``margin`` is
    the absolute difference that relabellings exceed with probability alpha, so ``estimate ±
    margin`` is the test inverted under a shift model: it excludes zero exactly when
    ``p_value <= alpha``.
    """

    estimate: float
    p_value: float
    margin: float

    def significant(self) -> bool:
        return abs(self.estimate) > self.margin

    def interval(self) -> Interval:
        return Interval(self.estimate, self.estimate - self.margin, self.estimate + self.margin)


_UNTESTED = PermutationTest(math.nan, math.nan, math.nan)
ROUNDING_NOISE = 1e-12  # seconds: far below any clock's resolution


def midranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n of ``values`` in their order; tied values share the mean of their ranks."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        rank = (start + end) / 2 + 1
        for position in range(start, end + 1):
            ranks[order[position]] = rank
        start = end + 1
    return ranks


def seed_of(samples: Sequence[Sequence[float]]) -> int:
    """A seed derived from the samples themselves: the same runs always give the same verdicts."""
    digest = hashlib.sha256()
    for sample in samples:
        digest.update(struct.pack(f"<I{len(sample)}d", len(sample), *sample))
    return int.from_bytes(digest.digest()[:8], "big")


# 0 <-> 1: the other run's labels, in one C call
_FLIP = bytes.maketrans(b"\x00\x01", b"\x01\x00")
# a binary numeral's digits as 0/1 bytes
_BITS = bytes.maketrans(b"01", b"\x00\x01")


class _PooledSample:
    """One series of both runs pooled, with what each relabelling's statistics need."""

    __slots__ = ("base_count", "cand_count", "in_order", "ordered", "ranks", "total", "values")

    def __init__(
        self, base: Sequence[float], cand: Sequence[float], statistics: Sequence[Statistic]
    ) -> None:
        self.values = [*base, *cand]
        self.base_count, self.cand_count = len(base), len(cand)
        self.total = sum(self.values)
        order = sorted(range(len(self.values)), key=self.values.__getitem__)
        self.ordered = [self.values[i] for i in order]
        # labels in the pooled sample's sorted order, in one C call
        self.in_order: Callable[[bytes], tuple[int, ...]] = (
            itemgetter(*order) if len(order) > 1 else lambda labels: (labels[0],)
        )
        # each quantile's ranks in either run: the run sizes are the same in every relabelling
        self.ranks = [
            None
            if statistic.quantile is None
            else (
                _ranks_of(self.base_count, statistic.quantile),
                _ranks_of(self.cand_count, statistic.quantile),
            )
            for statistic in statistics
        ]

    def differences(self, labels: bytes) -> list[float]:
        """Candidate minus baseline of each statistic; ``labels[i]`` is 1 for baseline traces."""
        result = []
        runs: tuple[list[float], list[float]] | None = None
        for ranks in self.ranks:
            if ranks is None:
                base_sum = sum(compress(self.values, labels))
                cand_mean = (self.total - base_sum) / self.cand_count
                result.append(cand_mean - base_sum / self.base_count)
                continue
            if runs is None:
                runs = self._sorted_runs(labels)
            base, cand = runs
            (b_low, b_high, b_weight), (c_low, c_high, c_weight) = ranks
            # the arithmetic of _interpolated, term for term: the same values to the last bit
            base_low, cand_low = base[b_low], cand[c_low]
            result.append(
                cand_low
                + (cand[c_high] - cand_low) * c_weight
                - (base_low + (base[b_high] - base_low) * b_weight)
            )
        return result

    def _sorted_runs(self, labels: bytes) -> tuple[list[float], list[float]]:
        """Each run's values in ascending order under ``labels``: the pooled sample is sorted
        once, so picking a run's values out of it in order keeps them sorted (no sort per
        relabelling, and no Python loop: both picks run in C)."""
        base = list(compress(self.ordered, self.in_order(labels)))
        cand = list(compress(self.ordered, self.in_order(labels.translate(_FLIP))))
        return base, cand


def _snapped(value: float) -> float:
    # Differences of a constant series are rounding noise (1e-17 s), not a "-0 µs" interval.
    return 0.0 if abs(value) < ROUNDING_NOISE else value


def _random_labels(rng: random.Random, total: int, ones: int) -> bytes:
    """A uniformly random choice of ``ones`` of ``total`` positions, as 0/1 bytes."""
    labels = bytearray(total)
    # consumed by deque in C: no Python-level loop over the chosen positions
    deque(map(labels.__setitem__, rng.sample(range(total), ones), repeat(1, ones)), maxlen=0)
    return bytes(labels)


def permutation_tests(
    baseline: Sequence[Sequence[float]],
    candidate: Sequence[Sequence[float]],
    statistics: Sequence[Sequence[Statistic]],
    *,
    permutations: int = 499,
    alpha: float = 0.05,
    seed: int | None = None,
) -> list[list[PermutationTest]]:
    """Two-sided permutation tests of ``statistic(candidate) - statistic(baseline)``.

    ``baseline[k]`` and ``candidate[k]`` are the k-th series (e.g. one stage) measured on the
    same traces, tested for ``statistics[k]``: each relabelling moves whole traces between the
    runs, so all series share it. Returns ``[series][statistic] -> PermutationTest``. With
    ``permutations + 1`` a multiple of ``1 / alpha`` the test's level is exactly alpha.
    """
    n_base = len(baseline[0]) if baseline else 0
    n_cand = len(candidate[0]) if candidate else 0
    if n_base == 0 or n_cand == 0:
        return [[_UNTESTED for _ in wanted] for wanted in statistics]
    pooled = [
        _PooledSample(base, cand, wanted)
        for base, cand, wanted in zip(baseline, candidate, statistics, strict=True)
    ]
    observed_labels = b"\x01" * n_base + b"\x00" * n_cand
    observed = [sample.differences(observed_labels) for sample in pooled]
    nulls: list[list[list[float]]] = [[[] for _ in wanted] for wanted in statistics]
    rng = random.Random(seed_of([*baseline, *candidate]) if seed is None else seed)
    for _ in range(permutations):
        labels = _random_labels(rng, n_base + n_cand, n_base)
        for sample, null in zip(pooled, nulls, strict=True):
            for s, difference in enumerate(sample.differences(labels)):
                null[s].append(abs(difference))
    # p <= alpha when fewer than `allowed` relabellings reach the observed difference
    allowed = math.floor(alpha * (permutations + 1) + 1e-9)
    result = []
    for estimates, null in zip(observed, nulls, strict=True):
        row = []
        for estimate, spread in zip(estimates, null, strict=True):
            spread.sort(reverse=True)
            estimate = _snapped(estimate)
            reached = sum(1 for value in spread if value >= abs(estimate))
            margin = _snapped(spread[allowed - 1]) if allowed >= 1 else math.inf
            row.append(PermutationTest(estimate, (1 + reached) / (permutations + 1), margin))
        result.append(row)
    return result


def signed_ranks(differences: Sequence[float]) -> list[float]:
    """Wilcoxon's signed ranks: the midrank of each ``|d|`` among the non-zero ones, with the
    sign of ``d``; a zero difference (rounding noise) ranks 0 and never changes the sum."""
    nonzero = [i for i, d in enumerate(differences) if abs(d) >= ROUNDING_NOISE]
    ranks = midranks([abs(differences[i]) for i in nonzero])
    signed = [0.0] * len(differences)
    for i, rank in zip(nonzero, ranks, strict=True):
        signed[i] = math.copysign(rank, differences[i])
    return signed


def sign_flip_tests(
    differences: Sequence[Sequence[float]],
    *,
    permutations: int = 499,
    alpha: float = 0.05,
    seed: int | None = None,
) -> list[PermutationTest]:
    """Two-sided paired tests, one per series: ``differences[k][i]`` is candidate minus baseline
    of series ``k`` for the i-th pair (one question asked in both runs).

    The statistic is the sum of the pairs' signed ranks (Wilcoxon's signed-rank test). Under "no
    change" each pair's difference is as likely negative as positive, so flipping the signs of
    random pairs gives the statistic's distribution; each relabelling flips the same pairs in
    every series (like :func:`permutation_tests`, whose p-value and margin these follow). Pairing
    removes what the questions themselves contribute (a long answer is slow before and after), so
    a change that moves every question by a little is found in far fewer requests than by
    comparing the two runs as unordered samples.
    """
    count = len(differences[0]) if differences else 0
    if count == 0:
        return [_UNTESTED for _ in differences]
    ranked = [signed_ranks(series) for series in differences]
    observed = [math.fsum(series) for series in ranked]
    magnitudes = [[abs(rank) for rank in series] for series in ranked]
    totals = [math.fsum(series) for series in magnitudes]
    nulls: list[list[float]] = [[] for _ in differences]
    rng = random.Random(seed_of(differences) if seed is None else seed)
    for _ in range(permutations):
        flips = rng.getrandbits(count)
        # pairs whose bit is set count negative: sum of all minus twice the flipped ones; bit i
        # as byte i of a 0/1 mask, made in C (fsum is exact, so the order it adds in is moot)
        flipped = format(flips, f"0{count}b")[::-1].encode().translate(_BITS)
        for series, total, null in zip(magnitudes, totals, nulls, strict=True):
            null.append(abs(total - 2 * math.fsum(compress(series, flipped))))
    allowed = math.floor(alpha * (permutations + 1) + 1e-9)
    result = []
    for estimate, spread in zip(observed, nulls, strict=True):
        spread.sort(reverse=True)
        reached = sum(1 for value in spread if value >= abs(estimate) - ROUNDING_NOISE)
        margin = spread[allowed - 1] if allowed >= 1 else math.inf
        result.append(PermutationTest(estimate, (1 + reached) / (permutations + 1), margin))
    return result


def sign_flips_needed(alpha: float = 0.05) -> int:
    """The fewest pairs for which a two-sided sign-flip test can reach ``p <= alpha``: with n
    pairs the most extreme outcome has probability ``2 / 2**n`` (6 pairs at 5%)."""
    needed = 1
    while 2 / 2**needed > alpha:
        needed += 1
    return needed
