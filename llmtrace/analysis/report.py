"""The report: per-stage statistics across traces, the bottleneck, the tail and advice.

``build_report`` turns a ``TraceSet`` into a ``Report``; ``Report.to_json`` writes the stable,
versioned JSON (schema ``llmtrace.report/1``) and ``Report.from_json`` reads it back, so a saved
report can be rendered or compared later without the traces.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmtrace import semconv as sc
from llmtrace.analysis.advice import Evidence, StageFigures, advise_caching, advise_stage
from llmtrace.analysis.breakdown import (
    ModelPhases,
    critical_path,
    declared_stage,
    is_model_call,
)
from llmtrace.analysis.evidence import FactSink, ModelCall, root_facts
from llmtrace.analysis.model import NANOS, Span, Trace, TraceSet, cyclic_gc_paused
from llmtrace.analysis.stats import Distribution, distribution, histogram

if TYPE_CHECKING:
    from llmtrace.analysis.native import NativeTraces

SCHEMA = "llmtrace.report/1"
SLOWEST = 10
MAX_SAMPLES = 5000
MAX_WATERFALL_SPANS = 300


@dataclass(slots=True)
class StageSummary:
    distribution: Distribution
    share: float
    traces: int  # traces in which the stage took any time on the critical path

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = self.distribution.to_json()
        data.pop("count", None)
        data["share"] = self.share
        data["traces"] = self.traces
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StageSummary:
        return cls(Distribution.from_json(data), float(data["share"]), int(data.get("traces", 0)))


@dataclass(slots=True)
class ModelUsage:
    calls: int
    input_tokens: Distribution | None
    output_tokens: Distribution | None
    time_to_first_token: Distribution | None
    output_tokens_per_second: Distribution | None

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "input_tokens": _dist_json(self.input_tokens),
            "output_tokens": _dist_json(self.output_tokens),
            "ttft": _dist_json(self.time_to_first_token),
            "output_tokens_per_second": _dist_json(self.output_tokens_per_second),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelUsage:
        return cls(
            int(data["calls"]),
            _dist(data.get("input_tokens")),
            _dist(data.get("output_tokens")),
            _dist(data.get("ttft")),
            _dist(data.get("output_tokens_per_second")),
        )


@dataclass(slots=True)
class SlowTrace:
    trace_id: str
    duration: float
    root: str
    stages: dict[str, float]
    orphan: bool = False
    url: str | None = None


@dataclass(slots=True)
class Bottleneck:
    stage: str
    share: float
    advice: list[str]


@dataclass(slots=True)
class Tail:
    """Traces above the end-to-end P95 against the median traces: where the extra time went."""

    stage: str
    growth: float
    threshold: float
    traces: int
    tail_mean: float
    median_mean: float
    stages: dict[str, float]


@dataclass(slots=True)
class WaterfallSpan:
    name: str
    stage: str
    start: float  # seconds after the trace's start
    duration: float
    depth: int
    service: str | None = None


@dataclass(slots=True)
class Waterfall:
    trace_id: str
    duration: float
    spans: list[WaterfallSpan]
    critical_path: list[tuple[str, float, float]]  # (stage, start, end) seconds after the start
    truncated: bool = False


@dataclass(slots=True)
class Report:
    source: str
    service: str | None
    traces: int
    end_to_end: Distribution | None
    stages: dict[str, StageSummary]
    ttft: Distribution | None
    bottleneck: Bottleneck | None
    tail: Tail | None
    slowest: list[SlowTrace]
    generation: Distribution | None = None
    output_tokens_per_second: Distribution | None = None
    models: dict[str, ModelUsage] = field(default_factory=dict)
    evidence: Evidence = field(default_factory=Evidence)
    ttft_histogram: dict[str, Any] = field(default_factory=dict)
    waterfall: Waterfall | None = None
    excluded_open: int = 0
    excluded_warmup: int = 0
    orphans: int = 0
    warnings: list[str] = field(default_factory=list)
    run: dict[str, Any] | None = None
    jaeger_url: str | None = None
    samples: dict[str, Any] = field(default_factory=dict)
    generated_at: str = ""
    llmtrace_version: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "source": self.source,
            "service": self.service,
            "traces": self.traces,
            "end_to_end": _dist_json(self.end_to_end),
            "stages": {stage: summary.to_json() for stage, summary in self.stages.items()},
            "ttft": _dist_json(self.ttft),
            "bottleneck": None
            if self.bottleneck is None
            else {
                "stage": self.bottleneck.stage,
                "share": self.bottleneck.share,
                "advice": list(self.bottleneck.advice),
            },
            "tail": None
            if self.tail is None
            else {
                "stage": self.tail.stage,
                "growth": self.tail.growth,
                "threshold": self.tail.threshold,
                "traces": self.tail.traces,
                "tail_mean": self.tail.tail_mean,
                "median_mean": self.tail.median_mean,
                "stages": dict(self.tail.stages),
            },
            "slowest": [
                {
                    "trace_id": slow.trace_id,
                    "duration": slow.duration,
                    "root": slow.root,
                    "stages": dict(slow.stages),
                    "orphan": slow.orphan,
                    "url": slow.url,
                }
                for slow in self.slowest
            ],
            "generation": _dist_json(self.generation),
            "output_tokens_per_second": _dist_json(self.output_tokens_per_second),
            "models": {name: usage.to_json() for name, usage in self.models.items()},
            "evidence": self.evidence.to_json(),
            "ttft_histogram": self.ttft_histogram,
            "waterfall": None if self.waterfall is None else _waterfall_json(self.waterfall),
            "excluded_open": self.excluded_open,
            "excluded_warmup": self.excluded_warmup,
            "orphans": self.orphans,
            "warnings": list(self.warnings),
            "run": self.run,
            "jaeger_url": self.jaeger_url,
            "generated_at": self.generated_at,
            "llmtrace_version": self.llmtrace_version,
            "samples": self.samples,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        schema = data.get("schema")
        if schema != SCHEMA:
            raise ValueError(f"not an llmtrace report (schema {schema!r}, expected {SCHEMA!r})")
        bottleneck = data.get("bottleneck")
        tail = data.get("tail")
        return cls(
            source=str(data.get("source", "")),
            service=data.get("service"),
            traces=int(data.get("traces", 0)),
            end_to_end=_dist(data.get("end_to_end")),
            stages={
                stage: StageSummary.from_json(summary)
                for stage, summary in (data.get("stages") or {}).items()
            },
            ttft=_dist(data.get("ttft")),
            bottleneck=None
            if not bottleneck
            else Bottleneck(
                str(bottleneck["stage"]),
                float(bottleneck["share"]),
                [str(line) for line in bottleneck.get("advice", [])],
            ),
            tail=None
            if not tail
            else Tail(
                stage=str(tail["stage"]),
                growth=float(tail["growth"]),
                threshold=float(tail.get("threshold", math.nan)),
                traces=int(tail.get("traces", 0)),
                tail_mean=float(tail.get("tail_mean", math.nan)),
                median_mean=float(tail.get("median_mean", math.nan)),
                stages={k: float(v) for k, v in (tail.get("stages") or {}).items()},
            ),
            slowest=[
                SlowTrace(
                    trace_id=str(item["trace_id"]),
                    duration=float(item["duration"]),
                    root=str(item.get("root", "")),
                    stages={k: float(v) for k, v in (item.get("stages") or {}).items()},
                    orphan=bool(item.get("orphan", False)),
                    url=item.get("url"),
                )
                for item in data.get("slowest") or []
            ],
            generation=_dist(data.get("generation")),
            output_tokens_per_second=_dist(data.get("output_tokens_per_second")),
            models={
                name: ModelUsage.from_json(usage)
                for name, usage in (data.get("models") or {}).items()
            },
            evidence=Evidence.from_json(data.get("evidence") or {}),
            ttft_histogram=data.get("ttft_histogram") or {},
            waterfall=_waterfall(data.get("waterfall")),
            excluded_open=int(data.get("excluded_open", 0)),
            excluded_warmup=int(data.get("excluded_warmup", 0)),
            orphans=int(data.get("orphans", 0)),
            warnings=[str(w) for w in data.get("warnings") or []],
            run=data.get("run"),
            jaeger_url=data.get("jaeger_url"),
            samples=data.get("samples") or {},
            generated_at=str(data.get("generated_at", "")),
            llmtrace_version=str(data.get("llmtrace_version", "")),
        )


def _dist_json(value: Distribution | None) -> dict[str, Any] | None:
    return None if value is None else value.to_json()


def _dist(data: dict[str, Any] | None) -> Distribution | None:
    return None if not data else Distribution.from_json(data)


def _waterfall_json(waterfall: Waterfall) -> dict[str, Any]:
    return {
        "trace_id": waterfall.trace_id,
        "duration": waterfall.duration,
        "truncated": waterfall.truncated,
        "spans": [
            {
                "name": span.name,
                "stage": span.stage,
                "start": span.start,
                "duration": span.duration,
                "depth": span.depth,
                "service": span.service,
            }
            for span in waterfall.spans
        ],
        "critical_path": [list(segment) for segment in waterfall.critical_path],
    }


def _waterfall(data: dict[str, Any] | None) -> Waterfall | None:
    if not data:
        return None
    return Waterfall(
        trace_id=str(data["trace_id"]),
        duration=float(data["duration"]),
        truncated=bool(data.get("truncated", False)),
        spans=[
            WaterfallSpan(
                name=str(s["name"]),
                stage=str(s["stage"]),
                start=float(s["start"]),
                duration=float(s["duration"]),
                depth=int(s["depth"]),
                service=s.get("service"),
            )
            for s in data.get("spans", [])
        ],
        critical_path=[(str(s), float(a), float(b)) for s, a, b in data.get("critical_path", [])],
    )


def load_report_file(path: Path) -> Report | None:
    """A saved JSON report at ``path``, or None when the file holds traces instead."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return None
    if b'"llmtrace.report/' not in head:
        return None
    try:
        return Report.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError) as exc:
        from llmtrace.errors import SourceError

        raise SourceError(f"{path}: not a readable llmtrace report ({exc})") from None


