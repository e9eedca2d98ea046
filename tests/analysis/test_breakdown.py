from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from llmtrace import semconv as sc
from llmtrace.analysis.breakdown import breakdown, critical_path, model_phases, stage_nanos
from llmtrace.analysis.model import KIND_CLIENT, KIND_SERVER, NANOS
from tests.analysis.trees import Tree


def stages_ms(tree: Tree) -> dict[str, float]:
    result = breakdown(tree.trace())
    total = sum(result.stages.values())
    assert total == pytest.approx(result.duration, abs=1e-9)  # every instant counted once
    return {stage: round(seconds * 1000, 6) for stage, seconds in result.stages.items()}


def test_sequential_children_each_count_in_full() -> None:
    tree = Tree()
    root = tree.add("answer", 0, 100, stage="other")
    tree.add("search", 10, 40, parent=root, stage="retrieval")
    tree.add("rerank", 40, 55, parent=root, stage="rerank")
    tree.add("format", 60, 90, parent=root, stage="postprocess")
    assert stages_ms(tree) == {"other": 25, "retrieval": 30, "rerank": 15, "postprocess": 30}


def test_parallel_retrievals_count_only_the_critical_path() -> None:
    tree = Tree()
    root = tree.add("answer", 0, 100, stage="other")
    tree.add("search a", 0, 60, parent=root, stage="retrieval")
    tree.add("embed b", 0, 30, parent=root, stage="embedding")  # concurrent, finished earlier
    tree.add("generate", 60, 100, parent=root, stage="tool")
    assert stages_ms(tree) == {"retrieval": 60, "tool": 40}


def test_overlapping_children_the_last_to_finish_wins_its_stretch() -> None:
    tree = Tree()
    root = tree.add("answer", 0, 100, stage="other")
    tree.add("a", 0, 70, parent=root, stage="retrieval")
    tree.add("b", 50, 90, parent=root, stage="embedding")
    assert stages_ms(tree) == {"retrieval": 50, "embedding": 40, "other": 10}


def test_span_without_stage_inherits_and_nested_stages_claim_their_time() -> None:
    tree = Tree()
    root = tree.add("answer", 0, 100)  # no stage on the root: other
    pipeline = tree.add("rag", 0, 80, parent=root, stage="retrieval")
    step = tree.add("load step", 10, 50, parent=pipeline)  # inherits retrieval
    tree.add("embed", 20, 30, parent=step, stage="embedding")
    tree.add("tool", 60, 70, parent=pipeline, stage="tool")
    assert stages_ms(tree) == {"retrieval": 60, "embedding": 10, "tool": 10, "other": 20}


def test_unknown_stage_name_counts_as_other() -> None:
    tree = Tree()
    tree.add("answer", 0, 10, stage="thinking")
    assert stages_ms(tree) == {"other": 10}


def test_child_outliving_its_parent_is_clamped_to_the_parent() -> None:
    tree = Tree()
    root = tree.add("answer", 0, 50, stage="other")
    tree.add("fire and forget", 40, 500, parent=root, stage="tool")
    assert stages_ms(tree) == {"other": 40, "tool": 10}


def test_llm_span_is_split_at_its_first_token() -> None:
    tree = Tree()
    root = tree.add("answer", 0, 300, stage="other")
    tree.add(
        "chat m",
        100,
        300,
        parent=root,
        stage="ttft",
        kind=KIND_CLIENT,
        **{sc.TIME_TO_FIRST_TOKEN: 0.05},
    )
    assert stages_ms(tree) == {"other": 100, "ttft": 50, "generation": 150}


def test_llm_span_falls_back_to_time_to_first_chunk() -> None:
    tree = Tree()
    tree.add(
        "chat m",
        0,
        100,
        kind=KIND_CLIENT,
        **{sc.GEN_AI_OPERATION_NAME: "chat", sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: 0.03},
    )
    assert stages_ms(tree) == {"ttft": 30, "generation": 70}


def test_llm_span_without_first_token_time_is_all_ttft() -> None:
    tree = Tree()
    root = tree.add("answer", 0, 120, stage="other")
    tree.add("chat m", 20, 120, parent=root, stage="ttft", **{sc.GEN_AI_REQUEST_STREAM: False})
    assert stages_ms(tree) == {"other": 20, "ttft": 100}


