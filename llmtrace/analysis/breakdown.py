"""Per-trace latency breakdown: the critical path, and every instant of it assigned to a stage.

These rules also exist in Rust (``native/src/analysis.rs``, kept equal by
``tests/analysis/test_native.py``) because this Python breakdown, driven by the native reader, is
3.2-3.75x slower than the all-native report and past the 1 GiB memory target at 100,000 requests
(measured in benchmarks/README.md, report_engines.py); it stays the reference, and serves the
runtime's request metrics and the install without Rust.

Pure functions over one ``Trace``. The rules (docs/architecture.md, "How a trace is broken down"):

* Only the critical path counts: walking back from the root's end, the child that finished last
  is what the parent was waiting for; time not covered by such a child is the parent's own.
  Concurrent work off that path added no latency. So a trace's stage times sum to its
  end-to-end time.
* A span without ``llmtrace.stage`` inherits its parent's; the root without one is ``other``.
* Structure recorded beside the work it wraps is passed over: a leaf that claims no stage (none,
  or ``other``; not a model call) is not a step of the critical path when a sibling with a stage
  or with spans under it covers at least nine tenths of it (``wrapped_by_sibling``); the walk
  goes on to that sibling, and the leaf's few uncovered instants are its parent's own time. A
  framework's function run recorded as a sibling of the runs it started (LangGraph's
  ``call_model`` beside the model's chain, as OpenInference and OpenLLMetry record it) ends a
  little after them; followed as the last child to finish, it would take the whole stretch as
  ``other`` and hide the model call. Why nine tenths: such a wrapper's own time is only the
  function's set-up and return, while two pieces of parallel work rarely end within a tenth of
  each other; and when they do, the sibling is all but on the critical path too (shortening the
  leaf alone would gain at most the uncovered tenth).
* A model call is split by durations measured on the client: the time before its last attempt,
  when the client retried (refused attempts and the waits before trying again,
  ``llmtrace.retry.time``), is ``retry``; HTTP transport phases (or, when the
  server's timings are known, client TTFT - server TTFT) are ``network``, the server's queue
  time is ``queue``, a model load the server reported (Ollama's ``load_duration``) is ``load``,
  the rest until the first token is ``ttft``, the remainder ``generation``.
  Timestamps from the server span are never compared with the client's: the two hosts' clocks
  differ, and only durations measured on one clock are trustworthy.
* A model call that failed (``error.type``; or a span with one directly over such a call, as a
  framework records its call of a client) and that the request went past, a later sibling being
  on the critical path after it, is ``retry``, with the wait until that sibling: a framework's
  retry (LangChain's ``with_retry``) or fallback (``with_fallbacks``, LiteLLM's router) spent it
  before the call that answered.
* A hop to another process ends where that process's span begins: a SERVER or CONSUMER span
  under a CLIENT or PRODUCER span, or under a span of another service (``is_remote``), is that
  service's time, never ``network``: its own time is ``other`` unless it declares a stage (a
  service llmtrace does not instrument declares none), and its children are read as anywhere. Its
  times are on another host's clock, so it is placed in its caller by durations alone, centred in
  the caller's span (``remote_shift``): the caller's wait beyond the server's span is the hop's
  network, half before and half after. A CLIENT or PRODUCER span with such a child and no stage of
  its own (another instrumentation's HTTP client span) is a hop: its own time is ``network``.
* A call without a first-token time (not streamed) counts entirely as ``ttft``: the client gets
  its first output token together with the last one, so all of it was time to first token. The
  exception is a joined server span that says when the server produced its first token; then
  the server's decode time is ``generation``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any

from llmtrace import semconv as sc
from llmtrace.analysis.model import (
    KIND_CLIENT,
    KIND_CONSUMER,
    KIND_PRODUCER,
    KIND_SERVER,
    NANOS,
    Span,
    Trace,
)

_STAGES = frozenset(sc.STAGES)
_REMOTE_KINDS = (KIND_SERVER, KIND_CONSUMER)
_CALLER_KINDS = (KIND_CLIENT, KIND_PRODUCER)
_MODEL_OPERATIONS = frozenset({sc.OP_CHAT, sc.OP_TEXT_COMPLETION, sc.OP_GENERATE_CONTENT})
_ROOT_STAGE = "other"
_TRANSPORT_PHASES = (sc.HTTP_CONNECT, sc.HTTP_TLS, sc.HTTP_REQUEST_SENT)
_STAGE_KEY = sc.STAGE
# a model call's own tag, today's or an earlier release's: split at its first token
_MODEL_CALL_STAGES = sc.MODEL_CALL_STAGES
# What a server may report of its own timings on the client's span (read by server_timings).
_SERVER_REPORTED = frozenset(
    {
        sc.SERVER_QUEUE_TIME,
        sc.SERVER_PROMPT_TIME,
        sc.SERVER_GENERATION_TIME,
        sc.SERVER_INFERENCE_TIME,
        sc.SERVER_TIME_TO_FIRST_TOKEN,
        sc.SERVER_PROCESSING_TIME,
        sc.SERVER_LOAD_TIME,
    }
)


@dataclass(slots=True)
class ModelPhases:
    """How one model call's duration divides into stages (seconds; they sum to the duration)."""

    network: float
    queue: float
    ttft: float
    generation: float
    server_joined: bool = False
    # Model loading the server reported (Ollama's load_duration): taken out of ttft, stage load.
    load: float = 0.0
    # Attempts the provider refused and the waits before trying again (llmtrace.retry.time):
    # the call's first stretch, stage retry.
    retry: float = 0.0


