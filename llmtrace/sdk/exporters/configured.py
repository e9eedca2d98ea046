"""The exporter the settings ask for: OTLP over gRPC or HTTP (per signal: endpoint, headers and
transport security as the OpenTelemetry SDK decides them, see ``options.transport``), the
embedded file, the console, or none. ``llmtrace.sdk.config`` installs what these build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter

from llmtrace.options import (
    Settings,
    metrics_endpoint,
    resolved_exporter,
    traces_endpoint,
    transport,
)


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as file:
        return file.read()


def _session_verifying_with(certificate: str) -> Any:
    """A ``requests`` session that verifies with ``certificate`` whatever the environment says.

    requests lets ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` replace a session's own ``verify``
    (not a request's). The OTLP/HTTP exporter sets the session's (SDK 1.45; 1.30 set the
    request's), so on a machine with either variable set (common behind corporate proxies)
    ``OTEL_EXPORTER_OTLP_CERTIFICATE`` was silently ignored and every export failed
    verification. Only ``verify`` is kept; proxies and everything else still come from the
    environment."""
    import requests

    class _Session(requests.Session):
        def merge_environment_settings(
            self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any
        ) -> Any:
            merged = super().merge_environment_settings(url, proxies, stream, verify, cert)
            if verify is None or verify is True:
                merged["verify"] = self.verify
            return merged

    session = _Session()
    session.verify = certificate
    return session


def otlp_exporter(s: Settings, signal: str = "traces") -> Any:  # a span or metric exporter
    """The OTLP exporter of ``signal`` (``"traces"`` or ``"metrics"``): endpoint, headers and
    transport security of that signal (``options.transport``: TLS unless the endpoint or
    ``OTEL_EXPORTER_OTLP_[SIGNAL_]INSECURE`` says plaintext)."""
    traces = signal == "traces"
    protocol = s.protocol if traces else s.metrics_protocol
    endpoint = traces_endpoint(s) if traces else metrics_endpoint(s)
    headers = dict(s.headers if traces else s.metrics_headers) or None
    security = transport(s, signal)
    if protocol == "grpc":
        if traces:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcExporter,
            )
        else:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # type: ignore[assignment]
                OTLPMetricExporter as GrpcExporter,
            )
        credentials = None
        if security.secure and (security.certificate or security.client_certificate):
            import grpc  # type: ignore[import-untyped]

            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(security.certificate),
                private_key=_read(security.client_key),
                certificate_chain=_read(security.client_certificate),
            )
        return GrpcExporter(
            endpoint=endpoint,
            headers=headers,
            insecure=not security.secure,
            credentials=credentials,
        )
    if traces:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
            OTLPMetricExporter as HttpExporter,
        )
    return HttpExporter(
        endpoint=endpoint,
        headers=headers,
        session=_session_verifying_with(security.certificate) if security.certificate else None,
        certificate_file=security.certificate,
        client_key_file=security.client_key,
        client_certificate_file=security.client_certificate,
    )


def make_exporter(s: Settings) -> SpanExporter | None:
    """The span exporter the settings ask for (None for ``exporter="none"``)."""
    kind = resolved_exporter(s)
    if kind == "none":
        return None
    if kind == "console":
        return ConsoleSpanExporter()
    if kind == "file":
        from llmtrace.sdk.exporters.file import OTLPJsonFileExporter

        return OTLPJsonFileExporter(
            Path(s.file_path), max_bytes=s.file_max_bytes, backups=s.file_backups
        )
    exporter: SpanExporter = otlp_exporter(s)
    return exporter
