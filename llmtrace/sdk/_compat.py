"""Where llmtrace uses another library's private names: the only place it may.

Each use is a *fast path*: a shortcut past a public API that costs more, kept only where it
saves a measurable share of llmtrace's own per-call cost (``benchmarks/overhead_peers.py``, run
with the path on and off; measured in benchmarks/README.md, overhead_peers.py). Each declares the releases it was
verified on (the lowest the suite ran on and the newest release series, so ``"1.45"`` covers
every 1.45.x) and a public fallback that gives the same spans, attributes and phases. The
fallback is used:

- outside the verified range (a new upstream release: the fast path stays off until the suite
  has run on that release and the range here is widened);
- when a probe of the installed release does not find what the fast path expects;
- when ``LLMTRACE_FAST_PATHS`` says so: ``off`` (public APIs only; the suite runs its core checks
  that way, ``tests/core/test_fast_paths.py``), ``-NAME`` for one path, or ``on`` (verified range
  ignored, probes still apply: how ``scripts/test_newest.sh`` checks a new release before its
  range is widened).

The libraries llmtrace *instruments* (provider SDKs, frameworks, vector stores) are another
matter: an instrumentation hooks where its library does the work, often a private method, and
each declares the releases it supports (``supported`` in its module, the extras in
pyproject.toml, tested at both ends by ``make test-min-deps`` and ``make test-newest``).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import Histogram as HistogramInstrument
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.metrics.view import DefaultAggregation, ExplicitBucketHistogramAggregation
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import Status, StatusCode

logger = logging.getLogger(__name__)

ENVIRONMENT = "LLMTRACE_FAST_PATHS"


@dataclass(frozen=True)
class FastPath:
    """One use of private names: in which distribution, the releases verified, what it reads,
    what is used instead."""

    name: str
    distribution: str
    lowest: str
    newest: str
    uses: str
    fallback: str


FAST_PATHS: dict[str, FastPath] = {
    path.name: path
    for path in (
        FastPath(
            "span-store",
            "opentelemetry-sdk",
            "1.30.0",
            "1.45",
            "Span._attributes (BoundedAttributes._dict, max_value_len, maxlen), Span._lock, "
            "Span._end_time, Span._status: a stream's end attributes and OK status written at once",
            "Span.set_attributes and Span.set_status",
        ),
        FastPath(
            "span-events",
            "opentelemetry-sdk",
            "1.30.0",
            "1.45",
            "Span._events (BoundedList), Span._lock, Span._end_time, Span._start_time, Event "
            "with one shared empty immutable BoundedAttributes: a model call's first-token and "
            "headers events appended at once, at the span's start plus their times",
            "Span.add_event with the span's start_time",
        ),
        FastPath(
            "context-variable",
            "opentelemetry-api",
            "1.30.0",
            "1.45",
            "opentelemetry.context._RUNTIME_CONTEXT._current_context: the current context read "
            "from its ContextVar",
            "opentelemetry.context.get_current",
        ),
        FastPath(
            "metric-reader",
            "opentelemetry-sdk",
            "1.30.0",
            "1.45",
            "MetricReader._set_collect_callback (overridden), MetricExporter._preferred_temporality "
            "and ._preferred_aggregation, ExplicitBucketHistogramAggregation._boundaries and "
            "._record_min_max: the request histograms llmtrace aggregates itself, exported with "
            "the SDK's metrics",
            "the request histograms recorded through the SDK's own instruments",
        ),
        FastPath(
            "batch-queue",
            "opentelemetry-sdk",
            "1.30.0",
            "1.45",
            "BatchSpanProcessor._batch_processor._queue (queue before 1.32): how many spans wait "
            "to be exported, for delivery_stats()",
            "delivery_stats() leaves queued and dropped unknown (None)",
        ),
        FastPath(
            "span-fields",
            "opentelemetry-sdk",
            "1.30.0",
            "1.45",
            "ReadableSpan._attributes (BoundedAttributes._dict), ._parent, ._kind, ._name, "
            "._start_time, ._end_time, ._context, ._status, ._events (BoundedList._dq), "
            "Span._parent and ._context, the tracer's span class _Span: the request breakdown "
            "reads spans without a property call per field",
            "ReadableSpan's public properties",
        ),
        FastPath(
            "sampler-delegates",
            "opentelemetry-sdk",
            "1.30.0",
            "1.45",
            "ParentBased._root, ._remote_parent_sampled, ._remote_parent_not_sampled, "
            "._local_parent_sampled, ._local_parent_not_sampled: whether a parent-based sampler "
            "ever reads a span's attributes (model spans then start without them)",
            "model spans start with their attributes under a ParentBased sampler",
        ),
        FastPath(
            "meter-global",
            "opentelemetry-api",
            "1.30.0",
            "1.45",
            "opentelemetry.metrics._internal._METER_PROVIDER: whether a MeterProvider is set "
            "yet, read where the API keeps it (its getter reads the environment each time none "
            "is), on every model call and stream end",
            "opentelemetry.metrics.get_meter_provider()",
        ),
        FastPath(
            "proxy-meter-provider",
            "opentelemetry-api",
            "1.30.0",
            "1.45",
            "the class name _ProxyMeterProvider: what the API's get_meter_provider() returns "
            "while no MeterProvider is set (model calls then build no metric points)",
            "a MeterProvider counts as set when it is the SDK's (opentelemetry.sdk.metrics) or "
            "any other than the API's no-op one",
        ),
    )
}

_VERSION = re.compile(r"\d+(?:\.\d+)*")


def _release(text: str) -> tuple[int, ...]:
    found = _VERSION.match(text)
    return tuple(int(part) for part in found.group().split(".")) if found else ()


def within(version: str, lowest: str, newest: str) -> bool:
    """Whether ``version`` is at least ``lowest`` and in ``newest``'s release series or before
    (``newest`` "1.45" admits 1.45.7, not 1.46.0)."""
    release, top = _release(version), _release(newest)
    return bool(release) and _release(lowest) <= release and release[: len(top)] <= top


def _switches() -> tuple[str, set[str]]:
    """(``auto``/``on``/``off``, names turned off) from ``LLMTRACE_FAST_PATHS``."""
    mode, off = "auto", set()
    for word in os.environ.get(ENVIRONMENT, "").replace(" ", "").lower().split(","):
        if word in ("auto", "on", "off"):
            mode = word
        elif word.startswith("-") and word[1:] in FAST_PATHS:
            off.add(word[1:])
        elif word:
            logger.warning("llmtrace: %s: %r is not a fast path; ignored", ENVIRONMENT, word)
    return mode, off


# Where a distribution states its own version, read without a search of the installed
# distributions' metadata (which takes tens of milliseconds in a large environment).
_VERSION_MODULES = {
    "opentelemetry-api": "opentelemetry.version",
    "opentelemetry-sdk": "opentelemetry.sdk.version",
}


@functools.cache
def installed(distribution: str) -> str | None:
    """The installed release of ``distribution`` (None when it is not installed)."""
    module = _VERSION_MODULES.get(distribution)
    if module is not None:
        try:
            version = getattr(importlib.import_module(module), "__version__", None)
            if isinstance(version, str):
                return version
        except ImportError:
            pass
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def prepare() -> None:
    """Decide every fast path and run the probes now (``init()`` calls this), so that the first
    traced request does not pay for them inside its spans."""
    for name in FAST_PATHS:
        enabled(name)
    if _direct_store is None:
        _probe_direct_store()
    if _event_store is None:
        _probe_event_store()


_decided: dict[str, bool] = {}


def enabled(name: str) -> bool:
    """Whether fast path ``name`` may be taken: its distribution's installed release is in its
    verified range (or ``on``) and the environment does not turn it off. Decided once; a probe
    at the place of use may still refuse it."""
    answer = _decided.get(name)
    if answer is None:
        answer = _decided[name] = state(name)[0]
    return answer


def state(name: str) -> tuple[bool, str]:
    """(taken, why) for fast path ``name``: what ``llmtrace doctor`` prints."""
    path = FAST_PATHS[name]
    mode, off = _switches()
    version = installed(path.distribution)
    if mode == "off" or name in off:
        return False, f"off by {ENVIRONMENT}"
    if version is None:
        return False, f"{path.distribution} not installed"
    if mode == "on":
        return True, f"{path.distribution} {version} (verified range ignored: {ENVIRONMENT}=on)"
    if not within(version, path.lowest, path.newest):
        return False, (
            f"{path.distribution} {version} is outside the releases verified "
            f"({path.lowest} to {path.newest}.x): {path.fallback} used instead"
        )
    return True, f"{path.distribution} {version} (verified {path.lowest} to {path.newest}.x)"


def forget() -> None:
    """Decide again on the next ``enabled`` (tests that change the environment)."""
    _decided.clear()


def context_variable() -> ContextVar[Any] | None:
    """``context-variable``: the ContextVar OpenTelemetry's default runtime context keeps the
    current context in, read and set directly (one C call where ``get_current``, ``attach`` and
    ``detach`` cost two Python calls each, and a model call asks several times); None when the
    fast path is off or the runtime context is another (then ``opentelemetry.context``'s
    functions are used)."""
    if not enabled("context-variable"):
        return None
    try:
        from opentelemetry import context as otel_context
        from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext

        runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
        variable = getattr(runtime, "_current_context", None)
        if type(runtime) is ContextVarsRuntimeContext and isinstance(variable, ContextVar):
            return variable
    except Exception:
        logger.debug("llmtrace: OpenTelemetry's context read through its API", exc_info=True)
    return None


def _probe_provider() -> Any:
    """A tracer provider of its own for a probe: its sampler and resource given, so that it
    reads nothing from the environment (an invalid ``OTEL_TRACES_SAMPLER`` is said once, by
    ``init()``, not by a probe)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    return TracerProvider(sampler=ALWAYS_ON, resource=Resource.get_empty(), shutdown_on_exit=False)


