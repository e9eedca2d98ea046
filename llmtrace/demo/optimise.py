"""The one change the demo makes after its first run, chosen from the report's bottleneck."""

from __future__ import annotations

from dataclasses import dataclass

from llmtrace.analysis.report_model import Report
from llmtrace.demo.rag import RagSettings

CAPPED_MAX_TOKENS = 64
SMALLER_TOP_K = 3
# Stages whose time grows with the number of passages retrieved, reranked and put in the prompt
# (ttft includes prompt processing on the model server).
_CONTEXT_STAGES = frozenset({"ttft", "prompt", "retrieval", "rerank", "embedding"})


@dataclass(frozen=True)
class Optimisation:
    stage: str
    share: float
    description: str
    settings: RagSettings


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
    capped = (
        CAPPED_MAX_TOKENS
        if settings.max_tokens > CAPPED_MAX_TOKENS
        else max(1, settings.max_tokens // 4)
    )
    return Optimisation(
        stage,
        share,
        f"cap the answer length: max_tokens {settings.max_tokens} -> {capped}",
        settings.with_changes(max_tokens=capped),
    )