@dataclass(slots=True)
class ServerTimings:
    """Durations the model server measured on its own clock (seconds; None when unknown)."""

    queue: float
    time_to_first_token: float | None
    end_to_end: float | None
    load: float = 0.0


@dataclass(slots=True)
class Segment:
    """A stretch of the critical path: ``stage`` from ``start`` to ``end`` (unix ns on the root's
    clock), in span ``span`` of service ``service``."""

    stage: str
    start: int
    end: int
    span: str = ""
    service: str | None = None


# A stretch of the critical path as the walk emits it: (start, end, stage, span). Cheaper to make
# than a Segment, and tuples sort by their start (never equal: the stretches do not overlap).
Stretch = tuple[int, int, str, Span]


@dataclass(slots=True)
class TraceBreakdown:
    trace_id: str
    duration: float
    stages: dict[str, float]
    orphan: bool = False
    segments: list[Segment] = field(default_factory=list)


def _seconds(value: Any) -> float | None:
    if value.__class__ is float:
        return value
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def declared_stage(span: Span) -> str | None:
    """The span's own ``llmtrace.stage``; an unknown name counts as ``other``, a model call's tag
    as ``ttft`` (the stage its own time starts with)."""
    stage = span.attributes.get(sc.STAGE)
    if stage is None:
        return None
    if stage in _STAGES:
        return str(stage)
    return "ttft" if stage in _MODEL_CALL_STAGES else _ROOT_STAGE


def first_token_time(span: Span) -> float | None:
    """Client time to first token in seconds after the span's start, when recorded."""
    attributes = span.attributes
    value = _seconds(attributes.get(sc.TIME_TO_FIRST_TOKEN))
    if value is None:
        value = _seconds(attributes.get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK))
    return value


def is_model_call(span: Span) -> bool:
    """A span tagged as a model call (``model``, or ``ttft`` as earlier releases wrote), or a
    chat/completion span with a first-token time."""
    attributes = span.attributes
    stage = attributes.get(sc.STAGE)
    if stage is not None:
        return stage in _MODEL_CALL_STAGES
    return _is_unstaged_model_call(attributes)


def _is_unstaged_model_call(attributes: dict[str, Any]) -> bool:
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
    # an operation name may be any attribute value, an array among them: not one to look up
    return (
        operation.__class__ is str
        and operation in _MODEL_OPERATIONS
        and (
            sc.TIME_TO_FIRST_TOKEN in attributes
            or sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK in attributes
        )
    )


def find_server_span(span: Span) -> Span | None:
    """The model server's SERVER span joined under this client span (through traceparent)."""
    if not span.children:
        return None
    stack = list(span.children)
    while stack:
        child = stack.pop()
        if child.kind == KIND_SERVER:
            return child
        stack.extend(child.children)
    return None


