"""llmtrace: where did a slow LLM request's time go?

The whole public API::

    import llmtrace
    llmtrace.init(service_name="support-bot")

    @llmtrace.workflow
    def answer(question): ...

The names are imported on first use (PEP 562), so that ``import llmtrace`` and the ``llmtrace``
command do not load the OpenTelemetry SDK until something needs it. Type checkers and IDEs read
the imports under ``TYPE_CHECKING`` below and see every name with its type.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from llmtrace._version import __version__

if TYPE_CHECKING:
    from llmtrace.errors import ConfigError, LLMTraceError
    from llmtrace.options import settings
    from llmtrace.sdk._safety import internal_failures
    from llmtrace.sdk.config import delivery_stats, force_flush, init, shutdown
    from llmtrace.sdk.decorators import (
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
    from llmtrace.sdk.request_context import RequestContext, context, current_trace_id, trace_url
    from llmtrace.semconv import STAGES

# Where each lazily imported public name is defined.
_LAZY_NAMES: dict[str, str] = {
    "delivery_stats": "llmtrace.sdk.config",
    "internal_failures": "llmtrace.sdk._safety",
    "force_flush": "llmtrace.sdk.config",
    "init": "llmtrace.sdk.config",
    "shutdown": "llmtrace.sdk.config",
    "SpanDecorator": "llmtrace.sdk.decorators",
    "embedding": "llmtrace.sdk.decorators",
    "llm": "llmtrace.sdk.decorators",
    "mark_first_token": "llmtrace.sdk.decorators",
    "record_usage": "llmtrace.sdk.decorators",
    "rerank": "llmtrace.sdk.decorators",
    "retrieval": "llmtrace.sdk.decorators",
    "set_attributes": "llmtrace.sdk.decorators",
    "span": "llmtrace.sdk.decorators",
    "stage": "llmtrace.sdk.decorators",
    "tool": "llmtrace.sdk.decorators",
    "workflow": "llmtrace.sdk.decorators",
    "ConfigError": "llmtrace.errors",
    "LLMTraceError": "llmtrace.errors",
    "settings": "llmtrace.options",
    "RequestContext": "llmtrace.sdk.request_context",
    "context": "llmtrace.sdk.request_context",
    "current_trace_id": "llmtrace.sdk.request_context",
    "trace_url": "llmtrace.sdk.request_context",
    "STAGES": "llmtrace.semconv",
}


def instrument(
    names: Iterable[str] | None = None,
    *,
    tracer_provider: object | None = None,
    meter_provider: object | None = None,
) -> list[str]:
    """Auto-instrument the installed libraries (or just ``names``); returns what was instrumented.

    ``tracer_provider`` / ``meter_provider``: where the instrumentations' spans and GenAI metrics
    go, as with any OpenTelemetry instrumentor (default: the global providers; decorators always
    use the global tracer provider). An unknown name raises :class:`ConfigError` naming the
    accepted ones.
    """
    from llmtrace.instrumentation.registry import instrument as _instrument

    return _instrument(
        None if names is None else list(names),
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )


def uninstrument(names: Iterable[str] | None = None) -> None:
    """Undo ``instrument()`` for ``names`` (default: every library): the originals are restored."""
    from llmtrace.instrumentation.registry import uninstrument as _uninstrument

    _uninstrument(names)


def _import_public_name(name: str) -> object:
    """Import the module that defines ``name`` and keep the value, so the next access is direct."""
    module_name = _LAZY_NAMES.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


# Hidden from type checkers, which would otherwise accept any attribute of the module (a typo
# included) as the return type of __getattr__; they see the imports above instead.
if not TYPE_CHECKING:
    __getattr__ = _import_public_name


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
    "internal_failures",
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
