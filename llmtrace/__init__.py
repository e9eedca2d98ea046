"""llmtrace: where did a slow LLM request's time go?

The whole public API::

    import llmtrace
    llmtrace.init(service_name="support-bot")

    @llmtrace.workflow
    def answer(question): ...
"""

from __future__ import annotations

__version__ = "0.1.0"

from collections.abc import Iterable

from llmtrace.config import delivery_stats, force_flush, init, shutdown
from llmtrace.decorators import (
    SpanDecorator,
    embedding,
    llm,
    mark_first_token,
    record_usage,
    rerank,
    retrieval,
    set_attributes,
    span,
    stage,
    tool,
    workflow,
)
from llmtrace.errors import ConfigError, LLMTraceError
from llmtrace.options import settings
from llmtrace.request_context import RequestContext, context, current_trace_id, trace_url
from llmtrace.semconv import STAGES


def instrument(names: Iterable[str] | None = None) -> list[str]:
    """Auto-instrument the installed libraries (or just ``names``); returns what was instrumented.

    An unknown name raises :class:`ConfigError` naming the accepted ones.
    """
    from llmtrace.instrumentation.registry import instrument as _instrument

    return _instrument(None if names is None else list(names))


def uninstrument(names: Iterable[str] | None = None) -> None:
    """Undo ``instrument()`` for ``names`` (default: every library): the originals are restored."""
    from llmtrace.instrumentation.registry import uninstrument as _uninstrument

    _uninstrument(names)


__all__ = [
    "STAGES",
    "ConfigError",
    "LLMTraceError",
    "RequestContext",
    "SpanDecorator",
    "__version__",
    "context",
    "current_trace_id",
    "delivery_stats",
    "embedding",
    "force_flush",
    "init",
    "instrument",
    "llm",
    "mark_first_token",
    "record_usage",
    "rerank",
    "retrieval",
    "set_attributes",
    "settings",
    "shutdown",
    "span",
    "stage",
    "tool",
    "trace_url",
    "uninstrument",
    "workflow",
]