def _queue_spans(server: Span) -> tuple[float, bool]:
    """Time in queue-stage spans under a server span (outermost only, measured on its clock),
    and whether one of them is the proxy queue the middleware also reports as an attribute."""
    total = 0.0
    has_proxy_span = False
    stack = list(server.children)
    while stack:
        span = stack.pop()
        if span.attributes.get(sc.STAGE) == "queue":
            total += max(span.duration, 0.0)
            has_proxy_span = has_proxy_span or span.attributes.get(sc.QUEUE_NAME) == "proxy"
        else:
            stack.extend(span.children)
    return total, has_proxy_span


def _sum_known(*values: float | None) -> float | None:
    known = [value for value in values if value is not None]
    return sum(known) if known and len(known) == len(values) else None


def server_timings(span: Span) -> ServerTimings | None:
    """Server-side durations for a model call: from a joined server span or reported timings."""
    server = find_server_span(span)
    if server is not None:
        attributes = server.attributes
        if sc.GEN_AI_LATENCY_TIME_IN_QUEUE in attributes or sc.GEN_AI_LATENCY_E2E in attributes:
            # vLLM's llm_request span
            return ServerTimings(
                queue=_seconds(attributes.get(sc.GEN_AI_LATENCY_TIME_IN_QUEUE)) or 0.0,
                time_to_first_token=_seconds(attributes.get(sc.GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN)),
                end_to_end=_seconds(attributes.get(sc.GEN_AI_LATENCY_E2E)) or server.duration,
            )
        # llmtrace's server middleware: queue-stage spans, and the proxy queue (X-Request-Start)
        # as an attribute, which the middleware may also record as a span of its own.
        queued, has_proxy_span = _queue_spans(server)
        proxy_queue = _seconds(attributes.get(sc.SERVER_PROXY_QUEUE_TIME)) or 0.0
        server_ttft = _seconds(attributes.get(sc.SERVER_TIME_TO_FIRST_TOKEN))
        if server_ttft is None:
            server_ttft = _seconds(attributes.get(sc.TIME_TO_FIRST_TOKEN))
        return ServerTimings(
            queue=queued + (0.0 if has_proxy_span else proxy_queue),
            time_to_first_token=server_ttft,
            end_to_end=server.duration if server.end > server.start else None,
        )
    # Timings the server reported in its response (TGI headers, llama.cpp body timings).
    attributes = span.attributes
    if _SERVER_REPORTED.isdisjoint(attributes):
        return None  # none reported (most calls): what follows would find nothing
    queue = _seconds(attributes.get(sc.SERVER_QUEUE_TIME))
    prompt = _seconds(attributes.get(sc.SERVER_PROMPT_TIME))
    generation = _seconds(attributes.get(sc.SERVER_GENERATION_TIME))
    inference = _seconds(attributes.get(sc.SERVER_INFERENCE_TIME))
    first_token = _seconds(attributes.get(sc.SERVER_TIME_TO_FIRST_TOKEN))
    total = _seconds(attributes.get(sc.SERVER_PROCESSING_TIME))
    # A model load (Ollama) comes before the prompt is evaluated, within the first-token wait.
    load = _seconds(attributes.get(sc.SERVER_LOAD_TIME))
    if first_token is None and total is not None and generation is not None:
        # The server's whole time less its generation (Ollama): its wait for the first token,
        # with what its named parts leave out (waiting for a free slot, templating).
        first_token = total - generation
    if first_token is None and prompt is not None:
        first_token = (queue or 0.0) + (load or 0.0) + prompt
    if total is None:
        total = _sum_known(first_token, generation)
    if total is None and inference is not None:
        total = (queue or 0.0) + inference
    if queue is None and first_token is None and total is None and load is None:
        return None
    return ServerTimings(queue or 0.0, first_token, total, load or 0.0)


def _transport_time(span: Span) -> float:
    attributes = span.attributes
    total = 0.0
    for name in _TRANSPORT_PHASES:
        value = attributes.get(name)
        if value is None:
            continue  # not measured (a reused connection has no connect)
        value = _seconds(value)
        if value is not None and value > 0:
            total += value
    return total


