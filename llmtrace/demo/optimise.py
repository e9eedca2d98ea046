"""The one change the demo makes after its first run, chosen from the report's bottleneck."""

from __future__ import annotations

from dataclasses import dataclass

from llmtrace.analysis.report_model import Report
from llmtrace.demo.rag import RagSettings

CAPPED_MAX_TOKENS = 64
SMALLER_TOP_K = 3
# A generation-bound run is capped at this share of its typical (median) answer: a cap the
# answers never reach changes nothing, and one that only the longest answers reach changes too
# few requests for a 12-question run to show it.
CAP_SHARE_OF_TYPICAL_ANSWER = 0.5
MIN_CAP = 16
# Stages whose time grows with the number of passages retrieved, reranked and put in the prompt
# (ttft includes prompt processing on the model server).
_CONTEXT_STAGES = frozenset({"ttft", "prompt", "retrieval", "rerank", "embedding"})


@dataclass(frozen=True)
class Optimisation:
    stage: str
    share: float
    description: str
    settings: RagSettings
    # how the new value was chosen, printed on a line of its own ("" when there is nothing to say)
    reason: str = ""


def choose_optimisation(report: Report, settings: RagSettings) -> Optimisation:
    """Generation-bound → cap ``max_tokens``; context-bound → retrieve fewer passages."""
    bottleneck = report.bottleneck
    stage = bottleneck.stage if bottleneck else "generation"
    share = bottleneck.share if bottleneck else 0.0
    if stage in _CONTEXT_STAGES and settings.top_k > SMALLER_TOP_K:
        return Optimisation(
            stage,
            share,
            f"retrieve fewer passages: top_k {settings.top_k} -> {SMALLER_TOP_K}",
            settings.with_changes(top_k=SMALLER_TOP_K),
        )
    # Generation, queueing behind other requests' generation, or anything else: shorter answers
    # shorten every request.
    capped, why = _capped_max_tokens(report, settings.max_tokens)
    return Optimisation(
        stage,
        share,
        f"cap the answer length: max_tokens {settings.max_tokens} -> {capped}",
        settings.with_changes(max_tokens=capped),
        why,
    )


def _capped_max_tokens(report: Report, max_tokens: int) -> tuple[int, str]:
    """Half the answers' median length in output tokens, as the model reported them; without
    token counts, ``CAPPED_MAX_TOKENS`` (or a quarter of a smaller limit)."""
    typical = [
        usage.output_tokens.p50
        for usage in report.models.values()
        if usage.output_tokens is not None and usage.output_tokens.p50 > 0
    ]
    if typical:
        median = max(typical)
        capped = max(MIN_CAP, round(median * CAP_SHARE_OF_TYPICAL_ANSWER))
        if capped < max_tokens:
            return capped, f"half the median answer, {median:.0f} tokens"
    if max_tokens > CAPPED_MAX_TOKENS:
        return CAPPED_MAX_TOKENS, ""
    return max(1, max_tokens // 4), ""
