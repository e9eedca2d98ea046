"""The report of one bench run, built from traces by the analysis API, with the run's metadata."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from llmtrace.analysis.compare import Comparison, compare
from llmtrace.analysis.report import build_report, user_perceived_ttft
from llmtrace.analysis.report_model import Report
from llmtrace.analysis.sources import load_traces
from llmtrace.bench.runner import BenchResult
from llmtrace.bench.runs import RUN_KEY, load_run, resolve_run, run_metadata

# Exporters stamp spans with the wall clock; allow for a step between our clock read and theirs.
_CLOCK_MARGIN = timedelta(seconds=1)


def build_run_report(
    source: str | Path,
    result: BenchResult,
    *,
    service: str | None = None,
    jaeger_url: str | None = None,
) -> Report:
    """The report of ``result``'s run (warmups excluded); the traces it names link to
    ``jaeger_url`` when they were not read from a Jaeger."""
    traceset = load_traces(str(source), service=service, since=result.started_at - _CLOCK_MARGIN)
    traceset.jaeger_url = traceset.jaeger_url or jaeger_url
    report = build_report(traceset, run=result.plan.name)
    # The run knows which question each of its requests asked: compare pairs two runs' questions.
    asked = {o.trace_id: o.question_id for o in result.measured}
    traced = report.samples.get("trace_ids") or []
    questions = [asked.get(trace_id) for trace_id in traced]
    if questions and all(question is not None for question in questions):
        report.samples["questions"] = questions
    # The client's first sight of each answer is known to the run, which measured it.
    answered = [o for o in result.measured if o.status == "ok"]
    report.user_ttft = user_perceived_ttft(
        [o.time_to_first_byte for o in answered if o.time_to_first_byte is not None],
        [o.time_to_first_event for o in answered if o.time_to_first_event is not None],
        report.ttft,
    )
    return report


def report_document(
    report: Report, result: BenchResult, *, model: str | None = None
) -> dict[str, Any]:
    """The JSON saved for the run: the report plus the run's metadata under ``"run"``."""
    document = report.to_json()
    existing = document.get(RUN_KEY)
    metadata = run_metadata(result, model=model)
    if model is None:
        # Keep the model the report found on the model-call spans.
        metadata.pop("model")
    document[RUN_KEY] = {**(existing if isinstance(existing, dict) else {}), **metadata}
    return document


def load_saved_report(name_or_path: str, runs_dir: Path) -> Report:
    return Report.from_json(load_run(resolve_run(name_or_path, runs_dir)))


def compare_with_baseline(baseline: Report, candidate_document: dict[str, Any]) -> Comparison:
    return compare(baseline, Report.from_json(candidate_document))
