"""Pytest plugin (loaded by the root conftest): a real OpenTelemetry Collector and Jaeger v2.

``tracing_stack`` starts both programs natively, once per session, on free loopback ports, with
the very config files docker-compose.yml mounts (collector-config/). Only endpoints differ,
through the ``${env:VAR:-default}`` variables those files read. It waits until both report
healthy and stops them when the session ends, whatever happened in between.

The binaries come from scripts/backends.sh (built from the Go module proxy into a cache outside
the repository). The build runs after collection, before the first test, when any selected
test uses ``tracing_stack``: a first build takes several minutes and must not count against a
test's timeout; later runs find the cache current within a second.

Tests that stop, kill and restart one part of the stack build their own with ``new_jaeger`` and
``new_collector``: each returns a ``BackendProcess`` on ports fixed at creation, so whatever
talks to it reconnects after a restart, and with the data directories given, so a restart finds
what the previous run left.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
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
JAEGER_BADGER_CONFIG = CONFIG_DIR / "jaeger-badger.yaml"
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


_ports_handed_out: set[int] = set()


def _free_ports(count: int) -> list[int]:
    """Ports the kernel just handed out, none of them given to an earlier backend.

    Held together so that no two are the same; remembered because a backend's ports must stay
    its own while it is stopped, and the kernel may offer a free one again.
    """
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < count:
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            if port not in _ports_handed_out:
                ports.append(port)
        _ports_handed_out.update(ports)
        return ports


def _die_with_parent() -> None:
    # If pytest itself is killed (SIGKILL, a CI timeout), the kernel stops the backends too, so
    # no run leaves a collector or Jaeger behind holding ports.
    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class BackendProcess:
    """One backend program on fixed ports, with its output in a log file.

    Created stopped; ``start`` runs it and waits until it reports healthy. It can be stopped
    (SIGTERM, a clean shutdown), killed (SIGKILL, as a crash) and started again with the same
    command line and environment; every run appends to the same log.
    """

    def __init__(
        self, name: str, argv: list[str], env: Mapping[str, str], health_url: str, log_dir: Path
    ) -> None:
        self.name = name
        self.argv = argv
        self.env = dict(env)
        self.health_url = health_url
        self.log_path = log_dir / f"{name}.log"
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def start(self, timeout: float = STARTUP_TIMEOUT_SECONDS) -> None:
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        with self.log_path.open("ab") as log:
            log.write(f"--- {self.name} starting: {' '.join(self.argv)}\n".encode())
            log.flush()
            self._popen = subprocess.Popen(
                self.argv,
                env={**os.environ, **self.env},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        self._wait_healthy(time.monotonic() + timeout)

    def stop(self) -> None:
        """SIGTERM: the program shuts down cleanly (flushes, releases its files)."""
        if self.running:
            assert self._popen is not None
            self._popen.send_signal(signal.SIGTERM)
            try:
                self._popen.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait()

    def kill(self) -> None:
        """SIGKILL: the program gets no chance to flush or to release anything."""
        if self.running:
            assert self._popen is not None
            self._popen.kill()
            self._popen.wait()

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def _wait_healthy(self, deadline: float) -> None:
        assert self._popen is not None
        while time.monotonic() < deadline:
            if self._popen.poll() is not None:
                pytest.fail(
                    f"{self.name} exited with {self._popen.returncode} while starting; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}",
                    False,
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.health_url, timeout=1.0).status_code == 200:
                    return
            time.sleep(0.05)
        pytest.fail(
            f"{self.name} was not healthy at {self.health_url} in time; "
            f"last lines of {self.log_path}:\n{self.log_tail()}",
            False,
        )


LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Jaeger:
    process: BackendProcess
    otlp_grpc_endpoint: str
    """``127.0.0.1:PORT``, as the collector's OTELCOL_JAEGER_ENDPOINT wants it."""
    query_url: str
    """The query service: UI, ``/api/v3/traces``."""


@dataclass(frozen=True)
class Collector:
    process: BackendProcess
    otlp_grpc_endpoint: str
    """``http://127.0.0.1:PORT``: the OTLP/gRPC receiver."""
    otlp_http_endpoint: str
    """``http://127.0.0.1:PORT``: the OTLP/HTTP receiver (base, no ``/v1/traces``)."""
    prometheus_url: str
    """The Prometheus exporter (spanmetrics), the full ``/metrics`` URL."""


def new_jaeger(
    backends: Backends, log_dir: Path, *, badger_dir: Path | None = None, name: str = "jaeger"
) -> Jaeger:
    """A Jaeger on free loopback ports, not started yet.

    With ``badger_dir``, Jaeger runs collector-config/jaeger-badger.yaml and keeps its traces
    there; without, collector-config/jaeger.yaml (in memory).
    """
    otlp_grpc, otlp_http, query_http, query_grpc, health, telemetry = _free_ports(6)
    env = {
        "JAEGER_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{otlp_grpc}",
        "JAEGER_OTLP_HTTP_ENDPOINT": f"{LOOPBACK}:{otlp_http}",
        "JAEGER_QUERY_HTTP_ENDPOINT": f"{LOOPBACK}:{query_http}",
        "JAEGER_QUERY_GRPC_ENDPOINT": f"{LOOPBACK}:{query_grpc}",
        "JAEGER_HEALTH_ENDPOINT": f"{LOOPBACK}:{health}",
        "JAEGER_TELEMETRY_HOST": LOOPBACK,
        "JAEGER_TELEMETRY_PORT": str(telemetry),
    }
    config = JAEGER_CONFIG
    if badger_dir is not None:
        config = JAEGER_BADGER_CONFIG
        env["JAEGER_BADGER_DIR"] = str(badger_dir)
    process = BackendProcess(
        name,
        [str(backends.jaeger), f"--config={config}"],
        env,
        f"http://{LOOPBACK}:{health}/status",
        log_dir,
    )
    return Jaeger(
        process=process,
        otlp_grpc_endpoint=f"{LOOPBACK}:{otlp_grpc}",
        query_url=f"http://{LOOPBACK}:{query_http}",
    )