def model_phases(span: Span) -> ModelPhases:
    """Split one model call into network, queue, ttft and generation (durations only)."""
    # Conditionals where min/max would do: this runs for every model call on every request the
    # request metrics processor breaks down, and a builtin call costs more than a comparison.
    duration = (span.end - span.start) / NANOS
    if duration < 0.0:
        duration = 0.0
    client_first = first_token_time(span)
    if client_first is not None:
        if client_first < 0.0:
            client_first = 0.0
        elif client_first > duration:
            client_first = duration
    server = server_timings(span)
    network: float | None = None
    queue = 0.0
    load = 0.0
    if server is not None:
        queue = server.queue
        load = server.load
        if client_first is not None and server.time_to_first_token is not None:
            network = client_first - server.time_to_first_token
        elif server.end_to_end is not None:
            network = duration - server.end_to_end
        known_server_split = (
            server.time_to_first_token is not None and server.end_to_end is not None
        )
        if client_first is None and known_server_split:
            assert server.end_to_end is not None and server.time_to_first_token is not None
            decode = max(server.end_to_end - server.time_to_first_token, 0.0)
            client_first = max(duration - decode, 0.0)
    first = duration if client_first is None else client_first
    retry = _seconds(span.attributes.get(sc.RETRY_TIME))
    retry = _clamp(retry, first) if retry else 0.0
    if network is None:
        network = _transport_time(span)
    elif retry:
        # The server's timings are its answer's, the last attempt's: what the client waited
        # beyond them includes the refused attempts and the waits, which are retry.
        network -= retry
    network = _clamp(network, first - retry)
    queue = _clamp(queue, first - retry - network) if queue else 0.0
    load = _clamp(load, first - retry - network - queue) if load else 0.0
    return ModelPhases(
        network,
        queue,
        first - retry - network - queue - load,
        duration - first,
        server is not None,
        load,
        retry,
    )


def _clamp(value: float, high: float) -> float:
    """``value`` within [0, ``high``] (``high`` is never negative here)."""
    if value <= 0.0:
        return 0.0
    return high if value > high else value


def is_remote(span: Span, parent: Span) -> bool:
    """Whether ``span`` is another process's record of its caller's request: a SERVER or CONSUMER
    span under a CLIENT or PRODUCER span, or under a span of another service. Its times are on
    that process's clock, and its time is that service's, never the caller's network."""
    return span.kind in _REMOTE_KINDS and (
        parent.kind in _CALLER_KINDS or span.service != parent.service
    )


def remote_stage(declared: str) -> str:
    """The stage of a remote span's own time, given the stage it declares or would inherit: a
    server's time is never ``network`` (a service llmtrace does not see inherits its caller's)."""
    return _ROOT_STAGE if declared == "network" else declared


def remote_shift(span: Span, caller_start: int, caller_end: int) -> int:
    """Nanoseconds that place a remote span (and its subtree) on its caller's clock, by durations
    alone: centred in the caller's span [caller_start, caller_end), so the caller's wait beyond
    the server's span (the hop's network) falls half before it and half after. Timestamps of two
    hosts are never compared."""
    return caller_start + ((caller_end - caller_start) - (span.end - span.start)) // 2 - span.start


def is_hop(span: Span) -> bool:
    """A CLIENT or PRODUCER span without a stage of its own (another instrumentation's HTTP client
    span) with a remote span under it: its own time is the transport, ``network``."""
    return (
        span.kind in _CALLER_KINDS
        and _STAGE_KEY not in span.attributes
        and any(is_remote(child, span) for child in span.children)
    )


def _emit_model_call(
    span: Span,
    low: int,
    high: int,
    out: list[Stretch],
    phases_seen: dict[int, ModelPhases] | None,
    totals: dict[str, int] | None,
    shift: int = 0,
) -> None:
    phases = model_phases(span)
    if phases_seen is not None:
        phases_seen[id(span)] = phases
    boundary = span.start + shift
    for stage, seconds in (
        ("retry", phases.retry),
        ("network", phases.network),
        ("queue", phases.queue),
        ("load", phases.load),
        ("ttft", phases.ttft),
    ):
        if seconds <= 0.0:
            continue  # no time (most calls have no queue or load): nothing to emit
        phase_start = boundary
        boundary += round(seconds * NANOS)
        start = phase_start if phase_start > low else low
        end = boundary if boundary < high else high
        if end > start:
            if totals is None:
                out.append((start, end, stage, span))
            else:
                totals[stage] = totals.get(stage, 0) + (end - start)
    # generation: the rest, to the call's end
    start = boundary if boundary > low else low
    span_end = span.end + shift
    end = span_end if span_end < high else high
    if end > start:
        if totals is None:
            out.append((start, end, "generation", span))
        else:
            totals["generation"] = totals.get("generation", 0) + (end - start)


