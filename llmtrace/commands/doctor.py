"""``llmtrace doctor``: is the tracing pipeline this app would use actually working?

Checks, in order, and says in plain words what it found: the OTLP endpoint (from ``--otlp``
or the ``OTEL_EXPORTER_OTLP_*`` variables) is reachable; it accepts an OTLP export of a test
span; and, with ``--jaeger``, the test span arrives in Jaeger, whose web UI and Monitor tab are
described (a note, never a failure: traces reach Jaeger without them). Exit status 0 when every
check passed, 1 otherwise.

The OpenTelemetry SDK, protobuf, gRPC and httpx are imported by the checks that use them, so
that building the ``llmtrace`` parser does not load them.
"""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from llmtrace._urls import default_port
from llmtrace.commands.report import add_jaeger_argument
from llmtrace.errors import CommandError, ConfigError

if TYPE_CHECKING:
    import httpx
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )
    from opentelemetry.sdk.trace import ReadableSpan

HELP = "Check that spans can reach the OTLP endpoint (and Jaeger): prints what it found."
EXAMPLES = (
    "llmtrace doctor --jaeger http://localhost:16686",
    "llmtrace doctor --otlp http://collector:4318 --protocol http/protobuf",
)

DOCTOR_SERVICE_NAME = "llmtrace-doctor"
DEFAULT_PORTS = {"grpc": 4317, "http/protobuf": 4318}
CONNECT_TIMEOUT_SECONDS = 3.0
EXPORT_TIMEOUT_SECONDS = 10.0
JAEGER_ARRIVAL_SECONDS = 20.0
# What the page of a Jaeger built without its UI says (cmd/query/app/ui/placeholder/index.html).
JAEGER_PLACEHOLDER_TEXT = "This is not the Jaeger UI you are looking for"


def protocol_argument(text: str) -> str:
    """``--protocol``: one of the OTLP protocols llmtrace exports with."""
    # Imported here: llmtrace.options loads the file exporter, which loads the OpenTelemetry SDK.
    from llmtrace.options import PROTOCOLS

    if text not in PROTOCOLS:
        raise argparse.ArgumentTypeError(
            f"invalid protocol {text!r}: use one of {', '.join(PROTOCOLS)}"
        )
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--otlp",
        metavar="URL",
        help="OTLP endpoint to check (default: OTEL_EXPORTER_OTLP_ENDPOINT, "
        "else http://localhost:4317 for grpc, :4318 for http/protobuf)",
    )
    # The older spelling of --otlp.
    parser.add_argument("--endpoint", dest="otlp", help=argparse.SUPPRESS)
    parser.add_argument(
        "--protocol",
        type=protocol_argument,
        metavar="{grpc,http/protobuf}",
        help="OTLP protocol (default: OTEL_EXPORTER_OTLP_PROTOCOL, else grpc)",
    )
    add_jaeger_argument(
        parser, "Jaeger query URL (e.g. http://localhost:16686): also check the test span arrives"
    )


@dataclass(frozen=True)
class Target:
    endpoint: str
    source: str
    protocol: str
    host: str
    port: int
    secure: bool
    headers: Mapping[str, str]

    @property
    def traces_url(self) -> str:
        # Same rule as llmtrace.init(): a base endpoint gets the signal path appended.
        base = self.endpoint.rstrip("/")
        return base if base.endswith("/v1/traces") else f"{base}/v1/traces"


class Findings:
    """Collects the result lines; the command fails if any check failed."""

    def __init__(self) -> None:
        self.failed = False

    def ok(self, message: str) -> None:
        print(f"  ok    {message}")

    def fail(self, message: str, hint: str | None = None) -> None:
        self.failed = True
        print(f"  FAIL  {message}")
        if hint:
            print(f"        {hint}")

    def note(self, message: str) -> None:
        print(f"        {message}")


