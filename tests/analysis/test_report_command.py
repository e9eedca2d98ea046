"""``llmtrace report`` / ``compare`` end to end: a real instrumented app, its file, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.analysis.apps.delayed_app import DELAYS
from tests.analysis.conftest import REQUESTS, run_llmtrace


def test_report_recovers_injected_delays_and_names_the_bottleneck(delayed_traces: Path) -> None:
    result = run_llmtrace("report", str(delayed_traces), "--format", "json")
    data = json.loads(result.stdout)
    assert data["traces"] == REQUESTS
    for stage, injected in DELAYS.items():
        measured = data["stages"][stage]["mean"]
        assert measured == pytest.approx(injected, rel=0.10, abs=0.005), stage
    assert data["bottleneck"]["stage"] == "generation"
    assert sum(s["share"] for s in data["stages"].values()) == pytest.approx(1, abs=0.01)
    assert data["ttft"]["mean"] == pytest.approx(DELAYS["ttft"], rel=0.10, abs=0.005)
    assert data["models"]["delayed-model"]["calls"] == REQUESTS


def test_table_report_fits_80_columns(delayed_traces: Path) -> None:
    result = run_llmtrace("report", str(delayed_traces))
    lines = result.stdout.splitlines()
    assert any(line.lstrip().startswith("generation") for line in lines)
    assert "Bottleneck:" in result.stdout
    assert max(len(line) for line in lines) <= 80


def test_saved_report_and_trace_source_compare(delayed_traces: Path, tmp_path: Path) -> None:
    saved = tmp_path / "baseline.json"
    run_llmtrace("report", str(delayed_traces), "--format", "json", "--output", str(saved))
    result = run_llmtrace("compare", str(saved), str(delayed_traces), "--format", "json")
    data = json.loads(result.stdout)
    assert data["series"]["end_to_end"]["verdict"] == "no significant change"
    assert data["series"]["generation"]["p50"]["delta"] == pytest.approx(0, abs=1e-9)


def test_missing_source_is_one_line_error(tmp_path: Path) -> None:
    result = run_llmtrace("report", str(tmp_path / "nothing"), check=False)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "no traces at" in result.stderr
    assert "Traceback" not in result.stderr