_end_time = attrgetter("end")
_stretch_start = itemgetter(0)

# A sibling covering at least WRAPPED_NUMERATOR / WRAPPED_DENOMINATOR of a stage-less leaf is what
# the leaf wraps (see wrapped_by_sibling). Integers, so that both readers compare exactly.
WRAPPED_NUMERATOR = 9
WRAPPED_DENOMINATOR = 10


def claims_no_stage(span: Span) -> bool:
    """Whether the span's own time would be ``other`` or its parent's: it declares no stage or
    ``other`` (an unknown name reads as ``other``), and it is not a model call."""
    attributes = span.attributes
    declared = attributes.get(_STAGE_KEY)
    if declared is None:
        return not _is_unstaged_model_call(attributes)
    return declared == _ROOT_STAGE or (
        declared not in _STAGES and declared not in _MODEL_CALL_STAGES
    )


def wrapped_by_sibling(
    ordered: Sequence[Span],
    first: int,
    start: int,
    end: int,
    cursor: int,
    placed: Sequence[tuple[int, int]] | None = None,
) -> bool:
    """Whether a sibling from ``ordered[first:]`` (the leaf's siblings ending no later than it,
    latest first) covers at least nine tenths of the leaf's stretch [start, end), the part of the
    leaf before ``cursor`` (the parent's stretch not yet explained), and has a stage or spans
    under it: a sibling that is itself a stage-less leaf explains no more than the leaf does.
    (Indices, not a slice: the walk asks for every stage-less leaf it meets.) ``placed``, when
    given, holds each sibling's (start, end) on the walk's clock (see ``remote_shift``)."""
    length = end - start
    for index in range(first, len(ordered)):
        sibling = ordered[index]
        if placed is None:
            sibling_start, sibling_end = sibling.start, sibling.end
        else:
            sibling_start, sibling_end = placed[index]
        if sibling_end > cursor:
            sibling_end = cursor
        if (sibling_end - start) * WRAPPED_DENOMINATOR < length * WRAPPED_NUMERATOR:
            return False  # this sibling and the earlier-ending rest cover too little
        if sibling_start >= cursor:
            continue  # after the stretch explained so far, as the walk skips it
        if not sibling.children and claims_no_stage(sibling):
            continue
        if sibling_start < start:
            sibling_start = start
        covered = (sibling_end if sibling_end < end else end) - sibling_start
        if covered * WRAPPED_DENOMINATOR >= length * WRAPPED_NUMERATOR:
            return True
    return False


def failed_attempt(span: Span) -> bool:
    """A model call that failed, or a span that failed directly over one (a framework's record of
    its call of a client): if the request went on past it, the attempt was lost to a retry or a
    fallback."""
    if sc.ERROR_TYPE not in span.attributes:
        return False
    if is_model_call(span):
        return True
    for child in span.children:
        if sc.ERROR_TYPE in child.attributes and is_model_call(child):
            return True
    return False


@dataclass(slots=True)
class _Frame:
    """A span with children on the critical path: its children by end time (latest first), the
    next one to look at, how far back from its end its stretch is explained, and where that
    stretch ended (the cursor is below it once a child was on the path).

    ``placed`` and ``shifts``, when the span or a child of it is on another clock than the root
    (``remote_shift``), hold each child's (start, end) on the root's clock and the shift that put
    it there; None otherwise (most spans), and the children's own times are used."""

    span: Span
    low: int
    stage: str
    ordered: Sequence[Span]
    next: int
    cursor: int
    high: int
    placed: list[tuple[int, int]] | None = None
    shifts: list[int] | None = None


