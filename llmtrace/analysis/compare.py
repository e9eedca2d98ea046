"""Before/after: per-stage and end-to-end deltas with bootstrap confidence intervals.

A delta counts only when its 95% interval excludes zero *and* it is large enough to matter
(at least 1 ms and 5% of the baseline value): with thousands of traces a 0.1 ms shift can be
"significant" and still mean nothing to anyone. A tail percentile also needs enough traces
beyond it in both runs (at least 5: P90 needs 50 traces, P95 100): a bootstrap of a P95 read
from the top one or two values of 20 traces is far too confident.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmtrace import semconv as sc
from llmtrace.analysis.report_model import Report
from llmtrace.analysis.stats import Interval, bootstrap_difference, percentile_sorted

COMPARED = (("p50", 0.50), ("p90", 0.90), ("p95", 0.95))
MIN_EFFECT_SECONDS = 0.001
MIN_EFFECT_SHARE = 0.05
MIN_TRACES_BEYOND = 5
END_TO_END = "end_to_end"


@dataclass(slots=True)
class Delta:
    """Candidate minus baseline at one percentile, with its confidence interval (seconds)."""

    percentile: str
    baseline: float
    candidate: float
    interval: Interval
    enough_traces: bool = True

    @property
    def change(self) -> float:
        return self.candidate - self.baseline

    def significant(self) -> bool:
        if not self.enough_traces:
            return False
        threshold = max(MIN_EFFECT_SECONDS, MIN_EFFECT_SHARE * abs(self.baseline))
        return self.interval.excludes_zero() and abs(self.change) >= threshold


@dataclass(slots=True)
class SeriesComparison:
    name: str  # a stage, or "end_to_end"
    deltas: list[Delta]
    verdict: str  # faster | slower | no significant change | mixed


@dataclass(slots=True)
class Comparison:
    baseline: Report
    candidate: Report
    series: list[SeriesComparison]
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "llmtrace.comparison/1",
            "baseline": {
                "source": self.baseline.source,
                "traces": self.baseline.traces,
                "run": self.baseline.run,
            },
            "candidate": {
                "source": self.candidate.source,
                "traces": self.candidate.traces,
                "run": self.candidate.run,
            },
            "warnings": list(self.warnings),
            "series": {
                item.name: {
                    "verdict": item.verdict,
                    **{
                        delta.percentile: {
                            "baseline": delta.baseline,
                            "candidate": delta.candidate,
                            "delta": delta.change,
                            "ci_low": delta.interval.low,
                            "ci_high": delta.interval.high,
                            "significant": delta.significant(),
                            "enough_traces": delta.enough_traces,
                        }
                        for delta in item.deltas
                    },
                }
                for item in self.series
            },
        }


def _verdict(deltas: list[Delta]) -> str:
    signs = {1 if delta.change > 0 else -1 for delta in deltas if delta.significant()}
    if not signs:
        return "no significant change"
    if signs == {1}:
        return "slower"
    if signs == {-1}:
        return "faster"
    return "mixed"


def _series(report: Report, name: str) -> list[float]:
    samples = report.samples or {}
    if name == END_TO_END:
        return [float(v) for v in samples.get("end_to_end", [])]
    values = (samples.get("stages") or {}).get(name)
    if values is None:
        return [0.0] * len(samples.get("end_to_end", []))
    return [float(v) for v in values]


def run_warnings(baseline: Report, candidate: Report) -> list[str]:
    """Differences that make a comparison unfair: question set, concurrency, model."""
    warnings = []
    base_run = baseline.run or {}
    cand_run = candidate.run or {}
    for key, label in (
        ("question_set_hash", "question set"),
        ("concurrency", "concurrency"),
        ("model", "model"),
    ):
        before, after = base_run.get(key), cand_run.get(key)
        if before is not None and after is not None and before != after:
            warnings.append(f"the runs differ in {label}: {before} vs {after}")
    if "model" not in base_run or "model" not in cand_run:
        before_models, after_models = set(baseline.models), set(candidate.models)
        if before_models and after_models and before_models != after_models:
            warnings.append(
                "the runs used different models: "
                f"{', '.join(sorted(before_models))} vs {', '.join(sorted(after_models))}"
            )
    if not baseline.samples.get("end_to_end") or not candidate.samples.get("end_to_end"):
        warnings.append("a report has no per-trace samples: confidence intervals are unavailable")
    return warnings


def compare(baseline: Report, candidate: Report, *, resamples: int = 400) -> Comparison:
    """Deltas at P50/P90/P95 for end-to-end time and each stage, with 95% bootstrap CIs."""
    names = [END_TO_END] + [
        stage for stage in sc.STAGES if stage in baseline.stages or stage in candidate.stages
    ]
    base_series = [_series(baseline, name) for name in names]
    cand_series = [_series(candidate, name) for name in names]
    statistics = [(lambda values, q=q: percentile_sorted(values, q)) for _, q in COMPARED]
    intervals = bootstrap_difference(base_series, cand_series, statistics, resamples=resamples)
    smaller_run = min(len(base_series[0]), len(cand_series[0]))
    series = []
    for k, name in enumerate(names):
        deltas = []
        for s, (label, q) in enumerate(COMPARED):
            before = _reported(baseline, name, label)
            after = _reported(candidate, name, label)
            enough = smaller_run * (1 - q) >= MIN_TRACES_BEYOND
            deltas.append(Delta(label, before, after, intervals[k][s], enough))
        series.append(SeriesComparison(name, deltas, _verdict(deltas)))
    return Comparison(baseline, candidate, series, run_warnings(baseline, candidate))


def _reported(report: Report, name: str, label: str) -> float:
    """The percentile as the report states it (computed on all traces, not the sample)."""
    if name == END_TO_END:
        return report.end_to_end.at(label) if report.end_to_end else 0.0
    summary = report.stages.get(name)
    return summary.distribution.at(label) if summary else 0.0
