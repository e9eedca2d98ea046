"""pymilvus: ``MilvusClient`` / ``AsyncMilvusClient`` searches as retrieval spans, inserts and
upserts as writes; the same for the older ORM ``Collection`` (sync; it has no ``get``).

Patched on the client classes, so a Milvus server, Zilliz Cloud and Milvus Lite (a local ``.db``
file, served in-process by ``milvus-lite``) are all covered alike. The ORM's ``Collection``
talks to the connection directly, never through a client: no call is seen twice.

Attributes: ``db.system.name=milvus``; the collection (and ``gen_ai.data_source.id``) is the
collection name; ``db.operation.name`` is the method (``search``, ``hybrid_search``, ``query``,
``get``, ``insert``, ``upsert``). For ``search``, ``gen_ai.retrieval.top_k`` is ``limit`` (Milvus's
default 10) times the number of queries (vectors, texts or ids), ``db.operation.batch.size`` the
number of queries and ``llmtrace.retrieval.returned`` the hits over all of them; ``hybrid_search``
is one query over several vector fields, so its top_k is its ``limit``; ``query`` records a
``limit`` when one is given; ``get`` records none. With content capture on, the hits (id,
distance, returned fields) and text queries are recorded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.vectordb._spans import (
    NOTHING,
    Describe,
    Operation,
    Outcome,
    ReadResult,
    argument,
    async_wrapper,
    method_patches,
    retrieval_operation,
    returned,
    sync_wrapper,
    write_operation,
)

SYSTEM = "milvus"
_DEFAULT_LIMIT = 10  # pymilvus's default for search and hybrid_search
_CLIENT_CLASSES = (
    ("pymilvus.milvus_client.milvus_client", "MilvusClient", sync_wrapper),
    ("pymilvus.milvus_client.async_milvus_client", "AsyncMilvusClient", async_wrapper),
)
_ORM_CLASSES = (("pymilvus.orm.collection", "Collection", sync_wrapper),)


def _count(value: Any) -> int | None:
    """How many queries (or records) a "one or many" argument holds."""
    if value is None:
        return None
    if isinstance(value, str | Mapping):
        return 1
    shape = getattr(value, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) > 1 else 1
    if isinstance(value, Sequence):
        # A single vector is a flat list of numbers.
        return 1 if value and isinstance(value[0], int | float) else len(value)
    return None


def _record_count(data: Any) -> int | None:
    """Rows in an insert: a dict, a list of row dicts, a DataFrame, or (ORM) a list of columns."""
    if isinstance(data, list) and data and isinstance(data[0], list | tuple):
        return len(data[0])
    return _count(data)


@dataclass(frozen=True, slots=True)
class _Api:
    """Where one API's methods take what a span records."""

    collection: Callable[[Any, tuple[Any, ...], dict[str, Any]], str]
    data: int  # position of the vectors (search) or rows (insert, upsert)
    hybrid_limit: int  # position of hybrid_search's limit (search's is 3 in both)


_CLIENT = _Api(lambda _, args, kwargs: str(argument(args, kwargs, 0, "collection_name")), 1, 3)
_ORM = _Api(lambda collection, _, __: str(collection.name), 0, 2)


def _describe_search(api: _Api) -> Describe:
    def describe(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation:
        data = argument(args, kwargs, api.data, "data")
        queries = _count(data) or _count(kwargs.get("ids")) or 1
        limit = argument(args, kwargs, 3, "limit", _DEFAULT_LIMIT)
        texts = [item for item in data if isinstance(item, str)] if isinstance(data, list) else []
        return retrieval_operation(
            system=SYSTEM,
            operation="search",
            collection=api.collection(instance, args, kwargs),
            top_k=int(limit) * queries,
            batch_size=queries,
            query_text="\n".join(texts) or None,
        )

    return describe


def _describe_hybrid_search(api: _Api) -> Describe:
    def describe(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation:
        return retrieval_operation(
            system=SYSTEM,
            operation="hybrid_search",
            collection=api.collection(instance, args, kwargs),
            top_k=int(argument(args, kwargs, api.hybrid_limit, "limit", _DEFAULT_LIMIT)),
        )

    return describe


def _describe_query(api: _Api, operation: str = "query") -> Describe:
    """``query`` (a ``limit`` only as a keyword) and ``get`` (none)."""

    def describe(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation:
        limit = kwargs.get("limit")
        return retrieval_operation(
            system=SYSTEM,
            operation=operation,
            collection=api.collection(instance, args, kwargs),
            top_k=int(limit) if isinstance(limit, int) and limit >= 0 else None,
        )

    return describe


def _describe_write(api: _Api, operation: str) -> Describe:
    def describe(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation:
        return write_operation(
            system=SYSTEM,
            operation=operation,
            collection=api.collection(instance, args, kwargs),
            record_count=_record_count(argument(args, kwargs, api.data, "data")),
        )

    return describe


def _as_mapping(hit: Any) -> Mapping[str, Any]:
    """A hit as ``{"id", "distance", "entity"}``: MilvusClient's hits are dicts; the ORM's
    ``Hit`` objects (pymilvus 2.x) have ``to_dict``, and an attribute lookup that raises
    ``KeyError`` for a missing field, so nothing is read from them by name."""
    if isinstance(hit, Mapping):
        return hit
    to_dict = getattr(type(hit), "to_dict", None)
    converted = to_dict(hit) if to_dict is not None else None
    return converted if isinstance(converted, Mapping) else {}


def _hit_record(hit: Any) -> dict[str, Any]:
    fields = _as_mapping(hit)
    record: dict[str, Any] = {"id": str(fields.get("id"))}
    distance = fields.get("distance")
    if isinstance(distance, int | float):
        record["score"] = float(distance)
    entity = fields.get("entity")
    if isinstance(entity, Mapping) and entity:
        record["content"] = json.dumps(dict(entity), default=str)
    return record


def _read_search(result: Any) -> Outcome:
    """Hits per query (a ``SearchResult``: one list of hits per query)."""
    if not isinstance(result, Sequence):
        return NOTHING
    hits = [hit for per_query in result for hit in per_query]
    return returned(len(hits), [_hit_record(hit) for hit in hits])


def _read_rows(result: Any) -> Outcome:
    """Rows of ``query`` / ``get`` (a list of dicts)."""
    if not isinstance(result, Sequence):
        return NOTHING
    return returned(len(result))


def _read_nothing(result: Any) -> Outcome:
    return NOTHING


def _methods(api: _Api) -> tuple[tuple[str, Describe, ReadResult], ...]:
    return (
        ("search", _describe_search(api), _read_search),
        ("hybrid_search", _describe_hybrid_search(api), _read_search),
        ("query", _describe_query(api), _read_rows),
        ("get", _describe_query(api, "get"), _read_rows),
        ("insert", _describe_write(api, "insert"), _read_nothing),
        ("upsert", _describe_write(api, "upsert"), _read_nothing),
    )


class MilvusInstrumentor(LibraryInstrumentor):
    """Traces pymilvus searches, queries and writes (sync and async clients)."""

    package = "pymilvus"
    supported = ">= 2.5.3, < 4"

    def patches(self) -> Iterable[PatchRow]:
        yield from method_patches(_CLIENT_CLASSES, _methods(_CLIENT))
        # The ORM's Collection (deprecated in pymilvus 3.0) calls the connection, not a client.
        yield from method_patches(_ORM_CLASSES, _methods(_ORM))