def _enter(
    span: Span,
    low: int,
    high: int,
    inherited: str,
    out: list[Stretch],
    phases_seen: dict[int, ModelPhases] | None,
    totals: dict[str, int] | None,
    shift: int = 0,
    remote: bool = False,
) -> _Frame | None:
    """Enter ``span`` on the stretch [low, high): a model call or a leaf is emitted at once, a span
    with children becomes a frame to walk. ``shift`` places the span's times on the root's clock;
    ``remote``: the span is another process's (``is_remote``)."""
    attributes = span.attributes
    declared = attributes.get(_STAGE_KEY)
    if declared is None:
        stage = inherited
        if _is_unstaged_model_call(attributes):
            _emit_model_call(span, low, high, out, phases_seen, totals, shift)
            return None
    elif declared in _MODEL_CALL_STAGES:
        # The client's own measurements divide the call; children (HTTP spans, the server's
        # span on another clock) are already accounted for by those durations.
        _emit_model_call(span, low, high, out, phases_seen, totals, shift)
        return None
    else:
        stage = declared if declared in _STAGES else _ROOT_STAGE
    if remote:
        stage = remote_stage(stage)
    children = span.children
    if not children:
        if totals is None:
            out.append((low, high, stage, span))
        else:
            totals[stage] = totals.get(stage, 0) + (high - low)
        return None
    for child in children:
        if child.kind in _REMOTE_KINDS and is_remote(child, span):
            break
    else:
        if not shift:  # one clock for the span and its children (most spans)
            ordered = (
                sorted(children, key=_end_time, reverse=True) if len(children) > 1 else children
            )
            return _Frame(span, low, stage, ordered, 0, high, high)
        return _placed_frame(span, low, high, stage, shift)
    if declared is None and span.kind in _CALLER_KINDS:
        stage = "network"  # a hop (is_hop): the caller's wait outside the server's span
    return _placed_frame(span, low, high, stage, shift)


def _placed_frame(span: Span, low: int, high: int, stage: str, shift: int) -> _Frame:
    """A frame whose children are placed on the root's clock: by ``shift`` as the span is, or by
    their own ``remote_shift`` when they are remote; ordered by their placed end, latest first."""
    caller_start = span.start + shift
    caller_end = span.end + shift
    rows = []
    for child in span.children:
        if child.kind in _REMOTE_KINDS and is_remote(child, span):
            child_shift = remote_shift(child, caller_start, caller_end)
        else:
            child_shift = shift
        rows.append((child.end + child_shift, child.start + child_shift, child_shift, child))
    rows.sort(key=_placed_end, reverse=True)  # stable, as the unplaced sort by end
    return _Frame(
        span,
        low,
        stage,
        [row[3] for row in rows],
        0,
        high,
        high,
        [(row[1], row[0]) for row in rows],
        [row[2] for row in rows],
    )


def _placed_end(row: tuple[int, int, int, Span]) -> int:
    return row[0]


