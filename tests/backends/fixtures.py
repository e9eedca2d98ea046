"""Pytest plugin (loaded by the root conftest): a real OpenTelemetry Collector and Jaeger v2.

``tracing_stack`` starts both programs natively, once per session, on free loopback ports, with
the very config files docker-compose.yml mounts (collector-config/). Only endpoints differ,
through the ``${env:VAR:-default}`` variables those files read. It waits until both report
healthy and stops them when the session ends, whatever happened in between.

The binaries come from scripts/backends.sh (built from the Go module proxy into a cache outside
the repository). The build runs after collection, before the first test, when any selected
test uses ``tracing_stack``: a first build takes several minutes and must not count against a
test's timeout; later runs find the cache current within a second.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "collector-config"
COLLECTOR_CONFIG = CONFIG_DIR / "otel-collector.yaml"
JAEGER_CONFIG = CONFIG_DIR / "jaeger.yaml"
BACKENDS_SCRIPT = REPO / "scripts" / "backends.sh"

STARTUP_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Backends:
    jaeger: Path
    otelcol: Path


@dataclass(frozen=True)
class TracingStack:
    """Where the running collector and Jaeger listen (all on 127.0.0.1)."""

    otlp_grpc_endpoint: str
    """``http://127.0.0.1:PORT``: the collector's OTLP/gRPC receiver."""
    otlp_http_endpoint: str
    """``http://127.0.0.1:PORT``: the collector's OTLP/HTTP receiver (base, no ``/v1/traces``)."""
    jaeger_url: str
    """Jaeger's query service: UI, ``/api/v3/traces``."""
    prometheus_url: str
    """The collector's Prometheus exporter (spanmetrics), the full ``/metrics`` URL."""
    collector_health_url: str
    jaeger_health_url: str
    log_dir: Path


class BackendsBuildError(Exception):
    """scripts/backends.sh failed; its own output already says why."""


