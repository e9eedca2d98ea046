"""The span lifecycle shared by the vector-store and embedding-model wrappers.

A library module describes a call (``Operation``) and how to read its result; this module starts
the span, runs the call, records the outcome and ends the span exactly once. Whatever goes wrong
in the describing or reading is logged once and the call proceeds untouched
(docs/architecture.md, rule 1).

One span per logical operation (rule 4): when the application already wrapped the call in a
span of the same stage (``@llmtrace.retrieval`` around a store query, ``@llmtrace.embedding``
around ``encode``, or one instrumented method calling another) and that span names no data
source (model) or the same one, no second span is made; the call's details (``db.*``, top_k,
returned count, dimension) are added to the enclosing span where it does not set them itself.
A retrieval span for a *different* data source (a hybrid search over two stores) gets one child
span per store.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Tracer
from opentelemetry.util.types import AttributeValue

from llmtrace import semconv
from llmtrace.sdk._safety import log_once
from llmtrace.sdk.content import set_retrieval_content
from llmtrace.sdk.gate import (
    bounded_content,
    capture_settings,
    get_tracer,
    should_trace,
)
from llmtrace.sdk.span_errors import record_error

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Operation:
    """One store or model call, as known before it runs."""

    name: str
    stage: str
    attributes: Mapping[str, AttributeValue]
    # (attribute, value) naming what is operated on (data source, model): an enclosing span of
    # the same stage naming the same thing, or nothing, is this same operation.
    identity: tuple[str, str] | None = None
    # Read only when content capture is on.
    content: Mapping[str, str] = field(default_factory=dict)
    kind: SpanKind = SpanKind.CLIENT


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a finished call returned, as attributes."""

    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    content: Mapping[str, str] = field(default_factory=dict)


Describe = Callable[[Any, tuple[Any, ...], dict[str, Any]], Operation | None]
ReadResult = Callable[[Any], Outcome]


def retrieval_operation(
    *,
    system: str,
    operation: str,
    collection: str,
    top_k: int | None,
    batch_size: int | None = None,
    query_text: str | None = None,
) -> Operation:
    """A query against a store: a ``retrieval`` span per the span conventions of
    docs/architecture.md."""
    attributes: dict[str, AttributeValue] = {
        semconv.STAGE: "retrieval",
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_RETRIEVAL,
        semconv.GEN_AI_DATA_SOURCE_ID: collection,
        semconv.DB_SYSTEM_NAME: system,
        semconv.DB_COLLECTION_NAME: collection,
        semconv.DB_OPERATION_NAME: operation,
    }
    if top_k is not None:
        attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] = top_k
    if batch_size is not None and batch_size > 1:
        attributes[semconv.DB_OPERATION_BATCH_SIZE] = batch_size
    content = {semconv.GEN_AI_RETRIEVAL_QUERY_TEXT: query_text} if query_text else {}
    return Operation(
        name=f"retrieval {collection}",
        stage="retrieval",
        attributes=attributes,
        identity=(semconv.GEN_AI_DATA_SOURCE_ID, collection),
        content=content,
    )


def write_operation(
    *, system: str, operation: str, collection: str, record_count: int | None
) -> Operation:
    """A write (add, upsert): a database CLIENT span named after the operation, stage ``other``."""
    attributes: dict[str, AttributeValue] = {
        semconv.STAGE: "other",
        semconv.DB_SYSTEM_NAME: system,
        semconv.DB_COLLECTION_NAME: collection,
        semconv.DB_OPERATION_NAME: operation,
    }
    if record_count is not None and record_count > 1:
        attributes[semconv.DB_OPERATION_BATCH_SIZE] = record_count
    return Operation(name=f"{operation} {collection}", stage="other", attributes=attributes)


def returned(count: int | None, documents: Sequence[Mapping[str, Any]] = ()) -> Outcome:
    """The outcome of a retrieval: how many results, and (content capture only) which."""
    attributes: dict[str, AttributeValue] = {}
    if count is not None:
        attributes[semconv.RETRIEVAL_RETURNED] = count
    content = {semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(list(documents))} if documents else {}
    return Outcome(attributes=attributes, content=content)


NOTHING = Outcome()


def argument(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], position: int, name: str, default: Any = None
) -> Any:
    """A call's argument by keyword or position (position counts after ``self``)."""
    if name in kwargs:
        return kwargs[name]
    if len(args) > position:
        return args[position]
    return default


