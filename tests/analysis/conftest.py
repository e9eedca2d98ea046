"""Fixtures of the analysis tests: a trace directory written by a real instrumented app."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parent / "apps"


@pytest.fixture(params=["native", "python"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Trace files read by the native reader (``llmtrace._native``), then by the Python one."""
    monkeypatch.setenv("LLMTRACE_NATIVE", "1" if request.param == "native" else "0")
    return str(request.param)


REPO = Path(__file__).resolve().parents[2]
REQUESTS = 50


def run_llmtrace(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The real command line, in a child process."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "llmtrace", *args],
        capture_output=True,
        text=True,
        env=env,
        check=check,
        timeout=300,
    )


def run_delayed_app(trace_file: Path, requests: int, **env: str) -> None:
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "LLMTRACE_EXPORTER": "file",
        "LLMTRACE_FILE_PATH": str(trace_file),
        **env,
    }
    subprocess.run(
        [sys.executable, str(APPS / "delayed_app.py"), str(requests)],
        env=environment,
        check=True,
        timeout=300,
    )


@pytest.fixture(scope="session")
def delayed_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """50 requests of the delayed app, exported by llmtrace's file exporter."""
    directory = tmp_path_factory.mktemp("delayed") / ".llmtrace"
    run_delayed_app(directory / "traces.jsonl", REQUESTS)
    return directory
