"""LanceDB searches and writes as spans, on real embedded tables in temporary directories
(the synchronous ``lancedb.connect`` and the async ``lancedb.connect_async`` APIs)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import lancedb
import pytest
from lancedb.index import FTS
from opentelemetry import trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags

import llmtrace
from llmtrace import options, semconv
from llmtrace.analysis.breakdown import breakdown
from llmtrace.instrumentation.vectordb.lancedb import LanceDBInstrumentor
from tests.rag.spans_util import only
from tests.stores.conftest import assert_retrieval_span, instrumented_by

TABLE = "handbook"
ROWS = [
    {"id": 1, "vector": [1.0, 0.0, 0.0], "text": "refunds take five days"},
    {"id": 2, "vector": [0.0, 1.0, 0.0], "text": "shipping is free"},
    {"id": 3, "vector": [0.7, 0.7, 0.0], "text": "returns need a shipping label"},
]
QUERY = [0.9, 0.1, 0.0]


instrumented = instrumented_by(LanceDBInstrumentor)


@pytest.fixture
def table(tmp_path: Path, spans) -> Any:
    db = lancedb.connect(tmp_path / "lance")
    table = db.create_table(TABLE, data=ROWS)
    table.create_index("text", config=FTS())
    spans.clear()
    return table


def assert_retrieval(span: Any, operation: str) -> None:
    assert_retrieval_span(span, system="lancedb", source=TABLE, operation=operation)


def test_add_is_one_write_span_with_stage_other(tmp_path, spans) -> None:
    table = lancedb.connect(tmp_path / "lance").create_table(TABLE, data=ROWS[:1])
    spans.clear()

    table.add(ROWS[1:])

    # The synchronous table runs the async table's add on LanceDB's loop: still one span.
    span = only(spans.get_finished_spans(), f"add {TABLE}")
    assert len(spans.get_finished_spans()) == 1
    assert span.kind == SpanKind.CLIENT
    assert span.attributes[semconv.STAGE] == "other"
    assert span.attributes[semconv.DB_SYSTEM_NAME] == "lancedb"
    assert span.attributes[semconv.DB_OPERATION_NAME] == "add"
    assert span.attributes[semconv.DB_COLLECTION_NAME] == TABLE
    assert span.attributes[semconv.DB_OPERATION_BATCH_SIZE] == 2
    assert semconv.GEN_AI_OPERATION_NAME not in span.attributes


# (to_polars goes through to_arrow too; polars is not installed here.)
@pytest.mark.parametrize("terminal", ["to_list", "to_pandas", "to_arrow"])
def test_a_vector_search_is_one_retrieval_span_whatever_the_terminal(
    spans, table, terminal
) -> None:
    result = getattr(table.search(QUERY).limit(2), terminal)()

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert len(spans.get_finished_spans()) == 1
    assert_retrieval(span, "search")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(result) == 2


def test_without_a_limit_top_k_is_lancedbs_default_and_returned_what_came_back(
    spans, table
) -> None:
    rows = table.search(QUERY).to_list()

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 10
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 3


def test_a_batch_of_query_vectors_counts_totals(spans, table) -> None:
    rows = table.search([QUERY, [0.0, 1.0, 0.0]]).limit(1).to_list()

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert span.attributes[semconv.DB_OPERATION_BATCH_SIZE] == 2
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 2


def test_full_text_search(spans, table) -> None:
    rows = table.search("shipping", query_type="fts").limit(5).to_list()

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert_retrieval(span, "full_text_search")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 5
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 2


def test_a_hybrid_search_is_one_span_though_its_legs_run_on_threads(spans, table) -> None:
    rows = table.search(query_type="hybrid").vector(QUERY).text("shipping").limit(2).to_list()

    assert [span.name for span in spans.get_finished_spans()] == [f"retrieval {TABLE}"]
    (span,) = spans.get_finished_spans()
    assert_retrieval(span, "hybrid_search")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 2


def test_a_full_text_search_without_a_limit_has_lancedbs_default(spans, table) -> None:
    rows = table.search("shipping", query_type="fts").to_list()

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 10
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 2


def test_a_plain_scan_without_a_limit_records_no_top_k(spans, table) -> None:
    rows = table.search().to_list()

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert semconv.GEN_AI_RETRIEVAL_TOP_K not in span.attributes
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 3


def test_a_plain_scan_is_a_query(spans, table) -> None:
    rows = table.search().where("id > 1").limit(5).to_list()

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert_retrieval(span, "query")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 5
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 2


def test_merge_insert_is_a_write(spans, table) -> None:
    update = [{"id": 2, "vector": [0.0, 0.9, 0.1], "text": "shipping costs nothing"}]
    table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        [*update, {"id": 4, "vector": [0.0, 0.0, 1.0], "text": "new"}]
    )

    span = only(spans.get_finished_spans(), f"merge_insert {TABLE}")
    assert len(spans.get_finished_spans()) == 1
    assert span.attributes[semconv.STAGE] == "other"
    assert span.attributes[semconv.DB_OPERATION_BATCH_SIZE] == 2
    assert table.count_rows() == 4


def test_query_text_is_recorded_only_with_content_capture(spans, table, monkeypatch) -> None:
    table.search("shipping", query_type="fts").to_list()
    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert semconv.GEN_AI_RETRIEVAL_QUERY_TEXT not in span.attributes

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    options.reload()
    spans.clear()
    table.search("shipping", query_type="fts").to_list()
    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_QUERY_TEXT] == "shipping"


def test_an_error_keeps_its_type_and_message(spans, table) -> None:
    def failing() -> Any:
        return table.search(QUERY).where("no_such_column > 1").limit(1)

    with pytest.raises(Exception) as traced:
        failing().to_list()
    spans_after_traced = spans.get_finished_spans()
    with pytest.raises(Exception) as untraced:
        type(failing()).to_arrow.__wrapped__(failing())

    assert type(traced.value) is type(untraced.value)
    assert str(traced.value) == str(untraced.value)
    span = only(spans_after_traced, f"retrieval {TABLE}")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == type(traced.value).__qualname__


def test_suppressed_or_unsampled_searches_make_no_span(spans, table) -> None:
    with suppress_instrumentation():
        assert len(table.search(QUERY).limit(2).to_list()) == 2
    unsampled = NonRecordingSpan(SpanContext(0xABC, 0xDEF, False, TraceFlags(0)))
    with trace.use_span(unsampled):
        assert len(table.search(QUERY).limit(2).to_list()) == 2
        table.add([{"id": 9, "vector": [0.0, 0.0, 1.0], "text": "x"}])

    assert spans.get_finished_spans() == ()


def test_a_caught_failure_leaves_the_applications_span_unmarked(spans, table) -> None:
    with llmtrace.span("lookup", stage="retrieval"), contextlib.suppress(Exception):
        table.search(QUERY).where("no_such_column > 1").to_list()

    (span,) = spans.get_finished_spans()
    assert span.name == "lookup"
    assert span.status.status_code == StatusCode.UNSET
    assert span.attributes[semconv.DB_SYSTEM_NAME] == "lancedb"


def test_uninstrument_restores_every_original(spans, table) -> None:
    from lancedb.query import AsyncQueryBase, LanceVectorQueryBuilder
    from lancedb.table import AsyncTable, LanceTable

    LanceDBInstrumentor().uninstrument()
    try:
        for owner, method in (
            (LanceVectorQueryBuilder, "to_arrow"),
            (AsyncQueryBase, "to_arrow"),
            (LanceTable, "add"),
            (AsyncTable, "add"),
            (LanceTable, "_do_merge"),
        ):
            assert not hasattr(vars(owner)[method], "__wrapped__"), (owner, method)
        table.search(QUERY).limit(1).to_list()
        assert spans.get_finished_spans() == ()
    finally:
        LanceDBInstrumentor().instrument()
    table.search(QUERY).limit(1).to_list()
    assert len(spans.get_finished_spans()) == 1


async def test_the_async_api(tmp_path, spans) -> None:
    db = await lancedb.connect_async(tmp_path / "lance")
    table = await db.create_table(TABLE, data=ROWS[:1])
    await table.add(ROWS[1:])
    await table.create_index("text", config=FTS())

    nearest = await table.query().nearest_to(QUERY).limit(2).to_list()
    frame = await (await table.search(QUERY)).to_pandas()
    text = await table.query().nearest_to_text("shipping").limit(4).to_arrow()
    hybrid = await table.query().nearest_to(QUERY).nearest_to_text("shipping").limit(2).to_list()
    scan = await table.query().where("id > 2").to_list()
    with pytest.raises(Exception) as failure:
        await table.query().nearest_to(QUERY).where("no_such_column > 1").to_list()

    names = [span.name for span in spans.get_finished_spans()]
    assert names == [f"add {TABLE}"] + [f"retrieval {TABLE}"] * 6
    add, vector, default, fts, hybrid_span, plain, failed = spans.get_finished_spans()
    assert add.attributes[semconv.DB_OPERATION_BATCH_SIZE] == 2
    assert vector.attributes[semconv.DB_OPERATION_NAME] == "search"
    assert vector.attributes[semconv.RETRIEVAL_RETURNED] == len(nearest) == 2
    assert default.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 10
    assert default.attributes[semconv.RETRIEVAL_RETURNED] == len(frame) == 3
    assert fts.attributes[semconv.DB_OPERATION_NAME] == "full_text_search"
    assert fts.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 4
    assert fts.attributes[semconv.RETRIEVAL_RETURNED] == text.num_rows == 2
    # The hybrid query's legs run as tasks in its context: they report into its span.
    assert hybrid_span.attributes[semconv.DB_OPERATION_NAME] == "hybrid_search"
    assert hybrid_span.attributes[semconv.RETRIEVAL_RETURNED] == len(hybrid) == 2
    assert plain.attributes[semconv.DB_OPERATION_NAME] == "query"
    assert semconv.GEN_AI_RETRIEVAL_TOP_K not in plain.attributes
    assert plain.attributes[semconv.RETRIEVAL_RETURNED] == len(scan) == 1
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes[semconv.ERROR_TYPE] == type(failure.value).__qualname__


def test_the_report_shows_the_searches_as_retrieval(spans, table, report_stages) -> None:
    with llmtrace.span("answer"):
        table.search(QUERY).limit(2).to_list()
        table.search("shipping", query_type="fts").limit(2).to_list()

    assert report_stages(spans.get_finished_spans()).get("retrieval", 0.0) > 0.0


def test_init_instruments_lancedb_when_the_application_imports_it(
    tmp_path, run_auto_instrumented
) -> None:
    body = f"""
import lancedb
table = lancedb.connect(sys.argv[2]).create_table({TABLE!r}, data={ROWS!r})
table.add([{{"id": 4, "vector": [0.0, 0.0, 1.0], "text": "x"}}])
assert len(table.search({QUERY!r}).limit(2).to_list()) == 2
"""
    traces = run_auto_instrumented("lancedb", "lancedb", body, str(tmp_path / "lance"))

    roots = sorted(t.root.name for t in traces)
    assert roots == [f"add {TABLE}", f"retrieval {TABLE}"]
    (search,) = [t for t in traces if t.root.name == f"retrieval {TABLE}"]
    assert search.root.attributes[semconv.RETRIEVAL_RETURNED] == 2
    assert set(breakdown(search).stages) == {"retrieval"}