def _walk_critical_path(
    root: Span,
    low: int,
    high: int,
    out: list[Stretch],
    phases_seen: dict[int, ModelPhases] | None,
    totals: dict[str, int] | None = None,
) -> None:
    """Walking back from the end, the child that finished last is what its parent waited for;
    time no such child covers is the parent's own. A loop, not recursion: span trees can be
    deeper than Python's recursion limit.

    Each stretch of the path goes to ``out`` as (start, end, stage, span), or, with
    ``totals``, only its length is added to its stage's there: a caller that needs the totals
    alone saves making each stretch and summing them afterwards (at every emission, the two
    forms side by side)."""
    stack: list[_Frame] = []
    first = _enter(root, low, high, _ROOT_STAGE, out, phases_seen, totals)
    if first is not None:
        stack.append(first)
    while stack:
        frame = stack[-1]
        # the frame's state in locals while its children are looked at
        ordered = frame.ordered
        count = len(ordered)
        index = frame.next
        cursor = frame.cursor
        low = frame.low
        stage = frame.stage
        parent = frame.span
        placed = frame.placed
        entered = None
        while index < count and cursor > low:
            child = ordered[index]
            if placed is None:
                child_start = child.start
                child_end = child.end
            else:
                child_start, child_end = placed[index]
            index += 1
            if child_start >= cursor:
                continue  # entirely after the stretch already explained: concurrent work
            if child_end > cursor:
                child_end = cursor
            if child_end <= low:
                break  # this child and the earlier-ending rest are before the stretch
            if child_start < low:
                child_start = low
            if child_end <= child_start:
                continue
            leaf = not child.children
            if (
                leaf
                and index < count
                and claims_no_stage(child)
                and wrapped_by_sibling(ordered, index, child_start, child_end, cursor, placed)
            ):
                continue  # structure beside the work it wraps: passed over for that work
            if cursor < frame.high and failed_attempt(child):
                # Superseded: the attempt and the wait after it, until the sibling already on
                # the path, were lost to a retry or a fallback.
                if totals is None:
                    out.append((child_start, cursor, "retry", child))
                else:
                    totals["retry"] = totals.get("retry", 0) + (cursor - child_start)
                cursor = child_start
                continue
            if child_end < cursor:
                if totals is None:
                    out.append((child_end, cursor, stage, parent))
                else:
                    totals[stage] = totals.get(stage, 0) + (cursor - child_end)
            cursor = child_start
            remote = child.kind in _REMOTE_KINDS and is_remote(child, parent)
            if leaf and not remote:
                declared = child.attributes.get(_STAGE_KEY)
                if declared is not None and declared not in _MODEL_CALL_STAGES:
                    # a leaf with a stage of its own (most children): what _enter would emit
                    own = declared if declared in _STAGES else _ROOT_STAGE
                    if totals is None:
                        out.append((child_start, child_end, own, child))
                    else:
                        totals[own] = totals.get(own, 0) + (child_end - child_start)
                    continue
            shifts = frame.shifts
            entered = _enter(
                child,
                child_start,
                child_end,
                stage,
                out,
                phases_seen,
                totals,
                0 if shifts is None else shifts[index - 1],
                remote,
            )
            if entered is not None:
                break
        if entered is not None:
            frame.next = index
            frame.cursor = cursor
            stack.append(entered)
            continue
        # every child looked at: the rest of the stretch is the span's own time
        if cursor > low:
            if totals is None:
                out.append((low, cursor, stage, parent))
            else:
                totals[stage] = totals.get(stage, 0) + (cursor - low)
        stack.pop()


def _stretches(
    trace: Trace,
    phases_seen: dict[int, ModelPhases] | None,
    totals: dict[str, int] | None = None,
) -> list[Stretch]:
    """The critical path's stretches as the walk emits them (latest first, roughly); with
    ``totals``, none: each stage's nanoseconds are added there instead."""
    root = trace.root
    out: list[Stretch] = []
    if root.end > root.start:
        _walk_critical_path(root, root.start, root.end, out, phases_seen, totals)
    return out


def critical_path(trace: Trace, phases_seen: dict[int, ModelPhases] | None = None) -> list[Segment]:
    """The root's duration as consecutive stage segments along the critical path, in time order.

    ``phases_seen``, when given, receives the phases of each model call met on the path (keyed
    by ``id(span)``), so a caller that needs them too does not compute them twice.
    """
    stretches = _stretches(trace, phases_seen)
    # by start: stretches never share one (each is a non-empty part of the root)
    stretches.sort(key=_stretch_start)
    return [
        Segment(stage, start, end, span.name, span.service) for start, end, stage, span in stretches
    ]


def stage_nanos(trace: Trace, phases_seen: dict[int, ModelPhases] | None = None) -> dict[str, int]:
    """Nanoseconds per stage on the critical path (``critical_path``'s segments summed, without
    making or ordering them: for a caller that needs only the totals)."""
    stages: dict[str, int] = {}
    _stretches(trace, phases_seen, stages)
    return stages


def breakdown(trace: Trace, *, keep_segments: bool = False) -> TraceBreakdown:
    """Seconds per stage for one trace; the values sum to the trace's end-to-end time."""
    segments = critical_path(trace)
    stages: dict[str, float] = {}
    for segment in segments:
        stages[segment.stage] = stages.get(segment.stage, 0.0) + (segment.end - segment.start)
    for stage in stages:
        stages[stage] /= NANOS
    return TraceBreakdown(
        trace_id=trace.trace_id,
        duration=trace.duration,
        stages=stages,
        orphan=trace.orphan,
        segments=segments if keep_segments else [],
    )
