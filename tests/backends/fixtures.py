"""Pytest plugin (loaded by the root conftest): a real OpenTelemetry Collector and Jaeger v2.

``tracing_stack`` starts both programs natively, once per session, on free loopback ports, with
the very config files docker-compose.yml mounts (collector-config/). Only endpoints differ,
through the ``${env:VAR:-default}`` variables those files read. It waits until both report
healthy and stops them when the session ends, whatever happened in between.

The binaries come from scripts/backends.sh (built from the Go module proxy into a cache outside
the repository), and so does the Jaeger UI that the Jaeger started here serves (built from the
jaeger-ui source; ``../shared/vendor/`` holds it where GitHub is out of reach). The build runs after collection, before the first test, when any selected
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
PROMETHEUS_CONFIG = CONFIG_DIR / "prometheus.yml"
# The jaeger-ui source kept beside the repository for machines that cannot download it.
VENDORED_JAEGER_UI = REPO.parent / "shared" / "vendor" / "jaeger-ui-v1.76.0.tar.gz"

STARTUP_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Backends:
    jaeger: Path
    otelcol: Path
    jaeger_ui: Path | None = None
    """The Jaeger UI's build, or None when backends.sh could not build it (it said why)."""
    prometheus: Path | None = None
    """Built only when asked for (``--with-prometheus``)."""


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
    prometheus_server_url: str | None = None
    """A Prometheus scraping those spanmetrics, which Jaeger's Monitor tab reads, when started."""


class BackendsBuildError(Exception):
    """scripts/backends.sh failed; its own output already says why."""


