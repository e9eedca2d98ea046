"""LanceDB (embedded): searches as retrieval spans, ``add`` and ``merge_insert`` as writes.

A LanceDB search is built lazily (``table.search(vector).limit(5)``) and runs at its terminal
call. Every synchronous terminal (``to_list``, ``to_pandas``, ``to_polars``) goes through the
builder's ``to_arrow``, so that is what is patched on the vector, full-text, hybrid and plain
builders; on the async API (``lancedb.connect_async``) it is ``AsyncQueryBase.to_arrow``, which
``to_list`` / ``to_pandas`` / ``to_polars`` of every async query call. ``to_batches`` is not
traced: it returns a reader that runs the query while it is read.

Two places where LanceDB runs one search as several calls, kept to one span:

- The synchronous table runs every operation as a coroutine of the async table on LanceDB's own
  background event loop. Calls on that loop are left alone: the synchronous call is the span.
- A synchronous hybrid search runs its full-text and vector legs on a thread pool, outside the
  caller's context. The legs are remembered when the hybrid builder creates them and make no
  span of their own. (The async hybrid search gathers its legs as tasks, which inherit the
  context: they report into the hybrid span.)

Attributes: ``db.system.name=lancedb``; the collection (and ``gen_ai.data_source.id``) is the
table name; ``db.operation.name`` is ``search`` (vector), ``full_text_search``,
``hybrid_search`` or ``query`` (a plain scan); ``gen_ai.retrieval.top_k`` is the limit
(LanceDB's default of 10 for a vector, full-text or hybrid search without one; a plain scan
without a limit returns every row and records none), times the number of query vectors for a batch;
``llmtrace.retrieval.returned`` is the number of rows returned. No rows are recorded.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Sized
from typing import Any

from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.vectordb._spans import (
    NOTHING,
    Operation,
    Outcome,
    argument,
    async_wrapper,
    retrieval_operation,
    returned,
    sync_wrapper,
    write_operation,
)
from llmtrace.sdk.gate import get_tracer

SYSTEM = "lancedb"
DEFAULT_LIMIT = 10  # LanceDB's limit for a vector, full-text or hybrid search that sets none

# Builders created by a synchronous hybrid search for its two legs.
_hybrid_legs: weakref.WeakSet[Any] = weakref.WeakSet()

# Synchronous builder class: (operation name, LanceDB applies its default limit).
_SYNC_KINDS = {
    "LanceVectorQueryBuilder": ("search", True),
    "LanceFtsQueryBuilder": ("full_text_search", True),
    "LanceHybridQueryBuilder": ("hybrid_search", True),
    "LanceEmptyQueryBuilder": ("query", False),
}
_ASYNC_KINDS = {
    "AsyncVectorQuery": ("search", True),
    "AsyncFTSQuery": ("full_text_search", True),
    "AsyncHybridQuery": ("hybrid_search", True),
    "AsyncQuery": ("query", False),
    "AsyncTakeQuery": ("take", False),
}


def _on_lancedb_loop() -> bool:
    """Whether this runs on LanceDB's background loop, i.e. inside a synchronous call."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return False
    from lancedb.background_loop import LOOP

    return running is LOOP.loop


def _table_name(table: Any) -> str:
    name = getattr(table, "name", None)
    return name if isinstance(name, str) else SYSTEM


def _query_count(vector: Any) -> int:
    shape = getattr(vector, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) == 2 else 1
    if isinstance(vector, list) and vector and isinstance(vector[0], list | tuple):
        return len(vector)
    return 1


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _describe_sync_search(
    instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Operation | None:
    if instance in _hybrid_legs:
        return None
    operation, has_default = _SYNC_KINDS.get(type(instance).__name__, ("search", False))
    limit = getattr(instance, "_limit", None) or (DEFAULT_LIMIT if has_default else None)
    queries = _query_count(getattr(instance, "_query", None)) if operation == "search" else 1
    query = getattr(instance, "_str_query", None) or getattr(instance, "_query", None)
    return retrieval_operation(
        system=SYSTEM,
        operation=operation,
        collection=_table_name(getattr(instance, "_table", None)),
        top_k=limit * queries if limit is not None else None,
        batch_size=queries,
        query_text=_text(query) or _text(getattr(instance, "_text", None)),
    )


def _describe_async_search(
    instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Operation | None:
    if _on_lancedb_loop():
        return None
    operation, has_default = _ASYNC_KINDS.get(type(instance).__name__, ("search", False))
    inner = instance._inner
    # get_limit: the hybrid query's; the others carry it in their request (not in LanceDB 0.20).
    get_limit = getattr(inner, "get_limit", None)
    request = getattr(inner, "to_query_request", None)
    limit = get_limit() if get_limit else request().limit if request else None
    if limit is None and has_default:
        limit = DEFAULT_LIMIT
    return retrieval_operation(
        system=SYSTEM,
        operation=operation,
        collection=_table_name(getattr(instance, "_table", None)),
        top_k=int(limit) if limit is not None else None,
    )


def _record_count(data: Any) -> int | None:
    rows = getattr(data, "num_rows", None)  # pyarrow Table / RecordBatch
    if isinstance(rows, int):
        return rows
    if isinstance(data, dict):
        return 1
    return len(data) if isinstance(data, Sized) and not isinstance(data, str) else None


def _describe_write(operation: str, data_position: int, data_name: str) -> Any:
    def describe(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation | None:
        if _on_lancedb_loop():
            return None
        return write_operation(
            system=SYSTEM,
            operation=operation,
            collection=_table_name(instance),
            record_count=_record_count(argument(args, kwargs, data_position, data_name)),
        )

    return describe


def _read_rows(result: Any) -> Outcome:
    rows = getattr(result, "num_rows", None)
    return returned(rows) if isinstance(rows, int) else NOTHING


def _read_nothing(result: Any) -> Outcome:
    return NOTHING


def _remember_legs(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Around ``LanceHybridQueryBuilder._create_query_builders``: note the legs it creates."""
    result = wrapped(*args, **kwargs)
    try:
        for leg in (
            getattr(instance, "_fts_query", None),
            getattr(instance, "_vector_query", None),
        ):
            if leg is not None:
                _hybrid_legs.add(leg)
    except TypeError:  # a leg that cannot be weakly referenced: it makes its own span
        pass
    return result


class LanceDBInstrumentor(LibraryInstrumentor):
    """Traces LanceDB searches and writes (sync and async APIs)."""

    package = "lancedb"
    supported = ">= 0.34, < 1"

    def patches(self) -> Iterable[PatchRow]:
        tracer = get_tracer()
        sync_search = sync_wrapper(tracer, _describe_sync_search, _read_rows)
        for class_name in _SYNC_KINDS:
            yield "lancedb.query", f"{class_name}.to_arrow", sync_search
        yield "lancedb.query", "LanceHybridQueryBuilder._create_query_builders", _remember_legs
        yield (
            "lancedb.query",
            "AsyncQueryBase.to_arrow",
            async_wrapper(tracer, _describe_async_search, _read_rows),
        )
        for class_name, wrap in (("LanceTable", sync_wrapper), ("AsyncTable", async_wrapper)):
            add = _describe_write("add", 0, "data")
            yield "lancedb.table", f"{class_name}.add", wrap(tracer, add, _read_nothing)
            # merge_insert(...).execute(data) ends in the table's _do_merge (the upsert path).
            merge = _describe_write("merge_insert", 1, "new_data")
            yield "lancedb.table", f"{class_name}._do_merge", wrap(tracer, merge, _read_nothing)
