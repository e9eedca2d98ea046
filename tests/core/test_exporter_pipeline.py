"""The exporter pipeline inside a real application process: it never traces itself, and exit is
bounded whatever the backend does.

Each test runs an application in a subprocess, the way users run one, against a local OTLP
receiver (or an address where nothing listens, or a black hole that never answers).
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.core.otlp_receiver import OTLPReceiver, black_hole, unused_port

pytestmark = pytest.mark.integration

# Three decorated calls, three flushes, shutdown; every HTTP client library imported and
# instrumented (the OTLP/HTTP exporter itself sends with requests), and an application metric
# so that a metrics export happens over OTLP/HTTP too.
APP_WITH_INIT = textwrap.dedent(
    """
    import httpx, httpx2, requests
    import llmtrace
    from opentelemetry import metrics

    llmtrace.init(service_name="pipeline-app", instrument=["requests", "httpx", "httpx2"])
    requests_counter = metrics.get_meter("pipeline-app").create_counter("app.requests")

    @llmtrace.tool
    def step(number):
        requests_counter.add(1)
        return number * 2

    for number in range(3):
        assert step(number) == number * 2
        assert llmtrace.force_flush(5000)
    llmtrace.shutdown()
    print("done")
    """
)

# The same application with no llmtrace.init(): opentelemetry-instrument sets up the SDK.
APP_UNDER_OPENTELEMETRY_INSTRUMENT = textwrap.dedent(
    """
    import httpx, httpx2, requests
    import llmtrace
    from opentelemetry import trace

    @llmtrace.tool
    def step(number):
        return number * 2

    for number in range(3):
        assert step(number) == number * 2
        assert trace.get_tracer_provider().force_flush(5000)
    print("done")
    """
)

# Makes three spans and exits without flushing: the exit handler must deliver or give up.
APP_EXITING = textwrap.dedent(
    """
    import llmtrace

    llmtrace.init(service_name="exiting-app")

    @llmtrace.tool
    def step(number):
        return number

    for number in range(3):
        step(number)
    print("done")
    """
)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LLMTRACE_"))}
    env.update(OTEL_METRIC_EXPORT_INTERVAL="200", OTEL_LOGS_EXPORTER="none")
    env.update(extra)
    return env


def _run(tmp_path: Path, source: str, env: dict[str, str], *launcher: str) -> tuple[float, str]:
    (tmp_path / "app.py").write_text(source)
    started = time.monotonic()
    result = subprocess.run(
        [*launcher, sys.executable, "app.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"
    assert "Traceback" not in result.stderr, result.stderr
    return elapsed, result.stderr


def _assert_only_the_apps_spans(receiver: OTLPReceiver) -> None:
    names = collections.Counter(receiver.received.span_names)
    assert names == {"execute_tool step": 3}, names


@pytest.mark.parametrize(
    "protocol_variable", ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]
)
def test_otlp_http_export_never_traces_itself(tmp_path, protocol_variable):
    with OTLPReceiver() as receiver:
        env = _clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
        env[protocol_variable] = "http/protobuf"
        if protocol_variable == "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL":
            env["OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"] = "http/protobuf"
        elapsed, _ = _run(tmp_path, APP_WITH_INIT, env)
        _assert_only_the_apps_spans(receiver)
        assert "app.requests" in receiver.received.metric_names
        assert "/v1/traces" in receiver.received.paths
        assert "/v1/metrics" in receiver.received.paths
    assert elapsed < 20


@pytest.mark.parametrize(
    "protocol_variable", ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]
)
def test_otlp_http_export_under_opentelemetry_instrument_never_traces_itself(
    tmp_path, protocol_variable
):
    launcher = str(Path(sys.executable).with_name("opentelemetry-instrument"))
    with OTLPReceiver() as receiver:
        env = _clean_env(
            OTEL_SERVICE_NAME="instrumented-app",
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_METRICS_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
        )
        env[protocol_variable] = "http/protobuf"
        if protocol_variable == "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL":
            env["OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"] = "http/protobuf"
        _run(tmp_path, APP_UNDER_OPENTELEMETRY_INSTRUMENT, env, launcher)
        _assert_only_the_apps_spans(receiver)
        assert "/v1/metrics" in receiver.received.paths or not receiver.received.metric_names


def test_signal_specific_endpoints_are_used_as_given(tmp_path):
    with OTLPReceiver() as receiver:
        env = _clean_env(
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{receiver.url}/custom/v1/traces",
            OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=f"{receiver.url}/custom/v1/metrics",
        )
        _run(tmp_path, APP_WITH_INIT, env)
        _assert_only_the_apps_spans(receiver)
        paths = set(receiver.received.paths)
        assert paths == {"/custom/v1/traces", "/custom/v1/metrics"}, paths


def _exit_cases() -> list[tuple[str, str]]:
    return [
        ("http/protobuf", "unreachable"),
        ("grpc", "unreachable"),
        ("http/protobuf", "black hole"),
        ("grpc", "black hole"),
    ]


@pytest.fixture(scope="module")
def baseline_seconds(tmp_path_factory) -> float:
    """How long the exiting app takes with the local file exporter (start-up and imports)."""
    tmp_path = tmp_path_factory.mktemp("baseline")
    env = _clean_env(LLMTRACE_FILE_PATH=str(tmp_path / "traces.jsonl"))
    return min(_run(tmp_path, APP_EXITING, env)[0] for _ in range(2))


@pytest.mark.parametrize(("protocol", "backend"), _exit_cases())
def test_exit_is_bounded_and_says_what_was_lost(tmp_path, baseline_seconds, protocol, backend):
    def run(endpoint: str, **extra: str) -> tuple[float, str]:
        env = _clean_env(
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_EXPORTER_OTLP_PROTOCOL=protocol, **extra
        )
        return _run(tmp_path, APP_EXITING, env)

    if backend == "unreachable":
        elapsed, stderr = run(f"http://127.0.0.1:{unused_port()}")
        short_elapsed, short_stderr = run(
            f"http://127.0.0.1:{unused_port()}", LLMTRACE_SHUTDOWN_TIMEOUT="1"
        )
    else:
        with black_hole() as address:
            elapsed, stderr = run(f"http://{address}")
            short_elapsed, short_stderr = run(f"http://{address}", LLMTRACE_SHUTDOWN_TIMEOUT="1")

    # The default bound is 5 s; the rest is the interpreter's own start and exit.
    assert elapsed - baseline_seconds < 5.0 + 1.5, (elapsed, baseline_seconds)
    assert short_elapsed - baseline_seconds < 1.0 + 1.5, (short_elapsed, baseline_seconds)
    for output in (stderr, short_stderr):
        warnings = [line for line in output.splitlines() if "could not be delivered" in line]
        assert len(warnings) == 1, output
        assert "3 of 3 spans" in warnings[0], warnings[0]
        assert "reason unknown" not in warnings[0], warnings[0]
