"""chromadb: ``Collection.query`` / ``get`` as retrieval spans, ``add`` / ``upsert`` as writes.

Local (``PersistentClient``, ``EphemeralClient``) and HTTP clients share ``Collection``; the
async HTTP client uses ``AsyncCollection``. Both are patched.

Counts: ``gen_ai.retrieval.top_k`` is ``n_results`` (``limit`` for ``get``); for a batch of query
embeddings, top_k and ``llmtrace.retrieval.returned`` are totals over the batch and
``db.operation.batch.size`` is the number of queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# The module opts out of type checking (a file-level "type: ignore"), so mypy sees no names in it.
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.vectordb._spans import (
    NOTHING,
    Operation,
    Outcome,
    argument,
    async_wrapper,
    method_patches,
    retrieval_operation,
    returned,
    sync_wrapper,
    write_operation,
)

SYSTEM = "chroma"
_COLLECTION_CLASSES = (
    ("chromadb.api.models.Collection", "Collection", sync_wrapper),
    ("chromadb.api.models.AsyncCollection", "AsyncCollection", async_wrapper),
)


def _batch_length(value: Any) -> int | None:
    """How many records or queries a chromadb "one or many" argument holds."""
    if value is None:
        return None
    if isinstance(value, str):
        return 1
    shape = getattr(value, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) > 1 else 1
    if isinstance(value, Sequence):
        if not value:
            return 0
        first = value[0]
        # A single embedding is a flat list of numbers.
        return 1 if isinstance(first, int | float) else len(value)
    return None


def _describe_query(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation:
    n_results = argument(args, kwargs, 5, "n_results", 10)
    embeddings = argument(args, kwargs, 0, "query_embeddings")
    texts = argument(args, kwargs, 1, "query_texts")
    queries = _batch_length(embeddings) or _batch_length(texts) or 1
    query_text = None
    if isinstance(texts, str):
        query_text = texts
    elif isinstance(texts, Sequence) and texts and all(isinstance(t, str) for t in texts):
        query_text = "\n".join(texts)
    return retrieval_operation(
        system=SYSTEM,
        operation="query",
        collection=instance.name,
        top_k=int(n_results) * queries,
        batch_size=queries,
        query_text=query_text,
    )


def _describe_get(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation:
    limit = argument(args, kwargs, 2, "limit")
    return retrieval_operation(
        system=SYSTEM,
        operation="get",
        collection=instance.name,
        top_k=int(limit) if limit is not None else None,
    )


def _describe_write(operation: str) -> Any:
    def describe(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation:
        ids = argument(args, kwargs, 0, "ids")
        return write_operation(
            system=SYSTEM,
            operation=operation,
            collection=instance.name,
            record_count=_batch_length(ids),
        )

    return describe


def _documents(ids: Sequence[Any], documents: Any, distances: Any) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for index, record_id in enumerate(ids):
        record: dict[str, Any] = {"id": str(record_id)}
        if isinstance(distances, Sequence) and index < len(distances):
            record["score"] = float(distances[index])
        if isinstance(documents, Sequence) and index < len(documents) and documents[index]:
            record["content"] = str(documents[index])
        records.append(record)
    return records


def _read_query(result: Any) -> Outcome:
    if not isinstance(result, Mapping):
        return NOTHING
    batches = result.get("ids") or []
    documents = result.get("documents") or [None] * len(batches)
    distances = result.get("distances") or [None] * len(batches)
    records: list[dict[str, Any]] = []
    for ids, docs, dists in zip(batches, documents, distances, strict=False):
        records.extend(_documents(ids, docs, dists))
    return returned(sum(len(ids) for ids in batches), records)


def _read_get(result: Any) -> Outcome:
    if not isinstance(result, Mapping):
        return NOTHING
    ids = result.get("ids") or []
    return returned(len(ids), _documents(ids, result.get("documents"), None))


def _read_nothing(result: Any) -> Outcome:
    return NOTHING


_METHODS = (
    ("query", _describe_query, _read_query),
    ("get", _describe_get, _read_get),
    ("add", _describe_write("add"), _read_nothing),
    ("upsert", _describe_write("upsert"), _read_nothing),
)


class ChromaInstrumentor(LibraryInstrumentor):
    """Traces chromadb collection queries and writes."""

    package = "chromadb"
    supported = ">= 0.5, < 2"

    def patches(self) -> Iterable[PatchRow]:
        return method_patches(_COLLECTION_CLASSES, _METHODS)
