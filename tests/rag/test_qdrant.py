"""qdrant-client queries and upserts as spans, on real ``:memory:`` clients (sync and async)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from qdrant_client import AsyncQdrantClient, QdrantClient, models

from llmtrace import options, semconv
from llmtrace.instrumentation.vectordb.qdrant import QdrantInstrumentor
from llmtrace.sdk import content

from .spans_util import only

COLLECTION = "handbook"
POINTS = [
    models.PointStruct(id=1, vector=[1.0, 0.0, 0.0, 0.0], payload={"text": "refunds take 5 days"}),
    models.PointStruct(id=2, vector=[0.0, 1.0, 0.0, 0.0], payload={"text": "shipping is free"}),
    models.PointStruct(id=3, vector=[0.7, 0.7, 0.0, 0.0], payload={"text": "returns need a label"}),
]
QUERY = [0.9, 0.1, 0.0, 0.0]
VECTORS = models.VectorParams(size=4, distance=models.Distance.COSINE)


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    instrumentor = QdrantInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


@pytest.fixture
def client(spans) -> QdrantClient:
    client = QdrantClient(":memory:")
    client.create_collection(COLLECTION, vectors_config=VECTORS)
    client.upsert(COLLECTION, points=POINTS)
    spans.clear()
    return client


def test_upsert_is_a_write_span_with_stage_other(spans) -> None:
    client = QdrantClient(":memory:")
    client.create_collection(COLLECTION, vectors_config=VECTORS)

    client.upsert(COLLECTION, points=POINTS)

    span = only(spans.get_finished_spans(), f"upsert {COLLECTION}")
    assert span.kind == SpanKind.CLIENT
    assert span.attributes[semconv.STAGE] == "other"
    assert span.attributes[semconv.DB_SYSTEM_NAME] == "qdrant"
    assert span.attributes[semconv.DB_OPERATION_NAME] == "upsert"
    assert span.attributes[semconv.DB_COLLECTION_NAME] == COLLECTION
    assert span.attributes[semconv.DB_OPERATION_BATCH_SIZE] == 3
    assert semconv.GEN_AI_OPERATION_NAME not in span.attributes


def test_query_points_is_a_retrieval_span(spans, client: QdrantClient) -> None:
    response = client.query_points(COLLECTION, query=QUERY, limit=2)

    span = only(spans.get_finished_spans(), f"retrieval {COLLECTION}")
    assert span.kind == SpanKind.CLIENT
    assert span.attributes[semconv.STAGE] == "retrieval"
    assert span.attributes[semconv.GEN_AI_OPERATION_NAME] == "retrieval"
    assert span.attributes[semconv.GEN_AI_DATA_SOURCE_ID] == COLLECTION
    assert span.attributes[semconv.DB_OPERATION_NAME] == "query_points"
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(response.points) == 2


def test_returned_is_what_came_back_not_what_was_asked(spans, client: QdrantClient) -> None:
    client.query_points(COLLECTION, QUERY, limit=10)

    span = only(spans.get_finished_spans(), f"retrieval {COLLECTION}")
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 10
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == 3


def test_batch_counts_are_totals_over_the_batch(spans, client: QdrantClient) -> None:
    requests = [
        models.QueryRequest(query=QUERY, limit=1),
        models.QueryRequest(query=[0.0, 1.0, 0.0, 0.0], limit=5),
    ]

    client.query_batch_points(COLLECTION, requests=requests)

    span = only(spans.get_finished_spans(), f"retrieval {COLLECTION}")
    assert span.attributes[semconv.DB_OPERATION_NAME] == "query_batch_points"
    assert span.attributes[semconv.DB_OPERATION_BATCH_SIZE] == 2
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 6
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == 4


def test_documents_are_recorded_only_with_content_capture(
    spans, client: QdrantClient, capture_content
) -> None:
    client.query_points(COLLECTION, query=QUERY, limit=1)

    span = only(spans.get_finished_spans(), f"retrieval {COLLECTION}")
    documents = json.loads(span.attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert documents[0]["id"] == "1"
    assert "refunds take 5 days" in documents[0]["content"]


@pytest.mark.parametrize("mode", ["span_only", "event_only", "span_and_event"])
def test_documents_go_where_the_capture_mode_says(
    spans, client: QdrantClient, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)
    options.reload()
    client.query_points(COLLECTION, query=QUERY, limit=1)

    span = only(spans.get_finished_spans(), f"retrieval {COLLECTION}")
    events = [e for e in span.events if e.name == content.RETRIEVAL_CONTENT_EVENT]
    on_span = semconv.GEN_AI_RETRIEVAL_DOCUMENTS in span.attributes
    assert on_span is (mode != "event_only")
    assert len(events) == (0 if mode == "span_only" else 1)
    for event in events:
        (document,) = json.loads(event.attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS])
        assert "refunds take 5 days" in document["content"]
        if on_span:
            recorded = span.attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS]
            assert event.attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS] == recorded
    if mode == "event_only":
        assert not [
            key
            for key in span.attributes
            if key.startswith("gen_ai.retrieval.") and key != semconv.GEN_AI_RETRIEVAL_TOP_K
        ]


def test_no_documents_without_content_capture(spans, client: QdrantClient) -> None:
    client.query_points(COLLECTION, query=QUERY, limit=1)

    span = only(spans.get_finished_spans(), f"retrieval {COLLECTION}")
    assert semconv.GEN_AI_RETRIEVAL_DOCUMENTS not in span.attributes


def test_an_error_keeps_its_type_and_message(spans, client: QdrantClient) -> None:
    with pytest.raises(Exception) as traced:
        client.query_points("missing", query=QUERY)
    with pytest.raises(Exception) as untraced:
        type(client).query_points.__wrapped__(client, "missing", query=QUERY)

    assert type(traced.value) is type(untraced.value)
    assert str(traced.value) == str(untraced.value)
    span = only(spans.get_finished_spans(), "retrieval missing")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == type(traced.value).__qualname__


async def test_async_client_queries_and_upserts(spans) -> None:
    client = AsyncQdrantClient(":memory:")
    await client.create_collection(COLLECTION, vectors_config=VECTORS)
    await client.upsert(COLLECTION, points=POINTS)

    response = await client.query_points(COLLECTION, query=QUERY, limit=2)
    responses = await client.query_batch_points(
        COLLECTION, requests=[models.QueryRequest(query=QUERY, limit=3)]
    )

    names = [span.name for span in spans.get_finished_spans()]
    assert names == [f"upsert {COLLECTION}", f"retrieval {COLLECTION}", f"retrieval {COLLECTION}"]
    single, batch = spans.get_finished_spans()[1:]
    assert single.attributes[semconv.RETRIEVAL_RETURNED] == len(response.points) == 2
    assert batch.attributes[semconv.RETRIEVAL_RETURNED] == len(responses[0].points) == 3
    assert single.end_time is not None and single.end_time >= single.start_time


async def test_async_error_keeps_its_type(spans) -> None:
    client = AsyncQdrantClient(":memory:")
    with pytest.raises(ValueError, match="missing"):
        await client.query_points("missing", query=QUERY)
    span = only(spans.get_finished_spans(), "retrieval missing")
    assert span.status.status_code == StatusCode.ERROR
