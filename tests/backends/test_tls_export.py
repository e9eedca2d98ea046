"""Export over TLS and mutual TLS to the real OpenTelemetry Collector.

The test makes its own certificate authority with openssl (a CA, a server certificate for
127.0.0.1 and localhost, a client certificate, and a second CA that signed nothing the
collector uses), starts Jaeger and a collector whose OTLP receivers serve TLS (one receiver
requiring client certificates), and runs an application in its own process with llmtrace
configured only through the standard ``OTEL_EXPORTER_OTLP_*`` variables. Spans arrive in Jaeger
when the certificates are right; a plaintext client and a client trusting the wrong CA deliver
nothing, and llmtrace says why in one line.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.backends.fixtures import (
    LOOPBACK,
    BackendProcess,
    Backends,
    _free_ports,
    new_jaeger,
    stopped_at_exit,
    wait_for_spans,
)
from tests.subprocesses import clean_environment

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Certificates:
    ca: Path
    other_ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_ca(name: str, cwd: Path) -> None:
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", f"/CN={name}", "-keyout", f"{name}-key.pem", "-out", f"{name}.pem",
        cwd=cwd,
    )  # fmt: skip


def _make_signed(name: str, ca: str, cwd: Path, extensions: str) -> None:
    (cwd / f"{name}.ext").write_text(extensions)
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
        "-keyout", f"{name}-key.pem", "-out", f"{name}.csr",
        cwd=cwd,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}-key.pem",
        "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem",
        cwd=cwd,
    )  # fmt: skip


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    cwd = tmp_path_factory.mktemp("pki")
    _make_ca("ca", cwd)
    _make_ca("other-ca", cwd)
    _make_signed(
        "server",
        "ca",
        cwd,
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )
    _make_signed("client", "ca", cwd, "extendedKeyUsage=clientAuth\n")
    return Certificates(
        ca=cwd / "ca.pem",
        other_ca=cwd / "other-ca.pem",
        server_cert=cwd / "server.pem",
        server_key=cwd / "server-key.pem",
        client_cert=cwd / "client.pem",
        client_key=cwd / "client-key.pem",
    )


@dataclass(frozen=True)
class TlsCollector:
    grpc: str
    """``127.0.0.1:PORT``: OTLP/gRPC with TLS (no scheme: that alone must mean TLS)."""
    https: str
    """``https://127.0.0.1:PORT``: OTLP/HTTP with TLS."""
    mtls_grpc: str
    """``127.0.0.1:PORT``: OTLP/gRPC requiring a client certificate signed by the CA."""
    jaeger_url: str


def _collector_config(certs: Certificates, ports: dict[str, int], jaeger: str) -> str:
    def receiver(port: int, client_ca: Path | None = None) -> str:
        lines = [
            f"        endpoint: {LOOPBACK}:{port}",
            "        tls:",
            f"          cert_file: {certs.server_cert}",
            f"          key_file: {certs.server_key}",
        ]
        if client_ca is not None:
            lines.append(f"          client_ca_file: {client_ca}")
        return "\n".join(lines)

    return f"""\
extensions:
  health_check:
    endpoint: {LOOPBACK}:{ports["health"]}
receivers:
  otlp/tls:
    protocols:
      grpc:
{receiver(ports["grpc"])}
      http:
{receiver(ports["http"])}
  otlp/mtls:
    protocols:
      grpc:
{receiver(ports["mtls"], certs.ca)}
exporters:
  otlp/jaeger:
    endpoint: {jaeger}
    tls:
      insecure: true
service:
  extensions: [health_check]
  pipelines:
    traces:
      receivers: [otlp/tls, otlp/mtls]
      exporters: [otlp/jaeger]
  telemetry:
    metrics:
      level: none
"""


