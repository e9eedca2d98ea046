"""The native reader for trace files: ``llmtrace_native``, built from ``native/`` in Rust.

``llmtrace report`` on a file or directory reads, links and breaks down traces with it when it is
installed (``scripts/setup.sh`` builds it), about ten times faster than the Python path and in a
fraction of the memory: a day of traces is millions of spans. It implements the rules of
``otlp.py``, ``breakdown.py`` and ``evidence.py`` step for step; the Python code stays the
reference (and the path for Jaeger, whose answers are paged and small), and
``tests/analysis/test_native.py`` builds every report both ways and requires the same result.
A change to the rules is made in both places.

``LLMTRACE_NATIVE=0`` turns it off (the Python path is then used everywhere).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from llmtrace import semconv as sc
from llmtrace.analysis.collect import TraceColumns, TraceInfo
from llmtrace.analysis.evidence import FactSink, ModelCall
from llmtrace.analysis.model import Span, Trace
from llmtrace.analysis.otlp import link_children, stage_name

try:
    import llmtrace_native as _native
except ImportError:  # not built: the pure-Python path is used
    _native = None  # type: ignore[assignment]

_OFF = frozenset({"0", "false", "no", "off"})
_STAGE = sc.STAGE


def available() -> bool:
    """Whether trace files are read natively (installed, and not turned off)."""
    return _native is not None and os.environ.get("LLMTRACE_NATIVE", "").lower() not in _OFF


def is_whole_document(path: Path) -> bool:
    """A ``.json`` file holds whole JSON documents; everything else is OTLP JSON lines."""
    return path.suffix == ".json" or path.name.endswith(".json.gz")


class NativeTraces:
    """Traces read and linked by ``llmtrace_native``, kept in its compact form: a ``Collector``.

    The report asks for per-trace results (``collect``); Python ``Trace`` objects are made only
    when asked for (``trace``, ``traces``): the slowest trace's waterfall, or a caller that walks
    the spans itself.
    """

    def __init__(self, store: _native.TraceStore) -> None:
        self._store = store
        # (trace id, root span id, orphan, root name) per chosen trace
        self.selected = store.selected()
        self._trees: dict[str, list[Span]] = {}

    def collect(self, run: str | None) -> TraceColumns:
        """The breakdown and facts of the chosen traces (warm-up left out, only ``run``'s)."""
        traces, (calls, sizes, tools), unclaimed, excluded_warmup = self._store.collect(run)
        chosen, durations, columns, (runs, concurrency, question_sets), orphans, start, end = traces
        returned, top_k, query_hashes, rerank, embedding, prompt = sizes
        sink = FactSink(
            model_calls=list(map(ModelCall._make, calls)),
            retrieval_returned=returned,
            retrieval_top_k=top_k,
            retrieval_query_hashes=query_hashes,
            rerank_inputs=rerank,
            embedding_inputs=embedding,
            prompt_chars=prompt,
            tool_durations=dict(tools),
        )
        selected = self.selected

        def info(i: int) -> TraceInfo:
            trace_id, _, orphan, root = selected[chosen[i]]
            return TraceInfo(trace_id, root, orphan)

        return TraceColumns(
            durations=durations,
            columns=dict(columns),
            bench_runs=runs,
            concurrency=concurrency,
            question_sets=question_sets,
            orphans=orphans,
            started=start,
            ended=end,
            sink=sink,
            unclaimed=dict(unclaimed),
            excluded_warmup=excluded_warmup,
            info=info,
            full_trace=lambda i: self.trace(chosen[i]),
        )

    def trace(self, index: int) -> Trace:
        """The ``index``-th chosen trace as Python objects."""
        trace_id, root_id, orphan, *_ = self.selected[index]
        roots = self._trees.get(trace_id)
        if roots is None:
            spans: dict[str, Span] = {}
            # (span id, parent id, name, kind, start, end, attributes, service): a Span's fields
            for fields in self._store.trace_spans(index):
                span = Span(*fields)
                if _STAGE in span.attributes:
                    span.attributes[_STAGE] = stage_name(span.attributes[_STAGE])
                spans[span.span_id] = span
            roots = self._trees[trace_id] = link_children(spans)
        (root,) = [span for span in roots if span.span_id == root_id]
        return Trace(trace_id, root, orphan=orphan)

    def traces(self) -> list[Trace]:
        return [self.trace(index) for index in range(len(self.selected))]


def read_files(
    files: Iterable[Path],
    *,
    trace_id: str | None,
    service: str | None,
    since: int | None,
    until: int | None,
    limit: int | None,
) -> tuple[NativeTraces, int, list[str]]:
    """Read trace files natively; return the chosen traces, open traces left out, problems."""
    assert _native is not None
    store = _native.TraceStore()
    warnings: list[str] = []
    for file in files:
        warnings.extend(store.read_file(str(file), is_whole_document(file)))
    store.assemble(trace_id=trace_id, service=service, since=since, until=until, limit=limit)
    return NativeTraces(store), store.excluded_open, warnings
