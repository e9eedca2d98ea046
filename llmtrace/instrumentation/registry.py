"""Every llmtrace instrumentation by name; ``instrument()`` / ``uninstrument()``.

Each entry names its module and class, imported only when asked for: a library that is not
installed (or an instrumentation module that is not present) is skipped with a debug log, and
never stops the others. ``LLMTraceInstrumentor`` is the ``opentelemetry_instrumentor`` entry
point, so ``opentelemetry-instrument python app.py`` instruments everything available.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import threading
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

logger = logging.getLogger(__name__)

# name -> (module, class, the library it needs)
INSTRUMENTATIONS: dict[str, tuple[str, str, str]] = {
    "openai": ("llmtrace.instrumentation.openai", "OpenAIInstrumentor", "openai"),
    "anthropic": ("llmtrace.instrumentation.anthropic", "AnthropicInstrumentor", "anthropic"),
    "httpx": ("llmtrace.instrumentation.httpx", "HTTPXInstrumentor", "httpx"),
    "httpx2": ("llmtrace.instrumentation.httpx2", "HTTPX2Instrumentor", "httpx2"),
    "requests": ("llmtrace.instrumentation.requests", "RequestsInstrumentor", "requests"),
    "chromadb": ("llmtrace.instrumentation.vectordb.chromadb", "ChromaInstrumentor", "chromadb"),
    "qdrant": ("llmtrace.instrumentation.vectordb.qdrant", "QdrantInstrumentor", "qdrant_client"),
    "faiss": ("llmtrace.instrumentation.vectordb.faiss", "FaissInstrumentor", "faiss"),
    "sentence_transformers": (
        "llmtrace.instrumentation.sentence_transformers",
        "SentenceTransformersInstrumentor",
        "sentence_transformers",
    ),
}

_lock = threading.Lock()
_active: dict[str, Any] = {}


def available_names() -> list[str]:
    """Every instrumentation name llmtrace knows (installed or not)."""
    return list(INSTRUMENTATIONS)


def _load(name: str) -> Any | None:
    module_name, class_name, library = INSTRUMENTATIONS[name]
    if importlib.util.find_spec(library) is None:
        logger.debug("llmtrace: %s is not installed; %s instrumentation skipped", library, name)
        return None
    try:
        module = importlib.import_module(module_name)
        return getattr(module, class_name)()
    except Exception:
        logger.debug("llmtrace: %s instrumentation unavailable", name, exc_info=True)
        return None


def instrument(names: list[str] | None = None) -> list[str]:
    """Instrument the named libraries (all known ones when None); returns those now instrumented."""
    wanted = available_names() if names is None else list(names)
    with _lock:
        for name in wanted:
            if name not in INSTRUMENTATIONS:
                logger.debug("llmtrace: no instrumentation named %r", name)
                continue
            if name in _active:
                continue
            instrumentor = _load(name)
            if instrumentor is None:
                continue
            try:
                if not instrumentor.is_instrumented_by_opentelemetry:
                    instrumentor.instrument(skip_dep_check=True)
                _active[name] = instrumentor
            except Exception:
                logger.warning("llmtrace: %s instrumentation failed", name, exc_info=True)
        return [name for name in wanted if name in _active]


def uninstrument() -> None:
    """Undo ``instrument()``: every original method is restored."""
    with _lock:
        for name, instrumentor in list(_active.items()):
            try:
                instrumentor.uninstrument()
            except Exception:
                logger.warning("llmtrace: %s uninstrument failed", name, exc_info=True)
            del _active[name]


def instrumented() -> list[str]:
    with _lock:
        return list(_active)


class LLMTraceInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """All of llmtrace's instrumentations that can run here (``opentelemetry-instrument``)."""

    def instrumentation_dependencies(self) -> Collection[str]:
        # Each instrumentation checks its own library; this one needs nothing on its own.
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        instrument(None)

    def _uninstrument(self, **kwargs: Any) -> None:
        uninstrument()
