"""qdrant-client: queries as retrieval spans, ``upsert`` as a write, sync and async clients.

Patched on ``QdrantClient`` and ``AsyncQdrantClient``, so local (``:memory:``, path), HTTP and
gRPC modes are all covered. Methods a client version lacks (``search`` / ``search_batch`` were
removed in 1.16) are skipped.

Counts: ``gen_ai.retrieval.top_k`` is ``limit`` (qdrant's default 10 when unset); for
``query_batch_points`` / ``search_batch`` top_k and ``llmtrace.retrieval.returned`` are totals
over the batch and ``db.operation.batch.size`` is the number of requests.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
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

SYSTEM = "qdrant"
_DEFAULT_LIMIT = 10  # qdrant's own default when a request sets no limit
_CLIENT_CLASSES = (
    ("qdrant_client.qdrant_client", "QdrantClient", sync_wrapper),
    ("qdrant_client.async_qdrant_client", "AsyncQdrantClient", async_wrapper),
)


def _query_text(query: Any) -> str | None:
    text = getattr(query, "text", None)
    return text if isinstance(text, str) else None


def _describe_single(operation: str, query_parameter: str, limit_position: int) -> Any:
    def describe(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation:
        limit = argument(args, kwargs, limit_position, "limit") or _DEFAULT_LIMIT
        return retrieval_operation(
            system=SYSTEM,
            operation=operation,
            collection=str(argument(args, kwargs, 0, "collection_name")),
            top_k=int(limit),
            query_text=_query_text(argument(args, kwargs, 1, query_parameter)),
        )

    return describe


def _describe_batch(operation: str) -> Any:
    def describe(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation:
        requests = list(argument(args, kwargs, 1, "requests", ()))
        texts = [text for r in requests if (text := _query_text(getattr(r, "query", None)))]
        return retrieval_operation(
            system=SYSTEM,
            operation=operation,
            collection=str(argument(args, kwargs, 0, "collection_name")),
            top_k=sum(getattr(r, "limit", None) or _DEFAULT_LIMIT for r in requests),
            batch_size=len(requests),
            query_text="\n".join(texts) or None,
        )

    return describe


def _describe_upsert(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation:
    points = argument(args, kwargs, 1, "points")
    ids = getattr(points, "ids", points)
    return write_operation(
        system=SYSTEM,
        operation="upsert",
        collection=str(argument(args, kwargs, 0, "collection_name")),
        record_count=len(ids) if isinstance(ids, Sequence) else None,
    )


def _documents(points: Sequence[Any]) -> list[dict[str, Any]]:
    records = []
    for point in points:
        record: dict[str, Any] = {"id": str(point.id), "score": float(point.score)}
        if point.payload:
            record["content"] = json.dumps(point.payload, default=str)
        records.append(record)
    return records


def _points(result: Any) -> list[Any]:
    """The scored points of a ``QueryResponse`` or of a ``search`` result list."""
    points = getattr(result, "points", result)
    return list(points) if isinstance(points, Sequence) else []


def _read_single(result: Any) -> Outcome:
    points = _points(result)
    return returned(len(points), _documents(points))


def _read_batch(result: Any) -> Outcome:
    if not isinstance(result, Sequence):
        return NOTHING
    points = [point for response in result for point in _points(response)]
    return returned(len(points), _documents(points))


def _read_nothing(result: Any) -> Outcome:
    return NOTHING


# (method, describe, read); argument names and positions differ between query_points and search.
_METHODS = (
    ("query_points", _describe_single("query_points", "query", 6), _read_single),
    ("query_batch_points", _describe_batch("query_batch_points"), _read_batch),
    ("search", _describe_single("search", "query_vector", 4), _read_single),
    ("search_batch", _describe_batch("search_batch"), _read_batch),
    ("upsert", _describe_upsert, _read_nothing),
)


class QdrantInstrumentor(LibraryInstrumentor):
    """Traces qdrant-client queries and upserts (sync and async clients)."""

    package = "qdrant-client"
    supported = ">= 1.10, < 2"

    def patches(self) -> Iterable[PatchRow]:
        return method_patches(_CLIENT_CLASSES, _METHODS)
