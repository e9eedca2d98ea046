"""Running counts and latency percentiles of a bench run while it goes (for the progress bar).

The final numbers come from the trace report; these are only what the user watches live.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from llmtrace.analysis.stats import percentile_sorted
from llmtrace.bench.runner import Outcome


@dataclass
class LiveStats:
    done: int = 0
    errors: int = 0
    timeouts: int = 0
    warmups_done: int = 0
    _latencies: list[float] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        if outcome.warmup:
            self.warmups_done += 1
            return
        self.done += 1
        if outcome.status == "error":
            self.errors += 1
        elif outcome.status == "timeout":
            self.timeouts += 1
        else:
            bisect.insort(self._latencies, outcome.latency)

    @property
    def p50(self) -> float:
        return percentile_sorted(self._latencies, 0.50)

    @property
    def p95(self) -> float:
        return percentile_sorted(self._latencies, 0.95)
