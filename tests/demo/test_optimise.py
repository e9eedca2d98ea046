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


def test_a_generation_bound_run_with_token_counts_is_capped_at_half_its_median_answer() -> None:
    from llmtrace.analysis.report_model import ModelUsage
    from llmtrace.analysis.stats import distribution

    report = report_with_bottleneck("generation")
    report.models = {
        "m": ModelUsage(
            calls=5,
            input_tokens=None,
            output_tokens=distribution([40.0, 90.0, 97.0, 110.0, 128.0]),
            time_to_first_token=None,
            output_tokens_per_second=None,
        )
    }
    change = choose_optimisation(report, RagSettings(8, 128))
    assert change.settings == RagSettings(top_k=8, max_tokens=48)
    assert "max_tokens 128 -> 48" in change.description
    assert change.reason == "half the median answer, 97 tokens"
    # answers far below the limit already: the cap still halves them, never below 16 tokens
    report.models["m"].output_tokens = distribution([10.0, 12.0, 14.0])
    assert choose_optimisation(report, RagSettings(8, 128)).settings.max_tokens == 16
