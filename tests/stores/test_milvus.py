"""pymilvus searches and writes as spans, on Milvus Lite: a real Milvus (``milvus-lite``) on a
temporary ``.db`` file, served in-process over gRPC and reached by the real ``MilvusClient`` and
``AsyncMilvusClient``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags
from pymilvus import (
    AnnSearchRequest,
    AsyncMilvusClient,
    Collection,
    CollectionSchema,
    DataType,
    FieldSchema,
    MilvusClient,
    MilvusException,
    RRFRanker,
    connections,
)

import llmtrace
from llmtrace import options, semconv
from llmtrace.analysis.breakdown import breakdown
from llmtrace.instrumentation.vectordb.milvus import MilvusInstrumentor
from tests.rag.spans_util import only
from tests.stores.conftest import assert_retrieval_span, instrumented_by

ROWS = [
    {"id": 1, "vector": [1.0, 0.0, 0.0], "text": "refunds take five days"},
    {"id": 2, "vector": [0.0, 1.0, 0.0], "text": "shipping is free"},
    {"id": 3, "vector": [0.7, 0.7, 0.0], "text": "returns need a label"},
]
QUERY = [0.9, 0.1, 0.0]

instrumented = instrumented_by(MilvusInstrumentor)


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("milvus") / "milvus.db")


@pytest.fixture(scope="module")
def client(database: str) -> MilvusClient:
    return MilvusClient(database)


@pytest.fixture
def collection(client: MilvusClient, spans) -> str:
    name = f"handbook_{uuid.uuid4().hex[:8]}"
    client.create_collection(name, dimension=3)
    client.insert(name, ROWS)
    spans.clear()
    return name


def test_insert_and_upsert_are_write_spans_with_stage_other(client, spans) -> None:
    name = f"writes_{uuid.uuid4().hex[:8]}"
    client.create_collection(name, dimension=3)
    spans.clear()

    client.insert(name, ROWS)
    client.upsert(name, {"id": 2, "vector": [0.0, 0.9, 0.1], "text": "shipping costs nothing"})

    insert, upsert = spans.get_finished_spans()
    assert (insert.name, upsert.name) == (f"insert {name}", f"upsert {name}")
    for span, operation in ((insert, "insert"), (upsert, "upsert")):
        assert span.kind == SpanKind.CLIENT
        assert span.attributes[semconv.STAGE] == "other"
        assert span.attributes[semconv.DB_SYSTEM_NAME] == "milvus"
        assert span.attributes[semconv.DB_COLLECTION_NAME] == name
        assert span.attributes[semconv.DB_OPERATION_NAME] == operation
        assert semconv.GEN_AI_OPERATION_NAME not in span.attributes
    assert insert.attributes[semconv.DB_OPERATION_BATCH_SIZE] == 3
    assert semconv.DB_OPERATION_BATCH_SIZE not in upsert.attributes


def test_search_is_a_retrieval_span(client, spans, collection) -> None:
    result = client.search(collection, data=[QUERY], limit=2)

    span = only(spans.get_finished_spans(), f"retrieval {collection}")
    assert_retrieval_span(span, system="milvus", source=collection, operation="search")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(result[0]) == 2


def test_returned_is_what_came_back_not_the_default_limit(client, spans, collection) -> None:
    result = client.search(collection, [QUERY])

    span = only(spans.get_finished_spans(), f"retrieval {collection}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 10
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(result[0]) == 3


def test_a_batch_of_queries_counts_totals(client, spans, collection) -> None:
    result = client.search(collection, data=[QUERY, [0.0, 1.0, 0.0]], limit=2)

    span = only(spans.get_finished_spans(), f"retrieval {collection}")
    assert span.attributes[semconv.DB_OPERATION_BATCH_SIZE] == 2
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 4
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == sum(len(hits) for hits in result) == 4


def test_query_and_get_are_retrieval_spans(client, spans, collection) -> None:
    queried = client.query(collection, filter="id >= 2", limit=5)
    fetched = client.get(collection, ids=[1, 3])

    query, get = spans.get_finished_spans()
    assert query.attributes[semconv.DB_OPERATION_NAME] == "query"
    assert query.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 5
    assert query.attributes[semconv.RETRIEVAL_RETURNED] == len(queried) == 2
    assert get.attributes[semconv.DB_OPERATION_NAME] == "get"
    assert semconv.GEN_AI_RETRIEVAL_TOP_K not in get.attributes
    assert get.attributes[semconv.RETRIEVAL_RETURNED] == len(fetched) == 2


def test_hybrid_search_over_two_vector_fields(client, spans) -> None:
    name = f"hybrid_{uuid.uuid4().hex[:8]}"
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=3)
    schema.add_field("other", DataType.FLOAT_VECTOR, dim=3)
    indexes = client.prepare_index_params()
    indexes.add_index("dense", index_type="FLAT", metric_type="COSINE")
    indexes.add_index("other", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=indexes)
    client.insert(
        name, [{"id": i, "dense": [1.0, i, 0.0], "other": [0.0, 1.0, i]} for i in range(4)]
    )
    spans.clear()

    requests = [
        AnnSearchRequest([QUERY], "dense", {}, limit=3),
        AnnSearchRequest([[0.0, 1.0, 0.0]], "other", {}, limit=3),
    ]
    result = client.hybrid_search(name, requests, RRFRanker(), limit=2)

    span = only(spans.get_finished_spans(), f"retrieval {name}")
    assert span.attributes[semconv.DB_OPERATION_NAME] == "hybrid_search"
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(result[0]) == 2


# pymilvus 3.0 deprecates the ORM (to be removed in 3.1); it is still in the supported range.
@pytest.mark.filterwarnings("ignore:.*ORM-style PyMilvus API")
def test_the_orm_collection_is_traced_the_same_way(database, spans) -> None:
    connections.connect(alias="orm", uri=database)
    fields = [
        FieldSchema("id", DataType.INT64, is_primary=True),
        FieldSchema("vector", DataType.FLOAT_VECTOR, dim=3),
    ]
    name = f"orm_{uuid.uuid4().hex[:8]}"
    collection = Collection(name, CollectionSchema(fields), using="orm")
    spans.clear()

    # Column-based rows: a list of ids and a list of vectors.
    collection.insert([[row["id"] for row in ROWS], [row["vector"] for row in ROWS]])
    collection.create_index("vector", {"index_type": "FLAT", "metric_type": "L2", "params": {}})
    collection.load()
    result = collection.search([QUERY], "vector", {"metric_type": "L2"}, limit=2)
    rows = collection.query("id > 1", limit=5)
    connections.disconnect("orm")

    names = [span.name for span in spans.get_finished_spans()]
    assert names == [f"insert {name}", f"retrieval {name}", f"retrieval {name}"]
    insert, search, query = spans.get_finished_spans()
    assert insert.attributes[semconv.DB_OPERATION_BATCH_SIZE] == 3
    assert search.attributes[semconv.DB_OPERATION_NAME] == "search"
    assert search.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert search.attributes[semconv.RETRIEVAL_RETURNED] == len(result[0]) == 2
    assert query.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 5
    assert query.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 2


def test_hits_are_recorded_only_with_content_capture(
    client, spans, collection, monkeypatch
) -> None:
    client.search(collection, data=[QUERY], limit=1, output_fields=["text"])
    span = only(spans.get_finished_spans(), f"retrieval {collection}")
    assert semconv.GEN_AI_RETRIEVAL_DOCUMENTS not in span.attributes

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    options.reload()
    spans.clear()
    client.search(collection, data=[QUERY], limit=1, output_fields=["text"])
    span = only(spans.get_finished_spans(), f"retrieval {collection}")
    (document,) = json.loads(span.attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert document["id"] == "1"
    assert document["score"] == pytest.approx(0.9939, abs=1e-3)  # cosine similarity
    assert json.loads(document["content"]) == {"text": "refunds take five days"}


def test_an_error_keeps_its_type_and_message(client, spans) -> None:
    with pytest.raises(MilvusException) as traced:
        client.search("missing", data=[QUERY], limit=1)
    with pytest.raises(MilvusException) as untraced:
        MilvusClient.search.__wrapped__(client, "missing", data=[QUERY], limit=1)

    assert type(traced.value) is type(untraced.value)
    assert str(traced.value) == str(untraced.value)
    span = only(spans.get_finished_spans(), "retrieval missing")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == "MilvusException"


def test_suppressed_or_unsampled_calls_make_no_span(client, spans, collection) -> None:
    with suppress_instrumentation():
        assert len(client.search(collection, data=[QUERY], limit=2)[0]) == 2
    unsampled = NonRecordingSpan(SpanContext(0xABC, 0xDEF, False, TraceFlags(0)))
    with trace.use_span(unsampled):
        assert len(client.search(collection, data=[QUERY], limit=2)[0]) == 2
        client.insert(collection, {"id": 9, "vector": [0.0, 0.0, 1.0], "text": "x"})

    assert spans.get_finished_spans() == ()


def test_uninstrument_restores_both_clients(client, spans, collection) -> None:
    MilvusInstrumentor().uninstrument()
    try:
        for method in ("search", "hybrid_search", "query", "get", "insert", "upsert"):
            assert not hasattr(getattr(MilvusClient, method), "__wrapped__"), method
            assert not hasattr(getattr(AsyncMilvusClient, method), "__wrapped__"), method
        client.search(collection, data=[QUERY], limit=1)
        assert spans.get_finished_spans() == ()
    finally:
        MilvusInstrumentor().instrument()
    client.search(collection, data=[QUERY], limit=1)
    assert len(spans.get_finished_spans()) == 1


async def test_the_async_client(database, client, spans, collection) -> None:
    async_client = AsyncMilvusClient(database)
    try:
        await async_client.insert(collection, [{"id": 4, "vector": [0.0, 0.0, 1.0], "text": "x"}])
        result = await async_client.search(collection, data=[QUERY], limit=3)
        rows = await async_client.query(collection, filter="id > 0", limit=10)
        with pytest.raises(MilvusException) as failure:
            await async_client.search("missing", data=[QUERY])
    finally:
        await async_client.close()

    names = [span.name for span in spans.get_finished_spans()]
    assert names == [f"insert {collection}"] + [f"retrieval {collection}"] * 2 + [
        "retrieval missing"
    ]
    insert, search, query, failed = spans.get_finished_spans()
    assert insert.attributes[semconv.STAGE] == "other"
    assert search.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 3
    assert search.attributes[semconv.RETRIEVAL_RETURNED] == len(result[0]) == 3
    assert query.attributes[semconv.RETRIEVAL_RETURNED] == len(rows) == 4
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes[semconv.ERROR_TYPE] == type(failure.value).__qualname__


def test_the_report_shows_the_searches_as_retrieval(
    client, spans, collection, report_stages: Callable[..., dict[str, float]]
) -> None:
    with llmtrace.span("answer"):
        client.search(collection, data=[QUERY], limit=2)
        client.get(collection, ids=[1])

    assert report_stages(spans.get_finished_spans()).get("retrieval", 0.0) > 0.0


def test_init_instruments_pymilvus_when_the_application_imports_it(
    tmp_path: Path, run_auto_instrumented: Callable[..., list[Any]]
) -> None:
    body = f"""
from pymilvus import MilvusClient
client = MilvusClient(sys.argv[2])
client.create_collection("handbook", dimension=3)
client.insert("handbook", {ROWS!r})
assert len(client.search("handbook", data=[{QUERY!r}], limit=2)[0]) == 2
"""
    traces = run_auto_instrumented("milvus", "pymilvus", body, str(tmp_path / "auto.db"))

    assert sorted(t.root.name for t in traces) == ["insert handbook", "retrieval handbook"]
    (search,) = [t for t in traces if t.root.name == "retrieval handbook"]
    assert search.root.attributes[semconv.RETRIEVAL_RETURNED] == 2
    assert set(breakdown(search).stages) == {"retrieval"}
