"""``llmtrace demo`` end to end at reduced size: real model, real embeddings, real collector."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.model, pytest.mark.integration, pytest.mark.computes]


def jaeger_trace(url: str, deadline: float) -> dict[str, Any]:
    """The trace behind a Jaeger UI link, via the API (export and ingestion take a moment)."""
    base, trace_id = url.split("/trace/")
    while True:
        response = httpx.get(f"{base}/api/v3/traces/{trace_id}", timeout=10)
        if response.status_code == 200:
            return dict(response.json())
        if time.monotonic() > deadline:
            raise AssertionError(f"trace {trace_id} not in Jaeger: {response.status_code}")
        time.sleep(0.5)


def test_demo_measures_changes_one_thing_and_compares(tmp_path: Path, tracing_stack: Any) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LLMTRACE_"))}
    env["COLUMNS"] = "120"
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "llmtrace", "demo", "--questions", "10", "--top-k", "8",
         "--max-tokens", "24", "--output-dir", str(out),
         "--otlp", tracing_stack.otlp_grpc_endpoint, "--jaeger-url", tracing_stack.jaeger_url],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    stdout = done.stdout
    for expected in ("P50", "P90", "P95", "Bottleneck", "HTML report", "before / after"):
        assert expected in stdout, stdout
    assert (out / "demo-report.html").stat().st_size > 1000
    baseline = json.loads((out / "runs" / "demo-baseline.json").read_text())
    optimised = json.loads((out / "runs" / "demo-optimised.json").read_text())
    assert baseline["traces"] == optimised["traces"] == 10
    # Short answers leave the eight passages' prompt processing as the bottleneck; three
    # passages make every request faster, and ten requests per run are enough to say so.
    words = " ".join(stdout.split())  # the console wraps long lines
    assert "retrieve fewer passages: top_k 8 -> 3" in words
    assert "Verdict: end-to-end faster" in words, stdout[-4000:]
    # both runs asked the same ten questions: the verdict compares each with itself
    assert "signed-rank test over the 10 questions asked in both runs" in words
    assert "Each run measured 10 requests (1 warm-up left out)" in words
    assert "the P90 and the P95 would need 36 and 72 requests per run" in words
    assert baseline["run"]["question_set_hash"] == optimised["run"]["question_set_hash"]
    assert baseline["run"]["model"] == "SmolLM2-135M-Instruct"
    assert {"embedding", "retrieval", "rerank", "ttft"} <= set(baseline["stages"])
    # Token counts the model server reported: the prompt of four passages, a capped answer.
    usage = baseline["models"]["SmolLM2-135M-Instruct"]
    assert 100 < usage["input_tokens"]["mean"] < 2048
    assert 1 <= usage["output_tokens"]["mean"] <= 24
    assert usage["output_tokens_per_second"]["mean"] > 0
    advice = " ".join(baseline["bottleneck"]["advice"])
    assert "prompt size is unknown" not in advice
    if baseline["bottleneck"]["stage"] == "ttft":
        assert re.search(r"prompts averaged [\d,]+ input tokens", advice), advice

    # The same spans reached Jaeger through the collector; the printed link opens the slowest.
    match = re.search(r"(http://\S+/trace/[0-9a-f]{32})", stdout.replace("\n", ""))
    assert match, stdout
    trace = jaeger_trace(match.group(1), time.monotonic() + 30)
    names = {
        span["name"]
        for resource in trace["result"]["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    }
    assert {"bench demo-baseline", "retrieval lumora-handbook"} <= names
