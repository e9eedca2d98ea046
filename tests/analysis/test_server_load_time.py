"""A model load the server reported (``llmtrace.server.load_time``, Ollama's ``load_duration``) is
stage ``load``, taken out of the call's ``ttft``: in the Python breakdown and, to the last bit,
in the native reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llmtrace import semconv as sc
from llmtrace.analysis.breakdown import model_phases
from llmtrace.analysis.model import KIND_CLIENT
from llmtrace.analysis.report import build_report
from llmtrace.analysis.sources import load_traces
from tests.analysis.otlp_lines import MS, T0, otlp_span, request_line
from tests.analysis.test_breakdown import stages_ms
from tests.analysis.trees import Tree


def _ollama_call(tree: Tree, start: float, end: float, **attributes: Any) -> str:
    return tree.add("chat llama3", start, end, stage="ttft", kind=KIND_CLIENT, **attributes)


def test_streamed_call_with_a_load_splits_it_off_the_first_token_wait() -> None:
    tree = Tree()
    _ollama_call(
        tree,
        0,
        1000,
        **{
            sc.TIME_TO_FIRST_TOKEN: 0.52,
            sc.SERVER_LOAD_TIME: 0.4,
            sc.SERVER_PROMPT_TIME: 0.1,
            sc.SERVER_GENERATION_TIME: 0.47,
            sc.SERVER_PROCESSING_TIME: 0.97,
        },
    )
    # server first token = total - generation = 500 ms; the client saw it at 520 ms
    assert stages_ms(tree) == {"network": 20, "load": 400, "ttft": 100, "generation": 480}


def test_non_streamed_call_with_a_load_splits_off_load_and_the_servers_decode() -> None:
    tree = Tree()
    _ollama_call(
        tree,
        0,
        3000,
        **{
            sc.SERVER_LOAD_TIME: 2.0,
            sc.SERVER_PROMPT_TIME: 0.15,
            sc.SERVER_GENERATION_TIME: 0.8,
            sc.SERVER_PROCESSING_TIME: 2.99,
        },
    )
    # network = 3000 - 2990; the server's first token at 2990 - 800 = 2190 ms: load 2000,
    # prompt 150, and 40 ms its parts do not name (counted as ttft)
    assert stages_ms(tree) == {"network": 10, "load": 2000, "ttft": 190, "generation": 800}


def test_a_load_longer_than_the_first_token_wait_is_cut_to_it() -> None:
    tree = Tree()
    call = _ollama_call(tree, 0, 300, **{sc.TIME_TO_FIRST_TOKEN: 0.1, sc.SERVER_LOAD_TIME: 5.0})
    phases = model_phases(tree.spans[call])
    assert phases.load == pytest.approx(0.1) and phases.ttft == 0.0 and phases.network == 0.0
    assert stages_ms(tree) == {"load": 100, "generation": 200}


def test_a_call_without_a_load_is_split_as_before() -> None:
    tree = Tree()
    call = _ollama_call(
        tree,
        0,
        500,
        **{sc.TIME_TO_FIRST_TOKEN: 0.12, sc.SERVER_PROMPT_TIME: 0.1, sc.SERVER_LOAD_TIME: 0.0},
    )
    assert model_phases(tree.spans[call]).load == 0.0
    assert stages_ms(tree) == {"network": 20, "ttft": 100, "generation": 380}


def _lines() -> list[str]:
    """Traces with Ollama-shaped calls: loads of every size, streamed or not, under a root."""
    lines = []
    for n in range(40):
        trace = f"{n + 1:032x}"
        root = f"{2 * n + 1:016x}"
        start = T0 + n * 10_000 * MS
        duration = (300 + 37 * n + (3000 if n % 4 == 2 else 0)) * MS
        attributes: dict[str, Any] = {
            "llmtrace__stage": "ttft",
            "gen_ai__operation__name": "chat" if n % 3 else "text_completion",
            "gen_ai__request__model": "llama3",
            "gen_ai__response__model": "llama3",
            "gen_ai__usage__input_tokens": 17 + n,
            "gen_ai__usage__output_tokens": 50 + n,
            "llmtrace__server__load_time": [0.0, 0.01 * n, 2.5, 0.123456789][n % 4],
            "llmtrace__server__prompt_time": 0.05 + 0.001 * n,
            "llmtrace__server__generation_time": 0.1 + 0.003 * n,
        }
        if n % 2:
            attributes["llmtrace__time_to_first_token"] = 0.08 + 0.011 * n
            attributes["gen_ai__request__stream"] = True
        if n % 5:
            attributes["llmtrace__server__processing_time"] = duration / 1e9 - 0.002
        spans = [
            otlp_span(trace, root, None, "answer", start, start + duration + 5 * MS),
            otlp_span(
                trace,
                f"{2 * n + 2:016x}",
                root,
                "chat llama3",
                start + MS,
                start + MS + duration,
                kind=3,
                **attributes,
            ),
        ]
        lines.append(request_line(spans))
    return lines


def _report(path: Path, native: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("LLMTRACE_NATIVE", "1" if native else "0")
    data = build_report(load_traces(str(path))).to_json()
    data.pop("generated_at")
    return data


def test_both_readers_report_the_same_load_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ollama.jsonl"
    path.write_text("\n".join(_lines()) + "\n")
    python_report = _report(path, native=False, monkeypatch=monkeypatch)
    assert python_report["stages"]["load"]["traces"] == 30  # every trace with a load above 0
    # loads of 2.5 s in calls long enough to hold them are counted whole
    assert python_report["stages"]["load"]["p95"] == pytest.approx(2.5)
    native_report = _report(path, native=True, monkeypatch=monkeypatch)
    for key in python_report:
        assert native_report[key] == python_report[key], key