# --- metric-reader ----------------------------------------------------------------------------


def exporter_temporality(exporter: MetricExporter) -> AggregationTemporality | None:
    """The temporality ``exporter`` asks of histograms, when it asks for the explicit buckets the
    instruments advise (the OTLP exporters' default); None otherwise (exponential histograms,
    other bounds, preferences that cannot be read): the processor then records through the SDK,
    which applies them. Part of the ``metric-reader`` fast path: None when it is off."""
    if not enabled("metric-reader"):
        return None
    temporalities = getattr(exporter, "_preferred_temporality", None)
    aggregations = getattr(exporter, "_preferred_aggregation", None)
    if not isinstance(temporalities, dict) or not isinstance(aggregations, dict):
        return None
    aggregation = aggregations.get(HistogramInstrument)
    advised = aggregation is None or type(aggregation) is DefaultAggregation
    if type(aggregation) is ExplicitBucketHistogramAggregation:
        advised = getattr(aggregation, "_boundaries", 0) is None and bool(
            getattr(aggregation, "_record_min_max", False)
        )
    chosen = temporalities.get(HistogramInstrument, AggregationTemporality.CUMULATIVE)
    return chosen if advised and isinstance(chosen, AggregationTemporality) else None


class RequestMetricsReader(PeriodicExportingMetricReader):
    """The periodic reader of llmtrace's own meter provider: every collection (periodic, forced,
    at shutdown) exports the SDK's metrics and ``histograms`` together, under ``resource`` (the
    meter provider's)."""

    def __init__(
        self,
        exporter: MetricExporter,
        histograms: Any,
        resource: Resource,
        temporality: AggregationTemporality,
        **options: Any,
    ) -> None:
        self.request_histograms = histograms
        self._request_resource = resource
        self._request_temporality = temporality
        super().__init__(exporter, **options)

    def _set_collect_callback(  # type: ignore[misc]  # final in the SDK: called by the provider
        self, func: Callable[..., MetricsData | None] | None
    ) -> None:
        if func is None:
            super()._set_collect_callback(None)
            return
        histograms = self.request_histograms
        resource = self._request_resource
        temporality = self._request_temporality

        from llmtrace.sdk.request_histograms import joined

        def collect(reader: Any, timeout_millis: float = 10_000) -> MetricsData | None:
            data = func(reader, timeout_millis=timeout_millis)
            return joined(data, histograms.collect(temporality), resource)

        # typed in the SDK as taking a temporality; it is called with the timeout, as here
        super()._set_collect_callback(collect)  # type: ignore[arg-type]