def test_http_phases_count_as_network_at_the_start_of_the_call() -> None:
    tree = Tree()
    tree.add(
        "chat m",
        0,
        200,
        stage="ttft",
        **{
            sc.TIME_TO_FIRST_TOKEN: 0.08,
            sc.HTTP_CONNECT: 0.01,
            sc.HTTP_TLS: 0.015,
            sc.HTTP_REQUEST_SENT: 0.005,
        },
    )
    assert stages_ms(tree) == {"network": 30, "ttft": 50, "generation": 120}


def _joined_vllm_trace(skew_ms: float) -> Tree:
    tree = Tree()
    root = tree.add("answer", 0, 500, stage="other")
    call = tree.add(
        "chat m",
        100,
        500,
        parent=root,
        stage="ttft",
        kind=KIND_CLIENT,
        **{sc.TIME_TO_FIRST_TOKEN: 0.2, sc.HTTP_CONNECT: 0.05},
    )
    # the server's clock is off by skew_ms: only its durations may be used
    tree.add(
        "llm_request",
        110,
        480,
        parent=call,
        kind=KIND_SERVER,
        offset_ns=round(skew_ms * 1_000_000),
        **{
            sc.GEN_AI_LATENCY_TIME_IN_QUEUE: 0.06,
            sc.GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN: 0.17,
            sc.GEN_AI_LATENCY_E2E: 0.37,
        },
    )
    return tree


@pytest.mark.parametrize("skew_ms", [0, 5000, -5000])
def test_joined_vllm_server_span_gives_queue_and_network_whatever_its_clock(skew_ms: float) -> None:
    # client TTFT 200 ms, server TTFT 170 ms of which 60 ms queued → network 30, ttft 110
    assert stages_ms(_joined_vllm_trace(skew_ms)) == {
        "other": 100,
        "network": 30,
        "queue": 60,
        "ttft": 110,
        "generation": 200,
    }


@pytest.mark.parametrize("skew_ms", [0, 5000, -5000])
def test_joined_llmtrace_server_span_counts_proxy_and_queue_spans(skew_ms: float) -> None:
    offset = round(skew_ms * 1_000_000)
    tree = Tree()
    call = tree.add(
        "chat m", 0, 400, stage="ttft", kind=KIND_CLIENT, **{sc.TIME_TO_FIRST_TOKEN: 0.25}
    )
    server = tree.add(
        "POST /v1/chat/completions",
        20,
        390,
        parent=call,
        kind=KIND_SERVER,
        offset_ns=offset,
        **{sc.SERVER_PROXY_QUEUE_TIME: 0.01, sc.SERVER_TIME_TO_FIRST_TOKEN: 0.21},
    )
    tree.add("wait for worker", 20, 60, parent=server, stage="queue", offset_ns=offset)
    # network 250-210 = 40; queue 10 + 40 = 50; ttft 250-40-50 = 160; generation 150
    assert stages_ms(tree) == {"network": 40, "queue": 50, "ttft": 160, "generation": 150}


def test_non_streamed_call_with_server_first_token_splits_off_generation() -> None:
    tree = Tree()
    call = tree.add("chat m", 0, 400, stage="ttft", kind=KIND_CLIENT)
    tree.add(
        "llm_request",
        5000,
        5380,
        parent=call,
        kind=KIND_SERVER,
        **{
            sc.GEN_AI_LATENCY_TIME_IN_QUEUE: 0.02,
            sc.GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN: 0.1,
            sc.GEN_AI_LATENCY_E2E: 0.38,
        },
    )
    phases = model_phases(tree.trace().root)
    assert phases.server_joined
    assert (phases.network, phases.queue, phases.ttft, phases.generation) == pytest.approx(
        (0.02, 0.02, 0.08, 0.28)
    )


def test_orphan_subtree_becomes_its_own_trace() -> None:
    tree = Tree()
    root = tree.add("answer", 0, 100, stage="other")
    tree.add("search", 10, 40, parent=root, stage="retrieval")
    tree.add("late child", 200, 260, parent="00000000deadbeef", stage="tool")
    traces = sorted(tree.traces(), key=lambda t: t.orphan)
    assert [t.orphan for t in traces] == [False, True]
    assert breakdown(traces[1]).stages == pytest.approx({"tool": 0.06})
    assert breakdown(traces[0]).stages == pytest.approx({"other": 0.07, "retrieval": 0.03})


def test_critical_path_segments_are_in_time_order_and_contiguous() -> None:
    tree = Tree()
    root = tree.add("answer", 0, 100, stage="other")
    tree.add("search", 10, 40, parent=root, stage="retrieval")
    tree.add("chat", 40, 100, parent=root, stage="ttft", **{sc.TIME_TO_FIRST_TOKEN: 0.02})
    segments = critical_path(tree.trace())
    assert [s.stage for s in segments] == ["other", "retrieval", "ttft", "generation"]
    for before, after in itertools.pairwise(segments):
        assert before.end == after.start
    assert (segments[-1].end - segments[0].start) / NANOS == pytest.approx(0.1)


