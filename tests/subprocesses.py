"""Running an application in a real subprocess, the way users run one."""

from __future__ import annotations

import os
import subprocess
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
