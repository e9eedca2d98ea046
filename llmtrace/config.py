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
- Endpoints follow the OTLP exporter specification: the generic ``OTEL_EXPORTER_OTLP_ENDPOINT``
  (and the ``endpoint`` argument) is a base URL to which OTLP/HTTP appends ``/v1/traces`` and
  ``/v1/metrics``; the signal-specific ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` and
  ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` are used exactly as given. Metrics never go to the
  traces URL.
- ``OTEL_SDK_DISABLED=true`` turns llmtrace off entirely: no provider, no patches, decorators do
  nothing.
- A second ``init()`` is a no-op (logged at debug level); ``shutdown()`` then ``init()`` starts anew
  on the same provider (OpenTelemetry allows setting the global provider only once), with the new
  service name and sampler.
- Exit is bounded: flushing at interpreter exit (and ``shutdown()``) waits at most
  ``shutdown_timeout`` seconds (``LLMTRACE_SHUTDOWN_TIMEOUT``, default 5) for the backend, then
  logs one WARNING with the number of spans that could not be delivered. Spans lost to a full
  export queue or a failed export are counted (``delivery_stats()``) and reported the same way.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
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
from llmtrace.exporters.delivery import CountingExporter, CountingProcessor, DeliveryStats
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
DEFAULT_SHUTDOWN_TIMEOUT = 5.0
_TRUE = ("1", "true", "yes", "on", "span_only", "span_and_event", "event_only")
_FALSE = ("0", "false", "no", "off", "no_content", "")


@dataclass(frozen=True)
class Settings:
    """The options in force. ``settings()`` returns the active ones to instrumentations."""

    service_name: str = "unknown_service"
    exporter: str = "auto"
    endpoint: str | None = None
    """The base OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` semantics)."""
    traces_endpoint: str | None = None
    """``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``: the full traces URL, used as given."""
    metrics_endpoint: str | None = None
    """``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``: the full metrics URL, used as given."""
    protocol: str = "grpc"
    metrics_protocol: str = "grpc"
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
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    disabled: bool = False


_settings = Settings()
_lock = threading.RLock()
_initialized = False
_owned_provider: TracerProvider | None = None
_processor: CountingProcessor | None = None
_owned_meter_provider: Any = None
_sampler_switch: _SwitchableSampler | None = None
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
    if (value := _env("LLMTRACE_SHUTDOWN_TIMEOUT")) is not None:
        env["shutdown_timeout"] = _parse_float("LLMTRACE_SHUTDOWN_TIMEOUT", value)
    if (value := _env("OTEL_SDK_DISABLED")) is not None:
        env["disabled"] = _parse_bool("OTEL_SDK_DISABLED", value)
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
    if s.content_max_bytes < 0:
        raise ConfigError(f"content_max_bytes={s.content_max_bytes!r} must be >= 0")
    if s.file_max_bytes < 0 or s.file_backups < 0:
        raise ConfigError("file_max_bytes and file_backups must be >= 0")
    if s.redact is not None and not callable(s.redact):
        raise ConfigError(f"redact={s.redact!r} is not callable; accepted: a function str -> str")
    if not isinstance(s.instrument, bool):
        from llmtrace.instrumentation.registry import check_names

        check_names(s.instrument)


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


def _insecure(endpoint: str | None) -> bool | None:
    return None if endpoint is None else not endpoint.startswith("https://")


def _otlp_exporter(s: Settings) -> SpanExporter:
    headers = dict(s.headers) or None
    endpoint = traces_endpoint(s)
    if s.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=endpoint, headers=headers, insecure=_insecure(endpoint))
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

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
    shutdown_timeout: float | None = None,
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
            # An explicit argument wins over the signal-specific variables too.
            overrides["traces_endpoint"] = None
        if protocol is not None:
            overrides["protocol"] = overrides["metrics_protocol"] = str(protocol).lower()
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
        if shutdown_timeout is not None:
            overrides["shutdown_timeout"] = float(shutdown_timeout)
        s = replace(s, **overrides)
        _validate(s)

        if s.disabled:
            # OTEL_SDK_DISABLED: no provider, no exporter, no patches; decorators skip all work.
            logger.info("llmtrace: OTEL_SDK_DISABLED is set; tracing is off")
            _settings = s
            _initialized = True
            drop_all = True
            return

        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider) and current is not _owned_provider:
            provider = current
            add_exporter = explicit_exporter
        else:
            _own_provider(s)
            provider = _owned_provider  # type: ignore[assignment]
            add_exporter = True

        if add_exporter:
            span_exporter = _make_exporter(s)
            if span_exporter is not None:
                counting = CountingExporter(span_exporter)
                # The console exporter is for watching live: no batching delay.
                batching: SpanProcessor = (
                    SimpleSpanProcessor(counting)
                    if _resolved_exporter(s) == "console"
                    else BatchSpanProcessor(counting)
                )
                _processor = CountingProcessor(batching, counting)
                provider.add_span_processor(_processor)

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


