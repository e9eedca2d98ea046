"""A request through a service llmtrace does not instrument: a Python gateway (llmtrace) calls
an orchestrator in Node.js (OpenTelemetry JS: sdk-node, instrumentation-http), which calls a
Python RAG service (llmtrace) that streams from the model.

Real processes on loopback, each hop through a TCP proxy that puts a known latency on the wire,
the orchestrator's own work (a policy check), the retrieval and the first token delayed by known
amounts. The report must hold one trace per request across the three services, name the
orchestrator's own time ``other`` in service orchestrator (never network), measure network as
the latency on the wire, and add each trace's stages up to its end-to-end time: from the files
the services export, and from Jaeger through the real Collector.
"""

from __future__ import annotations

import gzip
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmtrace.analysis.report import build_report
from llmtrace.analysis.report_model import Report
from llmtrace.analysis.sources import load_traces
from tests.hops.proxy import DelayingProxy
from tests.servers.model_server import ModelServer

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REQUESTS = 14
POLICY = 0.250  # the orchestrator's own work
RETRIEVAL = 0.080  # behind it, in the RAG service
FIRST_TOKEN = 0.150  # the model's
WIRE = 0.015  # each way on each of the two hops through a proxy
NETWORK = 4 * WIRE
SERVICES = ("gateway", "orchestrator", "rag")


@dataclass(frozen=True)
class Node:
    node: str
    node_modules: str


@pytest.fixture(scope="session")
def node() -> Node:
    """Node and the OpenTelemetry JS packages, installed by the set-up's own script (cached)."""
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "node_deps.sh")],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    found = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return Node(found["node"], found["node_modules"])


class _Sink(BaseHTTPRequestHandler):
    """OTLP/HTTP JSON in, one OTLP JSON line per export out: the file the orchestrator's real
    exporter writes through (OpenTelemetry JS has no file exporter)."""

    path_out: Path

    def do_POST(self) -> None:
        length = self.headers["content-length"]
        body = self.rfile.read(int(length)) if length is not None else self._chunked()
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        with self.path_out.open("ab") as out:
            out.write(body.replace(b"\n", b"") + b"\n")
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def _chunked(self) -> bytes:
        parts = []
        while size := int(self.rfile.readline().split(b";")[0], 16):
            parts.append(self.rfile.read(size))
            self.rfile.readline()
        self.rfile.readline()
        return b"".join(parts)

    def log_message(self, *args: Any) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, process: subprocess.Popen[bytes], name: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{name} exited with {process.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{name} is not listening on {port}")


@dataclass
class Fleet:
    directory: Path
    names: dict[str, str]  # role -> service.name


def run_fleet(
    node: Node,
    model_server: ModelServer,
    directory: Path,
    otlp: tuple[str, str] | None = None,
    middle: str = "node",
) -> Fleet:
    """The three services, ``REQUESTS`` requests through them, every process stopped (and so
    flushed). ``otlp``: (gRPC endpoint, HTTP endpoint) of a Collector to export to as well;
    ``middle``: the orchestrator in Node.js (``node``) or plain OpenTelemetry Python
    (``python``, which exports to the Collector only)."""
    directory.mkdir(parents=True, exist_ok=True)
    model_server.configure(first_token_delay=FIRST_TOKEN, token_delay=0.005)
    suffix = uuid.uuid4().hex[:6]
    names = {role: f"{role}-{suffix}" for role in SERVICES}
    ports = {role: _free_port() for role in SERVICES}
    to_orchestrator = DelayingProxy(ports["orchestrator"], WIRE).start()
    to_rag = DelayingProxy(ports["rag"], WIRE).start()
    sink_path = directory / "orchestrator.jsonl"
    handler = type("Sink", (_Sink,), {"path_out": sink_path})
    sink = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    traces_url = (
        f"{otlp[1]}/v1/traces" if otlp else f"http://127.0.0.1:{sink.server_address[1]}/v1/traces"
    )
    python_env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "LLMTRACE_EXPORTER": "file",
        "MODEL_URL": model_server.base_url,
        "RETRIEVAL_MS": str(RETRIEVAL * 1000),
        "ORCHESTRATOR_URL": to_orchestrator.url,
        **({"HOPS_OTLP_ENDPOINT": otlp[0]} if otlp else {}),
    }
    processes: list[tuple[str, subprocess.Popen[bytes]]] = []
    try:
        for role in ("rag", "orchestrator", "gateway"):
            if role == "orchestrator" and middle == "python":
                assert otlp is not None
                command = [sys.executable, str(HERE / "plain_service.py"), str(ports[role])]
                env = {
                    **os.environ,
                    "RAG_URL": f"{to_rag.url}/rag",
                    "POLICY_MS": str(POLICY * 1000),
                    "OTEL_SERVICE_NAME": names[role],
                    "OTEL_EXPORTER_OTLP_ENDPOINT": otlp[0],
                    "SPAN_COUNT_FILE": str(directory / "orchestrator.count"),
                }
            elif role == "orchestrator":
                command = [node.node, str(HERE / "node" / "orchestrator.js")]
                env = {
                    **os.environ,
                    "NODE_PATH": node.node_modules,
                    "PORT": str(ports[role]),
                    "RAG_URL": f"{to_rag.url}/rag",
                    "POLICY_MS": str(POLICY * 1000),
                    "OTEL_SERVICE_NAME": names[role],
                    "OTLP_TRACES_URL": traces_url,
                }
            else:
                command = [sys.executable, str(HERE / "services.py"), role, str(ports[role])]
                env = {
                    **python_env,
                    "OTEL_SERVICE_NAME": names[role],
                    "LLMTRACE_FILE_PATH": str(directory / f"{role}.jsonl"),
                }
            process = subprocess.Popen(command, env=env)
            processes.append((role, process))
            _wait_listening(ports[role], process, role)
        with httpx.Client(base_url=f"http://127.0.0.1:{ports['gateway']}", timeout=30) as client:
            for n in range(REQUESTS):
                response = client.post("/ask", json={"question": f"question {n}"})
                assert response.status_code == 200, response.text
                assert response.json()["answer"]
    finally:
        for _, process in reversed(processes):
            # uvicorn shuts down on SIGINT, then raises it again: KeyboardInterrupt, and the
            # service's exporters flush (services.py)
            process.send_signal(signal.SIGINT)
        for role, process in processes:
            assert process.wait(timeout=60) == 0, role
        sink.shutdown()
        to_orchestrator.stop()
        to_rag.stop()
    return Fleet(directory, names)