@pytest.fixture(scope="module")
def tls_collector(
    backends: Backends, certificates: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TlsCollector]:
    log_dir = tmp_path_factory.mktemp("tls-stack")
    jaeger = new_jaeger(backends, log_dir, name="jaeger-tls")
    grpc, http, mtls, health = _free_ports(4)
    ports = {"grpc": grpc, "http": http, "mtls": mtls, "health": health}
    config = log_dir / "otel-collector-tls.yaml"
    config.write_text(_collector_config(certificates, ports, jaeger.otlp_grpc_endpoint))
    collector = BackendProcess(
        "otelcol-tls",
        [str(backends.otelcol), f"--config={config}"],
        {},
        f"http://{LOOPBACK}:{health}/",
        log_dir,
    )
    with stopped_at_exit(collector, jaeger.process):
        jaeger.process.start()
        collector.start()
        yield TlsCollector(
            grpc=f"{LOOPBACK}:{grpc}",
            https=f"https://{LOOPBACK}:{http}",
            mtls_grpc=f"{LOOPBACK}:{mtls}",
            jaeger_url=jaeger.query_url,
        )


APP = """
import llmtrace
llmtrace.init(exporter="otlp", instrument=False, shutdown_timeout=4)
# the spans are flushed at exit, within the shutdown timeout, and what failed is said there

@llmtrace.workflow
def answer():
    return 42

for _ in range(3):
    answer()
"""


def _run_app(tmp_path: Path, service: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", APP],
        cwd=tmp_path,
        env=clean_environment(
            OTEL_SERVICE_NAME=service,
            OTEL_METRICS_EXPORTER="none",
            PYTHONPATH=str(REPO),
            **env,
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("service", "env"),
    [
        # no scheme: that alone means TLS for gRPC
        (
            "tls-grpc",
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "{grpc}", "OTEL_EXPORTER_OTLP_CERTIFICATE": "{ca}"},
        ),
        (
            "tls-http",
            {
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "{https}",
                "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": "{ca}",
                # requests would let this replace the exporter's CA: the configured one wins
                "REQUESTS_CA_BUNDLE": "{other_ca}",
            },
        ),
        (
            "mtls-grpc",
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "{mtls}",
                "OTEL_EXPORTER_OTLP_CERTIFICATE": "{ca}",
                "OTEL_EXPORTER_OTLP_CLIENT_KEY": "{client_key}",
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "{client_cert}",
            },
        ),
    ],
)
def test_spans_arrive_over_tls_and_mutual_tls(tls_collector, certificates, tmp_path, service, env):
    places = {
        "grpc": tls_collector.grpc,
        "https": tls_collector.https,
        "mtls": tls_collector.mtls_grpc,
        "ca": certificates.ca,
        "other_ca": certificates.other_ca,
        "client_key": certificates.client_key,
        "client_cert": certificates.client_cert,
    }
    result = _run_app(tmp_path, service, **{k: v.format(**places) for k, v in env.items()})
    assert result.returncode == 0, result.stderr
    assert "could not be delivered" not in result.stderr, result.stderr
    wait_for_spans(tls_collector.jaeger_url, service, 3)


def _the_undelivered_line(tmp_path: Path, service: str, **env: str) -> str:
    """The app's one line saying what could not be delivered (it must say it exactly once)."""
    result = _run_app(tmp_path, service, **env)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "could not be delivered" in line]
    assert len(lines) == 1, result.stderr
    assert "3 of 3 spans" in lines[0], lines[0]
    return lines[0]


def test_a_plaintext_client_is_refused(tls_collector, tmp_path):
    line = _the_undelivered_line(
        tmp_path,
        "plaintext-refused",
        OTEL_EXPORTER_OTLP_ENDPOINT=tls_collector.grpc,
        OTEL_EXPORTER_OTLP_INSECURE="true",
    )
    assert "(plaintext)" in line, line


def test_a_client_without_its_certificate_is_refused_by_mutual_tls(
    tls_collector, certificates, tmp_path
):
    line = _the_undelivered_line(
        tmp_path,
        "mtls-refused",
        OTEL_EXPORTER_OTLP_ENDPOINT=tls_collector.mtls_grpc,
        OTEL_EXPORTER_OTLP_CERTIFICATE=str(certificates.ca),
    )
    assert "over TLS" in line, line


def test_a_wrong_ca_fails_with_one_clear_line(tls_collector, certificates, tmp_path):
    line = _the_undelivered_line(
        tmp_path,
        "wrong-ca",
        OTEL_EXPORTER_OTLP_ENDPOINT=tls_collector.grpc,
        OTEL_EXPORTER_OTLP_CERTIFICATE=str(certificates.other_ca),
    )
    assert f"over TLS, verified with the CA in {certificates.other_ca}" in line, line
    assert "no export succeeded over TLS" in line, line
