"""``llmtrace report`` on traces the peers' own instrumentations wrote, for real.

Each peer runs a small RAG application (``apps/rag_app.py``) in the peers virtualenv
(``scripts/peers.sh``), against the simulated model server with a 300 ms first token; its spans
are written as OTLP JSON by the OpenTelemetry SDK's own encoder, and the real command line reads
them, natively and in Python. The same spans, sent as OTLP protobuf to a real Collector, are read
back from Jaeger and give the same report.

Each peer's application runs once per module, writing its file and sending to the Collector at
once: both tests of a peer read that one run (the Collector's exporter sends each span as it
ends, never inside a model call's wait for its first token, which the timing checks measure).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import median
from typing import Any

import pytest

from tests.backends.fixtures import spans_in_file, wait_for_spans
from tests.build_cache import CACHE
from tests.servers.model_server import ModelServer
from tests.subprocesses import clean_environment, run

REPO = Path(__file__).resolve().parents[2]
APP = Path(__file__).resolve().parent / "apps" / "rag_app.py"
PEERS_PYTHON = CACHE / "peers-venv" / "bin" / "python"
REQUESTS = 5
FIRST_TOKEN = 0.300
# The report's TTFT against what the server did (the injected delay plus its own lateness): the
# client's share of a first-token time is sending the request and reading the first chunk
TTFT_OVER_SERVER = 0.010
# Any one request's client share, loosely: the first call also opens the connection and runs
# the peer's one-time set-up (measured up to 32 ms), and a stall of the shared machine lands here
CLIENT_OVERHEAD_MAX = 0.050


@dataclass(frozen=True)
class Peer:
    records_first_token: bool
    """whether it records a first-token time on the model call's span"""
    has_retrieval: bool
    """whether its idiom has a retrieval span llmtrace can recognise"""
    usage_on_the_call: bool = True
    """whether the token counts are on the model call's span"""


PEERS = {
    # openai-v2 2.4b0 does not hand stream chunks to util-genai 1.1b0: no first-token time
    "opentelemetry-genai": Peer(False, True),
    "openinference": Peer(True, True),
    "langfuse": Peer(True, True),
    # traceloop's @task is structure; its retrieval shows through the instrumented vector store
    # (qdrant-client's query_points, inside the task)
    "openllmetry": Peer(False, True),
    # Logfire's call span ends when the response headers are in; the stream's end is a log (an
    # instant, carrying the token counts) and no first-token time is written anywhere
    "logfire": Peer(False, True, usage_on_the_call=False),
    # OpenLIT 1.45.0 times its gen_ai.server.time_to_first_token from when the stream object is
    # handed back (the response headers are in) to the first chunk of any kind, the role-only
    # one included, which servers send with the headers: a fraction of a millisecond, not a
    # first-token time, so the report reads none
    "openlit": Peer(False, True),
}


@pytest.fixture(scope="module")
def peers_python() -> Path:
    if not PEERS_PYTHON.exists():
        pytest.fail(f"no peers virtualenv at {PEERS_PYTHON}: run scripts/peers.sh")
    return PEERS_PYTHON


def _serve(model_server: ModelServer) -> None:
    # nothing before the first token: the role-only first chunk comes with it, as a server that
    # streams from its first token sends it (the peers time the first chunk)
    model_server.configure(
        headers_delay=FIRST_TOKEN,
        first_token_delay=FIRST_TOKEN,
        token_delay=0.01,
        tokens=["Paris", " has", " 2.1", " million", " people", "."],
    )


