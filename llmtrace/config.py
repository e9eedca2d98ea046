"""``init()`` and ``shutdown()``: providers, exporters, sampling, content capture, environment.

Every option has an argument, and an environment variable: the standard ``OTEL_*`` one where it
exists, else ``LLMTRACE_*``. An argument wins over the environment, the environment over the
default. Decisions recorded here:

- An application that already installed an SDK ``TracerProvider`` keeps it: llmtrace adds its own
  exporter to that provider only when one was asked for explicitly (argument or
  ``LLMTRACE_EXPORTER``); with ``exporter="auto"`` the application's own pipeline decides where
  spans go, and llmtrace adds nothing.
- ``exporter="auto"`` means OTLP when an endpoint is configured (argument,
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), else the local file.
- A second ``init()`` is a no-op (logged at debug level); ``shutdown()`` then ``init()`` starts anew
  on the same provider (OpenTelemetry allows setting the global provider only once).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)

from llmtrace.errors import ConfigError
from llmtrace.exporters.file import DEFAULT_BACKUPS, DEFAULT_MAX_BYTES

logger = logging.getLogger(__name__)

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
_TRUE = ("1", "true", "yes", "on", "span_only", "span_and_event", "event_only")
_FALSE = ("0", "false", "no", "off", "no_content", "")


@dataclass(frozen=True)
class Settings:
    """The options in force. ``settings()`` returns the active ones to instrumentations."""

    service_name: str = "unknown_service"
    exporter: str = "auto"
    endpoint: str | None = None
    protocol: str = "grpc"
    headers: Mapping[str, str] = field(default_factory=dict)
    file_path: str = DEFAULT_FILE_PATH
    file_max_bytes: int = DEFAULT_MAX_BYTES
    file_backups: int = DEFAULT_BACKUPS
    sampler: str = "parentbased_always_on"
    sample_ratio: float = 1.0
    capture_content: bool = False
    content_max_bytes: int = DEFAULT_CONTENT_MAX_BYTES
    redact: Callable[[str], str] | None = None
    inject_stream_usage: bool = False
    instrument: bool | tuple[str, ...] = True


_settings = Settings()
_lock = threading.RLock()
_initialized = False
_owned_provider: TracerProvider | None = None
_processor: SpanProcessor | None = None
_atexit_registered = False
# Read on every decorated call: True only while llmtrace's own provider samples nothing.
drop_all = False


_from_env_cache: Settings | None = None


def settings() -> Settings:
    """The active settings: ``init()``'s, or before it the defaults plus the environment.

    Instrumentations ask for this on every model call, so the environment is read once (like
    the OpenTelemetry SDK, which reads it when it is configured); ``reload()`` reads it again.
    """
    global _from_env_cache
    if _initialized:
        return _settings
    cached = _from_env_cache
    if cached is None:
        cached = _from_env_cache = _from_environment(Settings())
    return cached


def reload() -> None:
    """Read the environment again (for settings used without ``init()``)."""
    global _from_env_cache
    _from_env_cache = None
    _forget_provider_name()


def _forget_provider_name() -> None:
    # Model-call instrumentations read LLMTRACE_PROVIDER_NAME themselves, once: read it again
    # whenever the rest of the environment is.
    from llmtrace.instrumentation.provider import configured_provider_name

    configured_provider_name.cache_clear()


def capture_content_enabled() -> bool:
    return settings().capture_content


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


def parse_headers(value: str) -> dict[str, str]:
    """``key1=value1,key2=value2`` as ``OTEL_EXPORTER_OTLP_HEADERS`` writes them (URL-encoded)."""
    from urllib.parse import unquote

    headers: dict[str, str] = {}
    for item in value.split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise ConfigError(
                f"header {item.strip()!r} in OTEL_EXPORTER_OTLP_HEADERS has no '='; "
                "accepted: key1=value1,key2=value2"
            )
        key, _, val = item.partition("=")
        headers[unquote(key.strip())] = unquote(val.strip())
    return headers


def _from_environment(base: Settings) -> Settings:
    env: dict[str, Any] = {}
    if (value := _env("OTEL_SERVICE_NAME")) is not None:
        env["service_name"] = value
    if (value := _env("LLMTRACE_EXPORTER")) is not None:
        env["exporter"] = value.lower()
    endpoint = _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or _env("OTEL_EXPORTER_OTLP_ENDPOINT")
    if endpoint is not None:
        env["endpoint"] = endpoint
    protocol = _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or _env("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol is not None:
        env["protocol"] = protocol.lower()
    headers = _env("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or _env("OTEL_EXPORTER_OTLP_HEADERS")
    if headers is not None:
        env["headers"] = parse_headers(headers)
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
        env["capture_content"] = _parse_bool(
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value
        )
    if (value := _env("LLMTRACE_CONTENT_MAX_BYTES")) is not None:
        env["content_max_bytes"] = _parse_int("LLMTRACE_CONTENT_MAX_BYTES", value)
    if (value := _env("LLMTRACE_INJECT_STREAM_USAGE")) is not None:
        env["inject_stream_usage"] = _parse_bool("LLMTRACE_INJECT_STREAM_USAGE", value)
    if (value := _env("LLMTRACE_INSTRUMENT")) is not None:
        env["instrument"] = _parse_instrument(value)
    return replace(base, **env)


def _parse_instrument(value: str) -> bool | tuple[str, ...]:
    lowered = value.lower()
    if lowered in ("all", "true", "1", "yes"):
        return True
    if lowered in ("none", "false", "0", "no"):
        return False
    return tuple(name.strip() for name in value.split(",") if name.strip())


def _validate(s: Settings) -> None:
    if s.exporter not in EXPORTERS:
        raise ConfigError(f"exporter={s.exporter!r} is not known; accepted: {', '.join(EXPORTERS)}")
    if s.protocol not in PROTOCOLS:
        raise ConfigError(
            f"protocol={s.protocol!r} is not supported; accepted: {', '.join(PROTOCOLS)}"
        )
    if s.sampler not in SAMPLERS:
        raise ConfigError(
            f"OTEL_TRACES_SAMPLER={s.sampler!r} is not supported; accepted: {', '.join(SAMPLERS)}"
        )
    if not 0.0 <= s.sample_ratio <= 1.0:
        raise ConfigError(f"sample_ratio={s.sample_ratio!r} is out of range; accepted: 0.0 to 1.0")
    if s.exporter == "otlp" and not s.endpoint:
        # The OTLP exporters have a default endpoint (localhost:4317 / :4318); that is fine.
        pass
    if s.content_max_bytes < 0:
        raise ConfigError(f"content_max_bytes={s.content_max_bytes!r} must be >= 0")
    if s.file_max_bytes < 0 or s.file_backups < 0:
        raise ConfigError("file_max_bytes and file_backups must be >= 0")
    if s.redact is not None and not callable(s.redact):
        raise ConfigError(f"redact={s.redact!r} is not callable; accepted: a function str -> str")
    if not isinstance(s.instrument, bool):
        from llmtrace.instrumentation.registry import available_names

        known = available_names()
        unknown = [name for name in s.instrument if name not in known]
        if unknown:
            raise ConfigError(
                f"instrument={unknown!r} names no known instrumentation; accepted: "
                f"{', '.join(sorted(known))}"
            )


def _sampler(s: Settings) -> Sampler:
    ratio_sampler = TraceIdRatioBased(s.sample_ratio)
    return {
        "always_on": ALWAYS_ON,
        "always_off": ALWAYS_OFF,
        "traceidratio": ratio_sampler,
        "parentbased_always_on": ParentBased(ALWAYS_ON),
        "parentbased_always_off": ParentBased(ALWAYS_OFF),
        "parentbased_traceidratio": ParentBased(ratio_sampler),
    }[s.sampler]


def _resolved_exporter(s: Settings) -> str:
    if s.exporter != "auto":
        return s.exporter
    return "otlp" if s.endpoint else "file"


def _otlp_exporter(s: Settings) -> SpanExporter:
    headers = dict(s.headers) or None
    if s.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        endpoint = s.endpoint
        insecure = None
        if endpoint is not None:
            insecure = not endpoint.startswith("https://")
        return GrpcExporter(endpoint=endpoint, headers=headers, insecure=insecure)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    endpoint = s.endpoint
    # A base endpoint (OTEL_EXPORTER_OTLP_ENDPOINT semantics) gets the signal path appended.
    if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return HttpExporter(endpoint=endpoint, headers=headers)


def _make_exporter(s: Settings) -> SpanExporter | None:
    kind = _resolved_exporter(s)
    if kind == "none":
        return None
    if kind == "console":
        return ConsoleSpanExporter()
    if kind == "file":
        from llmtrace.exporters.file import OTLPJsonFileExporter

        return OTLPJsonFileExporter(
            Path(s.file_path), max_bytes=s.file_max_bytes, backups=s.file_backups
        )
    return _otlp_exporter(s)


def init(
    service_name: str | None = None,
    *,
    exporter: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | None = None,
    file_path: str | os.PathLike[str] | None = None,
    sample_ratio: float | None = None,
    capture_content: bool | None = None,
    content_max_bytes: int | None = None,
    redact: Callable[[str], str] | None = None,
    inject_stream_usage: bool | None = None,
    instrument: bool | Iterable[str] | None = None,
) -> None:
    """Set up tracing for this process. Safe to call more than once (later calls do nothing)."""
    global _settings, _initialized, _owned_provider, _processor, _atexit_registered, drop_all
    with _lock:
        if _initialized:
            logger.debug("llmtrace.init() called again; the first configuration stays")
            return
        _forget_provider_name()
        s = _from_environment(Settings())
        explicit_exporter = exporter is not None or _env("LLMTRACE_EXPORTER") is not None
        overrides: dict[str, Any] = {}
        if service_name is not None:
            overrides["service_name"] = service_name
        if exporter is not None:
            overrides["exporter"] = str(exporter).lower()
        if endpoint is not None:
            overrides["endpoint"] = endpoint
        if protocol is not None:
            overrides["protocol"] = str(protocol).lower()
        if headers is not None:
            overrides["headers"] = dict(headers)
        if file_path is not None:
            overrides["file_path"] = os.fspath(file_path)
        if sample_ratio is not None:
            overrides["sampler"] = "parentbased_traceidratio"
            overrides["sample_ratio"] = float(sample_ratio)
        if capture_content is not None:
            overrides["capture_content"] = bool(capture_content)
        if content_max_bytes is not None:
            overrides["content_max_bytes"] = int(content_max_bytes)
        if redact is not None:
            overrides["redact"] = redact
        if inject_stream_usage is not None:
            overrides["inject_stream_usage"] = bool(inject_stream_usage)
        if instrument is not None:
            overrides["instrument"] = (
                instrument if isinstance(instrument, bool) else tuple(instrument)
            )
        s = replace(s, **overrides)
        _validate(s)

        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider) and current is not _owned_provider:
            provider = current
            add_exporter = explicit_exporter
        else:
            if _owned_provider is None:
                _owned_provider = TracerProvider(
                    resource=Resource.create({"service.name": s.service_name}),
                    sampler=_sampler(s),
                )
                trace.set_tracer_provider(_owned_provider)
            provider = _owned_provider
            add_exporter = True

        if add_exporter:
            span_exporter = _make_exporter(s)
            if span_exporter is not None:
                # The console exporter is for watching live: no batching delay.
                processor: SpanProcessor = (
                    SimpleSpanProcessor(span_exporter)
                    if _resolved_exporter(s) == "console"
                    else BatchSpanProcessor(span_exporter)
                )
                provider.add_span_processor(processor)
                _processor = processor

        if add_exporter and _resolved_exporter(s) == "otlp":
            _install_metrics(s)
        _settings = s
        _initialized = True
        drop_all = provider is _owned_provider and drops_everything(s)
        if not _atexit_registered:
            # The SDK provider flushes at exit only when it owns shutdown; a reused provider or an
            # added processor may not, and a short script must not lose its last spans.
            atexit.register(_flush_at_exit)
            _atexit_registered = True

    if s.instrument is not False:
        from llmtrace.instrumentation.registry import instrument as instrument_libraries

        instrument_libraries(None if s.instrument is True else list(s.instrument))


def _install_metrics(s: Settings) -> None:
    """The GenAI client metrics go to the same OTLP endpoint as the spans, unless the application
    already has a MeterProvider or ``OTEL_METRICS_EXPORTER=none``."""
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    if (_env("OTEL_METRICS_EXPORTER") or "otlp").lower() == "none":
        return
    if isinstance(metrics.get_meter_provider(), MeterProvider):
        return
    headers = dict(s.headers) or None
    exporter: Any
    if s.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetricExporter,
        )

        insecure = None if s.endpoint is None else not s.endpoint.startswith("https://")
        exporter = GrpcMetricExporter(endpoint=s.endpoint, headers=headers, insecure=insecure)
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter as HttpMetricExporter,
        )

        endpoint = s.endpoint
        if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/metrics"):
            endpoint = endpoint.rstrip("/").removesuffix("/v1/traces") + "/v1/metrics"
        exporter = HttpMetricExporter(endpoint=endpoint, headers=headers)
    metrics.set_meter_provider(
        MeterProvider(
            resource=Resource.create({"service.name": s.service_name}),
            metric_readers=[PeriodicExportingMetricReader(exporter)],
        )
    )


def force_flush(timeout_millis: int = 30000) -> bool:
    """Export every finished span now. Returns False when the flush timed out."""
    processor = _processor
    ok = True
    if processor is not None:
        ok = processor.force_flush(timeout_millis)
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        ok = provider.force_flush(timeout_millis) and ok
    return ok


def shutdown() -> None:
    """Flush and stop llmtrace's exporter and undo its instrumentation."""
    global _initialized, _processor, _settings, drop_all
    with _lock:
        if not _initialized:
            return
        try:
            from llmtrace.instrumentation.registry import uninstrument

            uninstrument()
        except Exception:
            logger.debug("llmtrace: uninstrument failed", exc_info=True)
        processor = _processor
        if processor is not None:
            processor.force_flush()
            processor.shutdown()
            _detach_processor(processor)
        _processor = None
        _initialized = False
        drop_all = False
        _settings = Settings()


def _detach_processor(processor: SpanProcessor) -> None:
    # The SDK has no public "remove processor"; keep the provider usable for a later init().
    provider = trace.get_tracer_provider()
    multi = getattr(provider, "_active_span_processor", None)
    procs = getattr(multi, "_span_processors", None)
    if isinstance(procs, tuple) and processor in procs:
        multi._span_processors = tuple(p for p in procs if p is not processor)  # type: ignore[union-attr]


def _flush_at_exit() -> None:
    try:
        force_flush(5000)
    except Exception:
        logger.debug("llmtrace: flush at exit failed", exc_info=True)
