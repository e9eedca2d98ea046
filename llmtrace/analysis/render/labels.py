"""Words for what a comparison compares and what its verdicts mean, shared by the renderers."""

from __future__ import annotations

import math
from typing import Any

from llmtrace._urls import is_web_url
from llmtrace.analysis.compare import (
    COMPARED,
    END_TO_END,
    NOT_ENOUGH_DATA,
    BucketedFigures,
    Comparison,
    RunSide,
    SettingChange,
)
from llmtrace.analysis.report_model import TraceExemplar
from llmtrace.analysis.units import format_seconds, format_share

_SETTING_LABELS = {"question_set": "question set"}
HASH_DIGITS = 12


def row_name(name: str) -> str:
    return "end-to-end" if name == END_TO_END else name


def _value(key: str, value: Any) -> str:
    if key == "question_set" and isinstance(value, str):
        return value[:HASH_DIGITS]
    return str(value)


def settings_text(side: RunSide) -> str:
    """``10 traces, question set 9f86d081884c, concurrency 1, model m``."""
    parts = [f"{side.traces} {'trace' if side.traces == 1 else 'traces'}"]
    parts += [
        f"{_SETTING_LABELS.get(key, key)} {_value(key, value)}"
        for key, value in side.settings.items()
    ]
    return ", ".join(parts)


def changes_text(changes: list[SettingChange]) -> str:
    """``max_tokens 256 → 64, top_k 8 → 3``: the settings the two runs recorded differently."""
    return ", ".join(
        f"{_SETTING_LABELS.get(c.setting, c.setting)} {_value(c.setting, c.baseline)} → "
        f"{_value(c.setting, c.candidate)}"
        for c in changes
    )


def not_enough_note(comparison: Comparison) -> str | None:
    """Which verdicts these runs are too small for, and how many requests each needs."""
    short = {
        delta.statistic: delta.needs
        for item in comparison.series
        for delta in item.deltas
        if delta.verdict == NOT_ENOUGH_DATA
    }
    rows = [item.needs for item in comparison.series if item.verdict == NOT_ENOUGH_DATA]
    if not short and not rows:
        return None
    needs = [f"the row's verdict ≥ {rows[0]}"] if rows else []
    needs += [
        f"{statistic.name.upper() if statistic.quantile else statistic.name} ≥ "
        f"{short[statistic.name]}"
        for statistic in COMPARED
        if statistic.name in short
    ]
    return (
        f"not enough data: {', '.join(needs)} requests per run "
        f"(these runs: {comparison.baseline.traces} and {comparison.candidate.traces})"
    )


METHOD_NOTE = (
    "Verdicts: a two-sided permutation test at 5% (the row's on ranks), and a change of at "
    "least 1 ms and 5% of the baseline; the interval is the test's 95% interval."
)


def method_note(comparison: Comparison) -> str:
    """How the verdicts were reached: the rows' test depends on whether the runs were paired,
    or were histograms."""
    if comparison.bucketed is not None:
        return bucketed_note(comparison.bucketed)
    if comparison.paired_questions is None:
        return METHOD_NOTE
    return (
        "Verdicts: a two-sided permutation test at 5%; each row's compares the "
        f"{comparison.paired_questions} questions asked in both runs, each with itself (signed "
        "ranks); a change must be at least 1 ms and 5% of the baseline; the interval is the "
        "test's 95% interval."
    )


def link_target(url: str | None) -> str | None:
    """``url`` when it may be shown as a link: an http(s) URL with no whitespace or control
    character (a saved report is read as it is, and a ``javascript:`` href or an escape sequence
    in a terminal link would act on the reader's side)."""
    if url is None or not is_web_url(url):
        return None
    if any(character.isspace() or not character.isprintable() for character in url):
        return None
    return url


def stage_times_text(trace: TraceExemplar) -> str:
    """``generation 75 ms, ttft 41 ms, retrieval 20 ms``: a request's stages, largest first."""
    text = ", ".join(
        f"{stage} {format_seconds(seconds)}" for stage, seconds in trace.stages.items()
    )
    return text + " (orphan)" if trace.orphan else text


def bottleneck_traces_heading(stage: str) -> str:
    return f"Requests where {stage} took longest"


def slowest_traces_heading(p95: float | None) -> str:
    if p95 is None:
        return "Slowest requests"
    return f"Slowest requests (at or above P95, {format_seconds(p95)})"


def changed_row_heading(name: str, verdict: str) -> str:
    """``generation slower: where it took longest in each run``."""
    return f"{row_name(name)} {verdict}: where it took longest in each run"


def bucketed_note(bucketed: BucketedFigures) -> str:
    """What a comparison of histograms can say: its figures came from buckets this wide."""
    sides = [
        f"{layout} buckets about {format_share(width)} wide" if math.isfinite(width) else layout
        for layout, width in zip(bucketed.layouts, bucketed.relative_widths, strict=True)
    ]
    widths = sides[0] if sides[0] == sides[1] else f"{sides[0]} before, {sides[1]} after"
    return (
        f"Figures from histograms ({widths} where the requests fell): "
        "a percentile is known only to within its bucket. Verdicts: a two-sided permutation "
        "test at 5% over the requests' buckets (the row's on ranks with ties), and a change of "
        "at least 1 ms and 5% of the baseline; the interval holds the buckets' width."
    )