# --- span-store -------------------------------------------------------------------------------

PLAIN_VALUES = frozenset((str, int, float, bool))
_SEQUENCES = frozenset((list, tuple))
_PLAIN_OR_SEQUENCE = PLAIN_VALUES | _SEQUENCES
STATUS_OK = Status(StatusCode.OK)
# (span class, attribute store class) this SDK is known to take values into directly; None
# until the first call decides, False when it does not.
_direct_store: tuple[type, type] | bool | None = None


def store_attributes(
    span: Any, attributes: dict[str, Any], ok: bool, plain: dict[str, Any] | None
) -> bool:
    """``span-store``: ``plain`` then ``attributes`` set on ``span`` (and its status OK when
    ``ok``) straight into the SDK span's attribute store, when that gives what ``set_attributes``
    and ``set_status`` would; False (nothing done) otherwise, and the caller uses those.

    The SDK checks and copies each value in Python, one call or more per attribute: about as
    much as llmtrace's own work on a model call for the attributes it records at the end. When
    every value is already what the SDK would keep (a str, int, float or bool, or a list or
    tuple of those, kept as a tuple), the span is not ended, and its limits leave the values as
    they are (no string length limit, room for them all), they go into the span's attribute
    store at once, under the span's lock, and so does the OK status (an OK status is final, so
    setting it is all ``set_status`` would do). Whether this SDK keeps its attributes and status
    where they are looked for is checked once, on a span of its own."""
    kinds = _direct_store if _direct_store is not None else _probe_direct_store()
    if not kinds or span.__class__ is not kinds[0]:  # type: ignore[index]
        return False
    sdk_span: Any = span  # (a class test narrows Any to object: typed again)
    store: Any = sdk_span._attributes
    values: dict[str, Any] | None = attributes
    # The classes of all values at once (in C, not one Python step per attribute): most
    # attributes are plain, and the few sequences (finish reasons) are looked at alone.
    if attributes:
        classes = set(map(type, attributes.values()))
        if not classes <= PLAIN_VALUES:
            values = _plain(attributes, classes)
    # (Apart: a test of the class in the condition would narrow the store's type to object.)
    known_store = store.__class__ is kinds[1]  # type: ignore[index]
    if (
        values is None
        or not known_store
        or store.max_value_len is not None
        or (
            store.maxlen is not None
            # (The store's own dict: its __len__ is a Python call.)
            and len(store._dict) + len(values) + len(plain or ()) > store.maxlen
        )
    ):
        return False
    # (Taken and released by name: ``with`` looks both methods up and parses the arguments of
    # each, twice the cost.)
    lock = sdk_span._lock
    lock.acquire()
    try:
        if sdk_span._end_time is not None:
            return False
        if plain:
            store._dict.update(plain)
        if values:
            store._dict.update(values)
        if ok:
            sdk_span._status = STATUS_OK
        return True
    finally:
        lock.release()


