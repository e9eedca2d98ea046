from __future__ import annotations

from llmtrace.analysis.report_model import Bottleneck, Report
from llmtrace.demo.optimise import choose_optimisation
from llmtrace.demo.rag import RagSettings


def report_with_bottleneck(stage: str, share: float = 0.6) -> Report:
    return Report(
        source="test",
        service=None,
        traces=1,
        end_to_end=None,
        stages={},
        ttft=None,
        bottleneck=Bottleneck(stage, share, []),
        tail=None,
        slowest=[],
    )


def test_generation_bound_runs_cap_max_tokens() -> None:
    change = choose_optimisation(report_with_bottleneck("generation"), RagSettings(8, 256))
    assert change.settings == RagSettings(top_k=8, max_tokens=64)
    assert change.stage == "generation" and "max_tokens 256 -> 64" in change.description


def test_context_bound_runs_retrieve_fewer_passages() -> None:
    for stage in ("ttft", "rerank", "retrieval", "prompt"):
        change = choose_optimisation(report_with_bottleneck(stage), RagSettings(8, 256))
        assert change.settings == RagSettings(top_k=3, max_tokens=256)


def test_a_small_top_k_falls_back_to_shorter_answers() -> None:
    change = choose_optimisation(report_with_bottleneck("ttft"), RagSettings(2, 40))
    assert change.settings == RagSettings(top_k=2, max_tokens=10)
