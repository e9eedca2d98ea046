"""The demo's closing words: the before/after verdict, and how many requests it rests on."""

from __future__ import annotations

from collections.abc import Iterable

from llmtrace.analysis.compare import END_TO_END, NOT_ENOUGH_DATA, Comparison
from llmtrace.analysis.units import format_seconds


def _label(statistic: str) -> str:
    return statistic if statistic == "mean" else statistic.upper()


def _listed(items: Iterable[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    words = list(items)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def verdict_lines(comparison: Comparison, warmup: int) -> list[str]:
    """The end-to-end verdict with the figures behind it, and which statistics the runs were
    large enough to judge (and which would need more requests per run)."""
    row = comparison.row(END_TO_END)
    if row is None:
        return ["No end-to-end time to compare."]
    p50, mean = row.delta("p50"), row.delta("mean")
    runs = (comparison.baseline.traces, comparison.candidate.traces)
    requests = f"{runs[0]}" if runs[0] == runs[1] else f"{runs[0]} and {runs[1]}"
    paired = comparison.paired_questions
    test = (
        f"signed-rank test over the {paired} questions asked in both runs"
        if paired is not None
        else "rank test"
    )
    lines = [
        f"Verdict: end-to-end {row.verdict_text()}: P50 {format_seconds(p50.baseline)} → "
        f"{format_seconds(p50.candidate)}, mean {format_seconds(mean.baseline)} → "
        f"{format_seconds(mean.candidate)} ({test}, p = {row.p_value:.3f}, judged at 5%)."
    ]
    judged: list[tuple[str, str]] = []
    short: list[tuple[str, str]] = []
    verdict_needs = f"{row.needs} questions" if paired is not None else str(row.needs)
    (short if row.verdict == NOT_ENOUGH_DATA else judged).append(("the verdict", verdict_needs))
    for delta in row.deltas:
        side = short if delta.verdict == NOT_ENOUGH_DATA else judged
        side.append((f"the {_label(delta.statistic)}", str(delta.needs)))
    rests = f"Each run measured {requests} requests ({warmup} warm-up left out)"
    if judged:
        rests += (
            f"; {_listed(name for name, _ in judged)} rest on all of them (they need at least "
            f"{_listed(needs for _, needs in judged)} requests per run)"
        )
    if short:
        rests += (
            f"; {_listed(name for name, _ in short)} would need "
            f"{_listed(needs for _, needs in short)} requests per run, so they are marked "
            "'not enough data' rather than guessed"
        )
    lines.append(rests + ".")
    return lines