# --- building ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _TraceInfo:
    """What the report shows of one trace besides its times."""

    trace_id: str
    root: str
    orphan: bool


def _no_trace(index: int) -> Any:
    raise IndexError(index)


@dataclass(slots=True)
class _Accumulator:
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
    unclaimed: dict[str, float] = field(default_factory=dict)
    excluded_warmup: int = 0
    info: Callable[[int], _TraceInfo] = _no_trace
    # the i-th trace as Python objects (for the waterfall of the slowest one)
    full_trace: Callable[[int], Trace] = _no_trace


def _collect(traceset: TraceSet, run: str | None) -> _Accumulator:
    if traceset.native is not None:
        return _collect_native(traceset.native, run)
    acc = _Accumulator()
    unclaimed = acc.unclaimed
    kept: list[Trace] = []
    rows: list[dict[str, float]] = []
    for trace in traceset.traces:
        facts = root_facts(trace)
        if facts.warmup:
            acc.excluded_warmup += 1
            continue
        if run is not None and facts.bench_run != run:
            continue
        phases: dict[int, ModelPhases] = {}
        stages: dict[str, float] = {}
        for segment in critical_path(trace, phases):
            seconds = (segment.end - segment.start) / NANOS
            stage = segment.stage
            stages[stage] = stages.get(stage, 0.0) + seconds
            if stage == "other":
                unclaimed[segment.span] = unclaimed.get(segment.span, 0.0) + seconds
        acc.sink.add_trace(trace, phases)
        kept.append(trace)
        rows.append(stages)
        acc.durations.append(trace.duration)
        acc.bench_runs.append(facts.bench_run)
        acc.concurrency.append(facts.bench_concurrency)
        acc.question_sets.append(facts.bench_question_set_hash)
    acc.columns = _stage_columns(rows)
    acc.orphans = sum(1 for trace in kept if trace.orphan)
    if kept:
        acc.started = min(trace.root.start for trace in kept)
        acc.ended = max(trace.root.end for trace in kept)
    acc.info = lambda i: _TraceInfo(kept[i].trace_id, kept[i].root.name, kept[i].orphan)
    acc.full_trace = kept.__getitem__
    return acc


