"""``llmtrace demo`` end to end at reduced size: real model, real embeddings, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model


def test_demo_measures_changes_one_thing_and_compares(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LLMTRACE_"))}
    env["COLUMNS"] = "120"
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "llmtrace", "demo", "--questions", "2", "--top-k", "4",
         "--max-tokens", "24", "--output-dir", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    stdout = done.stdout
    for expected in ("P50", "P90", "P95", "Bottleneck", "HTML report", "before / after"):
        assert expected in stdout, stdout
    assert (out / "demo-report.html").stat().st_size > 1000
    baseline = json.loads((out / "runs" / "demo-baseline.json").read_text())
    optimised = json.loads((out / "runs" / "demo-optimised.json").read_text())
    assert baseline["traces"] == optimised["traces"] == 2
    assert baseline["run"]["question_set_hash"] == optimised["run"]["question_set_hash"]
    assert baseline["run"]["model"] == "SmolLM2-135M-Instruct"
    assert {"embedding", "retrieval", "rerank", "ttft"} <= set(baseline["stages"])
