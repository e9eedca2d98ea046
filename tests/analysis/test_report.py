from __future__ import annotations

import json

import pytest

import llmtrace
from llmtrace import semconv as sc
from llmtrace.analysis.collect import TraceList
from llmtrace.analysis.model import KIND_CLIENT, TraceSet
from llmtrace.analysis.render.json import report_json
from llmtrace.analysis.report import build_report
from llmtrace.analysis.report_model import Report
from tests.analysis.trees import Tree


def rag_trace(
    retrieval_ms: float = 30,
    ttft_ms: float = 50,
    generation_ms: float = 100,
    *,
    input_tokens: int = 3200,
    returned: int = 40,
    **root_attributes: object,
) -> Tree:
    tree = Tree()
    end = 10 + retrieval_ms + ttft_ms + generation_ms + 5
    root = tree.add("answer", 0, end, stage="other", **root_attributes)
    tree.add(
        "search",
        5,
        5 + retrieval_ms,
        parent=root,
        stage="retrieval",
        **{sc.RETRIEVAL_RETURNED: returned, sc.GEN_AI_RETRIEVAL_TOP_K: returned},
    )
    start = 10 + retrieval_ms
    tree.add(
        "chat m",
        start,
        start + ttft_ms + generation_ms,
        parent=root,
        stage="ttft",
        kind=KIND_CLIENT,
        **{
            sc.TIME_TO_FIRST_TOKEN: ttft_ms / 1000,
            sc.GEN_AI_REQUEST_MODEL: "m",
            sc.GEN_AI_USAGE_INPUT_TOKENS: input_tokens,
            sc.GEN_AI_USAGE_OUTPUT_TOKENS: 50,
        },
    )
    return tree


def traceset(trees: list[Tree]) -> TraceSet:
    return TraceSet("test", TraceList([t for tree in trees for t in tree.traces()]))


def test_stage_means_add_up_and_shares_sum_to_one() -> None:
    report = build_report(traceset([rag_trace(retrieval_ms=20 + i) for i in range(20)]))
    assert report.end_to_end is not None
    total = sum(s.distribution.mean for s in report.stages.values())
    assert total == pytest.approx(report.end_to_end.mean)
    assert sum(s.share for s in report.stages.values()) == pytest.approx(1.0, abs=0.01)
    assert list(report.stages) == ["retrieval", "ttft", "generation", "other"]  # vocabulary order


def test_bottleneck_advice_cites_context_size_evidence() -> None:
    report = build_report(traceset([rag_trace(retrieval_ms=300) for _ in range(5)]))
    assert report.bottleneck is not None and report.bottleneck.stage == "retrieval"
    text = " ".join(report.bottleneck.advice)
    assert "40 documents" in text and sc.RETRIEVAL_RETURNED in text
    assert "3,200 input tokens" in text and "lower top_k" in text


def test_small_context_gets_no_context_advice() -> None:
    trees = [rag_trace(retrieval_ms=300, input_tokens=300, returned=3) for _ in range(5)]
    report = build_report(traceset(trees))
    assert report.bottleneck is not None
    assert not any("top_k" in line for line in report.bottleneck.advice)


def test_tail_names_the_stage_that_grew_in_the_slowest_traces() -> None:
    trees = [rag_trace() for _ in range(38)] + [rag_trace(ttft_ms=900) for _ in range(2)]
    report = build_report(traceset(trees))
    assert report.tail is not None
    assert report.tail.stage == "ttft"
    assert report.tail.growth == pytest.approx(0.85, abs=0.01)
    assert report.slowest[0].duration == pytest.approx(1.045)


def test_cache_advice_needs_repeated_identical_prompts() -> None:
    def with_prompt(prompt_hash: int) -> Tree:
        tree = Tree()
        root = tree.add("answer", 0, 100, stage="other")
        tree.add(
            "chat", 0, 100, parent=root, stage="ttft", **{sc.GEN_AI_INPUT_MESSAGES: prompt_hash}
        )
        return tree

    repeated = build_report(traceset([with_prompt(7) for _ in range(4)] + [with_prompt(8)]))
    distinct = build_report(traceset([with_prompt(i) for i in range(5)]))
    assert repeated.bottleneck and any("cache responses" in a for a in repeated.bottleneck.advice)
    assert distinct.bottleneck and not any("cache" in a for a in distinct.bottleneck.advice)


def test_run_filter_and_warmup_exclusion() -> None:
    trees = [
        rag_trace(**{sc.BENCH_RUN: "before", sc.BENCH_CONCURRENCY: 4}),
        rag_trace(**{sc.BENCH_RUN: "before", sc.BENCH_CONCURRENCY: 4, sc.BENCH_WARMUP: True}),
        rag_trace(**{sc.BENCH_RUN: "after", sc.BENCH_CONCURRENCY: 8}),
    ]
    report = build_report(traceset(trees), run="before")
    assert report.traces == 1 and report.excluded_warmup == 1
    assert report.run is not None
    assert report.run["name"] == "before" and report.run["concurrency"] == 4
    assert report.run["model"] == "m"


def test_json_has_the_contract_fields_and_round_trips() -> None:
    report = build_report(traceset([rag_trace(retrieval_ms=20 + i) for i in range(10)]))
    data = json.loads(report_json(report))
    assert data["schema"] == "llmtrace.report/1"
    for key in (
        "source",
        "service",
        "traces",
        "end_to_end",
        "stages",
        "ttft",
        "bottleneck",
        "tail",
        "slowest",
    ):
        assert key in data
    assert set(data["end_to_end"]) >= {"mean", "p50", "p90", "p95", "p99"}
    assert set(data["stages"]["retrieval"]) >= {"mean", "p50", "p90", "p95", "p99", "share"}
    assert set(data["bottleneck"]) == {"stage", "share", "advice", "service", "service_share"}
    assert {"stage", "growth"} <= set(data["tail"])
    assert {"trace_id", "duration"} <= set(data["slowest"][0])
    again = Report.from_json(data)
    assert json.loads(report_json(again)) == data


def test_the_report_names_the_llmtrace_release_that_made_it() -> None:
    # From llmtrace/_version.py, not the installed distribution's metadata: a checkout on
    # PYTHONPATH, or the unrelated PyPI project of the import name, would report another release.
    report = build_report(traceset([rag_trace()]))
    assert report.llmtrace_version == llmtrace.__version__
    assert json.loads(report_json(report))["llmtrace_version"] == llmtrace.__version__


def test_orphans_are_counted() -> None:
    tree = rag_trace()
    tree.add("late", 500, 600, parent="00000000deadbeef", stage="tool")
    report = build_report(traceset([tree]))
    assert report.traces == 2 and report.orphans == 1


def test_ttft_advice_without_reported_usage_says_the_prompt_size_is_unknown() -> None:
    from llmtrace.analysis.advice import Evidence, StageFigures, advise_stage

    figures = StageFigures(stage="ttft", mean=3.8, p95=4.8, share=0.54)
    unknown = " ".join(advise_stage(figures, Evidence(model_calls=10, retrieval_returned_mean=8)))
    assert "input token counts were not reported" in unknown
    assert "8 documents" in unknown
    known = " ".join(advise_stage(figures, Evidence(model_calls=10, input_tokens_mean=250)))
    assert "prompts averaged 250 input tokens" in known
    assert "not reported" not in known