def _collect_native(traces: NativeTraces, run: str | None) -> _Accumulator:
    """The same results from the native reader (see ``analysis.native``)."""
    got = traces.collect(run)
    selected = traces.selected
    chosen = got.chosen

    def info(i: int) -> _TraceInfo:
        trace_id, _, orphan, root = selected[chosen[i]]
        return _TraceInfo(trace_id, root, orphan)

    return _Accumulator(
        durations=got.durations,
        columns=got.columns,
        bench_runs=got.bench_runs,
        concurrency=got.concurrency,
        question_sets=got.question_sets,
        orphans=got.orphans,
        started=got.started,
        ended=got.ended,
        sink=got.sink,
        unclaimed=got.unclaimed,
        excluded_warmup=got.excluded_warmup,
        info=info,
        full_trace=lambda i: traces.trace(chosen[i]),
    )


def _stage_columns(rows: list[dict[str, float]]) -> dict[str, list[float]]:
    present = {stage for row in rows for stage, seconds in row.items() if seconds > 0}
    return {stage: [row.get(stage, 0.0) for row in rows] for stage in sc.STAGES if stage in present}


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _evidence(acc: _Accumulator) -> Evidence:
    sink = acc.sink
    calls: list[ModelCall] = sink.model_calls
    evidence = Evidence(model_calls=len(calls))
    if acc.durations:
        evidence.model_calls_per_trace = len(calls) / len(acc.durations)
    evidence.input_tokens_mean = _mean(
        [c.input_tokens for c in calls if c.input_tokens is not None]
    )
    evidence.output_tokens_mean = _mean(
        [c.output_tokens for c in calls if c.output_tokens is not None]
    )
    evidence.output_tokens_per_second_mean = _mean(
        [c.output_tokens_per_second for c in calls if c.output_tokens_per_second]
    )
    evidence.max_tokens_mean = _mean([c.max_tokens for c in calls if c.max_tokens is not None])
    evidence.non_streamed_calls = sum(1 for c in calls if c.streamed is False)
    evidence.length_finished_calls = sum(1 for c in calls if "length" in c.finish_reasons)
    connects = [c.connect for c in calls if c.connect is not None and c.connect > 0]
    evidence.new_connection_calls = len(connects)
    evidence.connect_mean = _mean(connects)
    joined = [c for c in calls if c.server_joined]
    evidence.server_joined_calls = len(joined)
    evidence.server_queue_mean = _mean([c.queue for c in joined])
    evidence.retrieval_calls = max(len(sink.retrieval_returned), len(sink.retrieval_top_k))
    evidence.retrieval_returned_mean = _mean([float(n) for n in sink.retrieval_returned])
    evidence.retrieval_top_k_mean = _mean([float(n) for n in sink.retrieval_top_k])
    evidence.rerank_inputs_mean = _mean([float(n) for n in sink.rerank_inputs])
    evidence.embedding_inputs_mean = _mean([float(n) for n in sink.embedding_inputs])
    evidence.prompt_chars_mean = _mean([float(n) for n in sink.prompt_chars])
    prompt_hashes = [c.input_hash for c in calls if c.input_hash is not None]
    evidence.hashed_prompts = len(prompt_hashes)
    evidence.repeated_prompts = len(prompt_hashes) - len(set(prompt_hashes))
    query_hashes = sink.retrieval_query_hashes
    evidence.hashed_queries = len(query_hashes)
    evidence.repeated_queries = len(query_hashes) - len(set(query_hashes))
    if sink.tool_durations:
        name, durations = max(sink.tool_durations.items(), key=lambda item: math.fsum(item[1]))
        evidence.slowest_tool = {"name": name, "mean": _mean(durations), "calls": len(durations)}
    if acc.unclaimed and acc.durations:
        ranked = sorted(acc.unclaimed.items(), key=lambda item: item[1], reverse=True)[:3]
        evidence.unclaimed_spans = [
            {"name": name, "mean": total / len(acc.durations)} for name, total in ranked
        ]
    return evidence


