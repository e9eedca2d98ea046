"""The line a report prints about what wrote its spans: the instrumentations recognised and how
many spans no stage was found for (``llmtrace.analysis.conventions``)."""

from __future__ import annotations

from llmtrace.analysis.report_model import Report


def recognised_line(report: Report) -> str | None:
    """ "Spans from OpenInference (8 spans), OpenLIT (8 spans); 4 spans with no stage", or None
    when the report has neither (a report saved by an older llmtrace)."""
    parts = [f"{name} ({count} spans)" for name, count in report.instrumentations.items()]
    line = "Spans from " + ", ".join(parts) if parts else "No instrumentation recognised"
    if report.unassigned_spans:
        noun = "span" if report.unassigned_spans == 1 else "spans"
        line += f"; {report.unassigned_spans} {noun} with no stage (counted as their parent's)"
    if not parts and not report.unassigned_spans:
        return None
    return line