def test_proxy_queue_reported_as_attribute_and_span_counts_once() -> None:
    tree = Tree()
    call = tree.add(
        "chat m", 0, 300, stage="ttft", kind=KIND_CLIENT, **{sc.TIME_TO_FIRST_TOKEN: 0.2}
    )
    server = tree.add(
        "POST /v1/chat",
        10,
        290,
        parent=call,
        kind=KIND_SERVER,
        **{sc.SERVER_PROXY_QUEUE_TIME: 0.03, sc.SERVER_TIME_TO_FIRST_TOKEN: 0.18},
    )
    tree.add("queue proxy", -20, 10, parent=server, stage="queue", **{sc.QUEUE_NAME: "proxy"})
    assert stages_ms(tree) == {"network": 20, "queue": 30, "ttft": 150, "generation": 100}


def test_llama_cpp_body_timings_on_the_client_span_give_network() -> None:
    tree = Tree()
    tree.add(
        "chat m",
        0,
        500,
        stage="ttft",
        kind=KIND_CLIENT,
        **{
            sc.TIME_TO_FIRST_TOKEN: 0.12,
            sc.SERVER_PROMPT_TIME: 0.1,
            sc.SERVER_GENERATION_TIME: 0.37,
        },
    )
    assert stages_ms(tree) == {"network": 20, "ttft": 100, "generation": 380}


def _wrapper_beside_the_chain(wrapper: tuple[float, float], chain: tuple[float, float]) -> Tree:
    """LangGraph's ``call_model`` recorded beside the model's chain it started (OpenInference,
    OpenLLMetry): a stage-less leaf, ending last, that the chain covers almost wholly."""
    tree = Tree()
    root = tree.add("LangGraph", 0, 1000)
    agent = tree.add("agent", 10, 990, parent=root)
    tree.add("call_model", *wrapper, parent=agent)
    sequence = tree.add("RunnableSequence", *chain, parent=agent)
    tree.add(
        "chat",
        chain[0] + 5,
        chain[1] - 5,
        parent=sequence,
        stage="ttft",
        **{sc.TIME_TO_FIRST_TOKEN: 0.3},
    )
    tree.add("should_continue", 970, 980, parent=agent)
    return tree


def test_stage_less_leaf_a_sibling_covers_almost_wholly_is_passed_over_for_it() -> None:
    tree = _wrapper_beside_the_chain((20, 960), (25, 955))
    assert stages_ms(tree) == {"other": 80, "ttft": 300, "generation": 620}
    # the wrapper's few uncovered instants are its parent's own time
    assert "call_model" not in {s.span for s in critical_path(tree.trace())}


def test_nine_tenths_covered_is_enough_and_less_is_not() -> None:
    # the chain covers 846 of the wrapper's 940 ms (90%): passed over
    passed = _wrapper_beside_the_chain((20, 960), (57, 903))
    assert stages_ms(passed) == {"other": 164, "ttft": 300, "generation": 536}
    # 845 of 940 ms: the wrapper ended last, and it takes its stretch
    kept = _wrapper_beside_the_chain((20, 960), (57, 902))
    assert stages_ms(kept) == {"other": 1000}


@pytest.mark.parametrize(
    ("sibling_stage", "expected"),
    [
        ("retrieval", {"other": 3, "retrieval": 97}),
        # a stage-less leaf explains no more than the wrapper does
        (None, {"other": 100}),
    ],
)
def test_only_a_sibling_with_a_stage_or_spans_under_it_explains_a_wrapper(
    sibling_stage: str | None, expected: dict[str, float]
) -> None:
    tree = Tree()
    root = tree.add("request", 0, 100)
    tree.add("wrapper", 0, 100, parent=root, stage="other")
    tree.add("search", 2, 99, parent=root, stage=sibling_stage)
    assert stages_ms(tree) == expected


def test_stage_less_span_with_spans_under_it_keeps_its_stretch() -> None:
    tree = Tree()
    root = tree.add("request", 0, 100)
    wrapper = tree.add("wrapper", 0, 100, parent=root)
    tree.add("format", 90, 100, parent=wrapper, stage="postprocess")
    tree.add("search", 2, 99, parent=root, stage="retrieval")
    assert stages_ms(tree) == {"other": 90, "postprocess": 10}


