"""Hops through services: a server span ends its caller's network, and the critical path is
broken down by service too (docs/architecture.md, "How a trace is broken down").

Hand-built traces of a gateway (llmtrace) calling an orchestrator that llmtrace does not
instrument (its spans carry no ``llmtrace.stage``, as OpenTelemetry JS records them), which calls
a RAG service (llmtrace): its own 265 ms is the orchestrator's, never network, whatever the
orchestrator's clock says.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from llmtrace import semconv as sc
from llmtrace.analysis.breakdown import breakdown, critical_path
from llmtrace.analysis.model import KIND_CLIENT, KIND_CONSUMER, KIND_PRODUCER, KIND_SERVER
from llmtrace.analysis.report import build_report, effective_stages
from llmtrace.analysis.sources import load_traces
from tests.analysis.otlp_lines import otlp_span, request_line
from tests.analysis.trees import Tree

NS = 1_000_000  # nanoseconds in a millisecond


def fleet(
    node_skew_ms: float = 0.0,
    rag_skew_ms: float = 0.0,
    node_stage: str | None = None,
    node_client_stage: str | None = None,
) -> Tree:
    """gateway 0-400 ms; its network span 5-395 calls the orchestrator (10-390 on the gateway's
    clock, ``node_skew_ms`` off on its own), whose own client span 270-385 calls the RAG service
    (275-380): retrieval 280-330, the model 330-378 (first token at 10 ms)."""
    tree = Tree()
    node = round(node_skew_ms * NS)
    rag = round(rag_skew_ms * NS)
    root = tree.add("POST /ask", 0, 400, stage="other", kind=KIND_SERVER, service="gateway")
    call = tree.add(
        "POST", 5, 395, parent=root, stage="network", kind=KIND_CLIENT, service="gateway"
    )
    server = tree.add(
        "POST /answer",
        10,
        390,
        parent=call,
        stage=node_stage,
        kind=KIND_SERVER,
        offset_ns=node,
        service="orchestrator",
    )
    onward = tree.add(
        "POST",
        270,
        385,
        parent=server,
        stage=node_client_stage,
        kind=KIND_CLIENT,
        offset_ns=node,
        service="orchestrator",
        http__request__method="POST",
    )
    rag_server = tree.add(
        "POST /rag",
        275,
        380,
        parent=onward,
        stage="other",
        kind=KIND_SERVER,
        offset_ns=rag,
        service="rag",
    )
    tree.add("retrieval docs", 280, 330, parent=rag_server, stage="retrieval", offset_ns=rag)
    tree.spans[next(reversed(tree.spans))].service = "rag"
    tree.add(
        "chat m",
        330,
        378,
        parent=rag_server,
        stage=sc.LLM_STAGE,
        kind=KIND_CLIENT,
        offset_ns=rag,
        service="rag",
        llmtrace__time_to_first_token=0.010,
    )
    return tree


def _ms(stages: dict[str, float]) -> dict[str, float]:
    return {stage: round(seconds * 1000, 3) for stage, seconds in stages.items()}


EXPECTED = {
    # gateway 5 + 5, orchestrator 260 + 5, RAG service 5 + 2
    "other": 282.0,
    # the gateway's wait outside the orchestrator's span, and the orchestrator's outside the RAG's
    "network": 20.0,
    "retrieval": 50.0,
    "ttft": 10.0,
    "generation": 38.0,
}


def test_a_service_llmtrace_does_not_see_is_its_own_time_not_network() -> None:
    result = breakdown(fleet().trace())
    assert _ms(result.stages) == EXPECTED
    assert sum(result.stages.values()) == pytest.approx(result.duration)


@pytest.mark.parametrize(("node_skew", "rag_skew"), [(4000.0, -250.0), (-30.0, 7.5), (0.4, 9000)])
def test_hops_are_placed_by_durations_whatever_the_other_hosts_clocks_say(
    node_skew: float, rag_skew: float
) -> None:
    assert _ms(breakdown(fleet(node_skew, rag_skew).trace()).stages) == EXPECTED


def test_a_server_span_that_declares_network_is_still_the_services_time() -> None:
    assert _ms(breakdown(fleet(node_stage="network").trace()).stages) == EXPECTED


def test_the_uninstrumented_services_own_stage_is_kept_when_it_declares_one() -> None:
    stages = _ms(breakdown(fleet(node_stage="tool").trace()).stages)
    assert stages["tool"] == 265.0
    assert stages["network"] == 20.0


def test_a_client_span_that_declares_a_stage_keeps_it() -> None:
    stages = _ms(breakdown(fleet(node_client_stage="tool").trace()).stages)
    assert stages["tool"] == 10.0  # the orchestrator's call, as it tagged it
    assert stages["network"] == 10.0


def test_segments_name_the_service_they_were_spent_in() -> None:
    by_service: dict[tuple[str | None, str], float] = {}
    for segment in critical_path(fleet(node_skew_ms=1234).trace()):
        key = (segment.service, segment.stage)
        by_service[key] = by_service.get(key, 0.0) + (segment.end - segment.start) / NS
    assert {key: round(value, 3) for key, value in by_service.items()} == {
        ("gateway", "other"): 10.0,
        ("gateway", "network"): 10.0,
        ("orchestrator", "other"): 265.0,
        ("orchestrator", "network"): 10.0,
        ("rag", "other"): 7.0,
        ("rag", "retrieval"): 50.0,
        ("rag", "ttft"): 10.0,
        ("rag", "generation"): 38.0,
    }


def test_a_server_span_longer_than_its_caller_leaves_no_network() -> None:
    # clocks that run at different rates, or a server that records its span past its answer
    tree = Tree()
    root = tree.add("job", 0, 100, stage="other", service="a")
    call = tree.add("POST", 10, 90, parent=root, kind=KIND_CLIENT, service="a")
    tree.add("POST /x", 0, 95, parent=call, kind=KIND_SERVER, service="b", offset_ns=77 * NS)
    stages = _ms(breakdown(tree.trace()).stages)
    assert stages == {"other": 100.0}


def test_a_consumer_under_a_producer_is_the_consumers_time() -> None:
    tree = Tree()
    root = tree.add("job", 0, 100, stage="other", service="a")
    send = tree.add("publish", 10, 90, parent=root, kind=KIND_PRODUCER, service="a")
    tree.add("process", 20, 80, parent=send, kind=KIND_CONSUMER, service="b", offset_ns=-5 * NS)
    stages = _ms(breakdown(tree.trace()).stages)
    assert stages == {"other": 80.0, "network": 20.0}


def test_a_server_span_of_the_same_service_under_an_internal_span_is_not_a_hop() -> None:
    # a framework's second SERVER span inside the process: one clock, its parent's stage
    tree = Tree()
    root = tree.add("POST /ask", 0, 100, stage="retrieval", kind=KIND_SERVER)
    inner = tree.add("inner", 10, 90, parent=root)
    tree.add("route", 20, 80, parent=inner, kind=KIND_SERVER, stage="network")
    assert _ms(breakdown(tree.trace()).stages) == {"retrieval": 40.0, "network": 60.0}


def test_the_waterfall_tags_the_hop_and_the_services_spans_as_the_breakdown_does() -> None:
    trace = fleet().trace()
    stages = effective_stages(trace.root)
    by_name = {(span.service, span.name): stages[id(span)] for span in trace.spans()}
    assert by_name[("orchestrator", "POST /answer")] == "other"
    assert by_name[("orchestrator", "POST")] == "network"
    assert by_name[("gateway", "POST")] == "network"


# --- the report by service, from a file, both readers --------------------------------------------


def _span(
    sid: int, parent: int | None, name: str, start: int, end: int, trace_id: str, **kw: Any
) -> dict[str, Any]:
    parent_id = None if parent is None else f"{parent:016x}"
    return otlp_span(trace_id, f"{sid:016x}", parent_id, name, start, end, **kw)


def _fleet_file(path: Path, requests: int, policy_ms: float) -> Path:
    """``requests`` traces like ``fleet``'s, each service in its own resource (as three processes
    export them), the orchestrator's own work ``policy_ms`` longer every other request."""
    lines = []
    for n in range(requests):
        trace_id = f"{n + 1:032x}"
        t0 = 1_700_000_000_000_000_000 + n * 10_000 * NS
        extra = round(policy_ms * NS) if n % 2 else 0

        def at(ms: float, extra_after: bool = True, t0: int = t0, extra: int = extra) -> int:
            return t0 + round(ms * NS) + (extra if extra_after else 0)

        span = partial(_span, trace_id=trace_id)

        gateway = [
            span(1, None, "POST /ask", at(0, False), at(400), kind=2, llmtrace__stage="other"),
            span(2, 1, "POST", at(5, False), at(395), kind=3, llmtrace__stage="network"),
        ]
        node = [  # no llmtrace.stage: OpenTelemetry JS, on a clock 3 s ahead
            span(3, 2, "POST /answer", at(3010, False), at(3390), kind="SPAN_KIND_SERVER"),
            span(4, 3, "POST", at(3270), at(3385), kind="SPAN_KIND_CLIENT", http__method="POST"),
        ]
        rag = [
            span(5, 4, "POST /rag", at(275), at(380), kind=2, llmtrace__stage="other"),
            span(6, 5, "retrieval docs", at(280), at(330), llmtrace__stage="retrieval"),
            span(
                7,
                5,
                "chat m",
                at(330),
                at(378),
                kind=3,
                llmtrace__stage=sc.LLM_STAGE,
                llmtrace__time_to_first_token=0.01,
                gen_ai__request__model="m",
            ),
        ]
        lines += [
            request_line(gateway, "gateway"),
            request_line(node, "orchestrator"),
            request_line(rag, "rag"),
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("reader", ["native", "python"])
def test_the_report_breaks_the_path_down_by_service_and_names_the_bottlenecks_service(
    tmp_path: Path, reader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMTRACE_NATIVE", "1" if reader == "native" else "0")
    report = build_report(load_traces(str(_fleet_file(tmp_path / "t.jsonl", 10, 250.0))))
    assert report.traces == 10
    assert report.bottleneck is not None
    assert report.bottleneck.stage == "other"
    assert report.bottleneck.service == "orchestrator"
    # mean other 282 + 125 ms, of which the orchestrator's 265 + 125
    assert report.bottleneck.service_share == pytest.approx(390 / 407, abs=1e-6)
    assert list(report.services) == ["orchestrator", "rag", "gateway"]
    orchestrator = report.services["orchestrator"]
    assert orchestrator.distribution.p95 == pytest.approx(0.525, abs=1e-6)  # 275 or 525 ms
    assert orchestrator.distribution.mean == pytest.approx(0.400, abs=1e-9)
    assert orchestrator.share == pytest.approx(0.400 / 0.525, abs=1e-9)
    assert set(orchestrator.stages) == {"network", "other"}
    assert orchestrator.stages["network"].distribution.mean == pytest.approx(0.010, abs=1e-9)
    assert report.stages["network"].distribution.mean == pytest.approx(0.020, abs=1e-9)
    # the services' shares add up to the whole, and each one's stages to its share
    assert sum(s.share for s in report.services.values()) == pytest.approx(1.0)
    for summary in report.services.values():
        assert sum(p.share for p in summary.stages.values()) == pytest.approx(summary.share)


def test_both_readers_give_the_same_report_by_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _fleet_file(tmp_path / "t.jsonl", 7, 120.0)
    reports = []
    for reader in ("1", "0"):
        monkeypatch.setenv("LLMTRACE_NATIVE", reader)
        data = build_report(load_traces(str(path))).to_json()
        data.pop("generated_at")
        reports.append(data)
    assert reports[0]["services"] == reports[1]["services"]
    assert reports[0] == reports[1]


def test_the_services_table_is_rendered_and_round_trips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    from llmtrace.analysis.render.html import render_html
    from llmtrace.analysis.render.json import report_json
    from llmtrace.analysis.render.terminal import print_report
    from llmtrace.analysis.report_model import Report

    report = build_report(load_traces(str(_fleet_file(tmp_path / "t.jsonl", 4, 250.0))))
    console = Console(record=True, width=100)
    print_report(report, console)
    text = console.export_text()
    assert "Latency by service (critical path)" in text
    assert "of it in service orchestrator" in text
    html = render_html(report)
    assert 'id="services"' in html and "of it in service orchestrator" in html
    again = Report.from_json(json.loads(report_json(report)))
    assert again.to_json()["services"] == report.to_json()["services"]
    assert again.bottleneck == report.bottleneck


def test_one_service_shows_no_services_table(tmp_path: Path) -> None:
    tree = Tree()
    root = tree.add("job", 0, 100, stage="other")
    tree.add("search", 10, 60, parent=root, stage="retrieval")
    from llmtrace.analysis.collect import TraceList
    from llmtrace.analysis.model import TraceSet

    report = build_report(TraceSet("test", TraceList(tree.traces())))
    assert report.services == {}
    assert report.bottleneck is not None and report.bottleneck.service is None
