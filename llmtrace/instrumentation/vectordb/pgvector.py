"""pgvector through psycopg 3: SQL ordered by a vector distance operator as a retrieval span.

pgvector is a PostgreSQL extension, so its searches are plain SQL sent through the driver:
``SELECT ... FROM items ORDER BY embedding <-> %s LIMIT 5``. ``Cursor.execute`` and
``AsyncCursor.execute`` are patched (``Connection.execute``, SQLAlchemy's psycopg dialect and
psycopg_pool all execute through them), and server-side (named) cursors too.

Every other statement is left alone, at the cost of a substring test for ``<`` and, where there
is one, a regular-expression scan for a distance operator (``<->`` L2, ``<=>`` cosine, ``<#>``
inner product, ``<+>`` L1, ``<~>`` Hamming, ``<%>`` Jaccard) before anything else is done; nothing
is parsed, and the tracing gate is not asked, unless one is there. A query counts as a vector search when its ``ORDER BY``
sorts on such an operator, directly or through a select-list alias
(``embedding <=> %s AS distance ... ORDER BY distance``).

Attributes: ``db.system.name=postgresql``, ``db.operation.name=SELECT``; the collection (and
``gen_ai.data_source.id``) is the first table named after ``FROM``, as written
(``public.items``); ``gen_ai.retrieval.top_k`` is the ``LIMIT`` (or ``FETCH FIRST n ROWS``),
read from the parameters when it is a placeholder (``%s``, ``%(name)s``, ``$1``);
``llmtrace.retrieval.returned`` is the cursor's row count. A server-side cursor fetches its rows
later, and in pipeline mode ``execute`` returns before the result arrives: those spans record no
returned count (and in pipeline mode they time the sending only). ``executemany`` and
``Cursor.stream`` are not traced. No SQL text, parameters or rows are recorded.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.vectordb._spans import (
    NOTHING,
    Operation,
    Outcome,
    ReadResult,
    argument,
    async_wrapper,
    retrieval_operation,
    returned,
    sync_wrapper,
)
from llmtrace.sdk.gate import get_tracer

SYSTEM = "postgresql"
OPERATION = "SELECT"
_REPLACED = "_llmtrace_replaced"

# The test every statement with a "<" pays: a distance operator anywhere in the text.
# (``<%%>`` is ``<%>`` escaped in a psycopg query with parameters.)
_DISTANCE_OPERATOR = re.compile(r"<(?:[-=#+~%]|%%)>")
_STRING_LITERAL = re.compile(r"'(?:[^']|'')*'")
_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)
_ORDER_BY = re.compile(r"\bORDER\s+BY\b", re.IGNORECASE)
_CLAUSE_END = re.compile(r"\b(?:LIMIT|OFFSET|FETCH|FOR|UNION|INTERSECT|EXCEPT)\b|[;)]", re.I)
_NAME = r'(?:"[^"]+"|[A-Za-z_][\w$]*)'
_ALIASED_DISTANCE = re.compile(
    rf"<(?:[-=#+~%]|%%)>[^,]*?\bAS\s+({_NAME})\s*(?:,|\bFROM\b)", re.IGNORECASE | re.DOTALL
)
_TABLE = re.compile(rf"\bFROM\s+(?:ONLY\s+)?({_NAME}(?:\s*\.\s*{_NAME})*)", re.IGNORECASE)
# A row limit: a number or a placeholder (psycopg's %s / %b / %t / %(name)s, or $n).
_COUNT = r"(\d+|%[sbt]|%\(\w+\)[sbt]|\$\d+)"
_LIMIT = re.compile(
    rf"\bLIMIT\s+{_COUNT}|\bFETCH\s+(?:FIRST|NEXT)\s+{_COUNT}\s+ROWS?\s+ONLY", re.IGNORECASE
)
_PLACEHOLDER = re.compile(r"%%|%(?:\((\w+)\))?[sbt]")


def _unquoted(name: str) -> str:
    return ".".join(part.strip().strip('"') for part in name.split("."))


def _orders_by_distance(sql: str, order_by: int) -> bool:
    """Whether the ORDER BY clause starting at ``order_by`` sorts on a distance operator."""
    end = _CLAUSE_END.search(sql, order_by)
    clause = sql[order_by : end.start() if end else len(sql)]
    if _DISTANCE_OPERATOR.search(clause):
        return True
    first_key = clause.split(",")[0].split()
    if not first_key:
        return False
    aliases = {_unquoted(m.group(1)) for m in _ALIASED_DISTANCE.finditer(sql, 0, order_by)}
    return _unquoted(first_key[0]) in aliases


def _placeholder_value(sql: str, position: int, token: str, params: Any) -> Any:
    """The parameter a LIMIT placeholder at ``position`` stands for (None if unknown)."""
    if params is None:
        return None
    if token.startswith("$"):
        index = int(token[1:]) - 1
        return params[index] if isinstance(params, Sequence) and index < len(params) else None
    if token.startswith("%("):
        return params.get(token[2:-2]) if isinstance(params, Mapping) else None
    if not isinstance(params, Sequence):
        return None
    index = sum(1 for m in _PLACEHOLDER.finditer(sql, 0, position) if m.group() != "%%")
    return params[index] if index < len(params) else None


def _top_k(sql: str, after: int, params: Any) -> int | None:
    match = _LIMIT.search(sql, after)
    if match is None:
        return None
    group = 1 if match.group(1) is not None else 2
    token = match.group(group)
    value: Any = (
        token if token.isdigit() else _placeholder_value(sql, match.start(group), token, params)
    )
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def vector_search(sql: str, params: Any = None) -> tuple[str, int | None] | None:
    """``(table, top_k)`` when ``sql`` is ordered by a pgvector distance, else None."""
    if _DISTANCE_OPERATOR.search(sql) is None:
        return None
    sql = _STRING_LITERAL.sub("''", _COMMENT.sub(" ", sql))
    for order_by in reversed([m.end() for m in _ORDER_BY.finditer(sql)]):
        if _orders_by_distance(sql, order_by):
            table = next(
                (m.group(1) for m in _TABLE.finditer(sql) if not m.group(1).startswith("(")),
                None,
            )
            return _unquoted(table) if table else SYSTEM, _top_k(sql, order_by, params)
    return None


def _query_text(query: Any, cursor: Any) -> str | None:
    if isinstance(query, str):
        return query
    if isinstance(query, bytes):
        return query.decode("utf-8", "replace")
    as_string = getattr(query, "as_string", None)  # psycopg.sql.Composable
    if as_string is None:
        return None
    text = as_string(cursor)
    return text if isinstance(text, str) else None


def _describe_execute(
    instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Operation | None:
    sql = _query_text(argument(args, kwargs, 0, "query"), instance)
    if sql is None:
        return None
    found = vector_search(sql, argument(args, kwargs, 1, "params"))
    if found is None:
        return None
    table, top_k = found
    return retrieval_operation(system=SYSTEM, operation=OPERATION, collection=table, top_k=top_k)


def _read_rowcount(cursor: Any) -> Outcome:
    count = getattr(cursor, "rowcount", -1)
    # -1: not known (pipeline mode sends the query and returns before the result arrives).
    return returned(count) if isinstance(count, int) and count >= 0 else NOTHING


def _read_nothing(cursor: Any) -> Outcome:
    return NOTHING


def _replace_sync(original: Callable[..., Any], traced: Callable[..., Any]) -> Callable[..., Any]:
    """``execute`` handing a call to the wrapt-style ``traced`` only when its SQL string holds a
    distance operator: every other statement costs a substring test (most SQL has no ``<``) and at
    most one regular-expression scan. Queries given
    as bytes or ``psycopg.sql`` objects go to ``traced``, which reads them (and passes most
    through)."""
    search = _DISTANCE_OPERATOR.search

    @functools.wraps(original)
    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        query = args[0] if args else kwargs.get("query")
        if type(query) is str and ("<" not in query or search(query) is None):
            return original(self, *args, **kwargs)
        return traced(original.__get__(self), self, args, kwargs)

    return execute


def _replace_async(original: Callable[..., Any], traced: Callable[..., Any]) -> Callable[..., Any]:
    """:func:`_replace_sync` for a coroutine method (itself a coroutine function, so that code
    inspecting ``AsyncCursor.execute`` still sees one)."""
    search = _DISTANCE_OPERATOR.search

    @functools.wraps(original)
    async def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        query = args[0] if args else kwargs.get("query")
        if type(query) is str and ("<" not in query or search(query) is None):
            return await original(self, *args, **kwargs)
        return await traced(original.__get__(self), self, args, kwargs)

    return execute


def _replacement(sync: bool, read: ReadResult) -> Callable[[Callable[..., Any]], Any]:
    """A row's factory: the original ``execute`` in, its replacement out."""
    traced = (sync_wrapper if sync else async_wrapper)(get_tracer(), _describe_execute, read)
    replace = _replace_sync if sync else _replace_async
    return lambda original: replace(original, traced)


