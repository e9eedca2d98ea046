"""Trace trees as plain data: what the parser produces and every analysis step reads."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmtrace.analysis.collect import Collector

# OTLP SpanKind values (the protobuf enum; JSON may carry the int or its name).
KIND_UNSPECIFIED = 0
KIND_INTERNAL = 1
KIND_SERVER = 2
KIND_CLIENT = 3
KIND_PRODUCER = 4
KIND_CONSUMER = 5

NANOS = 1_000_000_000
# Most spans are leaves: they share one empty tuple instead of each holding an empty list.
NO_CHILDREN: tuple[Span, ...] = ()


@dataclass(slots=True, eq=False)
class Span:
    """One finished (or still open) span; times are unix nanoseconds on the emitting host's clock."""

    span_id: str
    parent_id: str | None
    name: str
    kind: int
    start: int
    end: int
    attributes: dict[str, Any]
    service: str | None = None
    children: Sequence[Span] = NO_CHILDREN

    @property
    def duration(self) -> float:
        """Seconds between start and end (negative for an invalid end)."""
        return (self.end - self.start) / NANOS

    def walk(self) -> list[Span]:
        """This span and all its descendants, parents before children, siblings by start."""
        out: list[Span] = []
        stack = [self]
        while stack:
            span = stack.pop()
            out.append(span)
            if span.children:
                stack.extend(sorted(span.children, key=_start_time, reverse=True))
        return out


def attach(parent: Span, span: Span) -> None:
    """Make ``span`` a child of ``parent`` (the one way both trace builders link a tree: a file's
    spans in ``otlp.link_children``, a process's in ``request_metrics.local_trace``). A child still
    open when its trace was exported claims no time of its own."""
    if span.end <= 0 or span.end < span.start:
        span.end = span.start
    children = parent.children
    if children:
        children.append(span)  # type: ignore[attr-defined]
    else:
        parent.children = [span]


def _start_time(span: Span) -> int:
    return span.start


@dataclass(slots=True, eq=False)
class Trace:
    """One request: a root span and its subtree.

    ``orphan`` marks a subtree whose parent span never arrived (not exported, dropped, or still
    open); it is analysed as a trace of its own so its time is not lost, and reported as such.
    """

    trace_id: str
    root: Span
    orphan: bool = False

    @property
    def duration(self) -> float:
        return self.root.duration

    @property
    def service(self) -> str | None:
        return self.root.service

    def spans(self) -> list[Span]:
        return self.root.walk()


class TraceSet:
    """Everything read from one source, ready for analysis.

    ``collector`` holds the traces in the reader's own form and hands the report its per-trace
    columns (see ``analysis.collect``); ``traces`` makes Python objects of them on first use.
    ``excluded_open`` counts traces left out because their root span has no valid end;
    ``warnings`` holds problems met while reading (a malformed line, with file and line number).
    """

    __slots__ = (
        "_traces",
        "collector",
        "excluded_open",
        "filters",
        "jaeger_url",
        "service",
        "source",
        "warnings",
    )

    def __init__(
        self,
        source: str,
        collector: Collector,
        service: str | None = None,
        excluded_open: int = 0,
        warnings: list[str] | None = None,
        jaeger_url: str | None = None,
    ) -> None:
        self.source = source
        self.collector = collector
        self._traces: list[Trace] | None = None
        self.service = service
        self.excluded_open = excluded_open
        self.warnings = warnings if warnings is not None else []
        self.jaeger_url = jaeger_url
        self.filters: dict[str, str] = {}  # root attributes every trace carries (--filter)

    @property
    def traces(self) -> list[Trace]:
        if self._traces is None:
            self._traces = self.collector.traces()
        return self._traces

    @property
    def orphans(self) -> int:
        return sum(1 for trace in self.traces if trace.orphan)

    @property
    def span_count(self) -> int:
        return sum(len(trace.spans()) for trace in self.traces)


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building or analysing many spans.

    Trace trees hold no reference cycles (children are lists, parents are ids), but with millions
    of live objects every full collection rescans them all: reading a large file spent about half
    its time in the collector.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