def _plain(attributes: dict[str, Any], classes: set[type]) -> dict[str, Any] | None:
    """The attributes, whose values are of ``classes`` (not all plain), as the SDK would keep
    them (sequences as tuples), or None when one of them needs the SDK's own checks."""
    if not classes <= _PLAIN_OR_SEQUENCE:
        return None
    plain = PLAIN_VALUES
    values = dict(attributes)
    # (A plain loop: finding the sequences' keys in C costs more for the dozen attributes here.)
    for key, value in attributes.items():
        if type(value) in _SEQUENCES:
            if not set(map(type, value)) <= plain:
                return None
            values[key] = tuple(value)
    return values


def _probe_direct_store() -> tuple[type, type] | bool:
    """Whether this SDK keeps a span's attributes in ``_attributes._dict`` and its status in
    ``_status``, read back through ``span.attributes`` and ``span.status``: checked once on a
    span of a private provider (and only when the fast path is on)."""
    global _direct_store
    kinds: tuple[type, type] | bool = False
    try:
        if enabled("span-store"):
            provider = _probe_provider()
            probe: Any = provider.get_tracer("llmtrace.probe").start_span("probe")
            store: Any = getattr(probe, "_attributes", None)
            lock = getattr(probe, "_lock", None)
            if (
                isinstance(getattr(store, "_dict", None), dict)
                and hasattr(lock, "acquire")
                and hasattr(lock, "release")
                and hasattr(store, "max_value_len")
                and hasattr(store, "maxlen")
                and getattr(probe, "_end_time", False) is None
                and isinstance(getattr(probe, "_status", None), Status)
            ):
                store._dict.update({"llmtrace.probe": ("x",)})
                probe._status = STATUS_OK
                probe.end()
                if (
                    dict(getattr(probe, "attributes", None) or {}) == {"llmtrace.probe": ("x",)}
                    and getattr(probe, "status", None) is STATUS_OK
                ):
                    kinds = (probe.__class__, store.__class__)
    except Exception:
        logger.debug("llmtrace: attributes go through set_attributes", exc_info=True)
    _direct_store = kinds
    return kinds


