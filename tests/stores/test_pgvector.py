"""pgvector searches through psycopg 3 as retrieval spans, against a real PostgreSQL with the
pgvector extension (started by the ``postgres`` fixture from the pgserver wheel).

Vectors are sent as text and cast (``%s::vector``): the ``pgvector`` Python package, which
registers a binary adapter, is not needed for the SQL to be a vector search.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.trace import NonRecordingSpan, SpanContext, StatusCode, TraceFlags
from psycopg import sql

import llmtrace
from llmtrace import semconv
from llmtrace.analysis.breakdown import breakdown
from llmtrace.instrumentation.vectordb import _spans
from llmtrace.instrumentation.vectordb.pgvector import PgVectorInstrumentor, vector_search
from tests.rag.spans_util import only
from tests.stores.conftest import assert_retrieval_span, instrumented_by

# Starts a PostgreSQL server (the session's postgres fixture).
pytestmark = pytest.mark.integration

TABLE = "handbook"
ROWS = [
    (1, "Refunds take 5 days.", "[1,0,0]"),
    (2, "Shipping is free.", "[0,1,0]"),
    (3, "Returns need a label.", "[0.7,0.7,0]"),
]
QUERY = "[0.9,0.1,0]"
SEARCH = f"SELECT id, body FROM {TABLE} ORDER BY embedding <-> %s::vector LIMIT %s"


instrumented = instrumented_by(PgVectorInstrumentor)


@pytest.fixture(scope="module")
def table(postgres: str) -> str:
    with psycopg.connect(postgres, autocommit=True) as connection:
        connection.execute(f"DROP TABLE IF EXISTS {TABLE}")
        connection.execute(
            f"CREATE TABLE {TABLE} (id integer PRIMARY KEY, body text, embedding vector(3))"
        )
        with connection.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {TABLE} VALUES (%s, %s, %s::vector)", ROWS)
        # pgvector has the L1 operator <+> from 0.7 on; pgserver ships 0.6.2, which has only the
        # function. Made here from that function, so the SQL is the same on either.
        connection.execute(
            """DO $$ BEGIN
                 IF NOT EXISTS (SELECT 1 FROM pg_operator WHERE oprname = '<+>') THEN
                   CREATE OPERATOR <+> (LEFTARG = vector, RIGHTARG = vector,
                                        FUNCTION = l1_distance, COMMUTATOR = '<+>');
                 END IF;
               END $$"""
        )
    return TABLE


@pytest.fixture
def connection(postgres: str, table: str, spans) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres, autocommit=True) as connection:
        spans.clear()
        yield connection


@pytest.mark.parametrize("operator", ["<->", "<=>", "<#>", "<+>"])
def test_a_query_ordered_by_a_distance_is_a_retrieval_span(spans, connection, operator) -> None:
    rows = connection.execute(
        f"SELECT id, body FROM {TABLE} ORDER BY embedding {operator} %s::vector LIMIT 2",
        (QUERY,),
    ).fetchall()

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert_retrieval_span(span, system="postgresql", source=TABLE, operation="SELECT")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 2


def test_a_limit_given_as_a_parameter_is_the_top_k(spans, connection) -> None:
    rows = connection.execute(SEARCH, (QUERY, 10)).fetchall()

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 10
    # What came back, not what was asked for: the table holds three rows.
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 3


def test_named_parameters_and_an_ordering_by_a_distance_alias(spans, connection) -> None:
    rows = connection.execute(
        f"SELECT id, embedding <=> %(query)s::vector AS distance FROM public.{TABLE}"
        " WHERE id <> %(skip)s ORDER BY distance LIMIT %(k)s",
        {"query": QUERY, "skip": 2, "k": 1},
    ).fetchall()

    span = only(spans.get_finished_spans(), f"retrieval public.{TABLE}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 1
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 1


def test_a_client_side_cursor_and_a_composed_query(spans, connection) -> None:
    query = sql.SQL("SELECT id FROM {} ORDER BY embedding <#> %s::vector LIMIT 2").format(
        sql.Identifier(TABLE)
    )
    with psycopg.ClientCursor(connection) as cursor:
        cursor.execute(query, (QUERY,))
        rows = cursor.fetchall()

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 2


def test_a_query_given_as_bytes(spans, connection) -> None:
    rows = connection.execute(SEARCH.encode(), (QUERY, 2)).fetchall()

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 2


def test_composed_and_bytes_statements_without_a_distance_make_no_span(spans, connection) -> None:
    composed = sql.SQL("SELECT id FROM {} WHERE id < %s ORDER BY id").format(sql.Identifier(TABLE))
    assert len(connection.execute(composed, (3,)).fetchall()) == 2
    assert len(connection.execute(f"SELECT id FROM {TABLE}".encode()).fetchall()) == 3

    assert spans.get_finished_spans() == ()


def test_a_raw_cursor_with_numbered_placeholders(spans, connection) -> None:
    with psycopg.RawCursor(connection) as cursor:
        cursor.execute(
            f"SELECT id FROM {TABLE} ORDER BY embedding <-> $1::vector LIMIT $2", (QUERY, 1)
        )
        assert len(cursor.fetchall()) == 1

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 1
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == 1


def test_a_server_side_cursor_records_the_request_but_no_returned_count(spans, postgres) -> None:
    with psycopg.connect(postgres) as connection, connection.cursor(name="nearest") as cursor:
        spans.clear()
        cursor.execute(SEARCH, (QUERY, 2))
        rows = cursor.fetchall()

    assert len(rows) == 2
    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    # The rows are fetched after execute() returns: a count taken then would be wrong.
    assert semconv.RETRIEVAL_RETURNED not in span.attributes


def test_in_pipeline_mode_the_returned_count_is_not_known_at_execute(spans, connection) -> None:
    with connection.pipeline(), connection.cursor() as cursor:
        cursor.execute(SEARCH, (QUERY, 3))
        rows = cursor.fetchall()

    assert len(rows) == 3
    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 3
    assert semconv.RETRIEVAL_RETURNED not in span.attributes


@pytest.mark.parametrize(
    "statement",
    [
        f"SELECT id, body FROM {TABLE} WHERE id = 1",
        f"SELECT count(*) FROM {TABLE}",
        f"UPDATE {TABLE} SET body = body WHERE id = 1",
        # A distance computed but not what the rows are ordered by: not a nearest-neighbour search.
        f"SELECT id, embedding <-> '{QUERY}'::vector FROM {TABLE} ORDER BY id LIMIT 2",
        f"SELECT id FROM {TABLE} WHERE body <> 'x <-> y' ORDER BY id",
    ],
)
def test_other_sql_makes_no_span(spans, connection, statement) -> None:
    connection.execute(statement)

    assert spans.get_finished_spans() == ()


def test_plain_sql_never_reaches_the_tracing_gate(spans, connection, monkeypatch) -> None:
    asked = []
    gate = _spans.should_trace
    monkeypatch.setattr(_spans, "should_trace", lambda: asked.append(1) or gate())

    connection.execute(f"SELECT id FROM {TABLE} WHERE id < %s", (3,))
    connection.execute(f"DELETE FROM {TABLE} WHERE id = %s", (-1,))
    assert asked == []

    connection.execute(SEARCH, (QUERY, 1))
    assert asked == [1]


def test_an_error_keeps_its_type_and_message(spans, connection) -> None:
    missing = "SELECT id FROM missing ORDER BY embedding <-> %s::vector LIMIT 1"
    with pytest.raises(psycopg.Error) as traced:
        connection.execute(missing, (QUERY,))
    with connection.cursor() as cursor, pytest.raises(psycopg.Error) as untraced:
        psycopg.Cursor.execute.__wrapped__(cursor, missing, (QUERY,))

    assert type(traced.value) is type(untraced.value) is psycopg.errors.UndefinedTable
    assert str(traced.value) == str(untraced.value)
    span = only(spans.get_finished_spans(), "retrieval missing")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == "UndefinedTable"


def test_suppressed_instrumentation_makes_no_span(spans, connection) -> None:
    with suppress_instrumentation():
        rows = connection.execute(SEARCH, (QUERY, 2)).fetchall()

    assert len(rows) == 2
    assert spans.get_finished_spans() == ()


def test_nothing_is_recorded_under_an_unsampled_parent(spans, connection) -> None:
    unsampled = NonRecordingSpan(SpanContext(0xABC, 0xDEF, False, TraceFlags(0)))
    with trace.use_span(unsampled):
        rows = connection.execute(SEARCH, (QUERY, 2)).fetchall()

    assert len(rows) == 2
    assert spans.get_finished_spans() == ()


def test_an_applications_retrieval_span_is_not_doubled(spans, connection) -> None:
    with llmtrace.span("lookup", stage="retrieval"):
        connection.execute(SEARCH, (QUERY, 2))

    (span,) = spans.get_finished_spans()
    assert span.name == "lookup"
    assert span.attributes[semconv.DB_SYSTEM_NAME] == "postgresql"
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == 2


def test_uninstrument_restores_the_cursors(spans, connection) -> None:
    replaced = psycopg.Cursor.execute, psycopg.AsyncCursor.execute, psycopg.ServerCursor.execute
    PgVectorInstrumentor().instrument()  # the instrumentor is a singleton: a no-op
    assert (psycopg.Cursor.execute, psycopg.AsyncCursor.execute) == replaced[:2]
    PgVectorInstrumentor().uninstrument()
    try:
        restored = psycopg.Cursor.execute, psycopg.AsyncCursor.execute, psycopg.ServerCursor.execute
        assert restored == tuple(method.__wrapped__ for method in replaced)
        assert not any(hasattr(method, "__wrapped__") for method in restored)
        connection.execute(SEARCH, (QUERY, 2))
        assert spans.get_finished_spans() == ()
    finally:
        PgVectorInstrumentor().instrument()
    connection.execute(SEARCH, (QUERY, 2))
    assert len(spans.get_finished_spans()) == 1


async def test_async_connection_and_cursor(spans, postgres, table) -> None:
    assert inspect.iscoroutinefunction(psycopg.AsyncCursor.execute)
    async with await psycopg.AsyncConnection.connect(postgres, autocommit=True) as connection:
        spans.clear()
        cursor = await connection.execute(SEARCH, (QUERY, 2))
        first = await cursor.fetchall()
        async with connection.cursor() as cursor:
            await cursor.execute(SEARCH, (QUERY, 5))
            second = await cursor.fetchall()
        await connection.execute(f"SELECT count(*) FROM {TABLE}")
        with pytest.raises(psycopg.errors.UndefinedTable):
            await connection.execute("SELECT 1 FROM nowhere ORDER BY v <-> %s LIMIT 1", (QUERY,))

    names = [span.name for span in spans.get_finished_spans()]
    assert names == [f"retrieval {TABLE}", f"retrieval {TABLE}", "retrieval nowhere"]
    small, large, failed = spans.get_finished_spans()
    assert small.attributes[semconv.RETRIEVAL_RETURNED] == len(first) == 2
    assert large.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 5
    assert large.attributes[semconv.RETRIEVAL_RETURNED] == len(second) == 3
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes[semconv.ERROR_TYPE] == "UndefinedTable"


async def test_async_server_side_cursor(spans, postgres, table) -> None:
    async with (
        await psycopg.AsyncConnection.connect(postgres) as connection,
        connection.cursor(name="nearest") as cursor,
    ):
        spans.clear()
        await cursor.execute(SEARCH, (QUERY, 1))
        assert len(await cursor.fetchall()) == 1

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 1


def _sqlalchemy_url(postgres: str) -> str:
    parts = psycopg.conninfo.conninfo_to_dict(postgres)
    return f"postgresql+psycopg://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}"


def _sqlalchemy_search(limit: int) -> Any:
    """A Core ``select`` ordered by ``<->`` (SQLAlchemy renders the limit as a parameter)."""
    import sqlalchemy as sa

    class Vector(sa.types.UserDefinedType[str]):
        cache_ok = True

        def get_col_spec(self, **kwargs: Any) -> str:
            return "vector(3)"

    documents = sa.table(TABLE, sa.column("id"), sa.column("embedding", Vector()))
    query_vector = sa.cast(sa.literal(QUERY), Vector())
    statement = (
        sa.select(documents.c.id)
        .order_by(documents.c.embedding.op("<->")(query_vector))
        .limit(limit)
    )
    return statement


def test_sqlalchemy_with_the_psycopg_driver(spans, postgres, table) -> None:
    sa = pytest.importorskip("sqlalchemy")
    engine = sa.create_engine(_sqlalchemy_url(postgres))
    statement = _sqlalchemy_search(2)
    with engine.connect() as connection:
        spans.clear()
        rows = connection.execute(statement).fetchall()
        text_rows = connection.execute(
            sa.text(f"SELECT id FROM {TABLE} ORDER BY embedding <=> CAST(:q AS vector) LIMIT :k"),
            {"q": QUERY, "k": 1},
        ).fetchall()
    engine.dispose()

    select, text = spans.get_finished_spans()
    assert select.name == text.name == f"retrieval {TABLE}"
    # SQLAlchemy sends the LIMIT as a named parameter (%(param_1)s).
    assert select.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert select.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 2
    assert text.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 1
    assert text.attributes[semconv.RETRIEVAL_RETURNED] == len(text_rows) == 1


async def test_sqlalchemy_async_engine(spans, postgres, table) -> None:
    pytest.importorskip("sqlalchemy")
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(_sqlalchemy_url(postgres))
    statement = _sqlalchemy_search(3)
    async with engine.connect() as connection:
        spans.clear()
        rows = (await connection.execute(statement)).fetchall()
    await engine.dispose()

    span = only(spans.get_finished_spans(), f"retrieval {TABLE}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 3
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 3


def test_the_report_shows_the_searches_as_retrieval(spans, connection, report_stages) -> None:
    with llmtrace.span("answer"):
        connection.execute(f"SELECT count(*) FROM {TABLE}")
        connection.execute(SEARCH, (QUERY, 3))

    stages = report_stages(spans.get_finished_spans())
    assert stages.get("retrieval", 0.0) > 0.0


def test_init_instruments_psycopg_when_the_application_imports_it(
    postgres, table, run_auto_instrumented
) -> None:
    body = f"""