def _set_content(span: Span, content: Mapping[str, str]) -> None:
    if not content:
        return
    capture, max_bytes, redact, _ = capture_settings()
    if capture:
        bounded = {key: bounded_content(value, max_bytes, redact) for key, value in content.items()}
        set_retrieval_content(span, bounded)


def _enclosing_same_operation(operation: Operation) -> Span | None:
    """The application's own span this call belongs to, if any (see the module doc)."""
    if operation.identity is None:
        return None
    current = trace.get_current_span()
    attributes = getattr(current, "attributes", None)
    if not current.is_recording() or not attributes:
        return None
    if attributes.get(semconv.STAGE) != operation.stage:
        return None
    key, value = operation.identity
    named = attributes.get(key)
    if named is not None and named != value:
        return None
    return current


def _enrich(span: Span, values: Mapping[str, AttributeValue]) -> None:
    existing = getattr(span, "attributes", None) or {}
    for key, value in values.items():
        if key not in existing:
            span.set_attribute(key, value)


class _Started:
    """A call in flight: its own span, or the enclosing span it reports into."""

    __slots__ = ("operation", "owned", "span")

    def __init__(self, span: Span, operation: Operation, owned: bool) -> None:
        self.span = span
        self.operation = operation
        self.owned = owned

    def failed(self, exc: BaseException) -> None:
        if self.owned:
            if self.span.is_recording():
                record_error(self.span, exc)
            self.span.end()

    def succeeded(self, result: Any, read_result: ReadResult) -> None:
        try:
            if self.span.is_recording():
                outcome = read_result(result)
                if self.owned:
                    self.span.set_attributes(outcome.attributes)
                    _set_content(self.span, outcome.content)
                else:
                    _enrich(self.span, outcome.attributes)
        except Exception:
            log_once(logger, f"reading the result of {self.operation.name!r} failed")
        finally:
            if self.owned:
                self.span.end()


def _start(
    tracer: Tracer, describe: Describe, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> _Started | None:
    try:
        if not should_trace():
            return None
        operation = describe(instance, args, kwargs)
        if operation is None:
            return None
        enclosing = _enclosing_same_operation(operation)
        if enclosing is not None:
            _enrich(enclosing, operation.attributes)
            return _Started(enclosing, operation, owned=False)
        span = tracer.start_span(operation.name, kind=operation.kind)
        if span.is_recording():
            span.set_attributes(operation.attributes)
            _set_content(span, operation.content)
        return _Started(span, operation, owned=True)
    except Exception:
        log_once(logger, f"describing a call to {getattr(describe, '__qualname__', describe)}")
        return None


def _current(span: Span) -> Any:
    """``span`` current while the call runs. Nothing is recorded on it here: the status is set by
    ``_Started.failed`` on llmtrace's own span only, never on an application's enclosing span
    whose owner may catch the exception (``use_span`` would mark it ERROR by default)."""
    return trace.use_span(
        span, end_on_exit=False, record_exception=False, set_status_on_exception=False
    )


def sync_wrapper(tracer: Tracer, describe: Describe, read_result: ReadResult) -> Any:
    """A ``wrapt`` wrapper for a synchronous method."""

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        started = _start(tracer, describe, instance, args, kwargs)
        if started is None:
            return wrapped(*args, **kwargs)
        try:
            with _current(started.span):
                result = wrapped(*args, **kwargs)
        except BaseException as exc:
            started.failed(exc)
            raise
        started.succeeded(result, read_result)
        return result

    return wrapper


def async_wrapper(tracer: Tracer, describe: Describe, read_result: ReadResult) -> Any:
    """A ``wrapt`` wrapper for a coroutine method."""

    async def wrapper(
        wrapped: Callable[..., Awaitable[Any]],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        started = _start(tracer, describe, instance, args, kwargs)
        if started is None:
            return await wrapped(*args, **kwargs)
        try:
            with _current(started.span):
                result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            started.failed(exc)
            raise
        started.succeeded(result, read_result)
        return result

    return wrapper


Wrap = Callable[[Tracer, Describe, ReadResult], Any]


def method_patches(
    classes: Sequence[tuple[str, str, Wrap]], methods: Sequence[tuple[str, Describe, ReadResult]]
) -> Iterator[tuple[str, str, Any]]:
    """Patch rows for every ``method`` of every class: ``(module, class, sync or async wrapper)``
    times ``(method, describe, read_result)``, as the store clients' instrumentors list them."""
    tracer = get_tracer()
    for module_name, class_name, wrap in classes:
        for method, describe, read in methods:
            yield module_name, f"{class_name}.{method}", wrap(tracer, describe, read)
