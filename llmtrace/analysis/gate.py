"""The regression gate of ``llmtrace compare --fail-if-slower``: limits and the reasons they fail.

A limit names one row, one statistic and how much slower is allowed (``end_to_end:p95:10%``,
``ttft:p50:50ms``). It fails only on a verdict of "slower" (the comparison's test found the
change) whose change exceeds the allowance; "not enough data" fails only when data is required,
so a gate on 10 requests never fails on a P95 it cannot estimate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmtrace import semconv as sc
from llmtrace.analysis.compare import COMPARED, END_TO_END, NOT_ENOUGH_DATA, SLOWER, Comparison
from llmtrace.analysis.units import format_seconds, format_share, format_signed_seconds
from llmtrace.errors import CommandError

_STATISTICS = tuple(statistic.name for statistic in COMPARED)
_ALLOWANCE = re.compile(r"^(\d+(?:\.\d+)?)\s*(%|us|µs|ms|s)$")
_SECONDS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
FORMS = (
    f"ROW:STATISTIC:ALLOWANCE, ROW end_to_end or a stage ({', '.join(sc.STAGES)}), "
    f"STATISTIC {', '.join(_STATISTICS)}, ALLOWANCE a share (10%) or a time (50ms, 1.5s), "
    "e.g. end_to_end:p95:10%"
)


@dataclass(frozen=True, slots=True)
class SlowerLimit:
    """How much slower one row's statistic may get: a share of the baseline or seconds."""

    row: str
    statistic: str
    share: float | None = None
    seconds: float | None = None
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> SlowerLimit:
        parts = [part.strip() for part in text.split(":")]
        if len(parts) != 3:
            raise CommandError(f"invalid limit {text!r}: use {FORMS}")
        row, statistic, allowance = parts
        if row != END_TO_END and row not in sc.STAGES:
            raise CommandError(f"invalid limit {text!r}: unknown row {row!r}; use {FORMS}")
        if statistic.lower() not in _STATISTICS:
            raise CommandError(
                f"invalid limit {text!r}: unknown statistic {statistic!r}; use {FORMS}"
            )
        match = _ALLOWANCE.match(allowance)
        if match is None:
            raise CommandError(f"invalid limit {text!r}: bad allowance {allowance!r}; use {FORMS}")
        amount, unit = float(match.group(1)), match.group(2)
        if unit == "%":
            return cls(row, statistic.lower(), share=amount / 100, text=text)
        return cls(row, statistic.lower(), seconds=amount * _SECONDS[unit], text=text)

    def allowed(self, baseline: float) -> float:
        """The largest change (seconds) this limit lets pass, for this baseline value."""
        if self.share is not None:
            return self.share * abs(baseline)
        return self.seconds or 0.0


def failures(
    comparison: Comparison, limits: list[SlowerLimit], *, require_data: bool = False
) -> list[str]:
    """One line per limit that fails: a significant slowdown beyond its allowance, or (with
    ``require_data``) a statistic the runs are too small to judge or a row neither run has."""
    reasons = []
    for limit in limits:
        row = comparison.row(limit.row)
        label = f"{limit.row} {limit.statistic}"
        if row is None:
            if require_data:
                reasons.append(
                    f"{label}: neither run has the stage {limit.row} (limit {limit.text}, --require-data)"
                )
            continue
        delta = row.delta(limit.statistic)
        if delta.verdict == NOT_ENOUGH_DATA:
            if require_data:
                reasons.append(
                    f"{label}: {delta.verdict_text()}, the runs have "
                    f"{comparison.baseline.traces} and {comparison.candidate.traces} "
                    f"(limit {limit.text}, --require-data)"
                )
            continue
        allowed = limit.allowed(delta.baseline)
        if delta.verdict == SLOWER and delta.change > allowed:
            share = (
                f" (+{format_share(delta.change / delta.baseline)})" if delta.baseline > 0 else ""
            )
            reasons.append(
                f"{label} slower by {format_signed_seconds(delta.change)}{share}: "
                f"{format_seconds(delta.baseline)} → {format_seconds(delta.candidate)}, "
                f"95% interval [{format_signed_seconds(delta.interval.low)}, "
                f"{format_signed_seconds(delta.interval.high)}], beyond the limit {limit.text}"
            )
    return reasons