import psycopg
with psycopg.connect(sys.argv[2], autocommit=True) as connection:
    connection.execute("SELECT 1")
    rows = connection.execute({SEARCH!r}, ({QUERY!r}, 2)).fetchall()
assert len(rows) == 2
"""
    traces = run_auto_instrumented("pgvector", "psycopg", body, postgres)

    (search,) = [t for t in traces if t.root.name == f"retrieval {TABLE}"]
    assert search.root.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert search.root.attributes[semconv.RETRIEVAL_RETURNED] == 2
    # No other statement made a span, and the report counts the search as retrieval.
    assert len(traces) == 1
    assert set(breakdown(search).stages) == {"retrieval"}


def test_the_distance_operators_are_found_only_where_they_order_the_rows() -> None:
    assert vector_search("SELECT 1 FROM t ORDER BY e <-> %s LIMIT 4") == ("t", 4)
    assert vector_search("SELECT 1 FROM t ORDER BY e <+> %s FETCH FIRST 3 ROWS ONLY") == ("t", 3)
    assert vector_search('SELECT 1 FROM s."My T" ORDER BY e <~> %s') == ("s.My T", None)
    assert vector_search("SELECT 100%% FROM t ORDER BY e <%%> %s LIMIT %s", ("v", 6)) == ("t", 6)
    assert vector_search("SELECT e <-> %s FROM t ORDER BY id LIMIT 3") is None
    assert vector_search("SELECT 1 FROM t /* e <-> q */ ORDER BY id") is None
    assert vector_search("SELECT 1 FROM t WHERE a < 3 ORDER BY id") is None
