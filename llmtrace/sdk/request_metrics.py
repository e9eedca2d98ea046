"""The stage breakdown computed where the request ran, exported as metrics any backend aggregates.

``llmtrace report`` needs whole traces; at fleet scale with tail sampling, it cannot have them.
This span processor holds the spans of each local trace in flight (the request's spans in this
process) and, when the local root span ends, breaks the trace down with the report's own rules
(``analysis.breakdown`` over the analysis span model, built the way ``analysis.otlp`` builds it
from OTLP JSON) and records histograms through the OpenTelemetry metrics API:

* ``llmtrace.request.duration`` (s): the local root's duration.
* ``llmtrace.request.stage.duration`` (s), with ``llmtrace.stage``: the stage's time on the
  request's critical path, recorded only for stages with time in that request (a request without
  retrieval records no retrieval point; ``report --prometheus`` counts it as a zero, as the report
  does, from the request count).
* ``llmtrace.request.time_to_first_token`` (s): from the root's start to the first token of the
  request's main model call, when that call streamed.
* ``llmtrace.request.tokens`` ({token}), with ``gen_ai.token.type`` input/output: the usage of
  every model call of the request.

Attributes of every point: ``llmtrace.request.name`` (the root's ``http.route`` when it has
one, else the root span's name; both are low-cardinality by the span conventions),
``gen_ai.request.model`` of the main model call (the longest one on the critical path), and
``error.type`` when the request failed. ``service.name`` comes from the meter provider's resource.

Bounds: only local traces in flight are held, at most ``max_traces`` of them (a new request past
that is not tracked, and counted in ``llmtrace.request.untracked`` with ``reason``
``traces_in_flight``), at most ``max_spans`` spans each (the rest dropped and counted in
``llmtrace.request.spans_dropped``; their time counts as their parent's stage); a root still
open after ``root_timeout`` seconds is evicted (``reason`` ``evicted``).

Across processes: a span whose child runs in another process (an HTTP client span, a model
call) counts here as that span's own stage; the downstream process, if instrumented, records
its own local breakdown under its own ``service.name``. The two views measure the same time
twice, from each side: the caller's ``network`` or model-call stage contains the callee's whole
request. Sum stage times within one service, never across services.

Sampling: the processor sees only spans the sampler records. While request metrics are on (and
unless ``request_metrics_unsampled=False``) ``init()`` wraps the sampler of llmtrace's own provider
in :class:`RecordUnsampled`, so that a trace it drops is still recorded (never exported): every
request is counted, at the cost of recording every span (measured in benchmarks/README.md,
overhead_core.py). While it is on, ``gate.record_unsampled`` is True, and llmtrace's
instrumentation gates (which otherwise skip children of an unsampled parent) start children
under a parent that is recorded but not sampled, so an unsampled request's stages are its own.
On an application's own tracer provider its sampler decides which requests are counted.

Where the points go: under the meter provider ``llmtrace.init()`` creates (request metrics on
by default there), llmtrace aggregates the four histograms itself and that provider's reader
exports them with the SDK's own metrics (``llmtrace.sdk.request_histograms``: the SDK offers no
interface for aggregated data, and most of its cost per point is copying, cleaning and hashing
the point's attributes). On an application's own ``MeterProvider``, or with exponential
histograms, the points go through the SDK, with each request name, model and error type's
attribute dicts built once. Either way no point carries an exemplar: they are recorded outside
any span context, since the span current when a request's root ends is not the request's (an
exemplar would name another trace, or the caller's), and the SDK's default trace-based exemplar
filter adds to every point's cost when a sampled span is current (measured in
benchmarks/README.md, overhead_core.py).

Cost (measured by ``benchmarks/overhead_core.py --only-requests``, figures in
benchmarks/README.md, overhead_core.py): the aim is that the processor adds under 10% to the CPU
instructions of a request's spans (created, batched and OTLP-encoded), the figure that repeats
from run to run. The work is holding each span as it ends, the breakdown at the root's end (the
report's critical-path walk over the analysis model, adding up each stage's total as it goes)
and the histogram points. In CPU time the same work costs a larger share than its instructions
suggest. That is not the data (the breakdown of one request kept warm and computed again at every
root's end costs as much) but the code running cold: each hook runs once between the SDK's own
work. Recording the points through the SDK instead costs markedly more.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, StatusCode
from opentelemetry.util.types import Attributes

from llmtrace import semconv as sc
from llmtrace.analysis import conventions
from llmtrace.analysis.breakdown import ModelPhases, first_token_time, stage_nanos
from llmtrace.analysis.model import NANOS, NO_CHILDREN, Span, Trace, attach
from llmtrace.analysis.otlp import (
    KEPT_ATTRIBUTES,
    TABLE_ATTRIBUTES,
    stage_name,
    table_stage,
    yield_to_wire,
)

# The options (arguments, environment variables, defaults) live with every other option.
from llmtrace.options import DEFAULT_MAX_SPANS, DEFAULT_MAX_TRACES, DEFAULT_ROOT_TIMEOUT
from llmtrace.sdk import _compat
from llmtrace.sdk._safety import log_once
from llmtrace.sdk.request_histograms import FOLD_AFTER, HistogramSpec, RequestHistograms, Series

logger = logging.getLogger(__name__)

# Largest exponential histogram (buckets per sign); the SDK picks the scale that fits.
EXPONENTIAL_MAX_SIZE = 160

REQUEST_DURATION = "llmtrace.request.duration"
STAGE_DURATION = "llmtrace.request.stage.duration"
REQUEST_TTFT = "llmtrace.request.time_to_first_token"
REQUEST_TOKENS = "llmtrace.request.tokens"
UNTRACKED = "llmtrace.request.untracked"
SPANS_DROPPED = "llmtrace.request.spans_dropped"
HISTOGRAM_NAMES = (REQUEST_DURATION, STAGE_DURATION, REQUEST_TTFT)

REQUEST_NAME = "llmtrace.request.name"
TOKEN_TYPE = "gen_ai.token.type"
OVERFLOW_REASON = "reason"

# fmt: off
# Seconds. About 25% apart from 100 ms up, a few milliseconds apart below: a P95 read from them
# is within one bucket of the exact one, and one bucket is a small step at every scale.
STAGE_BUCKETS = (
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1, 0.125,
    0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.5,
    10.0, 12.5, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0,
)
TOKEN_BUCKETS = (
    1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144,
    1048576,
)
# fmt: on

_STAGE = sc.STAGE
_MODEL_CALL = conventions.MODEL_CALL
# a model call's own tag (llmtrace's spans), today's or an earlier release's
_MODEL_CALL_STAGES = sc.MODEL_CALL_STAGES
_FIRST_TOKEN_EVENTS = frozenset(conventions.FIRST_TOKEN_EVENTS)
_NUMBERS = (int, float)


def views(histogram: str) -> list[Any]:
    """The meter provider's views for ``histogram="exponential"`` (none for explicit buckets,
    which the instruments carry as advice)."""
    if histogram != "exponential":
        return []
    from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View

    return [
        View(
            instrument_name=name,
            aggregation=ExponentialBucketHistogramAggregation(max_size=EXPONENTIAL_MAX_SIZE),
        )
        for name in HISTOGRAM_NAMES
    ]


class RecordUnsampled(Sampler):
    """A sampler that records what ``inner`` drops, without sampling it: the spans reach span
    processors (this one computes the breakdown) but no exporter, which sends sampled spans only."""

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner

    @property
    def wrapped_sampler(self) -> Sampler:
        """The sampler that decides (this one only records what it drops, whatever the span's
        attributes)."""
        return self.inner

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        result = self.inner.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )
        if result.decision is Decision.DROP:
            # the span keeps the attributes it was started with (the SDK takes them from here)
            return SamplingResult(Decision.RECORD_ONLY, attributes, result.trace_state)
        return result

    def get_description(self) -> str:
        return f"RecordUnsampled{{{self.inner.get_description()}}}"


class _Pending:
    """One local trace in flight: its open local roots, and the spans ended so far in the analysis
    model (converted as they end: a fraction of the SDK span's memory, and the SDK span is freed
    once exported); ``declared``: those that are model calls by their stage, ``inferred``: those
    the conventions table made model calls."""

    __slots__ = ("declared", "dropped", "inferred", "linked", "roots", "spans", "started")

    def __init__(self, started: float) -> None:
        self.started = started
        self.roots: set[int] = set()
        self.spans: list[_Held] = []
        self.declared: list[Span] = []
        self.inferred: list[Span] = []
        self.dropped = 0
        self.linked = False  # a local root that ended linked the spans into its tree


@dataclass(slots=True)
class RequestFigures:
    """One local request broken down: what the processor records."""

    name: str
    duration: float
    # nanoseconds per stage, as the walk sums them; ``stages`` gives seconds (the points are
    # recorded in seconds, each converted as it is recorded)
    stage_nanos: dict[str, int]
    model: str | None
    error_type: str | None
    time_to_first_token: float | None
    input_tokens: int | None
    output_tokens: int | None

    @property
    def stages(self) -> dict[str, float]:
        """Seconds per stage on the critical path."""
        return {stage: nanos / NANOS for stage, nanos in self.stage_nanos.items()}


def _plain(value: Any) -> Any:
    # The SDK keeps arrays as tuples; OTLP JSON (what the report reads) has lists.
    return list(value) if value.__class__ is tuple else value


# The SDK span fields the breakdown reads directly (see llmtrace.sdk._compat.span_fields); with
# that fast path off, the classes are None and every span is read through its properties.
_FIELDS = _compat.span_fields()
_READABLE = _FIELDS.readable if _FIELDS else None
_SDK_SPANS = _FIELDS.started if _FIELDS else frozenset()
_BOUNDED = _FIELDS.attribute_store if _FIELDS else None
_BOUNDED_LIST = _FIELDS.event_list if _FIELDS else None
if _FIELDS:
    _ended_fields = _FIELDS.ended
    _ended_context = _FIELDS.context
    _ended_events = _FIELDS.events
    _ended_status = _FIELDS.status
    _started_parent_context = _FIELDS.started_parent_context
    _attribute_dict = _FIELDS.attribute_dict
    _event_deque = _FIELDS.event_deque


def _held_attributes(held: Any) -> Mapping[str, Any]:
    # The SDK's public view wraps a locked mapping in a proxy; reading the dict under it costs a
    # fraction, and the span has ended: nothing writes to it any more.
    if held.__class__ is _BOUNDED:
        return _attribute_dict(held)
    return held or {}


# One ended span as the processor holds it: its span id, its parent's (0 for none), and the span in
# the analysis model. The ids stay the SDK's integers: linking by them formats and hashes no
# strings. The analysis spans' own string ids are left empty, since nothing here reads them.
_Held = tuple[int, int, Span]


def hold(span: ReadableSpan, span_id: int, inferred: list[Span], declared: list[Span]) -> _Held:
    """One finished SDK span (``span_id``: its id) in the analysis model, read as
    ``analysis.otlp`` reads its OTLP JSON: the attributes the analysis keeps, and a foreign span's
    through the conventions table (``analysis.otlp.table_stage``). A model call is also added to
    ``declared`` (its stage says so) or ``inferred`` (the conventions table made it one).

    Every span of a request passes here as it ends (``RequestMetricsProcessor.on_end``, the hot
    path), so the common case, a span of llmtrace's own, is read first and with the least work.
    A span with a stage keeps its arrays as the SDK's tuples: nothing that reads such a span here
    reads an array, and a tuple stage is not a stage name, as a list is not."""
    if span.__class__ is _READABLE:
        # what the SDK hands span processors: its fields, without a property call for each
        held, parent, kind, name, start, end = _ended_fields(span)
        # the dict under the SDK's attribute store (see _held_attributes): the span has ended,
        # nothing writes to it any more
        own = held.__class__ is _BOUNDED
        source: Any = _attribute_dict(held) if own else held or {}
    else:
        own = False
        source = _held_attributes(span.attributes)
        parent, kind, name, start, end = (
            span.parent,
            span.kind,
            span.name,
            span.start_time,
            span.end_time,
        )
    stage = source.get(_STAGE)
    if stage.__class__ is str:
        # A declared stage (llmtrace's spans): the conventions table is not read, and when the
        # analysis keeps every attribute the SDK's dict is held as it is (nothing here writes to
        # a declared-stage span's attributes). OTLP's SpanKind is the SDK's plus one (OTLP has
        # UNSPECIFIED = 0): the enum member's value read directly, where a lookup would hash it.
        if not (own and KEPT_ATTRIBUTES.issuperset(source)):
            source = {key: value for key, value in source.items() if key in KEPT_ATTRIBUTES}
        model = Span("", None, name, kind._value_ + 1, start or 0, end or 0, source)
        if stage in _MODEL_CALL_STAGES:
            declared.append(model)
        # a SpanContext: [1] is its span id
        return span_id, parent[1] if parent is not None else 0, model
    parent_id = parent[1] if parent is not None else 0
    model = Span("", None, name, kind._value_ + 1, start or 0, end or 0, {})
    attributes = model.attributes
    foreign: dict[str, Any] = {}
    for key, value in source.items():
        if key in KEPT_ATTRIBUTES:
            value = _plain(value)
            attributes[key] = stage_name(value) if key == _STAGE else value
        elif key in TABLE_ATTRIBUTES:
            foreign[key] = _plain(value)
    if _STAGE in attributes:
        if attributes[_STAGE] in _MODEL_CALL_STAGES:
            declared.append(model)
        return span_id, parent_id, model
    first_token_at = None
    events = _ended_events(span) if span.__class__ is _READABLE else span.events
    if events.__class__ is _BOUNDED_LIST:
        # the SDK's events, in the deque under it: its length and iteration are Python calls
        # (iteration copies under a lock), and the span has ended: nothing adds to them any more
        events = _event_deque(events)
    for event in events or ():
        if event.name in _FIRST_TOKEN_EVENTS:
            first_token_at = event.timestamp
            break
    table_stage(model, foreign, first_token_at, inferred)
    return span_id, parent_id, model


def local_trace(
    root: ReadableSpan,
    spans: Sequence[_Held],
    inferred: Sequence[Span],
    relink: bool,
    declared: Sequence[Span] = (),
) -> tuple[Trace, bool, list[Span]]:
    """``root`` and the spans under it among ``spans`` (held by ``hold``; ``inferred`` and
    ``declared``: those it found model calls) as the report's trace model, whether every one of
    ``spans`` is under that root (no other local root's spans, no orphans), and the model calls
    among the root and ``spans``, in no particular order. ``relink``: another local root of the
    trace may have linked ``spans`` before."""
    # an inferred call may have yielded to a call below it when another local root ended
    inferred_calls = [span for span in inferred if span.attributes.get(_STAGE) == _MODEL_CALL]
    declared_calls = list(declared)
    context = _ended_context(root) if root.__class__ is _READABLE else root.context
    root_id, root_parent, root_model = hold(
        root, context[1] if context else 0, inferred_calls, declared_calls
    )
    by_id = {root_id: root_model}
    if relink:
        for _, _, span in spans:
            span.children = NO_CHILDREN
    for span_id, _, span in spans:
        by_id[span_id] = span
    whole = len(by_id) == len(spans) + 1
    # as analysis.otlp.link_children links a file's spans, by integer ids
    for _, parent_id, span in spans:
        parent = by_id.get(parent_id) if parent_id else None
        if parent is None or parent is span:
            whole = False  # an orphan, or the root of another local trace
            continue
        attach(parent, span)
    if inferred_calls:
        yield_to_wire(inferred_calls)
        declared_calls += [
            span for span in inferred_calls if span.attributes.get(_STAGE) == _MODEL_CALL
        ]
    return Trace("", root_model, orphan=root_parent != 0), whole, declared_calls


def _model_calls(trace: Trace, calls: list[Span], whole: bool) -> list[Span]:
    """The trace's model calls (``calls``: those among its spans, from ``local_trace``), in the
    order the report walks them (parents first, siblings by start): the order that breaks a tie
    between calls of equal duration and sums their tokens. Walking the tree is needed only to
    order several calls, or to leave out those of spans not under the root."""
    if whole and len(calls) <= 1:
        return calls
    return [span for span in trace.spans() if span.attributes.get(_STAGE) in _MODEL_CALL_STAGES]


def _number(value: Any) -> float | None:
    # (A tuple of the classes: ``int | float`` would build a union on every call.)
    if isinstance(value, bool) or not isinstance(value, _NUMBERS):
        return None
    return float(value)


def figures(
    root: ReadableSpan,
    spans: Sequence[_Held],
    inferred: Sequence[Span] = (),
    relink: bool = True,
    declared: Sequence[Span] = (),
) -> RequestFigures:
    """The breakdown and facts of one local request (``spans``: the others of its trace,
    ``inferred`` and ``declared``: their model calls, as ``local_trace`` takes them)."""
    trace, whole, found = local_trace(root, spans, inferred, relink, declared)
    phases: dict[int, ModelPhases] = {}
    stages = stage_nanos(trace, phases)
    calls = _model_calls(trace, found, whole)
    if len(calls) == 1:
        main: Span | None = calls[0]
    else:
        on_path = [span for span in calls if id(span) in phases]
        main = max(on_path or calls, key=_duration, default=None)
    model = None
    ttft = None
    input_tokens = output_tokens = None
    if main is not None:
        attributes = main.attributes
        named = attributes.get(sc.GEN_AI_REQUEST_MODEL) or attributes.get(sc.GEN_AI_RESPONSE_MODEL)
        model = named if isinstance(named, str) else None
        first = first_token_time(main)
        if first is not None:
            ttft = max((main.start - trace.root.start) / NANOS + first, 0.0)
        for call in calls:
            attributes = call.attributes
            tokens = _number(attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS))
            if tokens is not None:
                input_tokens = int((input_tokens or 0) + tokens)
            tokens = _number(attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS))
            if tokens is not None:
                output_tokens = int((output_tokens or 0) + tokens)
    if root.__class__ is _READABLE:
        root_attributes = _held_attributes(_ended_fields(root)[0])
        failed = _ended_status(root).status_code is StatusCode.ERROR
    else:
        root_attributes = _held_attributes(root.attributes)
        failed = root.status.status_code is StatusCode.ERROR
    route = root_attributes.get(sc.HTTP_ROUTE)
    error = root_attributes.get(sc.ERROR_TYPE)
    if not isinstance(error, str):
        error = "_OTHER" if failed else None
    duration = (trace.root.end - trace.root.start) / NANOS
    return RequestFigures(
        route if route.__class__ is str and route else trace.root.name,
        duration if duration > 0.0 else 0.0,
        stages,
        model,
        error,
        ttft,
        input_tokens,
        output_tokens,
    )


def _duration(span: Span) -> int:
    return span.end - span.start


HISTOGRAM_SPECS = (
    HistogramSpec(
        REQUEST_DURATION, "s", "Duration of the request's local root span", STAGE_BUCKETS
    ),
    HistogramSpec(
        STAGE_DURATION,
        "s",
        "Time of one stage on the request's critical path (stages with time only)",
        STAGE_BUCKETS,
    ),
    HistogramSpec(
        REQUEST_TTFT,
        "s",
        "From the request's start to the first token of its main model call",
        STAGE_BUCKETS,
    ),
    HistogramSpec(
        REQUEST_TOKENS, "{token}", "Tokens of every model call of the request", TOKEN_BUCKETS
    ),
)
# Recording outside any span context (see RequestMetricsProcessor._record); not empty, since the
# SDK takes an empty (falsy) context for none given and reads the current one instead.
_NO_SPAN = Context({"llmtrace.sdk.request_metrics": True})
_LABEL_SETS_HELD = 4096


def request_histograms() -> RequestHistograms:
    """llmtrace's own aggregation of the request histograms (see ``llmtrace.sdk.request_histograms``)."""
    return RequestHistograms(HISTOGRAM_SPECS)


class _LabelSet:
    """The attributes of one request name, model and error type, built once: the dicts handed to
    the SDK (which copies them), or the series of llmtrace's own histograms."""

    __slots__ = (
        "duration",
        "histograms",
        "input",
        "input_tokens",
        "key",
        "output",
        "output_tokens",
        "request",
        "stage_series",
        "stages",
        "ttft",
    )

    def __init__(
        self, key: tuple[str, str | None, str | None], histograms: RequestHistograms | None
    ) -> None:
        name, model, error = key
        request: dict[str, Any] = {REQUEST_NAME: name}
        if model is not None:
            request[sc.GEN_AI_REQUEST_MODEL] = model
        if error is not None:
            request[sc.ERROR_TYPE] = error
        self.key = key
        self.request = request
        self.input = {**request, TOKEN_TYPE: "input"}
        self.output = {**request, TOKEN_TYPE: "output"}
        self.stages: dict[str, dict[str, Any]] = {}
        self.stage_series: dict[str, Series] = {}
        self.histograms = histograms
        if histograms is not None:
            self.duration = histograms.series(REQUEST_DURATION, key, request)
            self.ttft = histograms.series(REQUEST_TTFT, key, request)
            self.input_tokens = histograms.series(REQUEST_TOKENS, (key, "input"), self.input)
            self.output_tokens = histograms.series(REQUEST_TOKENS, (key, "output"), self.output)

    def stage_attributes(self, stage: str) -> dict[str, Any]:
        found = self.stages.get(stage)
        if found is None:
            found = self.stages[stage] = {**self.request, _STAGE: stage}
        return found

    def stage(self, stage: str) -> Series:
        """The stage's series; called with the histograms' lock held."""
        assert self.histograms is not None
        found = self.stage_series[stage] = self.histograms.series_locked(
            STAGE_DURATION, (self.key, stage), self.stage_attributes(stage)
        )
        return found


class RequestMetricsProcessor(SpanProcessor):
    """Breaks each local request down when its local root ends and records the figures.

    ``meter_provider``: where to record (default: the global one, through the API).
    """

    def __init__(
        self,
        meter_provider: Any = None,
        *,
        max_traces: int = DEFAULT_MAX_TRACES,
        max_spans: int = DEFAULT_MAX_SPANS,
        root_timeout: float = DEFAULT_ROOT_TIMEOUT,
        clock: Any = time.monotonic,
        histograms: RequestHistograms | None = None,
    ) -> None:
        self.max_traces = max_traces
        self.max_spans = max_spans
        self.root_timeout = root_timeout
        self._clock = clock
        self._lock = threading.Lock()
        # in start order, as a dict keeps its insertion order (an OrderedDict costs more on every
        # insertion and removal; the oldest is looked for only past _evict_at)
        self._pending: dict[int, _Pending] = {}
        # no entry can be stale before this moment: the oldest entry's deadline when last looked
        # at (entries are in start order, and removing one only makes the oldest younger)
        self._evict_at = float("-inf")
        self.untracked = 0
        self.evicted = 0
        self.spans_dropped = 0
        self.recorded = 0
        self._histograms = histograms
        self._label_sets: dict[tuple[str, str | None, str | None], _LabelSet] = {}
        meter = (
            meter_provider.get_meter(sc.SCOPE_NAME)
            if meter_provider is not None
            else metrics.get_meter(sc.SCOPE_NAME)
        )
        if histograms is None:
            instruments = {
                spec.name: meter.create_histogram(
                    spec.name,
                    unit=spec.unit,
                    description=spec.description,
                    explicit_bucket_boundaries_advisory=list(spec.bounds),
                )
                for spec in HISTOGRAM_SPECS
            }
            self._duration = instruments[REQUEST_DURATION]
            self._stage = instruments[STAGE_DURATION]
            self._ttft = instruments[REQUEST_TTFT]
            self._tokens = instruments[REQUEST_TOKENS]
        self._untracked = meter.create_counter(
            UNTRACKED, unit="{request}", description="Requests not broken down, by reason"
        )
        self._spans_dropped = meter.create_counter(
            SPANS_DROPPED,
            unit="{span}",
            description="Spans left out of a request's breakdown (spans per request cap)",
        )

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        # The SDK span's fields and its SpanContext's items (a SpanContext is a tuple: trace id,
        # span id, is_remote, ...) read directly: for the children, which return at once, a
        # property call each was most of the work.
        if span.__class__ in _SDK_SPANS:
            parent, context = _started_parent_context(span)
        else:
            parent, context = span.parent, span.context
        if parent is not None and not parent[2]:
            return
        if context is None:
            return
        trace_id = context[0]
        now = self._clock()
        with self._lock:
            pending = self._pending.get(trace_id)
            if pending is None:
                if now >= self._evict_at:
                    self._evict_expired(now)
                if len(self._pending) >= self.max_traces:
                    self.untracked += 1
                    self._count_untracked("traces_in_flight")
                    return
                pending = self._pending[trace_id] = _Pending(now)
            pending.roots.add(context[1])

    def on_end(self, span: ReadableSpan) -> None:
        # fields and SpanContext items read directly, as in on_start
        context = _ended_context(span) if span.__class__ is _READABLE else span.context
        if context is None:
            return
        trace_id = context[0]
        if trace_id not in self._pending:
            return
        span_id = context[1]
        lock = self._lock
        try:
            # All under the lock, so that a span ending while its root ends on another thread is
            # either in that root's breakdown or (its request already broken down) ignored:
            # never appended to a request that is gone.
            lock.acquire()
            try:
                pending = self._pending.get(trace_id)
                if pending is None:
                    return
                if span_id not in pending.roots:
                    spans = pending.spans
                    if len(spans) < self.max_spans:
                        spans.append(hold(span, span_id, pending.inferred, pending.declared))
                    else:
                        pending.dropped += 1
                    return
                pending.roots.discard(span_id)
                # copies: a span of the trace may still end on another thread
                spans = list(pending.spans)
                inferred = list(pending.inferred)
                declared = list(pending.declared)
                relink = pending.linked
                dropped, pending.dropped = pending.dropped, 0
                if pending.roots:
                    # another local root of this trace is still open: keep this one's spans,
                    # the report would join them under it too
                    pending.spans.append(hold(span, span_id, pending.inferred, pending.declared))
                    pending.linked = True
                else:
                    del self._pending[trace_id]
            finally:
                lock.release()
            if dropped:
                self.spans_dropped += dropped
                self._spans_dropped.add(dropped)
            self._record(figures(span, spans, inferred, relink, declared))
        except Exception:
            log_once(logger, "request breakdown failed")

    def _record(self, request: RequestFigures) -> None:
        key = (request.name, request.model, request.error_type)
        labels = self._label_sets.get(key)
        if labels is None:
            labels = self._labels(key)
        if self._histograms is not None:
            self._aggregate(labels, request, self._histograms)
            self.recorded += 1
            return
        # Outside any span context: an exemplar would name whichever span is current when the
        # root ends (not the request's), and sampling one costs about as much as the point.
        self._duration.record(request.duration, labels.request, _NO_SPAN)
        record_stage = self._stage.record
        for stage, nanos in request.stage_nanos.items():
            if nanos > 0:
                record_stage(nanos / NANOS, labels.stage_attributes(stage), _NO_SPAN)
        if request.time_to_first_token is not None:
            self._ttft.record(request.time_to_first_token, labels.request, _NO_SPAN)
        if request.input_tokens is not None:
            self._tokens.record(request.input_tokens, labels.input, _NO_SPAN)
        if request.output_tokens is not None:
            self._tokens.record(request.output_tokens, labels.output, _NO_SPAN)
        self.recorded += 1

    def _labels(self, key: tuple[str, str | None, str | None]) -> _LabelSet:
        if len(self._label_sets) >= _LABEL_SETS_HELD:
            self._label_sets.clear()  # names and models are few; this bounds a misuse
        labels = self._label_sets[key] = _LabelSet(key, self._histograms)
        return labels

    @staticmethod
    def _aggregate(
        labels: _LabelSet, request: RequestFigures, histograms: RequestHistograms
    ) -> None:
        # the values wait in each series, folded in bulk (see request_histograms.Series)
        stage_series = labels.stage_series
        with histograms.lock:
            labels.duration.pending.append(request.duration)
            for stage, nanos in request.stage_nanos.items():
                if nanos > 0:
                    (stage_series.get(stage) or labels.stage(stage)).pending.append(nanos / NANOS)
            if request.time_to_first_token is not None:
                labels.ttft.pending.append(request.time_to_first_token)
            if request.input_tokens is not None:
                labels.input_tokens.pending.append(request.input_tokens)
            if request.output_tokens is not None:
                labels.output_tokens.pending.append(request.output_tokens)
            histograms.unfolded += 1
            if histograms.unfolded >= FOLD_AFTER:
                histograms.fold()

    def _evict_expired(self, now: float) -> None:
        # Called with the lock held. Entries are in start order: only the oldest can be stale.
        deadline = now - self.root_timeout
        pending = self._pending
        while pending:
            trace_id, oldest = next(iter(pending.items()))
            if oldest.started > deadline:
                self._evict_at = oldest.started + self.root_timeout
                return
            del pending[trace_id]
            self.evicted += 1
            self._count_untracked("evicted")
        self._evict_at = now + self.root_timeout  # none in flight: the next one starts no sooner

    def _count_untracked(self, reason: str) -> None:
        self._untracked.add(1, {OVERFLOW_REASON: reason})

    def evict_expired(self) -> None:
        """Evict local traces whose root has been open longer than ``root_timeout`` (this also
        happens whenever a new request starts)."""
        with self._lock:
            self._evict_expired(self._clock())

    def shutdown(self) -> None:
        with self._lock:
            self._pending.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