def resolve_target(endpoint: str | None, protocol: str | None) -> Target:
    from llmtrace.options import PROTOCOLS, settings

    try:
        configured = settings()
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    chosen_protocol = protocol or configured.protocol
    if chosen_protocol not in PROTOCOLS:
        raise CommandError(
            f"protocol {chosen_protocol!r} is not supported; accepted: {', '.join(PROTOCOLS)}"
        )
    if endpoint:
        chosen, source = endpoint, "--otlp"
    elif configured.endpoint:
        chosen, source = configured.endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT"
    else:
        chosen = f"http://localhost:{DEFAULT_PORTS[chosen_protocol]}"
        source = "the default, no endpoint is configured"
    # OTLP/gRPC endpoints are often written without a scheme (localhost:4317).
    with_scheme = chosen if "://" in chosen else f"http://{chosen}"
    try:
        parts = urlsplit(with_scheme)
    except ValueError:  # an unclosed IPv6 bracket
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CommandError(f"endpoint {chosen!r} is not a URL like http://localhost:4317")
    try:
        port = parts.port or default_port(parts.scheme)
    except ValueError:
        raise CommandError(f"endpoint {chosen!r} has an invalid port") from None
    return Target(
        endpoint=with_scheme,
        source=source,
        protocol=chosen_protocol,
        host=parts.hostname,
        port=port,
        secure=parts.scheme == "https",
        headers=dict(configured.headers),
    )


def check_reachable(target: Target, findings: Findings) -> bool:
    try:
        with socket.create_connection((target.host, target.port), CONNECT_TIMEOUT_SECONDS):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        findings.fail(
            f"Nothing answers at {target.host}:{target.port} ({reason.lower()}).",
            "Start the collector (`docker compose up -d` in the llmtrace repository, or the "
            "native binaries, see docs/jaeger.md in the repository) or point --otlp at yours.",
        )
        return False
    findings.ok(f"{target.host}:{target.port} accepts connections.")
    return True


