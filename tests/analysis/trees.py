"""Hand-built trace trees for breakdown and report tests (times in milliseconds)."""

from __future__ import annotations

import itertools
from typing import Any

from llmtrace import semconv as sc
from llmtrace.analysis.model import KIND_INTERNAL, NANOS, Span, Trace
from llmtrace.analysis.otlp import link_children

T0 = 1_700_000_000 * NANOS
_ids = itertools.count(1)


def at(milliseconds: float) -> int:
    return T0 + round(milliseconds * 1_000_000)


class Tree:
    """Spans of one trace; ``add`` returns the new span's id for use as a parent."""

    def __init__(self, trace_id: str | None = None) -> None:
        self.trace_id = trace_id or f"{next(_ids):032x}"
        self.spans: dict[str, Span] = {}

    def add(
        self,
        name: str,
        start: float,
        end: float | None,
        *,
        parent: str | None = None,
        stage: str | None = None,
        kind: int = KIND_INTERNAL,
        offset_ns: int = 0,
        service: str = "svc",
        **attributes: Any,
    ) -> str:
        span_id = f"{next(_ids):016x}"
        attrs = {key.replace("__", "."): value for key, value in attributes.items()}
        if stage is not None:
            attrs[sc.STAGE] = stage
        self.spans[span_id] = Span(
            span_id=span_id,
            parent_id=parent,
            name=name,
            kind=kind,
            start=at(start) + offset_ns,
            end=0 if end is None else at(end) + offset_ns,
            attributes=attrs,
            service=service,
        )
        return span_id

    def traces(self) -> list[Trace]:
        roots = link_children(self.spans)
        return [Trace(self.trace_id, root, orphan=root.parent_id is not None) for root in roots]

    def trace(self) -> Trace:
        (only,) = self.traces()
        return only
