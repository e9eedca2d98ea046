"""A local OTLP/HTTP receiver for tests: decodes what exporters POST and keeps it.

Real protobuf decoding (the ``opentelemetry-proto`` messages the exporters themselves use), so a
test can count exactly which spans and metrics an application sent. Also a black hole: a server
that accepts connections and never answers, the worst case for an exporter at exit.
"""

from __future__ import annotations

import gzip
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Received:
    span_names: list[str] = field(default_factory=list)
    metric_names: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    headers_by_path: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    """The request headers of every POST, by path (names in lower case)."""
    metric_resources: list[tuple[str, list[str]]] = field(default_factory=list)
    """Each metrics export's resources: (service.name, the names of the metrics under it)."""
    span_services: list[tuple[str, str]] = field(default_factory=list)
    """(service.name, span name) of every span."""
    metric_exports: list[ExportMetricsServiceRequest] = field(default_factory=list)
    """Every metrics export as it came, for the points in it (:func:`histogram_counts`)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def _names(resources: Any, items: str) -> list[str]:
    """The names of every span (or metric) in an export request's resource list."""
    scopes_field = "scope_spans" if items == "spans" else "scope_metrics"
    return [
        item.name
        for resource in resources
        for scope in getattr(resource, scopes_field)
        for item in getattr(scope, items)
    ]


def _attribute_values(attributes: Any) -> dict[str, Any]:
    return {
        item.key: getattr(item.value, str(item.value.WhichOneof("value"))) for item in attributes
    }


def histogram_counts(received: Received, name: str) -> list[tuple[dict[str, Any], int]]:
    """(attributes, count) of every point of the histogram ``name`` in the last export that has
    it: with cumulative temporality (the OTLP exporters' default) the totals so far."""
    with received.lock:
        exports = list(received.metric_exports)
    for export in reversed(exports):
        points = [
            (_attribute_values(point.attributes), int(point.count))
            for resource in export.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.histogram.data_points
        ]
        if points:
            return points
    return []


def _service(resource: Any) -> str:
    for attribute in resource.resource.attributes:
        if attribute.key == "service.name":
            return str(attribute.value.string_value)
    return ""


class OTLPReceiver:
    """``url`` is the base endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``); ``received`` what came."""

    def __init__(self) -> None:
        self.received = Received()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with received.lock:
                    received.paths.append(self.path)
                    received.headers_by_path.setdefault(self.path, []).append(
                        {name.lower(): value for name, value in self.headers.items()}
                    )
                    if self.path.endswith("/v1/traces"):
                        request = ExportTraceServiceRequest.FromString(body)
                        received.span_names.extend(_names(request.resource_spans, "spans"))
                        received.span_services.extend(
                            (_service(resource), span.name)
                            for resource in request.resource_spans
                            for scope in resource.scope_spans
                            for span in scope.spans
                        )
                        answer = ExportTraceServiceResponse().SerializeToString()
                    elif self.path.endswith("/v1/metrics"):
                        metrics = ExportMetricsServiceRequest.FromString(body)
                        received.metric_exports.append(metrics)
                        received.metric_names.extend(_names(metrics.resource_metrics, "metrics"))
                        received.metric_resources.extend(
                            (_service(resource), _names([resource], "metrics"))
                            for resource in metrics.resource_metrics
                        )
                        answer = ExportMetricsServiceResponse().SerializeToString()
                    else:
                        self.send_response(404)
                        self.end_headers()
                        return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OTLPReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def black_hole() -> Iterator[str]:
    """A ``host:port`` that accepts TCP connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            accepted.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        for connection in accepted:
            connection.close()
        listener.close()


def unused_port() -> int:
    """A port on which nothing listens (bound and released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
