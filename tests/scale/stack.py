"""Backends of the scalable layout on loopback: the binaries scripts/backends.sh builds (with
Prometheus), and the ``llmtrace`` command the tests read them back with."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.backends.fixtures import Backends, run_backends_script


def binaries() -> Backends:
    """Jaeger, the collector and Prometheus, built (or found current) by backends.sh."""
    return run_backends_script("--with-prometheus")


def prometheus_binary(backends: Backends) -> Path:
    assert backends.prometheus is not None, "backends.sh ran without --with-prometheus"
    return backends.prometheus


def llmtrace_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m llmtrace ARGS`` to completion, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "llmtrace", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