def check_report(report: Report, fleet: Fleet) -> None:
    """One trace per request across the three services, the orchestrator's time its own, network
    what the wire added, and the bottleneck named with its service."""
    names = fleet.names
    assert report.traces == REQUESTS
    assert report.orphans == 0
    assert set(report.services) == set(names.values())
    assert all(summary.traces == REQUESTS for summary in report.services.values())
    assert report.bottleneck is not None
    assert report.bottleneck.stage == "other"
    assert report.bottleneck.service == names["orchestrator"]
    orchestrator = report.services[names["orchestrator"]]
    own = orchestrator.stages["other"].distribution
    assert POLICY <= own.p50 < POLICY + 0.030
    # What the wire took, and a few ms per crossing: the proxies forward from threads, and a
    # server starts its span after parsing the request and ends it after its last write, which a
    # busy machine stretches now and then (so the median, and a margin). The orchestrator's own
    # 250 ms, counted as network before, is far outside it.
    network = report.stages["network"].distribution
    assert NETWORK - 0.005 <= network.p50 < NETWORK + 0.040
    # the orchestrator's part of the network: its hop to the RAG service, outside the RAG's span
    hop = orchestrator.stages["network"].distribution
    assert 2 * WIRE - 0.005 <= hop.p50 < 2 * WIRE + 0.025
    rag = report.services[names["rag"]]
    # (span times are wall-clock readings: a clock adjustment during a request can take a few
    # tens of microseconds off one, measured once at 0.079939 s for an 80 ms sleep)
    assert RETRIEVAL - 0.001 <= rag.stages["retrieval"].distribution.p50 < RETRIEVAL + 0.020
    assert FIRST_TOKEN <= rag.stages["ttft"].distribution.p50 < FIRST_TOKEN + 0.030
    # the hop into the RAG service was its caller's: what network it has is its model call's
    # connection set-up (llmtrace's HTTP phases), not the wire of the hop
    assert rag.stages.get("network") is None or rag.stages["network"].distribution.p50 < WIRE


def check_traces(source: str, **filters: Any) -> None:
    """Each trace's stages add up to its end-to-end time, by stage and by service alike."""
    columns = load_traces(source, **filters).collector.collect(None)
    assert len(columns.durations) == REQUESTS
    for index, duration in enumerate(columns.durations):
        by_stage = sum(column[index] for column in columns.columns.values())
        by_service = sum(
            column[index] for stages in columns.services.values() for column in stages.values()
        )
        assert by_stage == pytest.approx(duration, abs=1e-6)
        assert by_service == pytest.approx(duration, abs=1e-6)


@pytest.fixture(scope="module")
def fleet_in_files(
    node: Node, _model_server_process: ModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Fleet:
    return run_fleet(node, _model_server_process, tmp_path_factory.mktemp("hops") / "traces")


@pytest.mark.parametrize("reader", ["native", "python"])
def test_a_node_service_between_two_llmtrace_services_from_files(
    fleet_in_files: Fleet, reader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMTRACE_NATIVE", "1" if reader == "native" else "0")
    source = str(fleet_in_files.directory)
    report = build_report(load_traces(source, service=fleet_in_files.names["gateway"]))
    check_report(report, fleet_in_files)
    check_traces(source, service=fleet_in_files.names["gateway"])


@pytest.mark.parametrize("middle", ["node", "python"])
def test_a_service_without_llmtrace_between_two_llmtrace_services_through_the_collector_to_jaeger(
    middle: str,
    node: Node,
    _model_server_process: ModelServer,
    tracing_stack: Any,
    tmp_path: Path,
) -> None:
    """The middle service is Node.js with OpenTelemetry JS, or Python with OpenTelemetry's own
    instrumentations and no llmtrace; either way its spans reach Jaeger through the Collector."""
    from tests.backends.fixtures import spans_in_file, wait_for_spans

    fleet = run_fleet(
        node,
        _model_server_process,
        tmp_path / "traces",
        (tracing_stack.otlp_grpc_endpoint, tracing_stack.otlp_http_endpoint),
        middle=middle,
    )
    gateway = fleet.names["gateway"]
    every_span = sum(spans_in_file(path) for path in fleet.directory.glob("*.jsonl"))
    # the middle service's spans went to the Collector only: the Node.js one exports two a
    # request, the Python one counts what it exported
    if middle == "node":
        every_span += 2 * REQUESTS
    else:
        every_span += int((fleet.directory / "orchestrator.count").read_text())
    wait_for_spans(tracing_stack.jaeger_url, gateway, every_span)
    report = build_report(load_traces(tracing_stack.jaeger_url, service=gateway))
    check_report(report, fleet)
    check_traces(tracing_stack.jaeger_url, service=gateway)