# --- span-events ------------------------------------------------------------------------------

# The span class whose events this SDK keeps where add_events puts them, the SDK's event class and
# the shared empty attributes its events carry; None until the first call decides, False when it
# does not.
_event_store: tuple[type, type, Any] | bool | None = None


def add_events(span: Any, events: tuple[tuple[str, float], ...]) -> bool:
    """``span-events``: each (name, seconds after the span's start) of ``events`` appended to the
    SDK span's events, stamped at its start plus those seconds, as ``span.add_event`` would (an
    event without attributes); False (nothing done) when this SDK or span is not the one checked,
    and the caller uses ``add_event``.

    ``add_event`` makes an attribute store of its own for each event (with a lock of its own),
    checks the span's end through a wrapper and reads the limits, several times the cost of the
    event itself; events without attributes can share one immutable empty store."""
    kinds = _event_store if _event_store is not None else _probe_event_store()
    if not kinds or span.__class__ is not kinds[0]:  # type: ignore[index]
        return False
    event = kinds[1]  # type: ignore[index]
    empty = kinds[2]  # type: ignore[index]
    sdk_span: Any = span
    start = sdk_span._start_time
    lock = sdk_span._lock
    lock.acquire()
    try:
        if sdk_span._end_time is not None or start is None:
            return False
        # (One extend: the list takes its own lock once, not once per event. A loop, not a list
        # comprehension: that is a function made and called on every model call.)
        made = []
        for name, seconds in events:
            made.append(event(name, empty, start + int(seconds * 1e9)))
        sdk_span._events.extend(made)
        return True
    finally:
        lock.release()


