"""A report made straight from per-request samples, for testing comparisons without traces."""

from __future__ import annotations

import math

from llmtrace.analysis.report_model import Report, StageSummary
from llmtrace.analysis.stats import distribution


def simulated_run(end_to_end: list[float], stages: dict[str, list[float]] | None = None) -> Report:
    """A report of ``end_to_end`` seconds per request and, per stage, its seconds per request."""
    stages = stages or {}
    mean = math.fsum(end_to_end) / len(end_to_end) if end_to_end else 0.0
    summaries = {}
    for stage, values in stages.items():
        summary = distribution(values)
        assert summary is not None
        summaries[stage] = StageSummary(summary, summary.mean / mean if mean else 0.0, len(values))
    return Report(
        source="simulated",
        service=None,
        traces=len(end_to_end),
        end_to_end=distribution(end_to_end),
        stages=summaries,
        ttft=None,
        bottleneck=None,
        tail=None,
        slowest=[],
        samples={"end_to_end": end_to_end, "stages": stages},
    )
