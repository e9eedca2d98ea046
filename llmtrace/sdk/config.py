"""``init()`` and ``shutdown()``: the tracer and meter providers, exporters, sampling, exit.

The options themselves (arguments, environment variables, defaults, validation) are in
:mod:`llmtrace.options`; this module acts on them. Decisions recorded here:

- An application that already installed an SDK ``TracerProvider`` keeps it: llmtrace adds its own
  exporter to that provider only when one was asked for explicitly (argument or
  ``LLMTRACE_EXPORTER``); with ``exporter="auto"`` the application's own pipeline decides where
  spans go, and llmtrace adds nothing. Options that only llmtrace's own provider can honour
  (service name, resource attributes, sampler) are then said, in one WARNING, to have no effect.
- ``exporter="auto"`` means OTLP when an endpoint is configured (argument,
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), else the local file.
- ``OTEL_SDK_DISABLED=true`` turns llmtrace off entirely: no provider, no patches, decorators do
  nothing.
- A second ``init()`` is a no-op (logged at debug level); ``shutdown()`` then ``init()`` starts anew
  on the same provider (OpenTelemetry allows setting the global provider only once), with the new
  service name, resource attributes and sampler.
- Request metrics (``llmtrace.sdk.request_metrics``): each local request's stage breakdown is
  recorded as histograms when its local root span ends. ``request_metrics=None`` (the default,
  ``LLMTRACE_REQUEST_METRICS`` unset or ``auto``) turns them on exactly when llmtrace exports
  metrics itself (OTLP, its own meter provider): they then go where the spans go. With a file or
  console exporter the report reads whole traces anyway; on an application's own providers
  llmtrace adds nothing unless asked (``request_metrics=True`` records through the
  application's ``MeterProvider``). While they are on, on llmtrace's own provider, the spans of
  the traces the sampler drops are recorded too, for the breakdown only (never exported), so that
  the request metrics count every request whatever the sampler keeps; every request then pays
  for recording its spans (about three times what dropping them costs, a fraction of a
  millisecond: benchmarks/README.md, overhead_core.py), and ``request_metrics_unsampled=False``
  (``LLMTRACE_REQUEST_METRICS_UNSAMPLED=false``) counts sampled requests only. The GenAI client
  metrics count every model call in any case (``llmtrace.sdk.counted_span``).
  On llmtrace's own meter provider (explicit buckets, the default) its periodic reader is a
  ``_compat.RequestMetricsReader``: llmtrace aggregates the request histograms itself
  and that reader exports them with the SDK's metrics (far cheaper per point than the SDK:
  measured in benchmarks/README.md, overhead_core.py).
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
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
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

from llmtrace.options import (
    RequestMetricsOptions,
    Settings,
    drops_everything,
    from_environment,
    options_from,
    parse_capture,
    resolved_exporter,
    settings,
    traces_endpoint,
    transport,
    validate,
)
from llmtrace.options import activate as _activate
from llmtrace.sdk import gate
from llmtrace.sdk._attached import attach, detach
from llmtrace.sdk.exporters.configured import make_exporter, otlp_exporter
from llmtrace.sdk.exporters.delivery import CountingExporter, CountingProcessor, DeliveryStats
from llmtrace.sdk.request_context import install_when_used as install_request_context
from llmtrace.sdk.request_metrics import RecordUnsampled, RequestMetricsProcessor

if TYPE_CHECKING:
    from llmtrace.sdk.request_histograms import RequestHistograms

logger = logging.getLogger(__name__)

_lock = threading.RLock()
_owned_provider: TracerProvider | None = None
# The exporters llmtrace added (its own first, then init(exporters=...)), each counted.
_processors: list[CountingProcessor] = []
_extra_processors: list[SpanProcessor] = []
_owned_meter_provider: Any = None
_owned_meter_resource: Any = None
# The request histograms its reader exports (None: the request metrics go through the SDK).
_owned_request_histograms: RequestHistograms | None = None
_sampler_switch: _SwitchableSampler | None = None
_request_metrics: RequestMetricsProcessor | None = None
_atexit_registered = False


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


def _resource(s: Settings) -> Resource:
    """The resource of llmtrace's providers. ``Resource.create`` merges ``OTEL_RESOURCE_ATTRIBUTES``
    (a ``service.name`` there counts when none was given), then these attributes over it."""
    attributes = dict(s.resource_attributes)
    if s.service_name_given:
        attributes["service.name"] = s.service_name
    return Resource.create(attributes)


def _counted(exporter: SpanExporter, immediate: bool = False) -> CountingProcessor:
    counting = CountingExporter(exporter)
    # The console exporter is for watching live: no batching delay.
    inner: SpanProcessor = (
        SimpleSpanProcessor(counting) if immediate else BatchSpanProcessor(counting)
    )
    return CountingProcessor(inner, counting)


def init(
    service_name: str | None = None,
    *,
    exporter: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | None = None,
    file_path: str | os.PathLike[str] | None = None,
    sample_ratio: float | None = None,
    sampler: Sampler | None = None,
    resource_attributes: Mapping[str, Any] | None = None,
    span_processors: Iterable[SpanProcessor] | None = None,
    exporters: Iterable[SpanExporter] | None = None,
    capture_content: bool | str | None = None,
    content_max_bytes: int | None = None,
    redact: Callable[[str], str] | None = None,
    inject_stream_usage: bool | None = None,
    instrument: bool | Iterable[str] | None = None,
    shutdown_timeout: float | None = None,
    jaeger_url: str | None = None,
    request_metrics: bool | None = None,
    request_metrics_unsampled: bool | None = None,
) -> None:
    """Set up tracing for this process. Safe to call more than once (later calls do nothing).

    ``sampler`` (an OpenTelemetry ``Sampler``) wins over ``sample_ratio``; ``span_processors``
    are added to the provider as they are; each of ``exporters`` gets its own batch processor
    and, like llmtrace's own exporter, its delivery counted and its exit flush bounded.
    ``request_metrics`` / ``request_metrics_unsampled``: see the module docstring.
    ``capture_content``: ``True`` / ``False``, or where content goes, as
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says it (``"span_only"``,
    ``"event_only"``, ``"span_and_event"``, ``"no_content"``; any case).
    """
    global _owned_provider, _atexit_registered, _request_metrics
    with _lock:
        if initialized():
            logger.debug("llmtrace.init() called again; the first configuration stays")
            return
        s = from_environment(Settings())
        overrides: dict[str, Any] = {}
        if service_name is not None:
            overrides["service_name"] = service_name
            overrides["service_name_given"] = True
        if exporter is not None:
            overrides["exporter"] = str(exporter).lower()
            overrides["exporter_given"] = True
        if endpoint is not None:
            overrides["endpoint"] = endpoint
            # An explicit argument wins over the signal-specific variables too.
            overrides["traces_endpoint"] = None
        if protocol is not None:
            overrides["protocol"] = overrides["metrics_protocol"] = str(protocol).lower()
        if headers is not None:
            overrides["headers"] = overrides["metrics_headers"] = dict(headers)
        if file_path is not None:
            overrides["file_path"] = os.fspath(file_path)
        if sample_ratio is not None:
            overrides["sampler"] = "parentbased_traceidratio"
            overrides["sample_ratio"] = float(sample_ratio)
        if resource_attributes is not None:
            overrides["resource_attributes"] = dict(resource_attributes)
        if capture_content is not None:
            overrides["capture_content"], overrides["capture_mode"] = parse_capture(
                "capture_content",
                capture_content if isinstance(capture_content, str) else bool(capture_content),
            )
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
        if jaeger_url is not None:
            overrides["jaeger_url"] = jaeger_url
        s = replace(s, **overrides)
        validate(s)
        if not isinstance(s.instrument, bool):
            # The names the registry knows (the runtime's one reach into the instrumentation
            # layer above it, with the instrument() call below: init() composes the two).
            from llmtrace.instrumentation.registry import check_names

            check_names(s.instrument)
        request_options = options_from(request_metrics, unsampled=request_metrics_unsampled)
        if sampler is not None and not isinstance(sampler, Sampler):
            from llmtrace.errors import ConfigError

            raise ConfigError(
                f"sampler={sampler!r} is not an OpenTelemetry Sampler; accepted: an instance of "
                "opentelemetry.sdk.trace.sampling.Sampler"
            )

        if s.disabled:
            # OTEL_SDK_DISABLED: no provider, no exporter, no patches; decorators skip all work.
            logger.info("llmtrace: OTEL_SDK_DISABLED is set; tracing is off")
            _activate(s)
            gate.drop_all = True
            return

        current = trace.get_tracer_provider()
        chosen: Sampler | None = None
        if isinstance(current, TracerProvider) and current is not _owned_provider:
            provider = current
            add_exporter = s.exporter_given
            _warn_ineffective(service_name, resource_attributes, sample_ratio, sampler)
        else:
            chosen = sampler or _sampler(s)
            _own_provider(_resource(s), chosen)
            provider = _owned_provider  # type: ignore[assignment]
            add_exporter = True

        resource = _resource(s)
        s = replace(s, service_name=str(resource.attributes.get("service.name", s.service_name)))
        if add_exporter:
            span_exporter = make_exporter(s)
            if span_exporter is not None:
                _processors.append(
                    _counted(span_exporter, immediate=resolved_exporter(s) == "console")
                )
        _processors.extend(_counted(extra) for extra in exporters or ())
        for processor in _processors:
            attach(provider, processor)
        # Request context attributes (llmtrace.context) go on every span of the provider, from
        # the first context entered.
        install_request_context(provider)
        for extra_processor in span_processors or ():
            attach(provider, extra_processor)
            _extra_processors.append(extra_processor)

        if add_exporter and resolved_exporter(s) == "otlp":
            _install_metrics(s, resource, request_options)
        _request_metrics = _install_request_metrics(provider, request_options)
        records_unsampled = _records_unsampled(request_options, provider)
        if records_unsampled and chosen is not None and _sampler_switch is not None:
            # The sampler still decides what is exported; what it drops is recorded only.
            _sampler_switch.use(RecordUnsampled(chosen))
        gate.record_unsampled = records_unsampled
        # The fast paths decided and probed here, not inside the first request's spans.
        try:
            from llmtrace.sdk import _compat

            _compat.prepare()
        except Exception:
            logger.debug("llmtrace: fast paths not prepared", exc_info=True)
        _activate(s)
        gate.drop_all = (
            provider is _owned_provider
            and sampler is None
            and drops_everything(s)
            and not records_unsampled
        )
        if not _atexit_registered:
            # The SDK provider flushes at exit only when it owns shutdown; a reused provider or an
            # added processor may not, and a short script must not lose its last spans.
            atexit.register(_flush_at_exit)
            _atexit_registered = True

    if s.instrument is not False:
        from llmtrace.instrumentation.registry import instrument as instrument_libraries

        instrument_libraries(None if s.instrument is True else list(s.instrument))


def _settings_in_force() -> Settings | None:
    from llmtrace import options

    return options._active


def initialized() -> bool:
    """Whether ``init()`` is in force (until ``shutdown()``)."""
    return _settings_in_force() is not None


def _warn_ineffective(
    service_name: str | None,
    resource_attributes: Mapping[str, Any] | None,
    sample_ratio: float | None,
    sampler: Sampler | None,
) -> None:
    """One WARNING naming the options only llmtrace's own provider could have honoured."""
    given = [
        name
        for name, value in (
            ("service_name", service_name),
            ("resource_attributes", resource_attributes),
            ("sample_ratio", sample_ratio),
            ("sampler", sampler),
        )
        if value is not None
    ]
    if given:
        logger.warning(
            "llmtrace: the application already set a TracerProvider, so %s cannot take effect "
            "(set them on the application's provider instead)",
            ", ".join(given),
        )


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
        # Model calls asked whether the sampler looks at attributes; the new one may.
        gate.forget_sampler()

    @property
    def wrapped_sampler(self) -> Sampler:
        """The sampler that decides (model spans start without their attributes when it never
        reads them; see llmtrace.instrumentation.model_call.start_client_span)."""
        return self.current

    def should_sample(self, *args: Any, **kwargs: Any) -> Any:  # replaced per instance
        return self.current.should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return self.current.get_description()


