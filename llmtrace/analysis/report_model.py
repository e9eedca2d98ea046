"""The report's data model: per-stage summaries, models, the tail, the slowest trace's waterfall,
advice, the traces that show each finding, and the versioned JSON they are saved as (schema
``llmtrace.report/1``).

Renderers and ``compare`` read these; only :mod:`llmtrace.analysis.report` builds them from
traces. ``Report.from_json`` reads a saved report back, so one can be rendered or compared later
without its traces.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llmtrace._urls import jaeger_trace_url
from llmtrace.analysis.advice import Evidence
from llmtrace.analysis.histograms import Buckets
from llmtrace.analysis.stats import Distribution

SCHEMA = "llmtrace.report/1"
END_TO_END = "end_to_end"  # the row of whole requests, beside the stages'


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
class UserPerceivedTTFT:
    """When a bench client first saw streamed answers (``llmtrace bench --url``), next to the
    model's time to first token inside the service.

    What the user waits for is the first SSE event, or the first body byte of a chunked answer;
    ``service_adds_p50``/``_p95`` is that minus the model's TTFT at the same percentile: what the
    service (its steps before the model call, and the transport) adds before the user sees
    anything. bench records the client's times on its request spans
    (``llmtrace.client.time_to_first_byte``/``_event``), so a report of its traces has them too.
    """

    requests: int
    first_byte: Distribution | None
    first_event: Distribution | None
    model_ttft: Distribution | None
    service_adds_p50: float | None
    service_adds_p95: float | None

    @property
    def user_sees(self) -> Distribution | None:
        return self.first_event or self.first_byte

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "first_byte": _dist_json(self.first_byte),
            "first_event": _dist_json(self.first_event),
            "model_ttft": _dist_json(self.model_ttft),
            "service_adds_p50": self.service_adds_p50,
            "service_adds_p95": self.service_adds_p95,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UserPerceivedTTFT:
        def seconds(key: str) -> float | None:
            value = data.get(key)
            return None if value is None else float(value)

        return cls(
            requests=int(data.get("requests", 0)),
            first_byte=_dist(data.get("first_byte")),
            first_event=_dist(data.get("first_event")),
            model_ttft=_dist(data.get("model_ttft")),
            service_adds_p50=seconds("service_adds_p50"),
            service_adds_p95=seconds("service_adds_p95"),
        )


@dataclass(slots=True)
class TraceExemplar:
    """One request the report names: its trace id, end-to-end time, root span, the time of each
    stage on its critical path (largest first), and its page in Jaeger when a Jaeger is known."""

    trace_id: str
    duration: float
    root: str
    stages: dict[str, float]
    orphan: bool = False
    url: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "duration": self.duration,
            "root": self.root,
            "stages": dict(self.stages),
            "orphan": self.orphan,
            "url": self.url,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TraceExemplar:
        url = data.get("url")
        return cls(
            trace_id=str(data["trace_id"]),
            duration=float(data["duration"]),
            root=str(data.get("root", "")),
            stages={k: float(v) for k, v in (data.get("stages") or {}).items()},
            orphan=bool(data.get("orphan", False)),
            url=None if url is None else str(url),
        )


@dataclass(slots=True)
class Bottleneck:
    stage: str
    share: float
    advice: list[str]
    # where the stage's time was spent when the critical paths cross services: the service
    # holding most of it, and its part of the stage's time (None, 0.0: one service)
    service: str | None = None
    service_share: float = 0.0


@dataclass(slots=True)
class ServiceSummary:
    """One service's part of the critical path: its time per request, that time's share of the
    mean end-to-end time, the traces whose path it was on, and its stages (shares of the
    end-to-end time too, so a service's stages add up to its share)."""

    distribution: Distribution
    share: float
    traces: int
    stages: dict[str, StageSummary]

    def to_json(self) -> dict[str, Any]:
        data = StageSummary(self.distribution, self.share, self.traces).to_json()
        data["stages"] = {stage: summary.to_json() for stage, summary in self.stages.items()}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServiceSummary:
        summary = StageSummary.from_json(data)
        stages = {
            str(stage): StageSummary.from_json(item)
            for stage, item in (data.get("stages") or {}).items()
        }
        return cls(summary.distribution, summary.share, summary.traces, stages)


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
class Group:
    """The traces whose root carries one value of the ``--group-by`` attribute."""

    traces: int
    end_to_end: Distribution | None
    stages: dict[str, StageSummary]  # the same per-stage schema as the whole report's

    def to_json(self) -> dict[str, Any]:
        return {
            "traces": self.traces,
            "end_to_end": _dist_json(self.end_to_end),
            "stages": {stage: summary.to_json() for stage, summary in self.stages.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Group:
        return cls(
            traces=int(data.get("traces", 0)),
            end_to_end=_dist(data.get("end_to_end")),
            stages={
                stage: StageSummary.from_json(summary)
                for stage, summary in (data.get("stages") or {}).items()
            },
        )


@dataclass(slots=True)
class Grouping:
    """``--group-by KEY``: a stage table per value, the largest groups first, the rest counted."""

    key: str
    groups: dict[str, Group]
    groups_left_out: int = 0
    traces_left_out: int = 0
    traces_without_value: int = 0  # roots without the attribute (or not a string)


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
    slowest: list[TraceExemplar]
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
    grouping: Grouping | None = None
    filters: dict[str, str] = field(default_factory=dict)  # --filter KEY=VALUE, on root spans
    # bench --url against a streaming endpoint: from its request spans, or its own measurements
    user_ttft: UserPerceivedTTFT | None = None
    # spans per instrumentation recognised in the source, and spans no stage was found for
    instrumentations: dict[str, int] = field(default_factory=dict)
    unassigned_spans: int = 0
    # The requests that show each row, keyed by stage and END_TO_END: for a stage, those where it
    # took longest; for END_TO_END, the slowest at or above the end-to-end P95.
    exemplars: dict[str, list[TraceExemplar]] = field(default_factory=dict)
    # A report read from histograms (Prometheus) instead of traces: each row's summed histogram,
    # keyed like ``exemplars`` (a stage's with its requests without the stage as zeros), which
    # ``compare`` tests; and where its figures came from (source, window, the bucket of each).
    histograms: dict[str, Buckets] = field(default_factory=dict)
    figures_from: dict[str, Any] | None = None
    # the critical path by service, largest share first; empty when it never leaves one service
    services: dict[str, ServiceSummary] = field(default_factory=dict)

    @property
    def bottleneck_exemplars(self) -> list[TraceExemplar]:
        """The requests where the bottleneck stage took longest."""
        return self.exemplars.get(self.bottleneck.stage, []) if self.bottleneck else []

    @property
    def slowest_exemplars(self) -> list[TraceExemplar]:
        """The slowest requests, at or above the end-to-end P95."""
        return self.exemplars.get(END_TO_END, [])

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
                "service": self.bottleneck.service,
                "service_share": self.bottleneck.service_share,
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
            "slowest": [slow.to_json() for slow in self.slowest],
            "exemplars": {
                row: [exemplar.to_json() for exemplar in traces]
                for row, traces in self.exemplars.items()
            },
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
            "filters": dict(self.filters),
            "user_ttft": None if self.user_ttft is None else self.user_ttft.to_json(),
            "instrumentations": dict(self.instrumentations),
            "unassigned_spans": self.unassigned_spans,
            # --group-by: null without it; "groups" is keyed by value, largest first
            "group_by": None
            if self.grouping is None
            else {
                "key": self.grouping.key,
                "groups_left_out": self.grouping.groups_left_out,
                "traces_left_out": self.grouping.traces_left_out,
                "traces_without_value": self.grouping.traces_without_value,
            },
            "groups": None
            if self.grouping is None
            else {value: group.to_json() for value, group in self.grouping.groups.items()},
            "services": {name: summary.to_json() for name, summary in self.services.items()},
            **self._histograms_json(),
        }

    def _histograms_json(self) -> dict[str, Any]:
        """``histograms`` and ``figures_from``, in a report read from histograms only."""
        if not self.histograms and self.figures_from is None:
            return {}
        return {
            "histograms": {row: buckets.to_json() for row, buckets in self.histograms.items()},
            "figures_from": self.figures_from,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        schema = data.get("schema")
        if schema != SCHEMA:
            raise ValueError(f"not an llmtrace report (schema {schema!r}, expected {SCHEMA!r})")
        bottleneck = data.get("bottleneck")
        tail = data.get("tail")
        group_by = data.get("group_by")
        grouping = None
        if group_by:
            grouping = Grouping(
                key=str(group_by["key"]),
                groups={
                    str(value): Group.from_json(group)
                    for value, group in (data.get("groups") or {}).items()
                },
                groups_left_out=int(group_by.get("groups_left_out", 0)),
                traces_left_out=int(group_by.get("traces_left_out", 0)),
                traces_without_value=int(group_by.get("traces_without_value", 0)),
            )
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
                None if bottleneck.get("service") is None else str(bottleneck["service"]),
                float(bottleneck.get("service_share", 0.0)),
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
            slowest=[TraceExemplar.from_json(item) for item in data.get("slowest") or []],
            exemplars={
                str(row): [TraceExemplar.from_json(item) for item in traces or []]
                for row, traces in (data.get("exemplars") or {}).items()
            },
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
            grouping=grouping,
            filters={str(k): str(v) for k, v in (data.get("filters") or {}).items()},
            user_ttft=UserPerceivedTTFT.from_json(data["user_ttft"])
            if data.get("user_ttft")
            else None,
            instrumentations={
                str(k): int(v) for k, v in (data.get("instrumentations") or {}).items()
            },
            unassigned_spans=int(data.get("unassigned_spans", 0)),
            histograms={
                str(row): Buckets.from_json(buckets)
                for row, buckets in (data.get("histograms") or {}).items()
            },
            figures_from=data.get("figures_from"),
            services={
                str(name): ServiceSummary.from_json(item)
                for name, item in (data.get("services") or {}).items()
            },
        )


def linked(report: Report, jaeger_url: str) -> Report:
    """``report`` with every trace it names linked to its page in the Jaeger UI at
    ``jaeger_url``; a link the report already has is kept (it names the Jaeger it was read
    from)."""

    def link(traces: list[TraceExemplar]) -> list[TraceExemplar]:
        return [
            t if t.url else replace(t, url=jaeger_trace_url(jaeger_url, t.trace_id)) for t in traces
        ]

    return replace(
        report,
        jaeger_url=report.jaeger_url or jaeger_url.rstrip("/"),
        slowest=link(report.slowest),
        exemplars={row: link(traces) for row, traces in report.exemplars.items()},
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