def new_collector(
    backends: Backends,
    log_dir: Path,
    *,
    jaeger_endpoint: str,
    storage_dir: Path,
    name: str = "otelcol",
) -> Collector:
    """A collector on free loopback ports exporting to ``jaeger_endpoint``, not started yet.

    Its queue to Jaeger lives in ``storage_dir``: a collector started again with the same one
    sends what the previous run had not delivered.
    """
    grpc, http, prometheus, health, telemetry = _free_ports(5)
    env = {
        "OTELCOL_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{grpc}",
        "OTELCOL_OTLP_HTTP_ENDPOINT": f"{LOOPBACK}:{http}",
        "OTELCOL_JAEGER_ENDPOINT": jaeger_endpoint,
        "OTELCOL_PROMETHEUS_ENDPOINT": f"{LOOPBACK}:{prometheus}",
        "OTELCOL_HEALTH_ENDPOINT": f"{LOOPBACK}:{health}",
        "OTELCOL_TELEMETRY_HOST": LOOPBACK,
        "OTELCOL_TELEMETRY_PORT": str(telemetry),
        "OTELCOL_STORAGE_DIR": str(storage_dir),
    }
    process = BackendProcess(
        name,
        [str(backends.otelcol), f"--config={COLLECTOR_CONFIG}"],
        env,
        f"http://{LOOPBACK}:{health}/",
        log_dir,
    )
    return Collector(
        process=process,
        otlp_grpc_endpoint=f"http://{LOOPBACK}:{grpc}",
        otlp_http_endpoint=f"http://{LOOPBACK}:{http}",
        prometheus_url=f"http://{LOOPBACK}:{prometheus}/metrics",
    )


@contextlib.contextmanager
def stopped_at_exit(*processes: BackendProcess) -> Iterator[None]:
    """Stops the processes on exit, in the order given, whatever state they are in."""
    try:
        yield
    finally:
        for process in processes:
            process.stop()


@contextlib.contextmanager
def run_tracing_stack(backends: Backends, log_dir: Path) -> Iterator[TracingStack]:
    """Starts Jaeger, then the collector that exports to it; stops both on exit."""
    jaeger = new_jaeger(backends, log_dir)
    collector = new_collector(
        backends,
        log_dir,
        jaeger_endpoint=jaeger.otlp_grpc_endpoint,
        storage_dir=log_dir / "otelcol-storage",
    )
    # The collector first, so that it can flush what it holds to a still-running Jaeger.
    with stopped_at_exit(collector.process, jaeger.process):
        jaeger.process.start()
        collector.process.start()
        yield TracingStack(
            otlp_grpc_endpoint=collector.otlp_grpc_endpoint,
            otlp_http_endpoint=collector.otlp_http_endpoint,
            jaeger_url=jaeger.query_url,
            prometheus_url=collector.prometheus_url,
            collector_health_url=collector.process.health_url,
            jaeger_health_url=jaeger.process.health_url,
            log_dir=log_dir,
        )


@pytest.fixture(scope="session")
def tracing_stack(
    backends: Backends, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TracingStack]:
    """A running OpenTelemetry Collector and Jaeger v2, fed with collector-config/ unchanged."""
    with run_tracing_stack(backends, tmp_path_factory.mktemp("tracing-stack")) as stack:
        yield stack


def wait_for_spans(jaeger_url: str, service: str, spans: int, timeout: float = 60) -> None:
    """Until Jaeger holds ``spans`` spans of the service's traces (every one sent has landed),
    asking every 0.2 s."""
    params = {
        "query.service_name": service,
        "query.start_time_min": "2000-01-01T00:00:00Z",
        "query.start_time_max": "2100-01-01T00:00:00Z",
        "query.num_traces": "1000",
    }
    deadline = time.monotonic() + timeout
    found = 0
    while time.monotonic() < deadline:
        response = httpx.get(f"{jaeger_url}/api/v3/traces", params=params, timeout=10)
        if response.status_code == 200:
            found = sum(
                len(scope["spans"])
                for resource in response.json()["result"]["resourceSpans"]
                for scope in resource["scopeSpans"]
            )
            if found >= spans:
                return
        time.sleep(0.2)
    raise AssertionError(f"Jaeger holds {found} of {spans} spans of {service} after {timeout} s")


def spans_in_file(path: Path) -> int:
    """How many spans an OTLP JSON lines file holds (what its writer also sent elsewhere)."""
    return sum(
        len(scope["spans"])
        for line in path.read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
    )