def _probe_event_store() -> tuple[type, type, Any] | bool:
    """Whether events appended as :func:`add_events` does read back through ``span.events`` as
    ``add_event``'s do: checked once on spans of a private provider (when the path is on)."""
    global _event_store
    kinds: tuple[type, type, Any] | bool = False
    try:
        if enabled("span-events"):
            from opentelemetry.attributes import BoundedAttributes
            from opentelemetry.sdk.trace import Event

            tracer = _probe_provider().get_tracer("llmtrace.probe")
            public: Any = tracer.start_span("public")
            public.add_event("probe", timestamp=public.start_time + 5)
            public.end()
            fast: Any = tracer.start_span("fast")
            empty = BoundedAttributes(immutable=True)
            lock = getattr(fast, "_lock", None)
            if (
                isinstance(getattr(fast, "_start_time", None), int)
                and getattr(fast, "_end_time", False) is None
                and hasattr(getattr(fast, "_events", None), "extend")
                and hasattr(lock, "acquire")
            ):
                fast._events.extend([Event("probe", empty, fast._start_time + 5)])
                fast.end()

                def seen(span: Any) -> list[tuple[Any, ...]]:
                    return [
                        (
                            e.name,
                            e.timestamp - span.start_time,
                            dict(e.attributes or {}),
                            e.dropped_attributes,
                        )
                        for e in span.events
                    ]

                if seen(fast) == seen(public) == [("probe", 5, {}, 0)]:
                    kinds = (fast.__class__, Event, empty)
    except Exception:
        logger.debug("llmtrace: span events go through add_event", exc_info=True)
    _event_store = kinds
    return kinds


# --- batch-queue ------------------------------------------------------------------------------


def queued_spans(processor: Any) -> int | None:
    """``batch-queue``: how many spans ``processor`` (the SDK's ``BatchSpanProcessor``) holds
    in its queue, or None when that cannot be read (then ``delivery_stats()`` says how many were
    taken, handed, delivered and failed, and leaves queued and dropped unknown). The SDK keeps
    the queue private: a deque in ``_batch_processor._queue`` since 1.32, ``queue`` before."""
    if not enabled("batch-queue"):
        return None
    inner = getattr(processor, "_batch_processor", processor)
    queue = getattr(inner, "_queue", None)
    if queue is None:
        queue = getattr(processor, "queue", None)
    try:
        return len(queue) if queue is not None else None
    except TypeError:
        return None


# --- proxy-meter-provider ---------------------------------------------------------------------


def meter_provider_is_set(provider: Any) -> bool:
    """``proxy-meter-provider``: whether ``provider`` (``metrics.get_meter_provider()``) is one
    an application or ``init()`` set, not the API's placeholder (a proxy until one is set) or
    its no-op provider. The API names no public class for the proxy: outside the verified
    releases, a provider counts as set when it is not the no-op one and is the SDK's, or of a
    class that is not the API's own."""
    if isinstance(provider, NoOpMeterProvider):
        return False
    if enabled("proxy-meter-provider"):
        return type(provider).__name__ != "_ProxyMeterProvider"
    return not type(provider).__module__.startswith("opentelemetry.metrics")


# --- sampler-delegates ------------------------------------------------------------------------

_PARENT_BASED_DELEGATES = (
    "_root",
    "_remote_parent_sampled",
    "_remote_parent_not_sampled",
    "_local_parent_sampled",
    "_local_parent_not_sampled",
)


def parent_based_delegates(sampler: Any) -> list[Any] | None:
    """``sampler-delegates``: the five samplers an SDK ``ParentBased`` sampler (whose
    ``should_sample`` is the SDK's own) hands each decision to, or None (the fast path off, a
    subclass deciding otherwise, a delegate missing): the caller then assumes the sampler may
    read a span's attributes, so model spans start with them, as without llmtrace."""
    if not enabled("sampler-delegates"):
        return None
    from opentelemetry.sdk.trace import sampling

    if type(sampler).should_sample is not sampling.ParentBased.should_sample:
        return None
    delegates = [getattr(sampler, name, None) for name in _PARENT_BASED_DELEGATES]
    return None if any(delegate is None for delegate in delegates) else delegates


# --- span-fields ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpanFields:
    """``span-fields``: what the request breakdown reads an SDK span's fields with, each a C
    ``attrgetter`` where the public properties cost a Python call each (for a child span, which
    the breakdown only holds, those calls were a large share of its work: measured in
    benchmarks/README.md, overhead_core.py)."""

    # the class span processors are handed at a span's end, and the classes the tracer starts
    readable: type
    started: frozenset[type]
    # ended span -> (attributes, parent, kind, name, start, end), -> context, -> events, -> status
    ended: Callable[[Any], tuple[Any, Any, Any, str, int | None, int | None]]
    context: Callable[[Any], Any]
    events: Callable[[Any], Any]
    status: Callable[[Any], Any]
    # started span -> (parent, context)
    started_parent_context: Callable[[Any], tuple[Any, Any]]
    # the SDK's attribute store and event list, and the dict and deque under them
    attribute_store: type
    attribute_dict: Callable[[Any], dict[str, Any]]
    event_list: type
    event_deque: Callable[[Any], Any]