class _SwitchableSampler(Sampler):
    """The sampler of llmtrace's own provider, replaceable by a later ``init()``.

    OpenTelemetry lets the global provider be set once, and its tracers keep the sampler object
    they were made with; this one forwards to the sampler of the settings in force. The forward
    costs nothing per span: ``should_sample`` is the current sampler's own bound method, stored on
    the instance (where it shadows the class's).
    """

    def __init__(self, sampler: Sampler) -> None:
        self.use(sampler)

    def use(self, sampler: Sampler) -> None:
        self.current = sampler
        self.should_sample = sampler.should_sample  # type: ignore[method-assign]

    def should_sample(self, *args: Any, **kwargs: Any) -> Any:  # replaced per instance
        return self.current.should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return self.current.get_description()


def _own_provider(s: Settings) -> None:
    """Create llmtrace's provider, or give the existing one the new service name and sampler."""
    global _owned_provider, _sampler_switch
    if _owned_provider is None:
        _sampler_switch = _SwitchableSampler(_sampler(s))
        _owned_provider = TracerProvider(
            resource=Resource.create({"service.name": s.service_name}), sampler=_sampler_switch
        )
        trace.set_tracer_provider(_owned_provider)
        return
    if _sampler_switch is not None:
        _sampler_switch.use(_sampler(s))
    # Tracers hold the provider's Resource object: give that object the new attributes.
    _replace_resource_attributes(_owned_provider.resource, s.service_name)
    if _owned_meter_provider is not None:
        sdk_config = getattr(_owned_meter_provider, "_sdk_config", None)
        if sdk_config is not None:
            _replace_resource_attributes(sdk_config.resource, s.service_name)


def _replace_resource_attributes(resource: Resource, service_name: str) -> None:
    fresh = Resource.create({"service.name": service_name})
    try:
        resource._attributes = fresh._attributes
    except Exception:
        logger.warning(
            "llmtrace: could not change the service name to %r after shutdown(); spans keep "
            "the first one",
            service_name,
        )


def _install_metrics(s: Settings) -> None:
    """The GenAI client metrics go to the same OTLP endpoint as the spans, unless the application
    already has a MeterProvider or ``OTEL_METRICS_EXPORTER=none``."""
    global _owned_meter_provider
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    if (_env("OTEL_METRICS_EXPORTER") or "otlp").lower() == "none":
        return
    if isinstance(metrics.get_meter_provider(), MeterProvider):
        return
    headers = dict(s.headers) or None
    endpoint = metrics_endpoint(s)
    exporter: Any
    if s.metrics_protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetricExporter,
        )

        exporter = GrpcMetricExporter(
            endpoint=endpoint, headers=headers, insecure=_insecure(endpoint)
        )
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter as HttpMetricExporter,
        )

        exporter = HttpMetricExporter(endpoint=endpoint, headers=headers)
    # Shut down by llmtrace's bounded exit, not by the SDK's own unbounded exit handler.
    _owned_meter_provider = MeterProvider(
        resource=Resource.create({"service.name": s.service_name}),
        metric_readers=[PeriodicExportingMetricReader(exporter)],
        shutdown_on_exit=False,
    )
    metrics.set_meter_provider(_owned_meter_provider)


def delivery_stats() -> DeliveryStats | None:
    """Spans counted by llmtrace's exporter since ``init()``: taken, delivered, failed, dropped
    (None when llmtrace added no exporter)."""
    processor = _processor
    return processor.stats() if processor is not None else None


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
    """Flush and stop llmtrace's exporter (waiting at most ``shutdown_timeout`` seconds) and undo
    its instrumentation."""
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
            _stop(processor, None, _settings)
        elif _owned_meter_provider is not None:
            _flush_meters(_settings.shutdown_timeout)
        _processor = None
        _initialized = False
        drop_all = False
        _settings = Settings()