def test_a_model_call_is_never_passed_over_as_a_wrapper() -> None:
    tree = Tree()
    root = tree.add("request", 0, 100)
    tree.add(
        "chat",
        0,
        100,
        parent=root,
        **{sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT, sc.TIME_TO_FIRST_TOKEN: 0.04},
    )
    tree.add("search", 2, 99, parent=root, stage="retrieval")
    assert stages_ms(tree) == {"ttft": 40, "generation": 60}


def _random_tree(rng: random.Random) -> Tree:
    """A root and up to 12 spans nested at random, overlapping or not, some outliving their
    parent: stages of their own, none (inherited), unknown names, model calls declared by stage or
    by operation, with first-token times, HTTP phases and server timings or without, and stage-less
    leaves around another span, as wide as it or a little or much wider."""
    tree = Tree()
    root_end = rng.uniform(50, 500)
    root_stage = rng.choice([None, "retrieval", sc.LLM_STAGE])
    spans = [(tree.add("root", 0, root_end, stage=root_stage), 0.0, root_end)]
    parents: dict[str, str] = {}
    for number in range(rng.randint(0, 12)):
        if len(spans) > 1 and rng.random() < 0.15:
            wrapped, low, high = rng.choice(spans[1:])
            start = low - rng.choice([0.0, 0.5, 20.0])
            end = high + rng.choice([0.0, 0.5, 20.0])
            wrapper = tree.add(f"s{number}", start, end, parent=parents[wrapped])
            parents[wrapper] = parents[wrapped]
            continue
        parent, low, high = rng.choice(spans)
        start = rng.uniform(low, high)
        end = start + rng.uniform(0, (high - low) * 1.2)
        attributes: dict[str, Any] = {}
        kind = rng.choice(["stage", "none", "unknown", "model", "operation"])
        if kind == "stage":
            attributes[sc.STAGE] = rng.choice(["retrieval", "embedding", "postprocess", "queue"])
        elif kind == "unknown":
            attributes[sc.STAGE] = "something-else"
        elif kind in ("model", "operation"):
            if kind == "model":
                attributes[sc.STAGE] = sc.LLM_STAGE
            else:
                attributes[sc.GEN_AI_OPERATION_NAME] = sc.OP_CHAT
            seconds = (end - start) / 1000
            if rng.random() < 0.7:
                attributes[sc.TIME_TO_FIRST_TOKEN] = rng.uniform(0, seconds * 1.1)
            if rng.random() < 0.5:
                attributes[sc.HTTP_CONNECT] = rng.uniform(0, seconds / 4)
                attributes[sc.HTTP_REQUEST_SENT] = rng.uniform(0, seconds / 4)
            if rng.random() < 0.3:
                attributes[sc.SERVER_QUEUE_TIME] = rng.uniform(0, seconds / 2)
        span = tree.add(f"s{number}", start, end, parent=parent, **attributes)
        parents[span] = parent
        spans.append((span, start, end))
    return tree


def test_stage_totals_equal_the_segments_summed_whatever_the_tree() -> None:
    """The walk's two forms (segments for the report, totals for the request metrics processor)
    give the same nanoseconds per stage."""
    rng = random.Random(7)
    for _ in range(2000):
        trace = _random_tree(rng).trace()
        summed: dict[str, int] = {}
        for segment in critical_path(trace):
            summed[segment.stage] = summed.get(segment.stage, 0) + segment.end - segment.start
        totals = stage_nanos(trace)
        assert totals == summed
        assert all(nanos > 0 for nanos in totals.values())
        assert sum(totals.values()) == trace.root.end - trace.root.start


@pytest.mark.parametrize("tag", [sc.LLM_STAGE, sc.EARLIER_LLM_STAGE])
def test_a_model_call_tagged_model_or_ttft_splits_at_its_first_token(tag: str) -> None:
    # ``model`` is today's tag, ``ttft`` what earlier releases wrote: both split the same way,
    # and a leaf beside the call that wraps it (no stage of its own) is passed over for it.
    tree = Tree()
    root = tree.add("answer", 0, 500, stage="other")
    tree.add("retrieve", 0, 100, parent=root, stage="retrieval")
    tree.add("call_model", 100, 495, parent=root)
    tree.add(
        "chat m",
        100,
        490,
        parent=root,
        stage=tag,
        kind=KIND_CLIENT,
        **{sc.TIME_TO_FIRST_TOKEN: 0.15},
    )
    assert stages_ms(tree) == {"retrieval": 100, "ttft": 150, "generation": 240, "other": 10}
