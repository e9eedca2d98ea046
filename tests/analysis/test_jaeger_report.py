"""The same traces in the file and in a real Jaeger (through a real Collector) give one report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.analysis.apps.delayed_app import DELAYS
from tests.analysis.conftest import REQUESTS, run_delayed_app_into_jaeger, run_llmtrace

pytestmark = pytest.mark.integration


def test_jaeger_source_gives_the_same_numbers_as_the_file(tracing_stack, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trace_file = tmp_path / "traces.jsonl"
    service = run_delayed_app_into_jaeger(tracing_stack, trace_file, REQUESTS, "delayed")
    from_file = json.loads(run_llmtrace("report", str(trace_file), "--format", "json").stdout)
    from_jaeger = json.loads(
        run_llmtrace(
            "report",
            tracing_stack.jaeger_url,
            "--service",
            service,
            "--lookback",
            "15m",
            "--format",
            "json",
        ).stdout
    )
    assert from_jaeger["traces"] == from_file["traces"] == REQUESTS
    assert set(from_jaeger["stages"]) == set(from_file["stages"])
    for stage in DELAYS:
        for stat in ("mean", "p50", "p95"):
            assert from_jaeger["stages"][stage][stat] == pytest.approx(
                from_file["stages"][stage][stat], abs=2e-6
            ), (stage, stat)
    assert from_jaeger["bottleneck"]["stage"] == from_file["bottleneck"]["stage"] == "generation"
    slowest = from_jaeger["slowest"][0]
    assert slowest["url"] == f"{tracing_stack.jaeger_url}/trace/{slowest['trace_id']}"
    assert slowest["trace_id"] == from_file["slowest"][0]["trace_id"]

    one = run_llmtrace(
        "report", tracing_stack.jaeger_url, "--trace-id", slowest["trace_id"], "--format", "json"
    )
    assert json.loads(one.stdout)["traces"] == 1


def test_jaeger_paging_splits_a_full_window(tracing_stack, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from llmtrace.analysis import sources

    trace_file = tmp_path / "traces.jsonl"
    service = run_delayed_app_into_jaeger(tracing_stack, trace_file, 12, "paged")
    page = sources.JAEGER_PAGE
    sources.JAEGER_PAGE = 5  # force several pages for 12 traces
    try:
        traceset = sources.load_traces(tracing_stack.jaeger_url, service=service, lookback="15m")
    finally:
        sources.JAEGER_PAGE = page
    assert len(traceset.traces) == 12
    assert len({t.trace_id for t in traceset.traces}) == 12