def _flush_meters(timeout: float) -> None:
    with _logged_at_debug("metrics flush"):
        _owned_meter_provider.force_flush(timeout_millis=int(timeout * 1000))


@contextlib.contextmanager
def _logged_at_debug(what: str) -> Iterator[None]:
    """Nothing at exit or shutdown may raise into the application: log at debug level, go on."""
    try:
        yield
    except Exception:
        logger.debug("llmtrace: %s failed", what, exc_info=True)


def _stop(processor: CountingProcessor, meter_provider: Any, s: Settings) -> None:
    """Flush and shut down ``processor`` (and ``meter_provider``, at exit) within the settings'
    ``shutdown_timeout``; then report what could not be delivered.

    The work runs in a daemon thread so the wait is bounded whatever the exporter does (a
    collector that accepts connections and never answers holds an OTLP export for its own
    timeout, 10 s by default, and the SDK's flush does not honour the timeout it is given).
    When time runs out the exporter is closed (later exports fail at once, counted) and the
    processor is detached, so the provider's own exit handler does not wait for it either.
    """
    timeout = s.shutdown_timeout
    deadline = time.monotonic() + timeout
    finished = threading.Event()

    def finish() -> None:
        try:
            with _logged_at_debug("flush"):
                processor.force_flush(int(timeout * 1000))
            with _logged_at_debug("exporter shutdown"):
                processor.shutdown()
            if meter_provider is not None:
                remaining = max(deadline - time.monotonic(), 0.0)
                with _logged_at_debug("metrics shutdown"):
                    meter_provider.shutdown(timeout_millis=int(remaining * 1000))
        finally:
            finished.set()

    worker = threading.Thread(target=finish, name="llmtrace-shutdown", daemon=True)
    worker.start()
    timed_out = not finished.wait(timeout)
    if timed_out:
        processor.exporter.close()
        with _logged_at_debug("exporter interrupt"):
            # Ends the OTLP exporters' retry back-off waits (they watch a shutdown event).
            processor.exporter.inner.shutdown()
    _detach_processor(processor)
    _report_undelivered(processor.stats(), s, timed_out)


def _report_undelivered(stats: DeliveryStats, s: Settings, timed_out: bool) -> None:
    if stats.undelivered == 0:
        return
    parts = []
    if stats.failed:
        parts.append(f"{stats.failed} in failed exports")
    if stats.queue_dropped:
        parts.append(f"{stats.queue_dropped} dropped because the export queue was full")
    waiting = stats.refused_after_deadline + (stats.queued or 0)
    if waiting:
        parts.append(f"{waiting} still waiting when time ran out")
    where = traces_endpoint(s) if _resolved_exporter(s) == "otlp" else _resolved_exporter(s)
    hint = (
        f"; the backend did not answer within {s.shutdown_timeout:g} s "
        "(LLMTRACE_SHUTDOWN_TIMEOUT sets the wait)"
        if timed_out
        else ""
    )
    logger.warning(
        "llmtrace: %d of %d spans could not be delivered to %s (%s)%s",
        stats.undelivered,
        stats.taken,
        where or "the default OTLP endpoint",
        ", ".join(parts) or "reason unknown",
        hint,
    )


def _detach_processor(processor: SpanProcessor) -> None:
    # The SDK has no public "remove processor"; keep the provider usable for a later init().
    provider = trace.get_tracer_provider()
    multi = getattr(provider, "_active_span_processor", None)
    procs = getattr(multi, "_span_processors", None)
    if isinstance(procs, tuple) and processor in procs:
        multi._span_processors = tuple(p for p in procs if p is not processor)  # type: ignore[union-attr]


def _flush_at_exit() -> None:
    global _processor
    try:
        processor = _processor
        if processor is not None:
            _processor = None
            _stop(processor, _owned_meter_provider, _settings)
        elif _owned_meter_provider is not None:
            _flush_meters(_settings.shutdown_timeout)
    except Exception:
        logger.debug("llmtrace: flush at exit failed", exc_info=True)
