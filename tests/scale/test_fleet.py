"""The issue's acceptance: three application processes, two gateways load-balancing by trace id,
two tail-sampling collectors, Prometheus and Jaeger, all real binaries on loopback.

``llmtrace report --prometheus`` gives the same stage table, within one bucket, as
``llmtrace report`` over a complete file export of the same requests; the request count is
exact although the samplers kept only some traces for Jaeger; every trace Jaeger holds is
complete; and the service and route filters single out the slow application.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmtrace.analysis.sources import load_traces
from llmtrace.sdk.request_metrics import STAGE_BUCKETS
from tests.backends.fixtures import (
    CONFIG_DIR,
    LOOPBACK,
    BackendProcess,
    _free_ports,
    new_jaeger,
    new_prometheus,
    stopped_at_exit,
)
from tests.scale import stack
from tests.subprocesses import clean_environment

pytestmark = pytest.mark.integration

APP = Path(__file__).parent / "apps" / "rag_app.py"
GATEWAY_CONFIG = CONFIG_DIR / "otel-gateway.yaml"
SAMPLER_CONFIG = CONFIG_DIR / "otel-sampler.yaml"
PROMETHEUS_CONFIG = CONFIG_DIR / "prometheus-scale.yml"
REQUESTS = 40  # per application
ERROR_EVERY = 8
KEEP_PERCENT = 20


@dataclass(frozen=True)
class Fleet:
    gateways: list[str]  # OTLP/gRPC endpoints
    prometheus_url: str
    jaeger_url: str


def _collector(
    otelcol: Path, config: Path, name: str, log_dir: Path, env: dict[str, str]
) -> tuple[BackendProcess, int]:
    grpc, http, health, telemetry = _free_ports(4)
    env = {
        "OTELCOL_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{grpc}",
        "OTELCOL_OTLP_HTTP_ENDPOINT": f"{LOOPBACK}:{http}",
        "OTELCOL_HEALTH_ENDPOINT": f"{LOOPBACK}:{health}",
        "OTELCOL_TELEMETRY_HOST": LOOPBACK,
        "OTELCOL_TELEMETRY_PORT": str(telemetry),
        **env,
    }
    process = BackendProcess(
        name, [str(otelcol), f"--config={config}"], env, f"http://{LOOPBACK}:{health}/", log_dir
    )
    return process, grpc


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    backends = stack.binaries()
    log_dir = tmp_path_factory.mktemp("fleet")
    jaeger = new_jaeger(backends, log_dir)
    samplers = []
    metrics_ports = []
    for i in (1, 2):
        (prometheus_port,) = _free_ports(1)
        metrics_ports.append(prometheus_port)
        samplers.append(
            _collector(
                backends.otelcol,
                SAMPLER_CONFIG,
                f"sampler-{i}",
                log_dir,
                {
                    "OTELCOL_JAEGER_ENDPOINT": jaeger.otlp_grpc_endpoint,
                    "OTELCOL_PROMETHEUS_ENDPOINT": f"{LOOPBACK}:{prometheus_port}",
                    "OTELCOL_DECISION_WAIT": "2s",
                    "OTELCOL_SLOW_MS": "60000",
                    "OTELCOL_KEEP_PERCENT": str(KEEP_PERCENT),
                },
            )
        )
    prometheus, prometheus_url = new_prometheus(
        stack.prometheus_binary(backends),
        PROMETHEUS_CONFIG,
        [f"{LOOPBACK}:{port}" for port in metrics_ports],
        log_dir,
    )
    sampler_list = "[" + ", ".join(f"{LOOPBACK}:{port}" for _, port in samplers) + "]"
    gateways = [
        _collector(
            backends.otelcol,
            GATEWAY_CONFIG,
            f"gateway-{i}",
            log_dir,
            {
                "OTELCOL_SAMPLERS": sampler_list,
                "OTELCOL_PROMETHEUS_OTLP": f"{prometheus_url}/api/v1/otlp",
            },
        )
        for i in (1, 2)
    ]
    processes = [g for g, _ in gateways] + [s for s, _ in samplers] + [prometheus, jaeger.process]
    with stopped_at_exit(*processes):
        for process in reversed(processes):
            process.start()
        yield Fleet(
            gateways=[f"http://{LOOPBACK}:{port}" for _, port in gateways],
            prometheus_url=prometheus_url,
            jaeger_url=jaeger.query_url,
        )


def _run_apps(fleet: Fleet, files: Path) -> None:
    apps = [
        # service, route, gateway, retrieval milliseconds
        ("rag", "ask", fleet.gateways[0], 30),
        ("rag", "ask", fleet.gateways[1], 30),
        ("rag-slow", "ask-deep", fleet.gateways[0], 150),
    ]
    running = []
    for i, (service, route, gateway, retrieval) in enumerate(apps):
        env = clean_environment(
            OTEL_SERVICE_NAME=service,
            OTEL_EXPORTER_OTLP_ENDPOINT=gateway,
            OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
            OTEL_METRIC_EXPORT_INTERVAL="1000",
            APP_ROUTE=route,
            APP_TRACE_FILE=str(files / f"app-{i}.jsonl"),
        )
        running.append(
            subprocess.Popen(
                [sys.executable, str(APP), str(REQUESTS), str(retrieval), str(ERROR_EVERY)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for process in running:
        _out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err


def _report(*args: str) -> dict[str, Any]:
    done = stack.llmtrace_cli("report", *args, "--format", "json")
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def _prometheus(fleet: Fleet, promql: str) -> float:
    body = httpx.get(f"{fleet.prometheus_url}/api/v1/query", params={"query": promql}).json()
    return sum(float(sample["value"][1]) for sample in body["data"]["result"])


def _within_one_bucket(estimate: float, exact: float) -> bool:
    index = bisect_left(STAGE_BUCKETS, exact)
    low = STAGE_BUCKETS[index - 1] if index > 0 else 0.0
    high = STAGE_BUCKETS[min(index, len(STAGE_BUCKETS) - 1)]
    return abs(estimate - exact) <= high - low


def _jaeger_traces(fleet: Fleet) -> dict[str, int]:
    spans: dict[str, int] = {}
    for service in ("rag", "rag-slow"):
        traceset = load_traces(fleet.jaeger_url, service=service, lookback="1h", limit=1000)
        for trace in traceset.traces:
            spans[trace.trace_id] = len(trace.spans())
    return spans


def test_fleet_breakdown_from_prometheus_matches_the_complete_file(
    fleet: Fleet, tmp_path: Path
) -> None:
    files = tmp_path / "export"
    files.mkdir()
    _run_apps(fleet, files)
    sent = 3 * REQUESTS

    # the request metrics reach Prometheus through the gateways
    deadline = time.monotonic() + 60
    while _prometheus(fleet, "sum(llmtrace_request_duration_seconds_count)") < sent:
        assert time.monotonic() < deadline, "the request metrics did not all arrive"
        time.sleep(1)

    exact = _report(str(files))
    assert exact["traces"] == sent
    fleet_report = _report("--prometheus", fleet.prometheus_url, "--lookback", "10m")
    assert fleet_report["traces"] == sent  # every request, whatever the samplers kept
    assert fleet_report["figures_from"]["source"] == "prometheus"
    assert fleet_report["stages"].keys() == exact["stages"].keys()
    for stage, figures in exact["stages"].items():
        for quantile in ("p50", "p95"):
            estimate = fleet_report["stages"][stage][quantile]
            assert _within_one_bucket(estimate, figures[quantile]), (stage, quantile, estimate)
        assert fleet_report["stages"][stage]["mean"] == pytest.approx(figures["mean"], rel=1e-6)
    for quantile in ("p50", "p95"):
        assert _within_one_bucket(
            fleet_report["end_to_end"][quantile], exact["end_to_end"][quantile]
        )

    # tail sampling: errors and a share of the rest; each kept trace is whole
    deadline = time.monotonic() + 60
    errors = 3 * (REQUESTS // ERROR_EVERY)
    while len(held := _jaeger_traces(fleet)) < errors:
        assert time.monotonic() < deadline, f"Jaeger holds {len(held)} traces"
        time.sleep(1)
    time.sleep(3)  # decisions still in flight
    held = _jaeger_traces(fleet)
    assert errors <= len(held) < sent
    complete = {trace.trace_id: len(trace.spans()) for trace in load_traces(str(files)).traces}
    assert {trace_id: complete[trace_id] for trace_id in held} == held

    # the filters single out the slow application
    slow = _report(
        "--prometheus", fleet.prometheus_url, "--lookback", "10m", "--service", "rag-slow"
    )
    route = _report(
        "--prometheus", fleet.prometheus_url, "--lookback", "10m", "--route", "ask-deep"
    )
    fast = _report("--prometheus", fleet.prometheus_url, "--lookback", "10m", "--service", "rag")
    assert slow["traces"] == route["traces"] == REQUESTS
    assert fast["traces"] == 2 * REQUESTS
    assert slow["stages"]["retrieval"]["p50"] >= 0.15 > 0.1 > fast["stages"]["retrieval"]["p50"]
    assert route["stages"]["retrieval"] == slow["stages"]["retrieval"]
    model = _report(
        "--prometheus", fleet.prometheus_url, "--lookback", "10m", "--model", "tiny-chat"
    )
    assert model["traces"] == sent
    unknown = stack.llmtrace_cli("report", "--prometheus", fleet.prometheus_url, "--model", "x")
    assert unknown.returncode == 2 and "no requests" in unknown.stderr

    # the table, as a person reads it
    table = stack.llmtrace_cli("report", "--prometheus", fleet.prometheus_url)
    assert table.returncode == 0, table.stderr
    assert "retrieval" in table.stdout and "figures from Prometheus" in table.stderr

    # compare two windows of the same metrics: the slow service against the fast one's figures
    # is not possible in one window, so the same window twice: no change, figures equal
    done = stack.llmtrace_cli(
        *("compare", "--format", "json"),
        *("--prometheus", fleet.prometheus_url, "--service", "rag-slow"),
        *("--baseline-window", "10m", "--window", "10m@now"),
    )
    assert done.returncode == 0, done.stderr
    comparison = json.loads(done.stdout)
    assert comparison["baseline"]["traces"] == comparison["candidate"]["traces"] == REQUESTS
    retrieval = comparison["series"]["retrieval"]["p50"]
    assert retrieval["baseline"] == retrieval["candidate"] == slow["stages"]["retrieval"]["p50"]
    # judged from the histograms (test_fleet_compare.py has windows that differ)
    assert comparison["method"]["figures"] == "histograms"
    for row in comparison["series"].values():
        assert row["verdict"] == row["mean"]["verdict"] == "no significant change"
    # an earlier window, before any request: said in one line, not a traceback
    done = stack.llmtrace_cli(
        "compare",
        *("--prometheus", fleet.prometheus_url),
        *("--baseline-window", "1m@30m", "--window", "10m"),
    )
    assert done.returncode == 2
    assert "no requests" in done.stderr
