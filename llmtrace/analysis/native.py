"""The native reader for trace files and Jaeger: ``llmtrace._native``, built from ``native/``.

``llmtrace report`` on a file, a directory or Jaeger's answers (OTLP JSON too) reads, links and
breaks down traces with it when it is
present: a wheel carries it, and an install from source builds it when Rust is there (see
pyproject.toml; without Rust the install leaves it out and never fails). It is several times
faster than the Python path and lighter on memory at scale (measured in benchmarks/README.md,
report_throughput.py and report_engines.py): a day of traces is millions of spans. It implements the rules of ``otlp.py``, ``breakdown.py`` and ``evidence.py`` step for
step; the Python code stays the reference, and ``tests/analysis/test_native.py`` builds every
report both ways and requires the same result. A change to the rules is made in both places;
the conventions of other instrumentations are one table (``conventions.py``) handed to the
native store when it is made.

``LLMTRACE_NATIVE=0`` turns it off (the Python path is then used everywhere).
``reader_notice()`` is the line ``llmtrace --version`` prints about which reader runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from llmtrace import semconv as sc
from llmtrace.analysis import conventions
from llmtrace.analysis.collect import TraceColumns, TraceInfo, service_columns
from llmtrace.analysis.evidence import FactSink, ModelCall
from llmtrace.analysis.model import Span, Trace
from llmtrace.analysis.otlp import link_children, stage_name
from llmtrace.options import native_reader_wanted

try:
    from llmtrace import _native
except ImportError:  # not built (an install from source without Rust): the Python path is used
    _native = None  # type: ignore[assignment]

_STAGE = sc.STAGE


def available() -> bool:
    """Whether trace files are read natively (installed, and not turned off)."""
    return _native is not None and native_reader_wanted()


def reader_notice() -> str:
    """One line saying which reader reads trace files, and why when it is not the native one."""
    if _native is None:
        return (
            "trace files are read by the pure-Python reader: this llmtrace was installed without "
            "its native reader (from source without Rust; a wheel has it)"
        )
    if not native_reader_wanted():
        return "trace files are read by the pure-Python reader (LLMTRACE_NATIVE is off)"
    return "trace files are read by the native reader"


def is_whole_document(path: Path) -> bool:
    """A ``.json`` file holds whole JSON documents; everything else is OTLP JSON lines."""
    return path.suffix == ".json" or path.name.endswith(".json.gz")


class NativeTraces:
    """Traces read and linked by ``llmtrace._native``, kept in its compact form: a ``Collector``.

    The report asks for per-trace results (``collect``); Python ``Trace`` objects are made only
    when asked for (``trace``, ``traces``): the slowest trace's waterfall, or a caller that walks
    the spans itself.
    """

    def __init__(self, store: _native.TraceStore) -> None:
        self._store = store
        self.selected = store.selected()
        self._trees: dict[str, list[Span]] = {}

    def collect(self, run: str | None, group_by: str | None = None) -> TraceColumns:
        """The breakdown and facts of the chosen traces (warm-up left out, only ``run``'s),
        and the root's ``group_by`` attribute per trace when given."""
        got = self._store.collect(run, group_by)
        families, unassigned = self._store.recognised()
        sink = FactSink(
            # flat tuples whose field order the native module names (MODEL_CALL_FIELDS)
            model_calls=list(map(ModelCall._make, got.model_calls)),
            retrieval_returned=got.retrieval_returned,
            retrieval_top_k=got.retrieval_top_k,
            retrieval_query_hashes=got.retrieval_query_hashes,
            rerank_inputs=got.rerank_inputs,
            embedding_inputs=got.embedding_inputs,
            prompt_chars=got.prompt_chars,
            tool_durations=dict(got.tool_durations),
            superseded_errors=got.superseded_errors,
        )
        selected = self.selected
        chosen = got.chosen

        def info(i: int) -> TraceInfo:
            trace = selected[chosen[i]]
            return TraceInfo(trace.trace_id, trace.root_name, trace.orphan)

        return TraceColumns(
            durations=got.durations,
            columns=dict(got.stages),
            bench_runs=got.bench_runs,
            concurrency=got.concurrency,
            question_sets=got.question_sets,
            orphans=got.orphans,
            started=got.started,
            ended=got.ended,
            sink=sink,
            unclaimed=dict(got.unclaimed),
            excluded_warmup=got.excluded_warmup,
            first_bytes=got.first_bytes,
            first_events=got.first_events,
            groups=got.groups,
            info=info,
            full_trace=lambda i: self.trace(chosen[i]),
            families=dict(families),
            unassigned_spans=unassigned,
            services=service_columns(
                [
                    (service, stage, index, seconds)
                    for service, stage, column in got.services
                    for index, seconds in enumerate(column)
                    if seconds > 0
                ],
                len(got.durations),
            ),
        )

    def trace(self, index: int) -> Trace:
        """The ``index``-th chosen trace as Python objects."""
        chosen = self.selected[index]
        roots = self._trees.get(chosen.trace_id)
        if roots is None:
            spans: dict[str, Span] = {}
            for record in self._store.trace_spans(index):
                span = Span(
                    span_id=record.span_id,
                    parent_id=record.parent_id,
                    name=record.name,
                    kind=record.kind,
                    start=record.start,
                    end=record.end,
                    attributes=record.attributes,
                    service=record.service,
                )
                if _STAGE in span.attributes:
                    span.attributes[_STAGE] = stage_name(span.attributes[_STAGE])
                spans[span.span_id] = span
            roots = self._trees[chosen.trace_id] = link_children(spans)
        (root,) = [span for span in roots if span.span_id == chosen.root_span_id]
        return Trace(chosen.trace_id, root, orphan=chosen.orphan)

    def traces(self) -> list[Trace]:
        return [self.trace(index) for index in range(len(self.selected))]


def new_store() -> _native.TraceStore:
    """An empty native store that applies the conventions table to every span it reads."""
    assert _native is not None
    return _native.TraceStore(conventions.native_table())


def assembled(
    store: _native.TraceStore,
    *,
    trace_id: str | None,
    service: str | None,
    since: int | None,
    until: int | None,
    limit: int | None,
    attributes: dict[str, str],
) -> NativeTraces:
    """The traces of ``store`` linked, and those passing the filters chosen (``_filter`` in
    sources.py: times in unix nanoseconds)."""
    store.assemble(
        trace_id=trace_id,
        service=service,
        since=since,
        until=until,
        limit=limit,
        attributes=list(attributes.items()),
    )
    return NativeTraces(store)


def read_files(
    files: Iterable[Path],
    *,
    trace_id: str | None,
    service: str | None,
    since: int | None,
    until: int | None,
    limit: int | None,
    attributes: dict[str, str],
) -> tuple[NativeTraces, int, list[str]]:
    """Read trace files natively; return the chosen traces, open traces left out, problems."""
    store = new_store()
    warnings: list[str] = []
    for file in files:
        warnings.extend(store.read_file(str(file), is_whole_document(file)))
    traces = assembled(
        store,
        trace_id=trace_id,
        service=service,
        since=since,
        until=until,
        limit=limit,
        attributes=attributes,
    )
    return traces, store.excluded_open, warnings