def _run_app(
    peer: str, python: Path, model_server: ModelServer, where: Path, *collector: str
) -> Path:
    """The peer's application, REQUESTS requests; its spans in a file (and to a Collector, given
    its OTLP/gRPC endpoint and a service name)."""
    path = where / f"{peer}.jsonl"
    env = clean_environment(OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental")
    argv = [str(python), str(APP), peer, model_server.base_url, str(path), str(REQUESTS)]
    result = run([*argv, *collector], where, env)
    assert result.returncode == 0, result.stderr
    return path


@dataclass(frozen=True)
class PeerRun:
    """One run of a peer's application: its trace file, the service its spans reached the
    Collector as, and the server's own first-token times for its calls."""

    path: Path
    service: str
    server_first_tokens: list[float]


@pytest.fixture(scope="module")
def peer_runs() -> dict[str, PeerRun]:
    """The runs made so far in this module, by peer."""
    return {}


@pytest.fixture
def peer_run(  # type: ignore[no-untyped-def]
    peer: str,
    peer_runs: dict[str, PeerRun],
    peers_python: Path,
    model_server: ModelServer,
    tracing_stack,
    tmp_path_factory: pytest.TempPathFactory,
) -> PeerRun:
    """The test's peer's run, made by the first test that asks for it."""
    if peer not in peer_runs:
        _serve(model_server)
        service = f"rag-{peer}-{uuid.uuid4().hex[:8]}"
        endpoint = tracing_stack.otlp_grpc_endpoint
        where = tmp_path_factory.mktemp(peer)
        path = _run_app(peer, peers_python, model_server, where, endpoint, service)
        peer_runs[peer] = PeerRun(path, service, _server_first_tokens(model_server))
    return peer_runs[peer]


def _report(*args: str, native: bool = True) -> dict[str, Any]:
    env = clean_environment(PYTHONPATH=str(REPO), LLMTRACE_NATIVE="1" if native else "0")
    result = subprocess.run(
        [sys.executable, "-m", "llmtrace", "report", *args, "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    data.pop("generated_at")
    return data


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _recorded_first_tokens(path: Path) -> list[float]:
    """First-token times (seconds after the span's start) as the peers wrote them, in the order
    the calls started: OpenInference's first-token event, Langfuse's completion start time,
    OpenLIT's time to first token."""
    found = []
    for line in path.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    start = int(span["startTimeUnixNano"])
                    for event in span.get("events", []):
                        if event["name"] == "First Token Stream Event":
                            found.append((start, (int(event["timeUnixNano"]) - start) / 1e9))
                    for attribute in span.get("attributes", []):
                        value = attribute["value"]
                        if attribute["key"] == "langfuse.observation.completion_start_time":
                            text = json.loads(value["stringValue"])
                            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
                            # In whole microseconds, as written: seconds since the epoch as a
                            # float keep only about a quarter of a microsecond.
                            micros = (moment - _EPOCH) // timedelta(microseconds=1)
                            found.append((start, (micros * 1000 - start) / 1e9))
                        if attribute["key"] == "gen_ai.server.time_to_first_token":
                            found.append((start, value["doubleValue"]))
    assert len(found) == REQUESTS
    return [seconds for _, seconds in sorted(found)]


def _server_first_tokens(model_server: ModelServer) -> list[float]:
    """What the server did per call: from the request's arrival to its first token's sending."""
    calls = [r for r in model_server.requests if r.path.endswith("/chat/completions")]
    assert len(calls) == REQUESTS
    times = []
    for call in calls:
        assert call.first_token_sent_at is not None
        times.append(call.first_token_sent_at - call.arrived_at)
    return times


@pytest.mark.parametrize("peer", sorted(PEERS))
def test_a_peers_traces_give_the_breakdown(peer: str, peer_run: PeerRun) -> None:
    expected = PEERS[peer]
    path = peer_run.path
    report = _report(str(path))
    assert _report(str(path), native=False) == report
    assert report["traces"] == REQUESTS  # one trace per request
    stages = report["stages"]
    assert {"ttft", "tool"} <= set(stages)
    assert ("retrieval" in stages) == expected.has_retrieval
    assert report["evidence"]["model_calls"] == REQUESTS
    assert report["unassigned_spans"] == 0
    (usage,) = report["models"].values()
    if expected.usage_on_the_call:
        assert usage["input_tokens"]["p50"] == 10
    server = peer_run.server_first_tokens
    # the server's own lateness (its sleep overshooting on a busy machine) is part of what the
    # client waits for; loosely bounded, so that the delay is the one injected
    assert max(server) - FIRST_TOKEN < CLIENT_OVERHEAD_MAX, server
    assert report["bottleneck"]["stage"] == "ttft"
    if expected.records_first_token:
        recorded = _recorded_first_tokens(path)
        # the report reads exactly what the peer recorded
        assert report["ttft"]["p50"] == pytest.approx(median(recorded))
        # and that is what the server did, plus the client's sending and first read
        over = report["ttft"]["p50"] - median(server)
        assert -0.002 < over < TTFT_OVER_SERVER, (recorded, server)
        overheads = [client - done for client, done in zip(recorded, server, strict=True)]
        assert max(overheads) < CLIENT_OVERHEAD_MAX, overheads
        assert "generation" in stages
    else:
        assert report["ttft"] is None
        assert report["evidence"]["first_token_unrecorded"] == REQUESTS
        advice = " ".join(report["bottleneck"]["advice"])
        assert "first-token time not recorded" in advice


def _differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where two reports differ, numbers compared to a nanosecond (sums in another order).
    A difference of exactly one nanosecond is within it: Jaeger hands Logfire's instants back
    1 ns long, so the self time left to their parent ("answer {question}", unclaimed) is 1 ns
    shorter from Jaeger, and 1e-9 against a 1e-9 bound passed or failed on the float's last bit.
    """
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        return [d for k in keys for d in _differences(a.get(k), b.get(k), f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in _differences(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float | int):
        return [] if b == pytest.approx(a, rel=1e-9, abs=1.5e-9) else [f"{where}: {a} != {b}"]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


@pytest.mark.parametrize("peer", sorted(PEERS))
def test_a_peers_traces_read_back_from_jaeger_give_the_files_report(  # type: ignore[no-untyped-def]
    peer: str, peer_run: PeerRun, tracing_stack
) -> None:
    path, service = peer_run.path, peer_run.service
    wait_for_spans(tracing_stack.jaeger_url, service, spans_in_file(path))
    from_file = _report(str(path))
    from_jaeger = _report(tracing_stack.jaeger_url, "--service", service, "--lookback", "15m")
    for report in (from_file, from_jaeger):
        for key in ("source", "service", "jaeger_url", "samples"):
            report.pop(key, None)
        # the same traces; only the links to them differ
        for slow in report.pop("slowest"):
            slow.pop("url", None)
            report.setdefault("slowest_ids", []).append(slow["trace_id"])
        for traces in report["exemplars"].values():
            for trace in traces:
                trace.pop("url", None)
        # Jaeger hands a span of no length (Logfire's logs) back 1 ns long: such an instant
        # appears among the spans no stage claims and splits the critical path around it
        evidence = report["evidence"]
        evidence["unclaimed_spans"] = [s for s in evidence["unclaimed_spans"] if s["mean"] > 1e-6]
        path = report["waterfall"]["critical_path"]
        merged = path[:1]
        for stage, start, end in path[1:]:
            if stage == merged[-1][0] and start == merged[-1][2]:
                merged[-1] = [stage, merged[-1][1], end]
            else:
                merged.append([stage, start, end])
        report["waterfall"]["critical_path"] = merged
    assert from_file["traces"] == REQUESTS
    assert not _differences(from_file, from_jaeger), "\n".join(_differences(from_file, from_jaeger))
    assert from_jaeger["bottleneck"]["stage"] == "ttft"
    # Jaeger's answers through the Python reader too
    python = _report(
        tracing_stack.jaeger_url, "--service", service, "--lookback", "15m", native=False
    )
    assert not _differences(from_file["stages"], python["stages"])