def _own_provider(resource: Resource, sampler: Sampler) -> None:
    """Create llmtrace's provider, or give the existing one the new resource and sampler."""
    global _owned_provider, _sampler_switch
    if _owned_provider is None:
        _sampler_switch = _SwitchableSampler(sampler)
        _owned_provider = TracerProvider(
            resource=_ReplaceableResource(resource), sampler=_sampler_switch
        )
        trace.set_tracer_provider(_owned_provider)
        return
    if _sampler_switch is not None:
        _sampler_switch.use(sampler)
    # Tracers hold the provider's Resource object: give that object the new attributes.
    _replace_resource_attributes(_owned_provider.resource, resource)
    if _owned_meter_resource is not None:
        _replace_resource_attributes(_owned_meter_resource, _with_instance_id(resource))


class _ReplaceableResource(Resource):
    """The resource of llmtrace's own providers, whose attributes a later ``init()`` replaces.

    OpenTelemetry lets the global providers be set once, and their tracers and meters keep the
    resource object they were made with; this one answers with the attributes of the resource
    it was last given, through the public ``attributes`` and ``schema_url`` (what exporters read)
    and the methods that read them."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self.current = resource

    @property
    def attributes(self) -> Any:
        return self.current.attributes

    @property
    def schema_url(self) -> str:
        return self.current.schema_url

    def merge(self, other: Resource) -> Resource:
        return self.current.merge(other)

    def to_json(self, indent: int | None = 4) -> str:
        return self.current.to_json(indent)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, _ReplaceableResource):
            other = other.current
        return self.current == other

    def __hash__(self) -> int:
        return hash(self.current)


def _replace_resource_attributes(resource: Resource, fresh: Resource) -> None:
    if isinstance(resource, _ReplaceableResource):
        resource.current = fresh
    else:
        logger.warning(
            "llmtrace: the tracer provider's resource is not llmtrace's; spans keep its attributes"
        )


def _records_unsampled(options: RequestMetricsOptions, provider: TracerProvider) -> bool:
    """Whether the traces the sampler drops are recorded for the request breakdown: while
    request metrics are on (``_request_metrics``) and the provider is llmtrace's own, unless
    ``request_metrics_unsampled=False``. Asked for explicitly where it cannot be, it says why."""
    if options.unsampled is False:
        return False
    if _request_metrics is None:
        if options.unsampled:
            logger.warning(
                "llmtrace: request_metrics_unsampled is set but request metrics are off "
                "(request_metrics=True turns them on); unsampled spans are not recorded"
            )
        return False
    if provider is not _owned_provider:
        if options.unsampled:
            logger.warning(
                "llmtrace: request_metrics_unsampled needs llmtrace's own TracerProvider; the "
                "application's sampler decides which requests are counted"
            )
        return False
    return True


def _install_request_metrics(
    provider: TracerProvider, options: RequestMetricsOptions
) -> RequestMetricsProcessor | None:
    """Add the request breakdown processor when asked for, or by default when llmtrace exports
    metrics itself; it is stopped and detached with the processors ``init()`` was given."""
    from llmtrace.sdk.metrics import meter_provider_set

    enabled = options.enabled
    if enabled is None:
        enabled = _owned_meter_provider is not None and meter_provider_set()
    if not enabled:
        return None
    from opentelemetry import metrics

    owned = _owned_meter_provider is not None and metrics.get_meter_provider() is (
        _owned_meter_provider
    )
    processor = RequestMetricsProcessor(
        max_traces=options.max_traces,
        max_spans=options.max_spans,
        root_timeout=options.root_timeout,
        histograms=_owned_request_histograms if owned else None,
    )
    attach(provider, processor)
    _extra_processors.append(processor)
    return processor


def request_metrics_processor() -> RequestMetricsProcessor | None:
    """The request breakdown processor ``init()`` added (None when request metrics are off)."""
    return _request_metrics


# One per process, for the lifetime of the process (see _with_instance_id).
_INSTANCE_ID = str(uuid.uuid4())


def _with_instance_id(resource: Resource) -> Resource:
    """The metrics resource with a ``service.instance.id`` (unless the application gave one).

    Replicas of a service export cumulative series under the same ``service.name``; a metrics
    backend tells them apart by the instance (Prometheus's OTLP receiver makes it the
    ``instance`` label). Without it, two processes would write one series and corrupt it.
    """
    if "service.instance.id" in resource.attributes:
        return resource
    return resource.merge(Resource({"service.instance.id": _INSTANCE_ID}))


def _install_metrics(
    s: Settings, resource: Resource, request_options: RequestMetricsOptions | None = None
) -> None:
    """The GenAI client metrics go to the same OTLP endpoint as the spans, unless the application
    already has a MeterProvider or ``OTEL_METRICS_EXPORTER=none``."""
    global _owned_meter_provider, _owned_meter_resource
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    if s.metrics_exporter == "none":
        return
    if isinstance(metrics.get_meter_provider(), MeterProvider):
        return
    exporter = otlp_exporter(s, "metrics")
    from llmtrace.sdk._compat import RequestMetricsReader, exporter_temporality
    from llmtrace.sdk.request_metrics import request_histograms, views

    global _owned_request_histograms
    metrics_resource = _owned_meter_resource = _ReplaceableResource(_with_instance_id(resource))
    histogram = request_options.histogram if request_options is not None else "explicit"
    temporality = exporter_temporality(exporter)
    reader: PeriodicExportingMetricReader
    if histogram == "explicit" and temporality is not None:
        # llmtrace aggregates the request histograms itself, far cheaper per point than the SDK
        # (measured in benchmarks/README.md, overhead_core.py)
        _owned_request_histograms = request_histograms()
        reader = RequestMetricsReader(
            exporter, _owned_request_histograms, metrics_resource, temporality
        )
    else:
        reader = PeriodicExportingMetricReader(exporter)
    # Shut down by llmtrace's bounded exit, not by the SDK's own unbounded exit handler.
    _owned_meter_provider = MeterProvider(
        resource=metrics_resource,
        metric_readers=[reader],
        shutdown_on_exit=False,
        views=views(histogram),
    )
    metrics.set_meter_provider(_owned_meter_provider)


def delivery_stats() -> DeliveryStats | None:
    """Spans counted by the exporters llmtrace added since ``init()``: taken, delivered, failed,
    dropped (None when it added none)."""
    processors = list(_processors)
    if not processors:
        return None
    return DeliveryStats.total([processor.stats() for processor in processors])


def force_flush(timeout_millis: int = 30000) -> bool:
    """Export every finished span now. Returns False when the flush timed out."""
    ok = True
    for processor in list(_processors):
        ok = processor.force_flush(timeout_millis) and ok
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        ok = provider.force_flush(timeout_millis) and ok
    return ok


def shutdown() -> None:
    """Flush and stop llmtrace's exporters (waiting at most ``shutdown_timeout`` seconds) and
    undo its instrumentation."""
    global _request_metrics
    with _lock:
        s = _settings_in_force()
        if s is None:
            return
        try:
            from llmtrace.instrumentation.registry import uninstrument

            uninstrument()
        except Exception:
            logger.debug("llmtrace: uninstrument failed", exc_info=True)
        _stop_all(s, meters=False)
        _activate(None)
        gate.drop_all = False
        _request_metrics = None
        gate.record_unsampled = False


def _stop_all(s: Settings, meters: bool) -> None:
    processors = list(_processors)
    extra = list(_extra_processors)
    _processors.clear()
    _extra_processors.clear()
    if processors or extra:
        _stop(processors, extra, _owned_meter_provider if meters else None, s)
    elif _owned_meter_provider is not None:
        _flush_meters(s.shutdown_timeout)


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


def _stop(
    processors: list[CountingProcessor],
    extra: list[SpanProcessor],
    meter_provider: Any,
    s: Settings,
) -> None:
    """Flush and shut down llmtrace's exporters, the processors ``init()`` was given, and at exit
    ``meter_provider``, all within the settings' ``shutdown_timeout``; then say what could not
    be delivered.

    The work runs in a daemon thread so the wait is bounded whatever an exporter does (a
    collector that accepts connections and never answers holds an OTLP export for its own
    timeout, 10 s by default, and the SDK's flush does not honour the timeout it is given).
    When time runs out the exporters are closed (later exports fail at once, counted) and the
    processors are detached, so the provider's own exit handler does not wait for them either.
    """
    timeout = s.shutdown_timeout
    deadline = time.monotonic() + timeout
    finished = threading.Event()

    def remaining_millis() -> int:
        return int(max(deadline - time.monotonic(), 0.0) * 1000)

    def finish() -> None:
        try:
            for processor in [*processors, *extra]:
                with _logged_at_debug("flush"):
                    processor.force_flush(remaining_millis())
                with _logged_at_debug("exporter shutdown"):
                    processor.shutdown()
            if meter_provider is not None:
                with _logged_at_debug("metrics shutdown"):
                    meter_provider.shutdown(timeout_millis=remaining_millis())
        finally:
            finished.set()

    worker = threading.Thread(target=finish, name="llmtrace-shutdown", daemon=True)
    worker.start()
    timed_out = not finished.wait(timeout)
    if timed_out:
        for processor in processors:
            processor.exporter.close()
            with _logged_at_debug("exporter interrupt"):
                # Ends the OTLP exporters' retry back-off waits (they watch a shutdown event).
                processor.exporter.inner.shutdown()
    for attached in [*processors, *extra]:
        _detach_processor(attached)
    for index, processor in enumerate(processors):
        own = index == 0  # llmtrace's own exporter comes first; init(exporters=...) follow
        where = _destination(s) if own else type(processor.exporter.inner).__name__
        over_tls = own and resolved_exporter(s) == "otlp" and transport(s, "traces").secure
        _report_undelivered(processor.stats(), where, s, timed_out, over_tls)


def _destination(s: Settings) -> str:
    kind = resolved_exporter(s)
    if kind == "otlp":
        where = traces_endpoint(s) or "the default OTLP endpoint"
        security = transport(s, "traces")
        if not security.secure:
            return f"{where} (plaintext)"
        verified = (
            f"the CA in {security.certificate}"
            if security.certificate
            else "the system's CAs (OTEL_EXPORTER_OTLP_CERTIFICATE names another)"
        )
        client = (
            f", client certificate {security.client_certificate}"
            if security.client_certificate
            else ""
        )
        return f"{where} over TLS, verified with {verified}{client}"
    if kind == "file":
        return s.file_path
    return kind


def _report_undelivered(
    stats: DeliveryStats, where: str, s: Settings, timed_out: bool, over_tls: bool = False
) -> None:
    if stats.undelivered == 0:
        return
    parts = []
    if stats.failed:
        parts.append(f"{stats.failed} in failed exports")
    if stats.queue_dropped:
        parts.append(f"{stats.queue_dropped} dropped because the export queue was full")
    if stats.in_flight:
        parts.append(f"{stats.in_flight} in an export still being retried when time ran out")
    waiting = stats.refused_after_deadline + (stats.queued or 0)
    if waiting:
        parts.append(f"{waiting} still queued when time ran out")
    hint = (
        f"; the backend did not answer within {s.shutdown_timeout:g} s "
        "(LLMTRACE_SHUTDOWN_TIMEOUT sets the wait)"
        if timed_out
        else ""
    )
    if stats.delivered == 0 and over_tls:
        # Nothing at all got through a TLS connection: the usual causes, said once here rather
        # than left to the transport's own log lines.
        hint += (
            "; no export succeeded over TLS: check that the collector serves TLS with a "
            "certificate signed by that CA for this host name (an http:// endpoint, or "
            "OTEL_EXPORTER_OTLP_INSECURE=true for gRPC, sends plaintext)"
        )
    logger.warning(
        "llmtrace: %d of %d spans could not be delivered to %s (%s)%s",
        stats.undelivered,
        stats.taken,
        where,
        ", ".join(parts) or "reason unknown",
        hint,
    )


def _detach_processor(processor: SpanProcessor) -> None:
    # Keeps the provider usable for a later init(): its next spans skip this processor.
    detach(trace.get_tracer_provider(), processor)


def _flush_at_exit() -> None:
    try:
        with _lock:
            s = _settings_in_force() or settings()
            _stop_all(s, meters=True)
    except Exception:
        logger.debug("llmtrace: flush at exit failed", exc_info=True)