def _models(calls: list[ModelCall]) -> dict[str, ModelUsage]:
    by_model: dict[str, list[ModelCall]] = {}
    for call in calls:
        by_model.setdefault(call.model, []).append(call)
    return {
        model: ModelUsage(
            calls=len(group),
            input_tokens=distribution(
                [c.input_tokens for c in group if c.input_tokens is not None]
            ),
            output_tokens=distribution(
                [c.output_tokens for c in group if c.output_tokens is not None]
            ),
            time_to_first_token=distribution(
                [c.time_to_first_token for c in group if c.time_to_first_token is not None]
            ),
            output_tokens_per_second=distribution(
                [c.output_tokens_per_second for c in group if c.output_tokens_per_second]
            ),
        )
        for model, group in sorted(by_model.items(), key=lambda item: -len(item[1]))
    }


def _tail(durations: list[float], columns: dict[str, list[float]], p95: float) -> Tail | None:
    tail_index = [i for i, d in enumerate(durations) if d > p95]
    if not tail_index:
        return None
    order = sorted(range(len(durations)), key=durations.__getitem__)
    # The "median trace" is the middle fifth of traces by end-to-end time (one trace at least),
    # so a single odd trace at the median does not decide the comparison.
    width = max(1, len(order) // 5)
    first = max(0, (len(order) - width) // 2)
    median_index = order[first : first + width]
    growth = {}
    for stage, values in columns.items():
        tail_mean = math.fsum(values[i] for i in tail_index) / len(tail_index)
        median_mean = math.fsum(values[i] for i in median_index) / len(median_index)
        growth[stage] = tail_mean - median_mean
    stage = max(growth, key=growth.__getitem__)
    return Tail(
        stage=stage,
        growth=growth[stage],
        threshold=p95,
        traces=len(tail_index),
        tail_mean=math.fsum(durations[i] for i in tail_index) / len(tail_index),
        median_mean=math.fsum(durations[i] for i in median_index) / len(median_index),
        stages=growth,
    )


def effective_stages(root: Span) -> dict[int, str]:
    """Each span's stage after inheritance (keyed by ``id(span)``); model calls show ``ttft``."""
    result: dict[int, str] = {}
    stack: list[tuple[Span, str]] = [(root, "other")]
    while stack:
        span, inherited = stack.pop()
        stage = declared_stage(span) or inherited
        if is_model_call(span):
            stage = sc.LLM_STAGE
        result[id(span)] = stage
        stack.extend((child, stage) for child in span.children)
    return result


def waterfall(trace: Trace) -> Waterfall:
    """The slowest trace's spans on one time axis, with its critical path by stage."""
    root = trace.root
    stages = effective_stages(root)
    rows: list[WaterfallSpan] = []
    stack: list[tuple[Span, int]] = [(root, 0)]
    while stack and len(rows) < MAX_WATERFALL_SPANS:
        span, depth = stack.pop()
        rows.append(
            WaterfallSpan(
                name=span.name,
                stage=stages[id(span)],
                start=(span.start - root.start) / NANOS,
                duration=max(span.duration, 0.0),
                depth=depth,
                service=span.service,
            )
        )
        children = sorted(span.children, key=lambda child: child.start, reverse=True)
        stack.extend((child, depth + 1) for child in children)
    path = [
        (s.stage, (s.start - root.start) / NANOS, (s.end - root.start) / NANOS)
        for s in critical_path(trace)
    ]
    return Waterfall(trace.trace_id, trace.duration, rows, path, truncated=bool(stack))


def _samples(durations: list[float], columns: dict[str, list[float]]) -> dict[str, Any]:
    index = list(range(len(durations)))
    if len(index) > MAX_SAMPLES:
        # A fixed seed keeps a saved report reproducible; compare bootstraps from these.
        index = sorted(random.Random(0).sample(index, MAX_SAMPLES))
    return {
        "end_to_end": [round(durations[i], 6) for i in index],
        "stages": {
            stage: [round(values[i], 6) for i in index] for stage, values in columns.items()
        },
    }


def _run_metadata(
    acc: _Accumulator, run: str | None, calls: list[ModelCall]
) -> dict[str, Any] | None:
    names = {name for name in acc.bench_runs if name}
    if run is None and len(names) != 1:
        return None
    name = run if run is not None else next(iter(names))
    concurrency = Counter(value for value in acc.concurrency if value)
    question_sets = Counter(value for value in acc.question_sets if value)
    models = Counter(call.model for call in calls)
    return {
        "name": name,
        "question_set_hash": question_sets.most_common(1)[0][0] if question_sets else None,
        "concurrency": concurrency.most_common(1)[0][0] if concurrency else None,
        "model": models.most_common(1)[0][0] if models else None,
        "started_at": _iso(acc.started) if acc.started is not None else None,
        "ended_at": _iso(acc.ended) if acc.ended is not None else None,
    }


def _iso(nanos: int) -> str:
    return datetime.fromtimestamp(nanos / NANOS, UTC).isoformat()


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("llmtrace")
    except Exception:
        return "unknown"


def build_report(traceset: TraceSet, *, run: str | None = None) -> Report:
    """Statistics, bottleneck, tail and advice for every complete trace in ``traceset``.

    ``run`` keeps only the traces of one benchmark run (spans with ``llmtrace.bench.run``).
    Warm-up requests of a benchmark (``llmtrace.bench.warmup``) are left out and counted.
    """
    with cyclic_gc_paused():
        acc = _collect(traceset, run)
    columns = acc.columns
    end_to_end = distribution(acc.durations)
    stages: dict[str, StageSummary] = {}
    for stage, values in columns.items():
        summary = distribution(values)
        assert summary is not None  # a present stage has values
        share = summary.mean / end_to_end.mean if end_to_end and end_to_end.mean > 0 else 0.0
        # stage times are never negative: the traces with time in it are those without a zero
        stages[stage] = StageSummary(summary, share, len(values) - values.count(0.0))
    calls = acc.sink.model_calls
    ttfts = [c.time_to_first_token for c in calls if c.time_to_first_token is not None]
    evidence = _evidence(acc)
    tail = _tail(acc.durations, columns, end_to_end.p95) if end_to_end else None
    bottleneck = None
    if stages:
        top = max(stages, key=lambda stage: stages[stage].share)
        advice = advise_stage(_figures(top, stages[top]), evidence)
        if tail is not None and tail.stage != top and tail.stage in stages:
            for line in advise_stage(_figures(tail.stage, stages[tail.stage]), evidence):
                advice.append(f"Slowest 5% ({tail.stage}): {line}")
        advice.extend(advise_caching(evidence))
        bottleneck = Bottleneck(top, stages[top].share, advice)
    order = sorted(range(len(acc.durations)), key=acc.durations.__getitem__, reverse=True)
    jaeger = traceset.jaeger_url
    slowest = [_slow_trace(acc, i, jaeger) for i in order[:SLOWEST]]
    return Report(
        source=traceset.source,
        service=traceset.service,
        traces=len(acc.durations),
        end_to_end=end_to_end,
        stages=stages,
        ttft=distribution(ttfts),
        bottleneck=bottleneck,
        tail=tail,
        slowest=slowest,
        generation=distribution(
            [c.generation_time for c in calls if c.generation_time is not None]
        ),
        output_tokens_per_second=distribution(
            [c.output_tokens_per_second for c in calls if c.output_tokens_per_second]
        ),
        models=_models(calls),
        evidence=evidence,
        ttft_histogram=histogram(ttfts),
        waterfall=waterfall(acc.full_trace(order[0])) if order else None,
        excluded_open=traceset.excluded_open,
        excluded_warmup=acc.excluded_warmup,
        orphans=acc.orphans,
        warnings=list(traceset.warnings),
        run=_run_metadata(acc, run, calls),
        jaeger_url=jaeger,
        samples=_samples(acc.durations, columns),
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        llmtrace_version=_version(),
    )


def _slow_trace(acc: _Accumulator, i: int, jaeger: str | None) -> SlowTrace:
    info = acc.info(i)
    stages = {stage: values[i] for stage, values in acc.columns.items() if values[i] > 0}
    return SlowTrace(
        trace_id=info.trace_id,
        duration=acc.durations[i],
        root=info.root,
        stages=dict(sorted(stages.items(), key=lambda item: -item[1])),
        orphan=info.orphan,
        url=f"{jaeger}/trace/{info.trace_id}" if jaeger else None,
    )


def _figures(stage: str, summary: StageSummary) -> StageFigures:
    return StageFigures(stage, summary.distribution.mean, summary.distribution.p95, summary.share)