def run_backends_script(*args: str) -> Backends:
    """Runs scripts/backends.sh (a no-op when the cache is current) and returns what it built.

    As scripts/test.sh does, it builds the Jaeger UI from the vendored source when that is
    there and no other source is named.
    """
    env = dict(os.environ)
    if "LLMTRACE_JAEGER_UI_SOURCE" not in env and VENDORED_JAEGER_UI.is_file():
        env["LLMTRACE_JAEGER_UI_SOURCE"] = str(VENDORED_JAEGER_UI)
    # Progress (stderr) goes to the terminal; stdout carries the paths.
    result = subprocess.run(
        ["bash", str(BACKENDS_SCRIPT), *args],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        raise BackendsBuildError(
            f"scripts/backends.sh failed (exit {result.returncode}); see its output above"
        )
    paths = {
        name: Path(value) if value else None
        for name, value in (
            line.split("=", 1) for line in result.stdout.splitlines() if "=" in line
        )
    }
    jaeger, otelcol = paths["jaeger"], paths["otelcol"]
    assert jaeger is not None and otelcol is not None
    return Backends(
        jaeger=jaeger,
        otelcol=otelcol,
        jaeger_ui=paths.get("jaeger_ui"),
        prometheus=paths.get("prometheus"),
    )


# One build per session and kind: with Prometheus or without (a failed build is remembered).
_built: dict[bool, Backends | BackendsBuildError] = {}


def _backends(config: pytest.Config, *, with_prometheus: bool = False) -> Backends:
    """Builds once per session; a failed build fails every test that needs it, once each."""
    if not with_prometheus and isinstance(_built.get(True), Backends):
        with_prometheus = True  # that build has everything
    if with_prometheus not in _built:
        capture = config.pluginmanager.getplugin("capturemanager")
        # The first build takes minutes: let its progress reach the terminal.
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            try:
                args = ["--with-prometheus"] if with_prometheus else []
                _built[with_prometheus] = run_backends_script(*args)
            except BackendsBuildError as exc:
                _built[with_prometheus] = exc
    built = _built[with_prometheus]
    if isinstance(built, BackendsBuildError):
        pytest.fail(str(built), pytrace=False)
    return built


def pytest_collection_finish(session: pytest.Session) -> None:
    # Before the first test, so that a first build's minutes count against no test's timeout.
    if session.config.option.collectonly:
        return
    needed = set().union(*(getattr(item, "fixturenames", ()) for item in session.items))
    with contextlib.suppress(pytest.fail.Exception):
        if "monitored_stack" in needed:
            _backends(session.config, with_prometheus=True)
        elif {"backends", "tracing_stack"} & needed:
            _backends(session.config)


@pytest.fixture(scope="session")
def backends(pytestconfig: pytest.Config) -> Backends:
    """The collector and Jaeger binaries built by scripts/backends.sh (current with the pins)."""
    return _backends(pytestconfig)


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
    backends: Backends,
    log_dir: Path,
    *,
    badger_dir: Path | None = None,
    prometheus_url: str | None = None,
    name: str = "jaeger",
) -> Jaeger:
    """A Jaeger on free loopback ports, not started yet, serving the UI that backends.sh built.

    With ``badger_dir``, Jaeger runs collector-config/jaeger-badger.yaml and keeps its traces
    there; without, collector-config/jaeger.yaml (in memory). Its Monitor tab reads
    ``prometheus_url``; without one, the tab answers with an error and the rest works.
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
    if backends.jaeger_ui is not None:
        env["JAEGER_UI_ASSETS"] = str(backends.jaeger_ui)
    if prometheus_url is not None:
        env["JAEGER_PROMETHEUS_ENDPOINT"] = prometheus_url
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


def new_prometheus(
    binary: Path, config: Path, targets: list[str], log_dir: Path, port: int | None = None
) -> tuple[BackendProcess, str]:
    """A Prometheus (not started yet) on ``config`` scraping ``targets`` every second, with its
    OTLP receiver and native histograms on; and its URL. Only the scrape targets and interval of ``config`` change."""
    import yaml  # here: this plugin loads in every run, the lowest-versions one without PyYAML

    if port is None:
        (port,) = _free_ports(1)
    settings = yaml.safe_load(config.read_text())
    settings["global"]["scrape_interval"] = "1s"
    settings["scrape_configs"][0]["static_configs"] = [{"targets": targets}]
    written = log_dir / f"prometheus-{port}.yml"
    written.write_text(yaml.safe_dump(settings))
    url = f"http://{LOOPBACK}:{port}"
    process = BackendProcess(
        f"prometheus-{port}",
        [
            str(binary),
            f"--config.file={written}",
            f"--storage.tsdb.path={log_dir / f'prometheus-data-{port}'}",
            f"--web.listen-address={LOOPBACK}:{port}",
            "--web.enable-otlp-receiver",
            # as docker-compose.yml: exponential histograms arrive as native histograms
            "--enable-feature=native-histograms",
        ],
        {},
        f"{url}/-/ready",
        log_dir,
    )
    return process, url


@contextlib.contextmanager
def stopped_at_exit(*processes: BackendProcess) -> Iterator[None]:
    """Stops the processes on exit, in the order given, whatever state they are in."""
    try:
        yield
    finally:
        for process in processes:
            process.stop()


@contextlib.contextmanager
def run_tracing_stack(
    backends: Backends, log_dir: Path, *, with_prometheus: bool = False
) -> Iterator[TracingStack]:
    """Starts Jaeger, then the collector that exports to it; stops both on exit.

    With ``with_prometheus``, also a Prometheus on collector-config/prometheus.yml scraping the
    collector's spanmetrics every second, which Jaeger's Monitor tab reads.
    """
    prometheus_url = None
    if with_prometheus:
        (prometheus_port,) = _free_ports(1)
        prometheus_url = f"http://{LOOPBACK}:{prometheus_port}"
    jaeger = new_jaeger(backends, log_dir, prometheus_url=prometheus_url)
    collector = new_collector(
        backends,
        log_dir,
        jaeger_endpoint=jaeger.otlp_grpc_endpoint,
        storage_dir=log_dir / "otelcol-storage",
    )
    processes = [collector.process, jaeger.process]
    if with_prometheus:
        assert backends.prometheus is not None, "backends.sh ran without --with-prometheus"
        target = collector.prometheus_url.removeprefix("http://").removesuffix("/metrics")
        prometheus, _ = new_prometheus(
            backends.prometheus, PROMETHEUS_CONFIG, [target], log_dir, prometheus_port
        )
        processes.insert(0, prometheus)
    # The collector before Jaeger, so that it can flush what it holds to a still-running Jaeger.
    with stopped_at_exit(*processes):
        for process in reversed(processes):
            process.start()
        yield TracingStack(
            otlp_grpc_endpoint=collector.otlp_grpc_endpoint,
            otlp_http_endpoint=collector.otlp_http_endpoint,
            jaeger_url=jaeger.query_url,
            prometheus_url=collector.prometheus_url,
            collector_health_url=collector.process.health_url,
            jaeger_health_url=jaeger.process.health_url,
            log_dir=log_dir,
            prometheus_server_url=prometheus_url,
        )


@pytest.fixture(scope="session")
def tracing_stack(
    backends: Backends, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TracingStack]:
    """A running OpenTelemetry Collector and Jaeger v2, fed with collector-config/ unchanged."""
    with run_tracing_stack(backends, tmp_path_factory.mktemp("tracing-stack")) as stack:
        yield stack


@pytest.fixture(scope="session")
def monitored_stack(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TracingStack]:
    """``tracing_stack`` with the Prometheus that Jaeger's Monitor tab reads."""
    backends = _backends(pytestconfig, with_prometheus=True)
    log_dir = tmp_path_factory.mktemp("monitored-stack")
    with run_tracing_stack(backends, log_dir, with_prometheus=True) as stack:
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
