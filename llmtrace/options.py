"""Every option llmtrace has: its argument, its environment variable, its default, parsed and
validated. Nothing here has a side effect (``config`` sets up providers and exporters from it).

Every option has an argument of ``init()``, and an environment variable: the standard
``OTEL_*`` one where it exists, else ``LLMTRACE_*``. An argument wins over the environment, the
environment over the default. Endpoints follow the OTLP exporter specification: the generic
``OTEL_EXPORTER_OTLP_ENDPOINT`` (and the ``endpoint`` argument) is a base URL to which OTLP/HTTP
appends ``/v1/traces`` and ``/v1/metrics``; the signal-specific ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
and ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` are used exactly as given.

The environment is read once (as the OpenTelemetry SDK reads it when it is configured) and kept:
instrumentations ask for the settings on every model call. ``reload()`` reads it again.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from llmtrace._urls import is_web_url
from llmtrace.errors import ConfigError

EXPORTERS = ("auto", "otlp", "file", "console", "none")
PROTOCOLS = ("grpc", "http/protobuf")
SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)
DEFAULT_FILE_PATH = ".llmtrace/traces.jsonl"
DEFAULT_CONTENT_MAX_BYTES = 16 * 1024
DEFAULT_SHUTDOWN_TIMEOUT = 5.0
# The embedded file rotates past this size and keeps this many rotated files.
DEFAULT_FILE_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_FILE_BACKUPS = 5
_JAEGER_URL = "LLMTRACE_JAEGER_URL"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")
CAPTURE_MODES = ("span_only", "event_only", "span_and_event")
"""Where captured content goes: span attributes, one span event per call, or both (the values of
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` as OpenTelemetry's util-genai reads them,
with ``no_content`` meaning capture off and ``true`` meaning ``span_only``)."""


@dataclass(frozen=True)
class TlsFiles:
    """What the environment says about one signal's transport security (None: not said)."""

    insecure: bool | None = None
    """``OTEL_EXPORTER_OTLP_[SIGNAL_]INSECURE`` (gRPC only, as in the OpenTelemetry SDK)."""
    certificate: str | None = None
    """``OTEL_EXPORTER_OTLP_[SIGNAL_]CERTIFICATE``: the CA bundle that verifies the server."""
    client_key: str | None = None
    """``OTEL_EXPORTER_OTLP_[SIGNAL_]CLIENT_KEY``: the client's private key (mutual TLS)."""
    client_certificate: str | None = None
    """``OTEL_EXPORTER_OTLP_[SIGNAL_]CLIENT_CERTIFICATE``: the client's certificate (mutual TLS)."""


@dataclass(frozen=True)
class Transport:
    """How one signal's OTLP exporter connects, decided as the OpenTelemetry SDK decides it."""

    secure: bool
    """TLS (True) or plaintext (False)."""
    certificate: str | None = None
    client_key: str | None = None
    client_certificate: str | None = None


@dataclass(frozen=True)
class Settings:
    """The options in force. ``settings()`` returns the active ones to instrumentations."""

    service_name: str = "unknown_service"
    service_name_given: bool = False
    """Whether the service name was set (argument or ``OTEL_SERVICE_NAME``), or is the default
    (then a ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES`` wins, as the specification says)."""
    exporter: str = "auto"
    exporter_given: bool = False
    """Whether the exporter was asked for (argument or ``LLMTRACE_EXPORTER``), not the default."""
    metrics_exporter: str = "otlp"
    """``OTEL_METRICS_EXPORTER``: ``none`` keeps llmtrace from exporting the GenAI metrics."""
    endpoint: str | None = None
    """The base OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` semantics)."""
    traces_endpoint: str | None = None
    """``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``: the full traces URL, used as given."""
    metrics_endpoint: str | None = None
    """``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``: the full metrics URL, used as given."""
    protocol: str = "grpc"
    metrics_protocol: str = "grpc"
    headers: Mapping[str, str] = field(default_factory=dict)
    """Headers of the span exporter (``OTEL_EXPORTER_OTLP_TRACES_HEADERS``, else
    ``OTEL_EXPORTER_OTLP_HEADERS``; ``init(headers=)`` sets both signals')."""
    metrics_headers: Mapping[str, str] = field(default_factory=dict)
    """Headers of the metrics exporter (``OTEL_EXPORTER_OTLP_METRICS_HEADERS``, else
    ``OTEL_EXPORTER_OTLP_HEADERS``)."""
    traces_tls: TlsFiles = field(default_factory=TlsFiles)
    """TLS of the span exporter: ``OTEL_EXPORTER_OTLP_TRACES_{INSECURE,CERTIFICATE,CLIENT_KEY,
    CLIENT_CERTIFICATE}``, each falling back to the variable without ``TRACES_``."""
    metrics_tls: TlsFiles = field(default_factory=TlsFiles)
    """The same for the metrics exporter (``OTEL_EXPORTER_OTLP_METRICS_*``)."""
    file_path: str = DEFAULT_FILE_PATH
    file_max_bytes: int = DEFAULT_FILE_MAX_BYTES
    file_backups: int = DEFAULT_FILE_BACKUPS
    sampler: str = "parentbased_always_on"
    sample_ratio: float = 1.0
    capture_content: bool = False
    capture_mode: str = "span_only"
    """Where captured content goes when ``capture_content`` is on: one of :data:`CAPTURE_MODES`."""
    content_max_bytes: int = DEFAULT_CONTENT_MAX_BYTES
    redact: Callable[[str], str] | None = None
    inject_stream_usage: bool = False
    instrument: bool | tuple[str, ...] = True
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    disabled: bool = False
    provider_name: str = ""
    """``LLMTRACE_PROVIDER_NAME``: ``gen_ai.provider.name`` for self-hosted compatible servers."""
    jaeger_url: str | None = None
    """``LLMTRACE_JAEGER_URL``: the Jaeger UI, for links to a trace (``trace_url()``, and the
    trace links of a report built in this process or read from a trace file: see
    ``jaeger_url()``)."""
    resource_attributes: Mapping[str, Any] = field(default_factory=dict)
    """Extra resource attributes (``OTEL_RESOURCE_ATTRIBUTES`` is merged by the SDK itself)."""


# The settings of the running init() (None before it and after shutdown()).
_active: Settings | None = None
_from_env_cache: Settings | None = None


def settings() -> Settings:
    """The active settings: ``init()``'s, or before it the defaults plus the environment."""
    global _from_env_cache
    active = _active
    if active is not None:
        return active
    cached = _from_env_cache
    if cached is None:
        cached = _from_env_cache = from_environment(Settings())
    return cached


def activate(s: Settings | None) -> None:
    """Make ``s`` the settings in force (``init()``), or go back to the environment's (None)."""
    global _active
    _active = s


def reload() -> None:
    """Read the environment again (for settings used without ``init()``)."""
    global _from_env_cache
    _from_env_cache = None


def native_reader_wanted() -> bool:
    """``LLMTRACE_NATIVE``: the native trace reader unless it is turned off (``0``, ``false``)."""
    return os.environ.get("LLMTRACE_NATIVE", "").strip().lower() not in ("0", "false", "no", "off")


def default_trace_file() -> str:
    """The trace file an application writes and ``llmtrace report`` reads by default."""
    return _env("LLMTRACE_FILE_PATH") or DEFAULT_FILE_PATH


def jaeger_url() -> str | None:
    """The Jaeger UI that trace links lead to: ``init(jaeger_url=...)``'s while it is in force,
    else ``LLMTRACE_JAEGER_URL``.

    Read alone, not through ``settings()``: ``llmtrace report`` needs no other option, and a bad
    value of one it does not use must not stop it. A value that is not an http(s) URL raises
    ``ConfigError``, as ``init()`` does.
    """
    active = _active
    url = active.jaeger_url if active is not None else _env(_JAEGER_URL)
    if url is not None:
        _check_jaeger_url(url)
    return url


def _check_jaeger_url(url: str) -> None:
    if not is_web_url(url):
        raise ConfigError(
            f"jaeger_url={url!r} is not a URL of the Jaeger UI; accepted: an http:// or https:// "
            "URL, e.g. http://localhost:16686"
        )


def drops_everything(s: Settings) -> bool:
    """True when the sampler can never sample a span: decorators then skip all work."""
    if s.sampler in ("always_off", "parentbased_always_off"):
        return True
    return s.sampler in ("traceidratio", "parentbased_traceidratio") and s.sample_ratio <= 0.0


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value.strip() if value is not None and value.strip() != "" else None


def _parse_bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{name}={value!r} is not a boolean; accepted: true, false (or 1, 0)")


def parse_capture(name: str, value: str | bool) -> tuple[bool, str]:
    """(capture on, mode) of a capture setting: a boolean, or a mode name in any case
    (``no_content``, ``span_only``, ``event_only``, ``span_and_event``)."""
    if isinstance(value, bool):
        return value, "span_only"
    lowered = value.strip().lower()
    if lowered in CAPTURE_MODES:
        return True, lowered
    if lowered == "no_content":
        return False, "span_only"
    try:
        return _parse_bool(name, value), "span_only"
    except ConfigError:
        raise ConfigError(
            f"{name}={value!r} is not a capture mode; accepted: no_content, span_only, "
            "event_only, span_and_event (any case), or true / false"
        ) from None


def _parse_float(name: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not a number") from None


def _parse_int(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not a whole number") from None


def parse_headers(value: str, name: str = "OTEL_EXPORTER_OTLP_HEADERS") -> dict[str, str]:
    """``key1=value1,key2=value2`` as ``OTEL_EXPORTER_OTLP_HEADERS`` writes them (URL-encoded)."""
    from urllib.parse import unquote

    headers: dict[str, str] = {}
    for item in value.split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise ConfigError(
                f"header {item.strip()!r} in {name} has no '='; accepted: key1=value1,key2=value2"
            )
        key, _, val = item.partition("=")
        headers[unquote(key.strip())] = unquote(val.strip())
    return headers


def from_environment(base: Settings) -> Settings:
    env: dict[str, Any] = {}
    if (value := _env("OTEL_SERVICE_NAME")) is not None:
        env["service_name"] = value
        env["service_name_given"] = True
    if (value := _env("LLMTRACE_EXPORTER")) is not None:
        env["exporter"] = value.lower()
        env["exporter_given"] = True
    if (value := _env("OTEL_METRICS_EXPORTER")) is not None:
        env["metrics_exporter"] = value.lower()
    if (value := _env("OTEL_EXPORTER_OTLP_ENDPOINT")) is not None:
        env["endpoint"] = value
    if (value := _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) is not None:
        env["traces_endpoint"] = value
    if (value := _env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")) is not None:
        env["metrics_endpoint"] = value
    generic_protocol = _env("OTEL_EXPORTER_OTLP_PROTOCOL")
    protocol = _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or generic_protocol
    if protocol is not None:
        env["protocol"] = protocol.lower()
    protocol = _env("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") or generic_protocol
    if protocol is not None:
        env["metrics_protocol"] = protocol.lower()
    for signal, key in (("TRACES", "headers"), ("METRICS", "metrics_headers")):
        name = f"OTEL_EXPORTER_OTLP_{signal}_HEADERS"
        if (headers := _env(name)) is not None:
            env[key] = parse_headers(headers, name)
        elif (headers := _env("OTEL_EXPORTER_OTLP_HEADERS")) is not None:
            env[key] = parse_headers(headers)
        env[f"{signal.lower()}_tls"] = _tls_from_environment(signal)
    if (value := _env("LLMTRACE_FILE_PATH")) is not None:
        env["file_path"] = value
    if (value := _env("LLMTRACE_FILE_MAX_BYTES")) is not None:
        env["file_max_bytes"] = _parse_int("LLMTRACE_FILE_MAX_BYTES", value)
    if (value := _env("LLMTRACE_FILE_BACKUPS")) is not None:
        env["file_backups"] = _parse_int("LLMTRACE_FILE_BACKUPS", value)
    if (value := _env("OTEL_TRACES_SAMPLER")) is not None:
        env["sampler"] = value.lower()
    if (value := _env("OTEL_TRACES_SAMPLER_ARG")) is not None:
        env["sample_ratio"] = _parse_float("OTEL_TRACES_SAMPLER_ARG", value)
    if (value := _env("LLMTRACE_SAMPLE_RATIO")) is not None:
        env["sampler"] = "parentbased_traceidratio"
        env["sample_ratio"] = _parse_float("LLMTRACE_SAMPLE_RATIO", value)
    if (value := os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")) is not None:
        env["capture_content"], env["capture_mode"] = parse_capture(
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value
        )
    if (value := _env("LLMTRACE_CONTENT_MAX_BYTES")) is not None:
        env["content_max_bytes"] = _parse_int("LLMTRACE_CONTENT_MAX_BYTES", value)
    if (value := _env("LLMTRACE_INJECT_STREAM_USAGE")) is not None:
        env["inject_stream_usage"] = _parse_bool("LLMTRACE_INJECT_STREAM_USAGE", value)
    if (value := _env("LLMTRACE_INSTRUMENT")) is not None:
        env["instrument"] = _parse_instrument(value)
    if (value := _env("LLMTRACE_SHUTDOWN_TIMEOUT")) is not None:
        env["shutdown_timeout"] = _parse_float("LLMTRACE_SHUTDOWN_TIMEOUT", value)
    if (value := _env("OTEL_SDK_DISABLED")) is not None:
        env["disabled"] = _parse_bool("OTEL_SDK_DISABLED", value)
    if (value := _env("LLMTRACE_PROVIDER_NAME")) is not None:
        env["provider_name"] = value
    if (value := _env(_JAEGER_URL)) is not None:
        env["jaeger_url"] = value
    return replace(base, **env)


def _signal_env(signal: str, suffix: str) -> tuple[str, str] | None:
    """(name, value) of ``OTEL_EXPORTER_OTLP_<SIGNAL>_<SUFFIX>``, else of the generic variable."""
    for name in (f"OTEL_EXPORTER_OTLP_{signal}_{suffix}", f"OTEL_EXPORTER_OTLP_{suffix}"):
        if (value := _env(name)) is not None:
            return name, value
    return None


def _tls_from_environment(signal: str) -> TlsFiles:
    insecure = _signal_env(signal, "INSECURE")
    files = {
        key: found[1] if (found := _signal_env(signal, suffix)) is not None else None
        for key, suffix in (
            ("certificate", "CERTIFICATE"),
            ("client_key", "CLIENT_KEY"),
            ("client_certificate", "CLIENT_CERTIFICATE"),
        )
    }
    return TlsFiles(insecure=None if insecure is None else _parse_insecure(*insecure), **files)


def _parse_insecure(name: str, value: str) -> bool:
    # The SDK reads "true" (any case) as insecure and anything else as secure, so "1" or "yes"
    # would mean TLS there: any value but true or false is refused, never read otherwise.
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"{name}={value!r} is not a boolean; accepted: true, false")
    return lowered == "true"


# Where the OTLP exporters send when no endpoint is configured (the SDK's defaults).
_DEFAULT_ENDPOINTS = {"grpc": "http://localhost:4317", "http/protobuf": "http://localhost:4318"}


def transport(s: Settings, signal: str) -> Transport:
    """Plaintext or TLS, and with which files, for ``signal`` (``"traces"`` or ``"metrics"``).

    Decided exactly as the OpenTelemetry Python SDK's OTLP exporters decide it, so that a
    scheme-less endpoint is never sent in clear text unless asked:

    - OTLP/HTTP: the URL's scheme decides (``https://`` is TLS, ``http://`` plaintext);
    - OTLP/gRPC: ``https://`` is TLS whatever else is set; otherwise
      ``OTEL_EXPORTER_OTLP_<SIGNAL>_INSECURE``, then ``OTEL_EXPORTER_OTLP_INSECURE``, decide when
      set; otherwise ``http://`` is plaintext and an endpoint without a scheme
      (``collector.example.com:4317``) is TLS.

    The certificate files (``OTEL_EXPORTER_OTLP_[<SIGNAL>_]CERTIFICATE``, ``…_CLIENT_KEY``,
    ``…_CLIENT_CERTIFICATE``) are used only with TLS.
    """
    if signal == "traces":
        protocol, endpoint, tls = s.protocol, traces_endpoint(s), s.traces_tls
    else:
        protocol, endpoint, tls = s.metrics_protocol, metrics_endpoint(s), s.metrics_tls
    url = endpoint or _DEFAULT_ENDPOINTS.get(protocol, _DEFAULT_ENDPOINTS["grpc"])
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if protocol != "grpc":
        secure = scheme == "https"
    elif scheme == "https":
        secure = True
    elif tls.insecure is not None:
        secure = not tls.insecure
    else:
        secure = scheme != "http"
    if not secure:
        return Transport(secure=False)
    return Transport(
        secure=True,
        certificate=tls.certificate,
        client_key=tls.client_key,
        client_certificate=tls.client_certificate,
    )


def _check_tls_files(s: Settings) -> None:
    for signal, tls in (("TRACES", s.traces_tls), ("METRICS", s.metrics_tls)):
        for suffix, path in (
            ("CERTIFICATE", tls.certificate),
            ("CLIENT_KEY", tls.client_key),
            ("CLIENT_CERTIFICATE", tls.client_certificate),
        ):
            if path is not None and not os.path.isfile(path):
                raise ConfigError(
                    f"OTEL_EXPORTER_OTLP_[{signal}_]{suffix}={path!r} is not a readable file; "
                    "accepted: the path of a PEM file"
                )
        if (tls.client_key is None) != (tls.client_certificate is None):
            raise ConfigError(
                f"mutual TLS for {signal.lower()} needs both OTEL_EXPORTER_OTLP_[{signal}_]"
                f"CLIENT_KEY and OTEL_EXPORTER_OTLP_[{signal}_]CLIENT_CERTIFICATE; one is set"
            )


def _parse_instrument(value: str) -> bool | tuple[str, ...]:
    lowered = value.lower()
    if lowered in ("all", "true", "1", "yes"):
        return True
    if lowered in ("none", "false", "0", "no"):
        return False
    return tuple(name.strip() for name in value.split(",") if name.strip())


def validate(s: Settings) -> None:
    if s.exporter not in EXPORTERS:
        raise ConfigError(f"exporter={s.exporter!r} is not known; accepted: {', '.join(EXPORTERS)}")
    for name, protocol in (("protocol", s.protocol), ("metrics protocol", s.metrics_protocol)):
        if protocol not in PROTOCOLS:
            raise ConfigError(
                f"{name}={protocol!r} is not supported; accepted: {', '.join(PROTOCOLS)}"
            )
    if s.sampler not in SAMPLERS:
        raise ConfigError(
            f"OTEL_TRACES_SAMPLER={s.sampler!r} is not supported; accepted: {', '.join(SAMPLERS)}"
        )
    if not 0.0 <= s.sample_ratio <= 1.0:
        raise ConfigError(f"sample_ratio={s.sample_ratio!r} is out of range; accepted: 0.0 to 1.0")
    if not s.shutdown_timeout >= 0.0:
        raise ConfigError(
            f"shutdown_timeout={s.shutdown_timeout!r} must be a number of seconds >= 0"
        )
    if s.capture_mode not in CAPTURE_MODES:
        raise ConfigError(
            f"capture_mode={s.capture_mode!r} is not supported; accepted: {', '.join(CAPTURE_MODES)}"
        )
    if s.content_max_bytes < 0:
        raise ConfigError(f"content_max_bytes={s.content_max_bytes!r} must be >= 0")
    if s.file_max_bytes < 0 or s.file_backups < 0:
        raise ConfigError("file_max_bytes and file_backups must be >= 0")
    if s.jaeger_url is not None:
        _check_jaeger_url(s.jaeger_url)
    if s.redact is not None and not callable(s.redact):
        raise ConfigError(f"redact={s.redact!r} is not callable; accepted: a function str -> str")
    if resolved_exporter(s) == "otlp":
        _check_tls_files(s)


def resolved_exporter(s: Settings) -> str:
    if s.exporter != "auto":
        return s.exporter
    return "otlp" if s.endpoint or s.traces_endpoint else "file"


def _signal_url(base: str | None, signal_path: str) -> str | None:
    """OTLP/HTTP: a base endpoint with the signal's path appended (a base that already ends with
    a signal path, as some users pass to ``init(endpoint=...)``, has it replaced)."""
    if base is None:
        return None
    root = base.rstrip("/")
    for known in ("/v1/traces", "/v1/metrics", "/v1/logs"):
        root = root.removesuffix(known)
    return root + signal_path


def traces_endpoint(s: Settings) -> str | None:
    """Where spans go over OTLP, as the exporter is given it (None: the exporter's default)."""
    if s.protocol == "grpc":
        return s.traces_endpoint or s.endpoint
    return s.traces_endpoint or _signal_url(s.endpoint, "/v1/traces")


def metrics_endpoint(s: Settings) -> str | None:
    """Where metrics go over OTLP: never the traces URL (None: the exporter's default)."""
    if s.metrics_protocol == "grpc":
        return s.metrics_endpoint or s.endpoint
    return s.metrics_endpoint or _signal_url(s.endpoint, "/v1/metrics")


# --- request metrics (llmtrace.sdk.request_metrics) -----------------------------------------------
# init(request_metrics=, request_metrics_unsampled=) and these environment variables; the
# limits and the histogram kind are environment variables only.
ENV_ENABLED = "LLMTRACE_REQUEST_METRICS"
ENV_UNSAMPLED = "LLMTRACE_REQUEST_METRICS_UNSAMPLED"
ENV_MAX_TRACES = "LLMTRACE_REQUEST_METRICS_MAX_TRACES"
ENV_MAX_SPANS = "LLMTRACE_REQUEST_METRICS_MAX_SPANS"
ENV_ROOT_TIMEOUT = "LLMTRACE_REQUEST_METRICS_ROOT_TIMEOUT"
ENV_HISTOGRAM = "LLMTRACE_REQUEST_METRICS_HISTOGRAM"
HISTOGRAMS = ("explicit", "exponential")

DEFAULT_MAX_TRACES = 10_000
DEFAULT_MAX_SPANS = 1_000
DEFAULT_ROOT_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True)
class RequestMetricsOptions:
    """What ``init()`` was asked for; ``enabled=None`` means: when a metrics pipeline exists.

    ``unsampled``: whether the requests the trace sampler drops are recorded too (their spans
    kept for the breakdown, never exported), so that the request metrics count every request.
    ``None`` (the default, ``LLMTRACE_REQUEST_METRICS_UNSAMPLED`` unset or ``auto``) means yes
    whenever request metrics are on and the tracer provider is llmtrace's own; ``False`` counts
    only the sampled requests, and saves recording the spans of the others. Why yes by default:
    the histograms are meant to count every request before any sampling (a sample thins the
    counts the report's request numbers and shares rest on), and recording the spans of a
    request that is not exported costs a fraction of a millisecond (about three times what
    dropping them costs: benchmarks/README.md, overhead_core.py), against the seconds of an LLM
    request.
    """

    enabled: bool | None = None
    unsampled: bool | None = None
    max_traces: int = DEFAULT_MAX_TRACES
    max_spans: int = DEFAULT_MAX_SPANS
    root_timeout: float = DEFAULT_ROOT_TIMEOUT
    histogram: str = "explicit"


def _env_flag(name: str, environ: Mapping[str, str]) -> bool | None:
    raw = environ.get(name)
    if raw is None or raw.strip().lower() in ("", "auto"):
        return None
    return _parse_bool(name, raw)


def _env_number(name: str, environ: Mapping[str, str], default: float) -> float:
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return default
    value = _parse_float(name, raw)
    if not value > 0:
        raise ConfigError(f"{name}={raw!r} must be greater than 0")
    return value


def options_from(
    enabled: bool | None = None,
    *,
    unsampled: bool | None = None,
    max_traces: int | None = None,
    max_spans: int | None = None,
    root_timeout: float | None = None,
    histogram: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> RequestMetricsOptions:
    """Arguments over environment variables over defaults, validated."""
    env = os.environ if environ is None else environ
    if enabled is None:
        enabled = _env_flag(ENV_ENABLED, env)
    if unsampled is None:
        unsampled = _env_flag(ENV_UNSAMPLED, env)
    kind = (histogram or env.get(ENV_HISTOGRAM) or "explicit").strip().lower()
    if kind not in HISTOGRAMS:
        raise ConfigError(
            f"request metrics histogram {kind!r} is unknown; accepted: {', '.join(HISTOGRAMS)}"
        )
    options = RequestMetricsOptions(
        enabled=enabled,
        unsampled=unsampled,
        max_traces=int(
            max_traces
            if max_traces is not None
            else _env_number(ENV_MAX_TRACES, env, DEFAULT_MAX_TRACES)
        ),
        max_spans=int(
            max_spans
            if max_spans is not None
            else _env_number(ENV_MAX_SPANS, env, DEFAULT_MAX_SPANS)
        ),
        root_timeout=float(
            root_timeout
            if root_timeout is not None
            else _env_number(ENV_ROOT_TIMEOUT, env, DEFAULT_ROOT_TIMEOUT)
        ),
        histogram=kind,
    )
    if options.max_traces < 1 or options.max_spans < 1 or not options.root_timeout > 0:
        raise ConfigError("request metrics limits must be greater than 0")
    return options
