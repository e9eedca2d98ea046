"""Reports made straight from per-request times, for testing comparisons without traces: with the
requests' own times (as from a trace file), or only their histograms (as from Prometheus)."""

from __future__ import annotations

import math

from llmtrace.analysis.histograms import Buckets, from_native
from llmtrace.analysis.prometheus import Histograms, report_from_histograms
from llmtrace.analysis.report_model import Report, StageSummary
from llmtrace.analysis.stats import distribution
from llmtrace.sdk.request_metrics import EXPONENTIAL_MAX_SIZE, STAGE_BUCKETS


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


# The request metrics' default explicit buckets, and the OpenTelemetry SDK's exponential ones as
# llmtrace configures them (at most EXPONENTIAL_MAX_SIZE buckets, the finest scale that fits).
LAYOUTS = ("explicit", "exponential")


def _explicit(values: list[float]) -> Buckets:
    bounds = [*STAGE_BUCKETS, math.inf]
    cumulative = [float(sum(1 for v in values if v <= bound)) for bound in bounds]
    return Buckets(bounds, cumulative, math.fsum(values))


def _exponential(values: list[float]) -> Buckets:
    """As the SDK buckets them (bucket i of scale s is (2**(i / 2**s), 2**((i + 1) / 2**s)]),
    then as Prometheus's query API hands a native histogram over, read by ``from_native``."""
    scale = 20
    while True:
        indices = [math.ceil(math.log2(v) * 2**scale) - 1 for v in values]
        if max(indices) - min(indices) < EXPONENTIAL_MAX_SIZE or scale <= -10:
            break
        scale -= 1
    counts: dict[int, int] = {}
    for index in indices:
        counts[index] = counts.get(index, 0) + 1
    native = [
        [0, str(2 ** (i / 2**scale)), str(2 ** ((i + 1) / 2**scale)), str(counts[i])]
        for i in sorted(counts)
    ]
    return from_native(native, math.fsum(values))


def bucketed_run(
    end_to_end: list[float], stages: dict[str, list[float]] | None = None, layout: str = "explicit"
) -> Report:
    """The report Prometheus's histograms of these requests give (no per-request samples): each
    row's request metric in ``layout``; a stage records only the requests with time in it."""
    bucketed = _explicit if layout == "explicit" else _exponential
    histograms = Histograms(
        bucketed(end_to_end),
        {
            stage: bucketed([v for v in values if v > 0])
            for stage, values in (stages or {}).items()
            if any(v > 0 for v in values)
        },
        None,
    )
    return report_from_histograms(histograms, source=f"simulated {layout} histograms")
