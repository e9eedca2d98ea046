"""Saved bench runs: the report JSON plus the run's metadata under ``"run"``.

``llmtrace compare`` reads these files and checks the metadata (question-set hash, concurrency,
model) to tell whether two runs are comparable.
"""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path
from typing import Any

from llmtrace.bench.runner import BenchResult
from llmtrace.errors import CommandError

RUN_KEY = "run"
DEFAULT_RUNS_DIR = Path(".llmtrace") / "runs"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def llmtrace_version() -> str:
    from llmtrace._version import __version__

    return __version__


def check_run_name(name: str) -> str:
    # The name becomes a file name and a span attribute: keep it to a safe alphabet.
    if not _SAFE_NAME.match(name):
        raise CommandError(
            f"run name {name!r} may only contain letters, digits, '.', '_' and '-' "
            "and must start with a letter or digit"
        )
    return name


def run_metadata(result: BenchResult, *, model: str | None = None) -> dict[str, Any]:
    plan = result.plan
    return {
        "name": plan.name,
        "question_set_hash": result.question_set_hash,
        "concurrency": plan.concurrency,
        "repeat": plan.repeat,
        "warmup": plan.warmup,
        "rate": plan.rate,
        "timeout": plan.timeout,
        "model": model,
        "llmtrace_version": llmtrace_version(),
        "python_version": platform.python_version(),
        "started_at": result.started_at.isoformat(),
        "ended_at": result.ended_at.isoformat() if result.ended_at else None,
        "requests": result.requests,
        "errors": result.errors,
        "timeouts": result.timeouts,
        "interrupted": result.interrupted,
    }


def run_path(name: str, runs_dir: Path = DEFAULT_RUNS_DIR) -> Path:
    return runs_dir / f"{check_run_name(name)}.json"


def save_run(report_json: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report_json, indent=2, default=str) + "\n", encoding="utf-8")
    # Replace atomically so a concurrent `llmtrace compare` never reads half a file.
    tmp.replace(path)
    return path


def resolve_run(name_or_path: str, runs_dir: Path = DEFAULT_RUNS_DIR) -> Path:
    """A saved run by name (``<runs_dir>/<name>.json``) or by path."""
    candidate = Path(name_or_path)
    if candidate.is_file():
        return candidate
    if _SAFE_NAME.match(name_or_path):
        by_name = runs_dir / f"{name_or_path}.json"
        if by_name.is_file():
            return by_name
    known = sorted(p.stem for p in runs_dir.glob("*.json")) if runs_dir.is_dir() else []
    hint = f" (saved runs: {', '.join(known)})" if known else f" (no runs saved in {runs_dir})"
    raise CommandError(f"no saved run {name_or_path!r}{hint}")


def load_run(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CommandError(f"cannot read saved run {path}: {exc}") from None
    if not isinstance(data, dict):
        raise CommandError(f"{path} is not a saved llmtrace run")
    return data
