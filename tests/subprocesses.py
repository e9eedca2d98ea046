"""Running an application in a real subprocess, the way users run one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without any ``OTEL_*`` or ``LLMTRACE_*`` setting, plus
    ``extra``: the subprocess sees only the configuration the test gives it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LLMTRACE_"))}
    env.update(extra)
    return env


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to completion (at most two minutes), capturing its text output."""
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def run_instrumented_app(
    app: str, cwd: Path, service: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run the unmodified ``app`` source as ``opentelemetry-instrument python app.py ARGS``, its
    spans going to llmtrace's file exporter; returns the finished process and the trace file."""
    (cwd / "app.py").write_text(app)
    traces = cwd / "traces.jsonl"
    env = clean_environment(
        OTEL_SERVICE_NAME=service,
        OTEL_TRACES_EXPORTER="llmtrace_file",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        LLMTRACE_FILE_PATH=str(traces),
    )
    launcher = Path(sys.executable).with_name("opentelemetry-instrument")
    return run([str(launcher), sys.executable, "app.py", *args], cwd, env), traces