def _build_backends() -> Backends:
    """Runs scripts/backends.sh (a no-op when the cache is current) and returns the binaries."""
    # Progress (stderr) goes to the terminal; stdout carries the binaries' paths.
    result = subprocess.run(
        ["bash", str(BACKENDS_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False
    )
    if result.returncode != 0:
        raise BackendsBuildError(
            f"scripts/backends.sh failed (exit {result.returncode}); see its output above"
        )
    paths = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    return Backends(jaeger=Path(paths["jaeger"]), otelcol=Path(paths["otelcol"]))


_built: Backends | BackendsBuildError | None = None


def _backends(config: pytest.Config) -> Backends | BackendsBuildError:
    """Builds once per session; a failed build is remembered, not retried by every test."""
    global _built
    if _built is None:
        capture = config.pluginmanager.getplugin("capturemanager")
        # The first build takes minutes: let its progress reach the terminal.
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            try:
                _built = _build_backends()
            except BackendsBuildError as exc:
                _built = exc
    return _built


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    for item in session.items:
        if {"backends", "tracing_stack"} & set(getattr(item, "fixturenames", ())):
            _backends(session.config)
            return


@pytest.fixture(scope="session")
def backends(pytestconfig: pytest.Config) -> Backends:
    """The collector and Jaeger binaries built by scripts/backends.sh (current with the pins)."""
    built = _backends(pytestconfig)
    if isinstance(built, BackendsBuildError):
        pytest.fail(str(built), pytrace=False)
    return built


def _free_ports(count: int) -> list[int]:
    """Ports the kernel just handed out; held together so that no two are the same."""
    with contextlib.ExitStack() as stack:
        sockets = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]


def _die_with_parent() -> None:
    # If pytest itself is killed (SIGKILL, a CI timeout), the kernel stops the backends too, so
    # no run leaves a collector or Jaeger behind holding ports.
    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class _Process:
    """One backend program with its output in a log file."""

    def __init__(self, name: str, argv: list[str], env: Mapping[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.popen = subprocess.Popen(
            argv,
            env={**os.environ, **env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )

    def log_tail(self, lines: int = 40) -> str:
        self._log.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def wait_healthy(self, url: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                pytest.fail(
                    f"{self.name} exited with {self.popen.returncode} while starting; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}",
                    False,
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=1.0).status_code == 200:
                    return
            time.sleep(0.1)
        pytest.fail(
            f"{self.name} was not healthy at {url} within {STARTUP_TIMEOUT_SECONDS:.0f}s; "
            f"last lines of {self.log_path}:\n{self.log_tail()}",
            False,
        )

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._log.close()


@contextlib.contextmanager
def run_tracing_stack(backends: Backends, log_dir: Path) -> Iterator[TracingStack]:
    """Starts Jaeger, then the collector that exports to it; stops both on exit."""
    (
        jaeger_otlp_grpc,
        jaeger_otlp_http,
        jaeger_query_http,
        jaeger_query_grpc,
        jaeger_health,
        jaeger_telemetry,
        collector_grpc,
        collector_http,
        collector_prometheus,
        collector_health,
        collector_telemetry,
    ) = _free_ports(11)
    loopback = "127.0.0.1"
    jaeger_env = {
        "JAEGER_OTLP_GRPC_ENDPOINT": f"{loopback}:{jaeger_otlp_grpc}",
        "JAEGER_OTLP_HTTP_ENDPOINT": f"{loopback}:{jaeger_otlp_http}",
        "JAEGER_QUERY_HTTP_ENDPOINT": f"{loopback}:{jaeger_query_http}",
        "JAEGER_QUERY_GRPC_ENDPOINT": f"{loopback}:{jaeger_query_grpc}",
        "JAEGER_HEALTH_ENDPOINT": f"{loopback}:{jaeger_health}",
        "JAEGER_TELEMETRY_HOST": loopback,
        "JAEGER_TELEMETRY_PORT": str(jaeger_telemetry),
    }
    collector_env = {
        "OTELCOL_OTLP_GRPC_ENDPOINT": f"{loopback}:{collector_grpc}",
        "OTELCOL_OTLP_HTTP_ENDPOINT": f"{loopback}:{collector_http}",
        "OTELCOL_JAEGER_ENDPOINT": f"{loopback}:{jaeger_otlp_grpc}",
        "OTELCOL_PROMETHEUS_ENDPOINT": f"{loopback}:{collector_prometheus}",
        "OTELCOL_HEALTH_ENDPOINT": f"{loopback}:{collector_health}",
        "OTELCOL_TELEMETRY_HOST": loopback,
        "OTELCOL_TELEMETRY_PORT": str(collector_telemetry),
    }
    stack = TracingStack(
        otlp_grpc_endpoint=f"http://{loopback}:{collector_grpc}",
        otlp_http_endpoint=f"http://{loopback}:{collector_http}",
        jaeger_url=f"http://{loopback}:{jaeger_query_http}",
        prometheus_url=f"http://{loopback}:{collector_prometheus}/metrics",
        collector_health_url=f"http://{loopback}:{collector_health}/",
        jaeger_health_url=f"http://{loopback}:{jaeger_health}/status",
        log_dir=log_dir,
    )
    started: list[_Process] = []
    try:
        jaeger = _Process(
            "jaeger", [str(backends.jaeger), f"--config={JAEGER_CONFIG}"], jaeger_env, log_dir
        )
        started.append(jaeger)
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        jaeger.wait_healthy(stack.jaeger_health_url, deadline)
        collector = _Process(
            "otelcol",
            [str(backends.otelcol), f"--config={COLLECTOR_CONFIG}"],
            collector_env,
            log_dir,
        )
        started.append(collector)
        collector.wait_healthy(stack.collector_health_url, deadline)
        yield stack
    finally:
        # The collector first, so that it can flush what it holds to a still-running Jaeger.
        for process in reversed(started):
            process.stop()


@pytest.fixture(scope="session")
def tracing_stack(
    backends: Backends, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TracingStack]:
    """A running OpenTelemetry Collector and Jaeger v2, fed with collector-config/ unchanged."""
    with run_tracing_stack(backends, tmp_path_factory.mktemp("tracing-stack")) as stack:
        yield stack
