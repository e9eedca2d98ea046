"""Per-trace columns the report needs, and the one protocol both trace readers implement.

A reader (the Python one here, the native one in ``analysis.native``) breaks every chosen trace
down once and hands the report columns aligned by trace: end-to-end times, seconds per stage,
benchmark facts, and the model calls and sizes advice cites. The report reads only these columns,
so it never learns which reader produced them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from llmtrace import semconv as sc
from llmtrace.analysis.breakdown import ModelPhases, critical_path
from llmtrace.analysis.evidence import FactSink, root_facts
from llmtrace.analysis.evidence import _number as number
from llmtrace.analysis.model import NANOS, Trace
from llmtrace.analysis.otlp import KEPT_ATTRIBUTES
from llmtrace.errors import SourceError

# The request context ``llmtrace.context()`` sets on every span of a request: the root span
# carries it, so filtering and grouping read the root alone.
REQUEST_KEYS = (sc.SESSION_ID, sc.USER_ID, sc.GEN_AI_CONVERSATION_ID)
# The service of spans whose resource names none (OpenTelemetry SDKs name theirs
# "unknown_service" then, so a user meets the same words in Jaeger).
UNNAMED_SERVICE = "unknown_service"


@dataclass(slots=True)
class TraceInfo:
    """What the report shows of one trace besides its times."""

    trace_id: str
    root: str
    orphan: bool


def _no_trace(index: int) -> Any:
    raise IndexError(index)


@dataclass(slots=True)
class TraceColumns:
    """Per-trace results gathered in one pass, as columns aligned by trace."""

    durations: list[float] = field(default_factory=list)
    columns: dict[str, list[float]] = field(default_factory=dict)  # stages with any time
    bench_runs: list[str | None] = field(default_factory=list)
    concurrency: list[int | None] = field(default_factory=list)
    question_sets: list[str | None] = field(default_factory=list)
    orphans: int = 0
    started: int | None = None  # earliest root start (unix ns)
    ended: int | None = None  # latest root end
    sink: FactSink = field(default_factory=FactSink)
    unclaimed: dict[str, float] = field(default_factory=dict)  # "other" seconds by span name
    excluded_warmup: int = 0
    # when the bench client first saw each trace's streamed answer, as its root records:
    # first body byte, first SSE event (``llmtrace bench --url``; None when not recorded)
    first_bytes: list[float | None] = field(default_factory=list)
    first_events: list[float | None] = field(default_factory=list)
    # the ``group_by`` attribute of each trace's root, when one was asked for
    groups: list[str | None] | None = None
    info: Callable[[int], TraceInfo] = _no_trace
    # the i-th trace as Python objects (for the waterfall of the slowest one)
    full_trace: Callable[[int], Trace] = _no_trace
    # of every span read: how many each recognised instrumentation wrote, and how many no
    # stage was found for (``analysis.conventions``)
    families: dict[str, int] = field(default_factory=dict)
    unassigned_spans: int = 0
    # the critical path by service: service -> stage -> seconds per trace (stages with any time)
    services: dict[str, dict[str, list[float]]] = field(default_factory=dict)


class Collector(Protocol):
    """Traces read by one reader, able to hand the report its per-trace columns."""

    def collect(self, run: str | None, group_by: str | None = None) -> TraceColumns:
        """The breakdown and facts of every trace (warm-up left out, only ``run``'s if given),
        and the root's ``group_by`` attribute per trace when given."""
        ...

    def traces(self) -> list[Trace]:
        """Every trace as Python objects, for callers that walk the spans themselves."""
        ...


def stage_columns(rows: list[dict[str, float]]) -> dict[str, list[float]]:
    """One column per stage with time in any row, in vocabulary order; absent stages are 0."""
    present = {stage for row in rows for stage, seconds in row.items() if seconds > 0}
    return {stage: [row.get(stage, 0.0) for row in rows] for stage in sc.STAGES if stage in present}


def service_columns(
    cells: list[tuple[str | None, str, int, float]], count: int
) -> dict[str, dict[str, list[float]]]:
    """Columns of the critical path by service from (service, stage, trace index, seconds)
    cells: services by name, their stages in vocabulary order, 0 where a trace spent none."""
    found: dict[str, dict[str, list[float]]] = {}
    for service, stage, index, seconds in cells:
        if seconds > 0:
            stages = found.setdefault(service or UNNAMED_SERVICE, {})
            column = stages.get(stage)
            if column is None:
                column = stages[stage] = [0.0] * count
            column[index] += seconds
    order = {stage: n for n, stage in enumerate(sc.STAGES)}
    return {
        service: dict(sorted(found[service].items(), key=lambda item: order[item[0]]))
        for service in sorted(found)
    }


def check_root_key(key: str) -> str:
    """``key`` when the readers keep it (filters and groups read it); a ``SourceError`` if not."""
    if key not in KEPT_ATTRIBUTES:
        raise SourceError(
            f"cannot filter or group by {key!r}: trace files are read for the request context "
            f"({', '.join(REQUEST_KEYS)}) and llmtrace's own attributes only"
        )
    return key


def root_text(trace: Trace, key: str) -> str | None:
    """The root span's ``key`` attribute when it is a string: what filters and groups compare."""
    value = trace.root.attributes.get(key)
    return value if isinstance(value, str) else None


class TraceList:
    """Traces already made Python objects (the Python reader, Jaeger): the reference rules."""

    __slots__ = ("_traces", "families", "unassigned_spans")

    def __init__(
        self, traces: list[Trace], families: dict[str, int] | None = None, unassigned: int = 0
    ) -> None:
        self._traces = traces
        self.families = families or {}
        self.unassigned_spans = unassigned

    def traces(self) -> list[Trace]:
        return self._traces

    def collect(self, run: str | None, group_by: str | None = None) -> TraceColumns:
        acc = TraceColumns(families=dict(self.families), unassigned_spans=self.unassigned_spans)
        groups: list[str | None] = []
        unclaimed = acc.unclaimed
        kept: list[Trace] = []
        rows: list[dict[str, float]] = []
        cells: list[tuple[str | None, str, int, float]] = []
        for trace in self._traces:
            facts = root_facts(trace)
            if facts.warmup:
                acc.excluded_warmup += 1
                continue
            if run is not None and facts.bench_run != run:
                continue
            phases: dict[int, ModelPhases] = {}
            stages: dict[str, float] = {}
            by_service: dict[tuple[str | None, str], float] = {}
            for segment in critical_path(trace, phases):
                seconds = (segment.end - segment.start) / NANOS
                stage = segment.stage
                stages[stage] = stages.get(stage, 0.0) + seconds
                key = (segment.service, stage)
                by_service[key] = by_service.get(key, 0.0) + seconds
                if stage == "other":
                    unclaimed[segment.span] = unclaimed.get(segment.span, 0.0) + seconds
            index = len(rows)
            cells.extend((service, stage, index, s) for (service, stage), s in by_service.items())
            acc.sink.add_trace(trace, phases)
            kept.append(trace)
            rows.append(stages)
            acc.durations.append(trace.duration)
            acc.bench_runs.append(facts.bench_run)
            acc.concurrency.append(facts.bench_concurrency)
            acc.question_sets.append(facts.bench_question_set_hash)
            root = trace.root.attributes
            acc.first_bytes.append(number(root.get(sc.CLIENT_TIME_TO_FIRST_BYTE)))
            acc.first_events.append(number(root.get(sc.CLIENT_TIME_TO_FIRST_EVENT)))
            if group_by is not None:
                groups.append(root_text(trace, group_by))
        acc.columns = stage_columns(rows)
        acc.services = service_columns(cells, len(rows))
        if group_by is not None:
            acc.groups = groups
        acc.orphans = sum(1 for trace in kept if trace.orphan)
        if kept:
            acc.started = min(trace.root.start for trace in kept)
            acc.ended = max(trace.root.end for trace in kept)
        acc.info = lambda i: TraceInfo(kept[i].trace_id, kept[i].root.name, kept[i].orphan)
        acc.full_trace = kept.__getitem__
        return acc
