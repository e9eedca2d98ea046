"""faiss searches as retrieval spans, on real in-process indexes."""

from __future__ import annotations

from collections.abc import Iterator

import faiss
import numpy as np
import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags

import llmtrace
from llmtrace import semconv
from llmtrace.instrumentation.vectordb.faiss import FaissInstrumentor, name_index

from .spans_util import only

DIMENSION = 8


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    instrumentor = FaissInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


def vectors(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((count, DIMENSION), dtype=np.float32)


def test_flat_index_search_is_a_retrieval_span(spans) -> None:
    index = faiss.IndexFlatL2(DIMENSION)
    index.add(vectors(20))

    distances, labels = index.search(vectors(1, seed=1), 5)

    span = only(spans.get_finished_spans(), "retrieval IndexFlatL2")
    assert span.kind == SpanKind.CLIENT
    assert span.attributes[semconv.STAGE] == "retrieval"
    assert span.attributes[semconv.GEN_AI_OPERATION_NAME] == "retrieval"
    assert span.attributes[semconv.GEN_AI_DATA_SOURCE_ID] == "IndexFlatL2"
    assert span.attributes[semconv.DB_SYSTEM_NAME] == "faiss"
    assert span.attributes[semconv.DB_OPERATION_NAME] == "search"
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 5
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == 5
    assert labels.shape == (1, 5) and distances.shape == (1, 5)


def test_returned_counts_only_real_neighbours_when_k_exceeds_the_index(spans) -> None:
    index = faiss.IndexFlatIP(DIMENSION)
    index.add(vectors(3))

    _, labels = index.search(vectors(2, seed=2), 10)

    span = only(spans.get_finished_spans(), "retrieval IndexFlatIP")
    assert (labels == -1).sum() == 14
    assert span.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 20
    assert span.attributes[semconv.RETRIEVAL_RETURNED] == 6
    assert span.attributes[semconv.DB_OPERATION_BATCH_SIZE] == 2


@pytest.mark.parametrize(
    "make_index",
    [
        lambda: faiss.IndexHNSWFlat(DIMENSION, 8),
        lambda: faiss.IndexIVFFlat(faiss.IndexFlatL2(DIMENSION), DIMENSION, 4),
        lambda: faiss.index_factory(DIMENSION, "IDMap,Flat"),
    ],
    ids=["hnsw", "ivf", "factory-idmap"],
)
def test_every_index_class_users_create_is_traced_once(spans, make_index) -> None:
    index = make_index()
    data = vectors(200)
    index.train(data)
    if isinstance(index, faiss.IndexIDMap):
        index.add_with_ids(data, np.arange(1000, 1200, dtype=np.int64))
    else:
        index.add(data)

    index.search(vectors(1, seed=3), 4)

    finished = spans.get_finished_spans()
    assert [span.name for span in finished] == [f"retrieval {type(index).__name__}"]
    assert finished[0].attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 4


def test_a_named_index_is_its_data_source(spans) -> None:
    index = faiss.IndexFlatL2(DIMENSION)
    index.add(vectors(4))
    name_index(index, "handbook")

    index.search(vectors(1), 2)

    span = only(spans.get_finished_spans(), "retrieval handbook")
    assert span.attributes[semconv.GEN_AI_DATA_SOURCE_ID] == "handbook"


def test_an_error_keeps_its_type_and_message(spans) -> None:
    index = faiss.IndexFlatL2(DIMENSION)
    wrong_dimension = np.zeros((1, DIMENSION + 1), dtype=np.float32)
    with pytest.raises(AssertionError) as traced:
        index.search(wrong_dimension, 1)
    with pytest.raises(AssertionError) as untraced:
        type(index).search.__wrapped__(index, wrong_dimension, 1)

    assert str(traced.value) == str(untraced.value)
    span = only(spans.get_finished_spans(), "retrieval IndexFlatL2")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == "AssertionError"


def test_inside_the_applications_retrieval_span_no_second_span_is_made(spans) -> None:
    index = faiss.IndexFlatL2(DIMENSION)
    index.add(vectors(10))

    @llmtrace.retrieval(top_k=3)
    def search(query: np.ndarray) -> list[int]:
        _, labels = index.search(query, 3)
        return [int(label) for label in labels[0]]

    search(vectors(1))

    finished = spans.get_finished_spans()
    assert [span.name for span in finished] == ["retrieval"]
    assert finished[0].attributes[semconv.DB_SYSTEM_NAME] == "faiss"
    assert finished[0].attributes[semconv.RETRIEVAL_RETURNED] == 3


def test_a_retrieval_span_for_another_data_source_gets_a_child(spans) -> None:
    index = faiss.IndexFlatL2(DIMENSION)
    index.add(vectors(10))

    with llmtrace.span(
        "retrieval hybrid", stage="retrieval", **{"gen_ai.data_source.id": "hybrid"}
    ):
        index.search(vectors(1), 3)

    finished = spans.get_finished_spans()
    child = only(finished, "retrieval IndexFlatL2")
    parent = only(finished, "retrieval hybrid")
    assert child.parent is not None and child.parent.span_id == parent.context.span_id


def test_nothing_is_recorded_under_an_unsampled_parent(spans) -> None:
    index = faiss.IndexFlatL2(DIMENSION)
    index.add(vectors(10))
    unsampled = NonRecordingSpan(SpanContext(0xABC, 0xDEF, False, TraceFlags(0)))

    with trace.use_span(unsampled):
        _, labels = index.search(vectors(1), 3)

    assert labels.shape == (1, 3)
    assert spans.get_finished_spans() == ()


def test_instrumenting_twice_wraps_once_and_uninstrument_restores(spans) -> None:
    FaissInstrumentor().instrument()  # the instrumentor is a singleton: a no-op
    index = faiss.IndexFlatL2(DIMENSION)
    index.add(vectors(5))
    index.search(vectors(1), 1)
    assert len(spans.get_finished_spans()) == 1

    FaissInstrumentor().uninstrument()
    try:
        spans.clear()
        index.search(vectors(1), 1)
        assert spans.get_finished_spans() == ()
        assert type(index).search.__name__ == "replacement_search"
    finally:
        FaissInstrumentor().instrument()
