"""chromadb queries and writes as spans: a real in-process client, and the sync and async HTTP
clients talking to a real Chroma server.

The collection gets its own embeddings: chromadb's default embedding function downloads a model,
which cannot work offline.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import httpx
import pytest
from opentelemetry.trace import SpanKind, StatusCode

import llmtrace
from llmtrace import semconv
from llmtrace.instrumentation.vectordb.chromadb import ChromaInstrumentor

from .spans_util import only

IDS = ["refunds", "shipping", "returns"]
EMBEDDINGS = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.7, 0.7, 0.0]]
DOCUMENTS = ["Refunds take 5 days.", "Shipping is free.", "Returns need a label."]


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    instrumentor = ChromaInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


@pytest.fixture(scope="module")
def client() -> Any:
    return chromadb.EphemeralClient()


@pytest.fixture
def collection(client: Any, spans) -> Any:
    collection = client.create_collection(
        f"handbook-{uuid.uuid4().hex[:8]}", embedding_function=None
    )
    collection.add(ids=IDS, embeddings=EMBEDDINGS, documents=DOCUMENTS)
    spans.clear()
    return collection


def test_query_is_a_retrieval_span_with_requested_and_returned_counts(spans, collection) -> None:
    result = collection.query(query_embeddings=[[0.9, 0.1, 0.0]], n_results=10)

    span = only(spans.get_finished_spans(), f"retrieval {collection.name}")
    assert span.kind == SpanKind.CLIENT
    assert span.attributes[semconv.STAGE] == "retrieval"
    assert span.attributes[semconv.GEN_AI_OPERATION_NAME] == "retrieval"
    assert span.attributes[semconv.GEN_AI_DATA_SOURCE_ID] == collection.name
    assert span.attributes[semconv.DB_SYSTEM_NAME] == "chroma"
    assert span.attributes[semconv.DB_COLLECTION_NAME] == collection.name
    assert span.attributes[semconv.DB_OPERATION_NAME] == "query"
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 10
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(result["ids"][0]) == 3


def test_batched_queries_count_totals(spans, collection) -> None:
    collection.query(query_embeddings=[[0.9, 0.1, 0.0], [0.0, 1.0, 0.0]], n_results=2)

    span = only(spans.get_finished_spans(), f"retrieval {collection.name}")
    assert span.attributes[semconv.DB_OPERATION_BATCH_SIZE] == 2
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 4
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == 4


def test_get_is_a_retrieval_span(spans, collection) -> None:
    result = collection.get(ids=["refunds", "returns"])

    span = only(spans.get_finished_spans(), f"retrieval {collection.name}")
    assert span.attributes[semconv.DB_OPERATION_NAME] == "get"
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(result["ids"]) == 2
    assert semconv.GEN_AI_RETRIEVAL_TOP_K not in span.attributes


def test_add_and_upsert_are_write_spans_with_stage_other(spans, client) -> None:
    collection = client.create_collection(f"writes-{uuid.uuid4().hex[:8]}", embedding_function=None)

    collection.add(ids=IDS, embeddings=EMBEDDINGS)
    collection.upsert(ids=["refunds"], embeddings=[[1.0, 0.1, 0.0]])

    add, upsert = spans.get_finished_spans()
    assert (add.name, upsert.name) == (f"add {collection.name}", f"upsert {collection.name}")
    for span, operation in ((add, "add"), (upsert, "upsert")):
        assert span.kind == SpanKind.CLIENT
        assert span.attributes[semconv.STAGE] == "other"
        assert span.attributes[semconv.DB_OPERATION_NAME] == operation
        assert span.attributes[semconv.DB_SYSTEM_NAME] == "chroma"
    assert add.attributes[semconv.DB_OPERATION_BATCH_SIZE] == 3
    assert semconv.DB_OPERATION_BATCH_SIZE not in upsert.attributes


def test_documents_only_with_content_capture(spans, collection, capture_content) -> None:
    collection.query(query_embeddings=[[1.0, 0.0, 0.0]], n_results=1)

    span = only(spans.get_finished_spans(), f"retrieval {collection.name}")
    documents = json.loads(span.attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert documents == [{"id": "refunds", "score": pytest.approx(0.0), "content": DOCUMENTS[0]}]


def test_no_content_by_default(spans, collection) -> None:
    collection.query(query_embeddings=[[1.0, 0.0, 0.0]], n_results=1)

    span = only(spans.get_finished_spans(), f"retrieval {collection.name}")
    assert semconv.GEN_AI_RETRIEVAL_DOCUMENTS not in span.attributes
    assert semconv.GEN_AI_RETRIEVAL_QUERY_TEXT not in span.attributes


def test_an_error_keeps_its_type_and_message(spans, collection) -> None:
    wrong_dimension = [[1.0, 0.0]]
    with pytest.raises(Exception) as traced:
        collection.query(query_embeddings=wrong_dimension, n_results=1)
    with pytest.raises(Exception) as untraced:
        type(collection).query.__wrapped__(
            collection, query_embeddings=wrong_dimension, n_results=1
        )

    assert type(traced.value) is type(untraced.value)
    assert str(traced.value) == str(untraced.value)
    span = only(spans.get_finished_spans(), f"retrieval {collection.name}")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == type(traced.value).__qualname__


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A real Chroma server (the ``chroma run`` that ships with chromadb) on a loopback port."""
    port = free_port()
    command = [str(Path(sys.executable).parent / "chroma"), "run", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--path", str(tmp_path_factory.mktemp("chroma"))]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("chroma run did not start")
            time.sleep(0.1)
        yield "127.0.0.1", port
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_the_http_client_is_traced_the_same_way(spans, chroma_server) -> None:
    host, port = chroma_server
    client = chromadb.HttpClient(host=host, port=port)
    collection = client.create_collection(f"remote-{uuid.uuid4().hex[:8]}", embedding_function=None)

    collection.upsert(ids=IDS, embeddings=EMBEDDINGS, documents=DOCUMENTS)
    result = collection.query(query_embeddings=[[0.0, 1.0, 0.0]], n_results=2)

    names = [span.name for span in spans.get_finished_spans()]
    assert names == [f"upsert {collection.name}", f"retrieval {collection.name}"]
    span = only(spans.get_finished_spans(), f"retrieval {collection.name}")
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == len(result["ids"][0]) == 2


async def test_the_async_http_client_is_traced(spans, chroma_server) -> None:
    host, port = chroma_server
    client = await chromadb.AsyncHttpClient(host=host, port=port)
    collection = await client.create_collection(
        f"async-{uuid.uuid4().hex[:8]}", embedding_function=None
    )

    await collection.add(ids=IDS, embeddings=EMBEDDINGS, documents=DOCUMENTS)
    result = await collection.query(query_embeddings=[[1.0, 0.0, 0.0]], n_results=5)
    fetched = await collection.get(limit=2)
    with pytest.raises(Exception) as failure:
        await collection.query(query_embeddings=[[1.0, 0.0]], n_results=1)

    add, query, get, failed = spans.get_finished_spans()
    assert add.name == f"add {collection.name}"
    assert add.attributes[semconv.STAGE] == "other"
    assert query.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 5
    assert query.attributes[semconv.RETRIEVAL_RETURNED] == len(result["ids"][0]) == 3
    assert get.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert get.attributes[semconv.RETRIEVAL_RETURNED] == len(fetched["ids"]) == 2
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes[semconv.ERROR_TYPE] == type(failure.value).__qualname__
    assert "dimension" in str(failure.value)


def test_a_caught_failure_leaves_the_applications_own_span_unmarked(spans, collection) -> None:
    wrong_dimension = [[1.0, 0.0]]
    # The application handles the failure inside its own span: that span did not fail.
    with llmtrace.span("lookup", stage="retrieval"), contextlib.suppress(Exception):
        collection.query(query_embeddings=wrong_dimension, n_results=1)
    span = only(spans.get_finished_spans(), "lookup")
    assert span.status.status_code == StatusCode.UNSET
    assert semconv.ERROR_TYPE not in span.attributes