# (module, class, synchronous, how to read the result); modules a psycopg version lacks are
# skipped (3.1 keeps both server cursors in psycopg.server_cursor).
_CURSORS: tuple[tuple[str, str, bool, ReadResult], ...] = (
    ("psycopg.cursor", "Cursor", True, _read_rowcount),
    ("psycopg.cursor_async", "AsyncCursor", False, _read_rowcount),
    ("psycopg._server_cursor", "ServerCursor", True, _read_nothing),
    ("psycopg._server_cursor_async", "AsyncServerCursor", False, _read_nothing),
    ("psycopg.server_cursor", "ServerCursor", True, _read_nothing),
    ("psycopg.server_cursor", "AsyncServerCursor", False, _read_nothing),
)


class PgVectorInstrumentor(LibraryInstrumentor):
    """Traces pgvector searches sent through psycopg 3 (sync and async cursors).

    ``execute`` runs for every statement an application sends, so it is replaced by a plain
    function rather than wrapped in a ``wrapt`` proxy: on psycopg's cursor the proxy alone cost
    several times the whole check (measured in benchmarks/README.md, "Measured without a
    script"). A row's
    third element is therefore a factory, ``original execute -> replacement``.
    """

    package = "psycopg"
    supported = ">= 3.1, < 4"

    def patches(self) -> Iterable[PatchRow]:
        for module_name, class_name, sync, read in _CURSORS:
            yield module_name, f"{class_name}.execute", _replacement(sync, read)

    def _instrument(self, **kwargs: Any) -> None:
        for module_name, path, replacement in self.patches():
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            class_name, method = path.split(".")
            owner = getattr(module, class_name, None)
            original = getattr(owner, "__dict__", {}).get(method)
            if original is None or getattr(original, _REPLACED, False):
                continue
            execute = replacement(original)
            setattr(execute, _REPLACED, True)
            self._patches.replace(module_name, path, execute)