def span_fields() -> SpanFields | None:
    """The readers of :class:`SpanFields`, when the fast path is on and a span of a private
    provider reads the same through them as through its public properties; None otherwise (the
    breakdown then uses ``ReadableSpan``'s properties)."""
    if not enabled("span-fields"):
        return None
    try:
        from operator import attrgetter

        from opentelemetry.attributes import BoundedAttributes
        from opentelemetry.sdk import trace as sdk_trace
        from opentelemetry.sdk.util import BoundedList

        fields = SpanFields(
            readable=sdk_trace.ReadableSpan,
            started=frozenset(
                cls
                for cls in (sdk_trace.Span, getattr(sdk_trace, "_Span", None))
                if isinstance(cls, type)
            ),
            ended=attrgetter(
                "_attributes", "_parent", "_kind", "_name", "_start_time", "_end_time"
            ),
            context=attrgetter("_context"),
            events=attrgetter("_events"),
            status=attrgetter("_status"),
            started_parent_context=attrgetter("_parent", "_context"),
            attribute_store=BoundedAttributes,
            attribute_dict=attrgetter("_dict"),
            event_list=BoundedList,
            event_deque=attrgetter("_dq"),
        )
        ended_spans: list[Any] = []

        class Keep(sdk_trace.SpanProcessor):
            def on_end(self, span: Any) -> None:
                ended_spans.append(span)

        provider = _probe_provider()
        provider.add_span_processor(Keep())
        tracer = provider.get_tracer("llmtrace.probe")
        probe: Any
        with tracer.start_as_current_span("parent"):
            probe = tracer.start_span("probe", attributes={"k": "v"})
        started_class = probe.__class__  # (tested apart: a test in place narrows probe)
        if started_class not in fields.started:
            return None
        parent, context = fields.started_parent_context(probe)
        if (parent, context) != (probe.parent, probe.context):
            return None
        probe.add_event("first_token")
        probe.end()
        ended: Any = ended_spans[-1]
        attributes, parent, kind, name, start, end = fields.ended(ended)
        events = fields.events(ended)
        ended_class = ended.__class__  # (tested apart: a test in place narrows ended)
        if not (
            ended_class is fields.readable
            and attributes.__class__ is BoundedAttributes
            and fields.attribute_dict(attributes) == dict(ended.attributes)
            and (parent, kind, name, start, end)
            == (ended.parent, ended.kind, ended.name, ended.start_time, ended.end_time)
            and fields.context(ended) == ended.context
            and fields.status(ended) is ended.status
            and events.__class__ is BoundedList
            and list(fields.event_deque(events)) == list(ended.events)
        ):
            return None
        return fields
    except Exception:
        logger.debug("llmtrace: spans read through their properties", exc_info=True)
        return None


# --- meter-global -----------------------------------------------------------------------------


def no_global_meter_provider() -> Callable[[], bool] | None:
    """``meter-global``: a check that the metrics API has no global provider set yet, one
    attribute read; None when the fast path is off, the API keeps its provider elsewhere, or
    ``OTEL_PYTHON_METER_PROVIDER`` names one (the API's getter loads it on first use; read once,
    as the API reads it once). While it answers False the caller asks the public getter."""
    if not enabled("meter-global") or "OTEL_PYTHON_METER_PROVIDER" in os.environ:
        return None
    try:
        from opentelemetry.metrics import _internal as metrics_api
    except ImportError:
        return None
    if not hasattr(metrics_api, "_METER_PROVIDER"):
        return None

    def unset() -> bool:
        return metrics_api._METER_PROVIDER is None

    return unset
