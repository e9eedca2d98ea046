"""The keys OpenTelemetry keeps a span, baggage and its suppression flags under in a context,
found through its public API once, at import.

The hot path reads the current context (a ``Context``, a dict) by these keys: one dict lookup
where ``trace.get_current_span()``, ``baggage.get_all()`` or ``is_instrumentation_enabled()``
would each cost Python calls on every model call. The API keeps the keys themselves private
(``_SPAN_KEY``, ``_BAGGAGE_KEY``, ``_SUPPRESS_INSTRUMENTATION_KEY``...), so they are found here
as the key each public setter adds to a context. When one cannot be found that way (an API
that no longer keeps a context as a dict), it is None (or empty) and callers use the public
getters instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.instrumentation.utils import (
    suppress_http_instrumentation,
    suppress_instrumentation,
)

logger = logging.getLogger(__name__)


def _added_keys(before: Context, after: object) -> tuple[str, ...]:
    """The keys ``after`` (a context) has that ``before`` has not; none when ``after`` is not a
    dict of string keys."""
    if not isinstance(after, dict):
        return ()
    keys = tuple(key for key in after if key not in before)
    return keys if all(isinstance(key, str) for key in keys) else ()


def _added_key(make: Callable[[Context], object]) -> str | None:
    """The one key ``make`` (a public setter) adds to an empty context."""
    try:
        empty = Context()
        keys = _added_keys(empty, make(empty))
        return keys[0] if len(keys) == 1 else None
    except Exception:
        logger.debug("llmtrace: a context key could not be found", exc_info=True)
        return None


def _keys_while(manager: Callable[[], Any]) -> tuple[str, ...]:
    """The keys ``manager()`` (a suppression context manager) sets in the current context: the
    SDK's exporters set the first of them alone, ``suppress_instrumentation()`` also a plain
    one, and a context with any of them set is suppressed."""
    try:
        empty = Context()
        token = otel_context.attach(empty)
        try:
            with manager():
                return _added_keys(empty, otel_context.get_current())
        finally:
            otel_context.detach(token)
    except Exception:
        logger.debug("llmtrace: the suppression keys could not be found", exc_info=True)
        return ()


SPAN: str | None = _added_key(lambda empty: trace.set_span_in_context(trace.INVALID_SPAN, empty))
BAGGAGE: str | None = _added_key(lambda empty: baggage.set_baggage("k", "v", context=empty))
SUPPRESS: tuple[str, ...] = _keys_while(suppress_instrumentation)
SUPPRESS_HTTP: tuple[str, ...] = _keys_while(suppress_http_instrumentation)