def make_test_span() -> ReadableSpan:
    """One finished span, made by a private provider so the app's tracing is left alone."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from llmtrace import semconv

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": DOCTOR_SERVICE_NAME}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer(semconv.SCOPE_NAME).start_as_current_span("llmtrace doctor") as span:
        span.set_attribute(semconv.STAGE, "other")
    provider.shutdown()
    return exporter.get_finished_spans()[0]


def _wrong_port_hint(target: Target) -> str | None:
    other = "http/protobuf" if target.protocol == "grpc" else "grpc"
    if target.port == DEFAULT_PORTS[other]:
        return (
            f"Port {target.port} is the usual OTLP {other} port; for {target.protocol} use "
            f"{DEFAULT_PORTS[target.protocol]}, or pass --protocol {other}."
        )
    return None


def export_over_http(target: Target, request: ExportTraceServiceRequest) -> str | None:
    """Returns None when the endpoint accepted the export, else what went wrong."""
    import httpx
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    try:
        response = httpx.post(
            target.traces_url,
            content=request.SerializeToString(),
            headers={**target.headers, "Content-Type": "application/x-protobuf"},
            timeout=EXPORT_TIMEOUT_SECONDS,
        )
    except httpx.HTTPError as exc:
        return f"the HTTP request failed ({type(exc).__name__}: {exc})"
    if response.status_code != 200:
        return f"it answered HTTP {response.status_code} to POST {target.traces_url}"
    content_type = response.headers.get("content-type", "")
    # Web apps (Jaeger's UI among them) answer 200 with a page for any path.
    if not content_type.startswith("application/x-protobuf"):
        return f"it answered POST {target.traces_url} with {content_type or 'no content type'}"
    return _rejected_spans(ExportTraceServiceResponse.FromString(response.content))


def _rejected_spans(response: ExportTraceServiceResponse) -> str | None:
    rejected = response.partial_success.rejected_spans
    if rejected:
        return f"it rejected {rejected} span(s): {response.partial_success.error_message}"
    return None


def export_over_grpc(target: Target, request: ExportTraceServiceRequest) -> str | None:
    """Returns None when the endpoint accepted the export, else what went wrong."""
    # grpcio ships no type information (and the OTLP exporter already depends on it).
    import grpc  # type: ignore[import-untyped]
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

    address = f"{target.host}:{target.port}"
    channel = (
        grpc.secure_channel(address, grpc.ssl_channel_credentials())
        if target.secure
        else grpc.insecure_channel(address)
    )
    try:
        response = TraceServiceStub(channel).Export(  # type: ignore[no-untyped-call]
            request,
            timeout=EXPORT_TIMEOUT_SECONDS,
            metadata=[(name.lower(), value) for name, value in target.headers.items()],
        )
    except grpc.RpcError as exc:
        code = exc.code() if isinstance(exc, grpc.Call) else None
        details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
        return f"the gRPC export failed ({code.name if code else 'error'}: {details})"
    finally:
        channel.close()
    return _rejected_spans(response)


def check_accepts_otlp(target: Target, span: ReadableSpan, findings: Findings) -> bool:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request = encode_spans([span])
    export = export_over_grpc if target.protocol == "grpc" else export_over_http
    problem = export(target, request)
    if problem is not None:
        findings.fail(
            f"{target.endpoint} does not accept OTLP over {target.protocol}: {problem}.",
            _wrong_port_hint(target),
        )
        return False
    findings.ok(f"{target.endpoint} accepted a test span over OTLP {target.protocol}.")
    return True


def check_jaeger(jaeger_url: str, trace_id: str, findings: Findings) -> None:
    import httpx

    base = jaeger_url.rstrip("/")
    try:
        httpx.get(f"{base}/api/v3/services", timeout=CONNECT_TIMEOUT_SECONDS).raise_for_status()
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        findings.fail(
            f"Jaeger's query API at {base} does not answer ({type(exc).__name__}).",
            "Check the URL: Jaeger's UI and API usually listen on port 16686.",
        )
        return
    started = time.monotonic()
    deadline = started + JAEGER_ARRIVAL_SECONDS
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"{base}/api/v3/traces/{trace_id}", timeout=5)
        except httpx.HTTPError:
            response = None
        if response is not None and response.status_code == 200:
            findings.ok(
                f"The test span reached Jaeger after {time.monotonic() - started:.1f}s: "
                f"{base}/trace/{trace_id}"
            )
            describe_jaeger_ui(base, findings)
            return
        time.sleep(0.5)
    findings.fail(
        f"The test span did not reach Jaeger at {base} within {JAEGER_ARRIVAL_SECONDS:.0f}s.",
        "The endpoint accepted it, so the collector does not forward to this Jaeger: check "
        "its Jaeger exporter endpoint (OTELCOL_JAEGER_ENDPOINT) and its log.",
    )


def describe_jaeger_ui(base: str, findings: Findings) -> None:
    """Notes whether Jaeger serves its web UI and whether its Monitor tab has metrics."""
    import httpx

    try:
        page = httpx.get(f"{base}/search", timeout=CONNECT_TIMEOUT_SECONDS).text
        monitor = httpx.get(
            f"{base}/api/metrics/calls",
            params={"service": DOCTOR_SERVICE_NAME, "spanKind": "internal"},
            timeout=EXPORT_TIMEOUT_SECONDS,
        )
    except httpx.HTTPError as exc:
        findings.note(f"Jaeger's web UI could not be checked ({type(exc).__name__}).")
        return
    if JAEGER_PLACEHOLDER_TEXT in page:
        findings.note(
            "Jaeger serves a placeholder page, not its web UI: it was built without the UI. "
            "Set JAEGER_UI_ASSETS to the `jaeger_ui=` directory scripts/backends.sh prints."
        )
    else:
        findings.note(f"Jaeger's web UI: {base}/search")
    if monitor.status_code == 200:
        findings.note(f"Jaeger's Monitor tab reads span metrics: {base}/monitor")
    else:
        findings.note(
            f"Jaeger's Monitor tab has no span metrics ({_jaeger_error(monitor)}): see "
            "JAEGER_PROMETHEUS_ENDPOINT in collector-config/jaeger.yaml."
        )


def _jaeger_error(response: httpx.Response) -> str:
    """The message of a failed Jaeger API call, else its status."""
    try:
        return str(response.json()["errors"][0]["msg"])[:200]
    except (ValueError, LookupError, TypeError):
        return f"HTTP {response.status_code}"


def run(args: argparse.Namespace) -> int:
    target = resolve_target(args.otlp, args.protocol)
    findings = Findings()
    print(f"OTLP endpoint {target.endpoint} over {target.protocol} (from {target.source})")
    if check_reachable(target, findings):
        span = make_test_span()
        trace_id = format(span.context.trace_id, "032x") if span.context else ""
        if check_accepts_otlp(target, span, findings):
            if args.jaeger:
                check_jaeger(args.jaeger, trace_id, findings)
            else:
                findings.note("Pass --jaeger http://localhost:16686 to check it arrives there.")
    print_fast_paths()
    print("All checks passed." if not findings.failed else "Some checks failed.")
    return 1 if findings.failed else 0


def print_fast_paths() -> None:
    """Which shortcuts past other libraries' public APIs this process takes, and why (never a
    failure: each has a public fallback)."""
    from llmtrace.sdk import _compat

    print("Fast paths (LLMTRACE_FAST_PATHS):")
    for name in _compat.FAST_PATHS:
        taken, why = _compat.state(name)
        print(f"  {'on ' if taken else 'off'}   {name}: {why}")
