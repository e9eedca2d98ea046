"""Request metrics leave a real application process over OTLP and arrive at the real Collector."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import httpx

from tests.backends.fixtures import CONFIG_DIR, TracingStack, new_prometheus, stopped_at_exit
from tests.scale import stack
from tests.subprocesses import clean_environment, run

APP = Path(__file__).parent / "apps" / "rag_app.py"


def _series(text: str, metric: str) -> dict[str, float]:
    """``metric`` lines of a Prometheus exposition, by their label set."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(rf"{metric}\{{(.*)\}} (\S+)", line)
        if match:
            found[match.group(1)] = float(match.group(2))
    return found


def test_an_app_exports_its_request_breakdown_to_the_collector(
    tracing_stack: TracingStack, tmp_path: Path
) -> None:
    env = clean_environment(
        OTEL_SERVICE_NAME="scale-export-app",
        OTEL_EXPORTER_OTLP_ENDPOINT=tracing_stack.otlp_grpc_endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
    )
    done = run([sys.executable, str(APP), "20", "40", "10"], tmp_path, env)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 30
    while True:
        text = httpx.get(tracing_stack.prometheus_url, timeout=5).text
        counts = {
            labels: value
            for labels, value in _series(text, "llmtrace_request_duration_seconds_count").items()
            if 'service_name="scale-export-app"' in labels or 'job="scale-export-app"' in labels
        }
        if sum(counts.values()) >= 20 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sum(counts.values()) == 20, text[-3000:]
    failed = [labels for labels in counts if 'error_type="TimeoutError"' in labels]
    assert len(failed) == 1 and counts[failed[0]] == 2
    assert all('llmtrace_request_name="ask"' in labels for labels in counts)
    assert all('gen_ai_request_model="tiny-chat"' in labels for labels in counts)
    stages = _series(text, "llmtrace_request_stage_duration_seconds_sum")
    retrieval = sum(
        v
        for k, v in stages.items()
        if 'llmtrace_stage="retrieval"' in k and "scale-export-app" in k
    )
    # 20 retrievals of at least 40 ms each
    assert 0.8 <= retrieval < 0.8 * 3

    # Prometheus scraping this collector with collector-config/prometheus.yml (compose's
    # `metrics` profile) reads the request breakdown back under the service's own name
    found = stack.binaries()
    target = tracing_stack.prometheus_url.removeprefix("http://").removesuffix("/metrics")
    prometheus, url = new_prometheus(
        stack.prometheus_binary(found), CONFIG_DIR / "prometheus.yml", [target], tmp_path
    )
    with stopped_at_exit(prometheus):
        prometheus.start()
        query = 'sum(llmtrace_request_duration_seconds_count{job="scale-export-app"})'
        deadline = time.monotonic() + 30
        while True:
            body = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=5).json()
            if body["data"]["result"] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        report = stack.llmtrace_cli(
            *("report", "--format", "json"), *("--prometheus", url, "--service", "scale-export-app")
        )
    assert report.returncode == 0, report.stderr
    figures = json.loads(report.stdout)
    assert figures["traces"] == 20
    assert figures["stages"]["retrieval"]["mean"] >= 0.04
    assert figures["stages"]["retrieval"]["traces"] == 20
