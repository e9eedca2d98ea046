"""The configuration reference: one row per option and environment variable llmtrace reads.

docs/configuration.md is generated from :data:`OPTIONS` when the documentation is built
(docs/hooks/generated.py), and tests/docs checks that every argument of ``init()`` and every
variable the package reads has its row. Data only, kept apart from :mod:`llmtrace.options` (what
parses and validates the options) so that neither runs past 800 lines; nothing imports it at run
time.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmtrace.options import (
    DEFAULT_CONTENT_MAX_BYTES,
    DEFAULT_FILE_BACKUPS,
    DEFAULT_FILE_MAX_BYTES,
    DEFAULT_MAX_SPANS,
    DEFAULT_MAX_TRACES,
    DEFAULT_ROOT_TIMEOUT,
    DEFAULT_SHUTDOWN_TIMEOUT,
    ENV_HISTOGRAM,
    ENV_MAX_SPANS,
    ENV_MAX_TRACES,
    ENV_ROOT_TIMEOUT,
    HISTOGRAMS,
)


@dataclass(frozen=True)
class Option:
    """One row of the configuration reference: docs/configuration.md is generated from
    :data:`OPTIONS` when the documentation is built, and tests/docs checks that every argument of
    ``init()`` and every variable llmtrace reads has its row."""

    argument: str
    """The argument of ``init()`` ("" when only the environment sets it)."""
    environment: str
    """The environment variables, as Markdown."""
    default: str
    meaning: str
    """What it does, as Markdown (links are relative to docs/configuration.md)."""


OPTIONS: tuple[Option, ...] = (
    Option(
        "service_name",
        "`OTEL_SERVICE_NAME`",
        "`unknown_service`",
        "the `service.name` resource attribute",
    ),
    Option(
        "exporter",
        "`LLMTRACE_EXPORTER`",
        "`auto`",
        (
            "`auto`: OTLP when an endpoint is configured, else the local file; `otlp`, `file`, "
            "`console`, `none`"
        ),
    ),
    Option(
        "endpoint",
        "`OTEL_EXPORTER_OTLP_ENDPOINT`",
        "none",
        (
            "the base OTLP endpoint, e.g. `http://localhost:4317` (gRPC) or `http://localhost:4318` "
            "(HTTP: `/v1/traces` and `/v1/metrics` are appended)"
        ),
    ),
    Option(
        "",
        "`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`",
        "none",
        "the full traces URL, used exactly as given (an `endpoint` argument wins over it)",
    ),
    Option(
        "",
        "`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`",
        "none",
        "the full metrics URL, used exactly as given; metrics never go to the traces URL",
    ),
    Option(
        "protocol",
        "`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, `OTEL_EXPORTER_OTLP_PROTOCOL`",
        "`grpc`",
        "`grpc` or `http/protobuf` (the argument sets both signals)",
    ),
    Option(
        "",
        "`OTEL_EXPORTER_OTLP_METRICS_PROTOCOL`",
        "the generic protocol",
        "the metrics exporter's protocol",
    ),
    Option(
        "headers",
        "`OTEL_EXPORTER_OTLP_TRACES_HEADERS`, `OTEL_EXPORTER_OTLP_HEADERS`",
        "none",
        "`key1=value1,key2=value2` (URL-encoded values); the argument sets both signals'",
    ),
    Option(
        "",
        "`OTEL_EXPORTER_OTLP_METRICS_HEADERS`",
        "the generic headers",
        "the metrics exporter's headers (a signal's own variable replaces the generic one)",
    ),
    Option(
        "",
        (
            "`OTEL_EXPORTER_OTLP_INSECURE`, `OTEL_EXPORTER_OTLP_TRACES_INSECURE`, "
            "`OTEL_EXPORTER_OTLP_METRICS_INSECURE`"
        ),
        "not set",
        (
            "gRPC only: `true` sends plaintext to an endpoint without a scheme; see [Transport "
            "security](#transport-security)"
        ),
    ),
    Option(
        "",
        "`OTEL_EXPORTER_OTLP_CERTIFICATE` (and `_TRACES_`, `_METRICS_`)",
        "the system's CAs",
        "PEM file of the CA that verifies the collector's certificate",
    ),
    Option(
        "",
        "`OTEL_EXPORTER_OTLP_CLIENT_KEY`, `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE` (and per signal)",
        "none",
        "the client's key and certificate, for mutual TLS (both or neither)",
    ),
    Option(
        "file_path",
        "`LLMTRACE_FILE_PATH`",
        "`.llmtrace/traces.jsonl`",
        "the embedded file exporter's file",
    ),
    Option(
        "",
        "`LLMTRACE_FILE_MAX_BYTES`",
        f"{DEFAULT_FILE_MAX_BYTES // 2**20} MiB",
        "rotate the file past this size (0: never)",
    ),
    Option(
        "",
        "`LLMTRACE_FILE_BACKUPS`",
        str(DEFAULT_FILE_BACKUPS),
        "rotated files kept (`traces.jsonl.1` is the newest)",
    ),
    Option(
        "sample_ratio",
        "`OTEL_TRACES_SAMPLER` + `OTEL_TRACES_SAMPLER_ARG`, or `LLMTRACE_SAMPLE_RATIO`",
        "1.0 (`parentbased_always_on`)",
        "fraction of traces kept; parent-based, so a trace is kept or dropped whole",
    ),
    Option(
        "sampler",
        "",
        "none",
        "an OpenTelemetry `Sampler` for llmtrace's provider; wins over `sample_ratio`",
    ),
    Option(
        "resource_attributes",
        "`OTEL_RESOURCE_ATTRIBUTES`",
        "none",
        (
            'extra resource attributes, e.g. `{"deployment.environment.name": "prod"}`; a '
            "`service.name` in the variable counts when no service name is given"
        ),
    ),
    Option(
        "span_processors",
        "",
        "none",
        "more span processors for the provider, added as they are",
    ),
    Option(
        "exporters",
        "",
        "none",
        (
            "more span exporters, each behind its own batch processor, counted and flushed within the"
            " exit bound like llmtrace's own"
        ),
    ),
    Option(
        "jaeger_url",
        "`LLMTRACE_JAEGER_URL`",
        "none",
        (
            "the Jaeger UI (an `http(s)` URL), for `llmtrace.trace_url()`, and for the links of the "
            "requests a report names: those `llmtrace report` and `compare` build from a trace file "
            "(the variable), and those a report built in the process links (`llmtrace bench` of a "
            "callable that calls `init(jaeger_url=...)`)"
        ),
    ),
    Option(
        "capture_content",
        "`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`",
        "false",
        (
            'record prompts, completions, queries and documents: `True`/`"span_only"` on spans, '
            '`"event_only"` in a span event, `"span_and_event"` both, `False`/`"no_content"` not at '
            "all (see [Captured content](captured-content.md))"
        ),
    ),
    Option(
        "content_max_bytes",
        "`LLMTRACE_CONTENT_MAX_BYTES`",
        str(DEFAULT_CONTENT_MAX_BYTES),
        (
            "byte budget per captured part (message text, tool-call arguments, tool response) and per"
            " retrieval attribute"
        ),
    ),
    Option(
        "redact",
        "",
        "none",
        "`str -> str` applied to every captured text (each message part's) before it is set",
    ),
    Option(
        "inject_stream_usage",
        "`LLMTRACE_INJECT_STREAM_USAGE`",
        "false",
        (
            'add `stream_options={"include_usage": true}` to OpenAI streaming requests (the caller '
            "never sees the extra chunk)"
        ),
    ),
    Option(
        "shutdown_timeout",
        "`LLMTRACE_SHUTDOWN_TIMEOUT`",
        f"{DEFAULT_SHUTDOWN_TIMEOUT:g}",
        (
            "seconds the flush at exit (and `shutdown()`) waits for the backend before giving up and "
            "saying what was lost"
        ),
    ),
    Option(
        "",
        "`OTEL_SDK_DISABLED`",
        "false",
        (
            "`true`: llmtrace does nothing at all (no provider, no patches, decorators pass calls "
            "straight through)"
        ),
    ),
    Option(
        "instrument",
        "`LLMTRACE_INSTRUMENT`",
        "`True` (all)",
        (
            "`True`: every installed library llmtrace knows (each instrumented when the application "
            'imports it); `False`/`none`; or a list such as `["openai", "httpx2"]`'
        ),
    ),
    Option(
        "",
        "`LLMTRACE_PROVIDER_NAME`",
        "guessed from the URL",
        "`gen_ai.provider.name` for self-hosted OpenAI-compatible servers",
    ),
    Option(
        "request_metrics",
        "`LLMTRACE_REQUEST_METRICS`",
        "`auto`",
        (
            "each request's stage breakdown as histograms when its local root span ends (see [At "
            "scale](at-scale.md)); `auto`: on when llmtrace exports OTLP metrics itself; `true` / "
            "`false`"
        ),
    ),
    Option(
        "request_metrics_unsampled",
        "`LLMTRACE_REQUEST_METRICS_UNSAMPLED`",
        "`auto`",
        (
            "`auto`: while request metrics are on (on llmtrace's own provider), also record the spans"
            " of the traces the sampler drops, for the breakdown only (never exported), so every "
            "request is counted; `false`: count sampled requests only; `true`: as `auto`, and say so "
            "when it cannot apply"
        ),
    ),
    Option(
        "",
        f"`{ENV_MAX_TRACES}`, `{ENV_MAX_SPANS}`, `{ENV_ROOT_TIMEOUT}`, `{ENV_HISTOGRAM}`",
        f"{DEFAULT_MAX_TRACES}, {DEFAULT_MAX_SPANS}, {DEFAULT_ROOT_TIMEOUT:g} s, `{HISTOGRAMS[0]}`",
        (
            "bounds of the breakdown's state (requests in flight, spans per request, seconds before "
            "an open request is dropped and counted) and its histogram kind (`explicit` or "
            "`exponential`)"
        ),
    ),
    Option(
        "",
        "`OTEL_METRICS_EXPORTER`",
        "`otlp`",
        "`none`: do not export the GenAI client metrics",
    ),
    Option(
        "",
        "`OTEL_PYTHON_METER_PROVIDER`",
        "not set",
        "OpenTelemetry's own: a meter provider it names is the one the GenAI client metrics go to "
        "(llmtrace then asks the metrics API for it on every call, as the API requires)",
    ),
    Option(
        "",
        "`OTEL_PROPAGATORS`",
        "`tracecontext,baggage`",
        "OpenTelemetry's own: the propagators whose headers go on every HTTP hop llmtrace traces "
        "(the W3C `traceparent` by default, so that a model server or the next service joins the "
        "trace); `none` sends no context header, about 45 k CPU instructions less per model call "
        "(see [Overhead](overhead.md#beside-the-other-instrumentations))",
    ),
    Option(
        "",
        "`OTEL_TRACES_EXPORTER=llmtrace_file`",
        "",
        "under `opentelemetry-instrument`: write the embedded file instead of OTLP",
    ),
    Option(
        "",
        "`LLMTRACE_FAST_PATHS`",
        "`auto`",
        (
            "the shortcuts past other libraries' public APIs (see [How llmtrace behaves inside your "
            "application](behaviour.md)): `auto` takes each on the releases it was verified on; `off`"
            " uses public APIs only; `-NAME` turns one off (`-span-store,-context-variable`); `on` "
            "ignores the verified ranges (for testing a new release)"
        ),
    ),
    Option(
        "",
        "`LLMTRACE_NATIVE`",
        "on when present",
        (
            "`llmtrace report`, `compare` and `bench` read trace files with the native reader; `0` "
            "for the pure-Python reader (same results, about four times slower at 10k to 100k requests, "
            "[benchmarks](benchmarks.md))"
        ),
    ),
)
