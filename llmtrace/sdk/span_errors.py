"""How a failure is marked on a span, the same everywhere in llmtrace: ``error.type`` (the
semantic conventions' attribute), the ERROR status with a short description, and for an
exception its ``exception`` event.

Two kinds of failure: an exception (its qualified class name is the type) and a failure known by
a code, with no exception (an HTTP 5xx status, a benchmark's own timeout).
"""

from __future__ import annotations

from opentelemetry.trace import Span, Status, StatusCode

from llmtrace import semconv

# A status description is for a person reading a trace, not a copy of a long error body.
_DESCRIPTION_LIMIT = 200


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception, cut to a readable length."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:_DESCRIPTION_LIMIT]


def record_error(span: Span, exc: BaseException, *, exception_event: bool = True) -> None:
    """Mark ``span`` failed by ``exc``."""
    if not span.is_recording():
        return
    span.set_attribute(semconv.ERROR_TYPE, type(exc).__qualname__)
    if exception_event:
        span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, describe(exc)))


def record_error_code(span: Span, error_type: str, description: str | None = None) -> None:
    """Mark ``span`` failed with a code rather than an exception (``"503"``, ``"timeout"``)."""
    if not span.is_recording():
        return
    span.set_attribute(semconv.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, description))


def end_failed(span: Span, exc: BaseException) -> None:
    """Mark ``span`` failed by ``exc`` and end it (a call that raised before it had a result)."""
    try:
        record_error(span, exc)
    finally:
        span.end()
