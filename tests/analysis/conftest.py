"""Fixtures of the analysis tests: a trace directory written by a real instrumented app."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

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


def run_delayed_app_into_jaeger(
    tracing_stack: Any, trace_file: Path, requests: int, prefix: str
) -> str:
    """The delayed app's ``requests`` into ``trace_file`` and, through the stack's Collector, into
    its Jaeger under a service of its own (named from ``prefix``), once Jaeger holds every span;
    the service's name."""
    from tests.backends.fixtures import spans_in_file, wait_for_spans

    service = f"{prefix}-{uuid.uuid4().hex[:8]}"
    run_delayed_app(
        trace_file,
        requests,
        OTEL_SERVICE_NAME=service,
        DELAYED_APP_OTLP_ENDPOINT=tracing_stack.otlp_grpc_endpoint,
    )
    wait_for_spans(tracing_stack.jaeger_url, service, spans_in_file(trace_file))
    return service


@pytest.fixture(scope="session")
def delayed_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """50 requests of the delayed app, exported by llmtrace's file exporter."""
    directory = tmp_path_factory.mktemp("delayed") / ".llmtrace"
    run_delayed_app(directory / "traces.jsonl", REQUESTS)
    return directory
