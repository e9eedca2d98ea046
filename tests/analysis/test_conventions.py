"""Traces other instrumentations wrote: stages, first-token times and usage read through the
conventions table, alike by the Python and the native reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from llmtrace import semconv as sc
from llmtrace.analysis import conventions
from llmtrace.analysis.model import Span
from llmtrace.analysis.native import NativeTraces
from llmtrace.analysis.otlp import (
    HASHED_ATTRIBUTES,
    KEPT_ATTRIBUTES,
    TABLE_ATTRIBUTES,
    table_stage,
)
from llmtrace.analysis.render.html import render_html
from llmtrace.analysis.render.terminal import print_report
from llmtrace.analysis.report import build_report
from llmtrace.analysis.sources import load_traces
from tests.analysis.otlp_lines import MS, T0, attribute, otlp_span, request_line
from tests.analysis.peer_shapes import (
    FIRST_TOKEN_MS,
    ROOT_MS,
    Shape,
    request_document,
    request_lines,
    shapes,
)

PEERS = sorted(shapes())
REQUESTS = 12


def _report(path: Path, reader: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("LLMTRACE_NATIVE", "1" if reader == "native" else "0")
    traceset = load_traces(str(path))
    assert isinstance(traceset.collector, NativeTraces) == (reader == "native")
    data = build_report(traceset).to_json()
    data.pop("generated_at")
    return data


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("peer", PEERS)
def test_each_peers_request_breaks_down_into_its_stages(
    peer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shape = shapes()[peer]
    path = _write(tmp_path, request_lines(peer, REQUESTS))
    report = _report(path, "python", monkeypatch)
    assert report["traces"] == REQUESTS
    stages = report["stages"]
    assert {"retrieval", "ttft", "tool"} <= set(stages)
    assert stages["retrieval"]["p50"] == pytest.approx(0.100, abs=1e-9)
    assert stages["tool"]["p50"] == pytest.approx(0.150, abs=1e-9)
    assert report["bottleneck"]["stage"] == "ttft"
    assert report["instrumentations"].get(shape.family, 0) >= 1
    (model,) = report["models"]
    assert model == "m-small"
    evidence = report["evidence"]
    if shape.records_first_token:
        assert report["ttft"]["p50"] == pytest.approx(FIRST_TOKEN_MS / 1000, abs=1e-6)
        assert stages["generation"]["p50"] == pytest.approx(0.200, abs=1e-6)
        assert evidence["first_token_unrecorded"] == 0
    else:
        # the whole call counts as time to first token, and the report says why
        assert report["ttft"] is None
        assert "generation" not in stages
        assert stages["ttft"]["p50"] == pytest.approx(0.500, abs=1e-9)
        assert evidence["first_token_unrecorded"] == REQUESTS
        assert any(
            "first-token time not recorded" in line for line in report["bottleneck"]["advice"]
        )


@pytest.mark.parametrize(
    "peer", ["openinference", "openllmetry", "langfuse", "opentelemetry-genai"]
)
def test_usage_is_read_from_each_peers_token_attributes(
    peer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, request_lines(peer, 3))
    usage = _report(path, "python", monkeypatch)["models"]["m-small"]
    assert usage["input_tokens"]["p50"] == 120
    assert usage["output_tokens"]["p50"] == 40


@pytest.mark.parametrize("peer", PEERS)
def test_both_readers_give_the_same_report_for_each_peer(
    peer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, request_lines(peer, REQUESTS))
    python_report = _report(path, "python", monkeypatch)
    native_report = _report(path, "native", monkeypatch)
    for key in python_report:
        assert native_report[key] == python_report[key], key


def test_the_report_names_the_instrumentations_and_the_spans_without_a_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = request_lines("openlit", 4) + request_lines("openinference", 2, first=4)
    path = _write(tmp_path, lines)
    for reader in ("python", "native"):
        report = _report(path, reader, monkeypatch)
        # OpenLIT's two spans per request by scope; the application's tool by the GenAI
        # conventions' attribute; OpenInference's four
        assert report["instrumentations"] == {
            "OpenInference": 8,
            "OpenLIT": 8,
            "OpenTelemetry GenAI": 4,
        }
        # the application's root span in the OpenLIT requests carries nothing to go by
        assert report["unassigned_spans"] == 4
    monkeypatch.setenv("LLMTRACE_NATIVE", "1")
    built = build_report(load_traces(str(path)))
    console = Console(record=True, width=200)
    print_report(built, console)
    for text in (console.export_text(), render_html(built)):
        assert "OpenInference (8 spans)" in text
        assert "4 spans with no stage" in text


def test_an_explicit_llmtrace_stage_wins_over_every_convention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace_id = f"{7:032x}"
    spans = [
        otlp_span(trace_id, f"{1:016x}", None, "answer", T0, T0 + 100 * MS),
        otlp_span(
            trace_id,
            f"{2:016x}",
            f"{1:016x}",
            "search",
            T0,
            T0 + 60 * MS,
            llmtrace__stage="retrieval",
            gen_ai__operation__name="chat",
            openinference__span__kind="LLM",
            gen_ai__server__time_to_first_token=0.01,
        ),
    ]
    path = _write(tmp_path, [request_line(spans)])
    for reader in ("python", "native"):
        report = _report(path, reader, monkeypatch)
        assert set(report["stages"]) == {"retrieval", "other"}
        assert report["models"] == {}
        assert report["instrumentations"] == {"llmtrace": 2}
        assert report["unassigned_spans"] == 1  # the root: no stage, no convention


def test_the_table_reads_only_attributes_the_analysis_does_not() -> None:
    # aliases are read from the table's own attributes and written to the analysis's
    assert not {alias.source for alias in conventions.ALIASES} & KEPT_ATTRIBUTES
    assert {alias.target for alias in conventions.ALIASES} <= KEPT_ATTRIBUTES
    assert TABLE_ATTRIBUTES.isdisjoint(KEPT_ATTRIBUTES | HASHED_ATTRIBUTES)
    assert {rule.stage for rule in conventions.STAGE_RULES} - {None} <= {
        "ttft",
        "embedding",
        "retrieval",
        "rerank",
        "tool",
        "postprocess",
    }


def _unstaged(attributes: dict[str, Any]) -> Span:
    return Span("", None, "span", 1, T0, T0 + 500 * MS, attributes)


def test_a_span_the_table_reads_nothing_of_is_unassigned_as_the_table_leaves_it() -> None:
    # both readers skip the table for such a span (an HTTP span, a workflow): the answer and the
    # attributes must be those the table itself gives
    unread = {key: "chat" for key in KEPT_ATTRIBUTES - conventions.CONVENTION_KEYS - {sc.STAGE}}
    for attributes in ({}, unread):
        inferred: list[Span] = []
        span = _unstaged(dict(attributes))
        assert table_stage(span, {}, None, inferred) is None
        assert span.attributes == attributes and not inferred
        read = dict(attributes)
        assert conventions.normalize(read, {}, None, T0) is None
        assert read == attributes


def test_a_model_call_the_table_finds_is_noted_for_yield_to_wire() -> None:
    inferred: list[Span] = []
    call = _unstaged({sc.GEN_AI_OPERATION_NAME: "chat"})
    assert table_stage(call, {}, T0 + 100 * MS, inferred) is True
    assert call.attributes[sc.STAGE] == conventions.MODEL_CALL
    assert call.attributes[conventions.FIRST_TOKEN_TARGET] == pytest.approx(0.1)
    retrieval = _unstaged({})
    assert table_stage(retrieval, {"openinference.span.kind": "RETRIEVER"}, None, inferred)
    assert retrieval.attributes[sc.STAGE] == "retrieval"
    chain = _unstaged({})
    assert table_stage(chain, {"openinference.span.kind": "CHAIN"}, None, inferred) is False
    assert inferred == [call]


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ('"2023-11-14T22:13:20.420000+00:00"', T0 + 420 * MS),
        ("2023-11-14T22:13:20Z", T0),
        ("2023-11-14 23:13:20.5+01:00", T0 + 500 * MS),
        ("2023-11-14T22:13:20.123456789123", T0 + 123_456_789),
        ("2024-02-29T00:00:00", 1_709_164_800 * 10**9),
        ("1969-12-31T23:59:59.5", -500 * MS),
        ("2023-02-29T00:00:00", None),
        ("2023-11-14T24:00:00", None),
        ("2023-11-14T22:13:20.", None),
        ("2023-11-14T22:13:20+0100", None),
        ("yesterday", None),
        ("\uff12023-11-14T22:13:20", None),  # a full-width digit
    ],
)
def test_iso_timestamps_are_read_to_the_nanosecond(text: str, nanos: int | None) -> None:
    assert conventions.iso_nanos(text) == nanos


def _odd_span(number: int, **attributes: Any) -> dict[str, Any]:
    trace_id = f"{number + 100:032x}"
    span = otlp_span(trace_id, f"{number + 1:016x}", None, "odd", T0, T0 + 500 * MS)
    span["attributes"] = [attribute(key, value) for key, value in attributes.items()]
    return span


def test_odd_values_of_the_tables_attributes_are_read_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    start_time = "langfuse.observation.completion_start_time"
    usage = "langfuse.observation.usage_details"
    odd = [
        {start_time: "2023-11-14T22:13:20.1Z", "langfuse.observation.type": "generation"},
        {start_time: '"2023-11-14T22:13:19Z"', usage: '{"input": 1.5, "output": true}'},
        {start_time: "not a time", usage: "[1, 2]", "openinference.span.kind": "LLM"},
        {usage: '{"input": 99999999999999999999}', "llm.token_count.prompt": 7},
        {usage: "{not json", "gen_ai.usage.prompt_tokens": [1, 2]},
        {"openinference.span.kind": ["LLM"], "traceloop.span.kind": "task"},
        {"db.system": "qdrant", "db.operation": "search", "db.response.returned_rows": 3.5},
        {"db.system.name": "qdrant", "db.operation.name": "upsert"},
        {"llm.invocation_parameters": '{"stream": false}', "llm.request.type": "completion"},
        {"gen_ai.server.time_to_first_token": "0.2", "gen_ai.operation.name": "chat"},
    ]
    spans = [_odd_span(number, **attrs) for number, attrs in enumerate(odd)]
    events = [
        {"name": "First Token Stream Event", "timeUnixNano": "not digits"},
        "not an object",
        {"name": ["First Token Stream Event"], "timeUnixNano": str(T0)},
        {"name": "First Token Stream Event", "timeUnixNano": 1.5},
        {"name": "First Token Stream Event", "timeUnixNano": str(T0 + 50 * MS)},
        {"name": "First Token Stream Event", "timeUnixNano": str(T0 + 60 * MS)},
    ]
    spans[2]["events"] = events
    spans[3]["events"] = {"not": "a list"}
    documents = [request_line([span]) for span in spans]
    # the scope written after the spans names them all the same
    late_scope = json.loads(request_line([_odd_span(20, **{"tool.name": "x"})]))
    scope_spans = late_scope["resourceSpans"][0]["scopeSpans"][0]
    scope_spans["scope"] = {"name": "openinference.instrumentation.x"}
    late_scope["resourceSpans"][0]["scopeSpans"][0] = {"spans": scope_spans["spans"], **scope_spans}
    documents.append(json.dumps(late_scope))
    path = _write(tmp_path, documents)
    python_report = _report(path, "python", monkeypatch)
    native_report = _report(path, "native", monkeypatch)
    assert native_report == python_report
    monkeypatch.setenv("LLMTRACE_NATIVE", "1")
    ours = {t.trace_id: [s.attributes for s in t.spans()] for t in load_traces(str(path)).traces}
    monkeypatch.setenv("LLMTRACE_NATIVE", "0")
    theirs = {t.trace_id: [s.attributes for s in t.spans()] for t in load_traces(str(path)).traces}
    assert ours == theirs
    first = theirs[f"{100:032x}"][0]
    assert first["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.1)
    assert first["llmtrace.stage"] == "ttft"
    assert theirs[f"{102:032x}"][0]["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.05)
    assert "gen_ai.usage.input_tokens" not in theirs[f"{103:032x}"][0] or (
        theirs[f"{103:032x}"][0]["gen_ai.usage.input_tokens"] == 7
    )
    assert theirs[f"{106:032x}"][0]["llmtrace.stage"] == "retrieval"
    assert "llmtrace.stage" not in theirs[f"{107:032x}"][0]
    # request_line writes llmtrace's scope: the scope names the family before any attribute
    assert python_report["instrumentations"] == {"llmtrace": 10, "OpenInference": 1}


def test_root_ends_where_the_request_ends() -> None:
    # the shapes' arithmetic the tests above rely on
    for shape in shapes().values():
        root = shape.spans[0]
        assert (root[2], root[3]) == (0, ROOT_MS)
        assert all(0 <= start <= end <= ROOT_MS for _, _, start, end, _, _ in shape.spans)


def test_a_frameworks_model_call_yields_to_the_providers_below_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # OpenInference's LangChain instrumentation writes an LLM span for ChatOpenAI, and its OpenAI
    # instrumentation another below it, with the first-token event: one call, timed at the wire
    shape = shapes()["openinference"]
    root, retrieval, chat, tool = shape.spans
    wrapper = (
        "openinference.instrumentation.langchain",
        "ChatOpenAI",
        chat[2] - 5,
        chat[3] + 5,
        {"openinference.span.kind": "LLM", "llm.model_name": "m-small"},
        [],
    )
    nested = Shape(shape.family, True, [root, retrieval, wrapper, tool])
    lines = []
    for index in range(3):
        document = request_document(nested, index)
        # the provider's span is the wrapper's child
        spans = request_document(Shape(shape.family, True, [root, chat]), index)
        (provider,) = [
            span
            for scope in spans["resourceSpans"][0]["scopeSpans"]
            for span in scope["spans"]
            if span["name"] == "ChatCompletion"
        ]
        provider["spanId"] = f"{index + 1:08x}{99:08x}"
        provider["parentSpanId"] = f"{index + 1:08x}{2:08x}"
        document["resourceSpans"][0]["scopeSpans"].append(
            {"scope": {"name": "openinference.instrumentation.openai"}, "spans": [provider]}
        )
        lines.append(json.dumps(document))
    path = _write(tmp_path, lines)
    reports = [_report(path, reader, monkeypatch) for reader in ("python", "native")]
    assert reports[0] == reports[1]
    report = reports[0]
    assert report["evidence"]["model_calls"] == 3
    assert report["ttft"]["p50"] == pytest.approx(FIRST_TOKEN_MS / 1000, abs=1e-6)
    assert report["stages"]["ttft"]["p50"] == pytest.approx(0.300, abs=1e-6)
    assert report["stages"]["generation"]["p50"] == pytest.approx(0.200, abs=1e-6)
    assert report["models"]["m-small"]["input_tokens"]["p50"] == 120
