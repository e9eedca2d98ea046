"""faiss: ``search`` on every index class as a retrieval span.

faiss's index classes are SWIG proxies. On import, ``faiss/class_wrappers.py`` replaces
``search`` on each ``faiss.Index`` subclass whose SWIG proxy defines its own ``search`` with a
numpy-friendly ``replacement_search`` (the C method stays reachable as ``search_c``); subclasses
that define none inherit their parent's replacement. So the right level is each class that holds
a ``replacement_search`` in its own ``__dict__``: patching those covers every concrete index
(``IndexFlatL2``, ``IndexIVFFlat``, ``IndexHNSWFlat``, ... and indexes from ``read_index`` or
``index_factory``) exactly once per call, since ``replacement_search`` calls into C, not back into
another Python ``search``.

faiss indexes have no name: ``gen_ai.data_source.id`` is the index class (``IndexFlatL2``) unless
the application names the index with :func:`name_index`. ``gen_ai.retrieval.top_k`` is ``k`` per
query times the number of query vectors; ``llmtrace.retrieval.returned`` counts neighbours with an
id other than -1 (faiss pads missing results with -1).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable
from typing import Any

from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.vectordb._spans import (
    NOTHING,
    Operation,
    Outcome,
    argument,
    retrieval_operation,
    returned,
    sync_wrapper,
)

# The module opts out of type checking (a file-level "type: ignore"), so mypy sees no names in it.
from llmtrace.sdk.gate import get_tracer, is_wrapped_by_llmtrace

logger = logging.getLogger(__name__)

SYSTEM = "faiss"
_REPLACED_SEARCH = "replacement_search"

_index_names: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def name_index(index: Any, name: str) -> None:
    """Use ``name`` as the index's data source (``retrieval {name}``) instead of its class."""
    _index_names[index] = name


def _index_name(index: Any) -> str:
    try:
        return _index_names.get(index) or type(index).__name__
    except TypeError:  # an object that cannot be weakly referenced
        return type(index).__name__


def _describe_search(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation:
    queries = argument(args, kwargs, 0, "x")
    k = int(argument(args, kwargs, 1, "k"))
    shape = getattr(queries, "shape", None)
    query_count = int(shape[0]) if shape is not None and len(shape) == 2 else 1
    return retrieval_operation(
        system=SYSTEM,
        operation="search",
        collection=_index_name(instance),
        top_k=k * query_count,
        batch_size=query_count,
    )


def _read_search(result: Any) -> Outcome:
    if not isinstance(result, tuple) or len(result) != 2:
        return NOTHING
    labels = result[1]
    return returned(int((labels != -1).sum()))


def _index_classes_with_own_search(faiss: Any) -> list[type]:
    classes = []
    for value in vars(faiss).values():
        if not (isinstance(value, type) and issubclass(value, faiss.Index)):
            continue
        search = value.__dict__.get("search")
        if is_wrapped_by_llmtrace(search) or getattr(search, "__name__", None) == _REPLACED_SEARCH:
            classes.append(value)
    return classes


class FaissInstrumentor(LibraryInstrumentor):
    """Traces ``search`` on faiss indexes."""

    package = "faiss-cpu"
    supported = ">= 1.7, < 2"

    def patches(self) -> Iterable[PatchRow]:
        import faiss

        wrapper = sync_wrapper(get_tracer(), _describe_search, _read_search)
        classes = _index_classes_with_own_search(faiss)
        if not classes:
            logger.debug("faiss has no Python-level search replacements; not instrumented")
        for cls in classes:
            # Patches leaves an already wrapped class alone.
            yield "faiss", f"{cls.__name__}.search", wrapper
