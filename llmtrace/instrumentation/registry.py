"""Every llmtrace instrumentation by name; ``instrument()`` / ``uninstrument()``.

Each entry names its module and class, imported only when asked for: a library that is not
installed (or an instrumentation module that is not present) is skipped with a debug log, and
never stops the others. ``LLMTraceInstrumentor`` is the ``opentelemetry_instrumentor`` entry
point, so ``opentelemetry-instrument python app.py`` instruments everything available.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import sys
import threading
from collections.abc import Collection, Iterable
from typing import Any

import wrapt
from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

logger = logging.getLogger(__name__)

# name -> (module under llmtrace.instrumentation, class, the library it needs). A library that
# changed its layout lists the modules to watch for, "|" between them: mistralai 2 is a namespace
# package (an import hook on it never fires; one on ``mistralai.client`` does), mistralai 1 is not.
INSTRUMENTATIONS: dict[str, tuple[str, str, str]] = {
    "openai": ("providers.openai", "OpenAIInstrumentor", "openai"),
    "anthropic": ("providers.anthropic", "AnthropicInstrumentor", "anthropic"),
    "httpx": ("hops.httpx", "HTTPXInstrumentor", "httpx"),
    "httpx2": ("hops.httpx2", "HTTPX2Instrumentor", "httpx2"),
    "requests": ("hops.requests", "RequestsInstrumentor", "requests"),
    "chromadb": ("vectordb.chromadb", "ChromaInstrumentor", "chromadb"),
    "qdrant": ("vectordb.qdrant", "QdrantInstrumentor", "qdrant_client"),
    "faiss": ("vectordb.faiss", "FaissInstrumentor", "faiss"),
    "langchain": ("frameworks.langchain", "LangChainInstrumentor", "langchain_core"),
    "threading": ("hops.threads", "ThreadingInstrumentor", "threading"),
    "litellm": ("frameworks.litellm", "LiteLLMInstrumentor", "litellm"),
    "llama_index": ("frameworks.llama_index", "LlamaIndexInstrumentor", "llama_index.core"),
    "sentence_transformers": (
        "vectordb.sentence_transformers",
        "SentenceTransformersInstrumentor",
        "sentence_transformers",
    ),
    "google_genai": ("providers.google_genai", "GoogleGenAIInstrumentor", "google.genai"),
    "bedrock": ("providers.bedrock", "BedrockInstrumentor", "botocore"),
    "ollama": ("providers.ollama", "OllamaInstrumentor", "ollama"),
    "mistralai": ("providers.mistralai", "MistralInstrumentor", "mistralai.client|mistralai"),
    "cohere": ("providers.cohere", "CohereInstrumentor", "cohere"),
    "groq": ("providers.groq", "GroqInstrumentor", "groq"),
    "pgvector": ("vectordb.pgvector", "PgVectorInstrumentor", "psycopg"),
    "lancedb": ("vectordb.lancedb", "LanceDBInstrumentor", "lancedb"),
    "milvus": ("vectordb.milvus", "MilvusInstrumentor", "pymilvus"),
}

# Re-entrant: instrumenting one library imports it, and that import may fire the post-import
# hook of another library llmtrace is waiting for (openai imports httpx2).
_lock = threading.RLock()
_active: dict[str, Any] = {}
_deferred: set[str] = set()
_hooked: set[str] = set()


def available_names() -> list[str]:
    """Every instrumentation name llmtrace knows (installed or not)."""
    return list(INSTRUMENTATIONS)


def _installed(library: str) -> bool:
    """Whether ``library`` (any of its "|" alternatives) is importable. ``find_spec`` raises for
    a dotted name whose parent package is missing (``llama_index.core`` without LlamaIndex): that
    is "not installed" too."""
    for module in library.split("|"):
        try:
            if importlib.util.find_spec(module) is not None:
                return True
        except ModuleNotFoundError:
            continue
    return False


def _imported(library: str) -> bool:
    return any(module in sys.modules for module in library.split("|"))


def _load(name: str) -> Any | None:
    module_name, class_name, library = INSTRUMENTATIONS[name]
    module_name = f"{__package__}.{module_name}"
    if not _installed(library):
        logger.debug("llmtrace: %s is not installed; %s instrumentation skipped", library, name)
        return None
    try:
        module = importlib.import_module(module_name)
        return getattr(module, class_name)()
    except Exception:
        logger.debug("llmtrace: %s instrumentation unavailable", name, exc_info=True)
        return None


def instrument(
    names: list[str] | None = None, *, tracer_provider: Any = None, meter_provider: Any = None
) -> list[str]:
    """Instrument the named libraries now; returns those instrumented. ``tracer_provider`` and
    ``meter_provider``: where their spans and metrics go (default: the global providers).

    Without names (``init()``'s default, and ``opentelemetry-instrument``): every known library
    that is installed, but a library the application has not imported yet is instrumented when
    it is imported (a post-import hook), not imported here. Importing every installed library
    up front would cost seconds of start-up (chromadb alone) and memory for libraries the
    application never uses.
    """
    from llmtrace.instrumentation._instrumentor import use_providers

    use_providers(tracer_provider, meter_provider)
    deferring = names is None
    wanted = available_names() if names is None else check_names(names)
    with _lock:
        for name in wanted:
            if name in _active:
                continue
            library = INSTRUMENTATIONS[name][2]
            if deferring and not _imported(library):
                _defer(name, library)
                continue
            instrumentor = _load(name)
            if instrumentor is None or not _supported(name, instrumentor):
                continue
            try:
                if not instrumentor.is_instrumented_by_opentelemetry:
                    # The version was checked just above, with llmtrace's own message.
                    instrumentor.instrument(skip_dep_check=True)
                _active[name] = instrumentor
            except Exception:
                logger.warning("llmtrace: %s instrumentation failed", name, exc_info=True)
        return [name for name in wanted if name in _active]


def _supported(name: str, instrumentor: Any) -> bool:
    """Whether the installed library is in the range the instrumentation supports; if not, one
    WARNING says which version was found and which are supported, and it is not instrumented."""
    from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

    try:
        conflict = get_dependency_conflicts(list(instrumentor.instrumentation_dependencies()))
    except Exception:
        logger.debug("llmtrace: version check of %s failed", name, exc_info=True)
        return True
    if conflict is None:
        return True
    found = getattr(conflict, "found", None)
    if found is None:  # not installed as a distribution (vendored, or another name): try anyway
        return True
    logger.warning(
        "llmtrace: %s is installed, but the %s instrumentation supports %s only; not instrumented",
        found,
        name,
        getattr(conflict, "required", "other versions"),
    )
    return False


def check_names(names: Iterable[str]) -> list[str]:
    """``names`` as a list, or ``ConfigError`` naming the unknown ones and the accepted ones."""
    if isinstance(names, str):
        names = [names]
    wanted = list(names)
    unknown = [name for name in wanted if name not in INSTRUMENTATIONS]
    if unknown:
        from llmtrace.errors import ConfigError

        raise ConfigError(
            f"instrument={unknown!r} names no known instrumentation; accepted: "
            f"{', '.join(sorted(INSTRUMENTATIONS))}"
        )
    return wanted


def _defer(name: str, library: str) -> None:
    if name in _deferred or not _installed(library):
        return
    _deferred.add(name)
    if name not in _hooked:
        # A registered hook cannot be removed; uninstrument() empties _deferred instead.
        _hooked.add(name)
        for module in library.split("|"):
            wrapt.register_post_import_hook(functools.partial(_on_import, name), module)


def _on_import(name: str, module: Any) -> None:
    with _lock:
        if name not in _deferred:
            return
        _deferred.discard(name)
    try:
        instrument([name])
    except Exception:
        logger.warning("llmtrace: %s instrumentation on import failed", name, exc_info=True)


def uninstrument(names: Iterable[str] | None = None) -> None:
    """Undo ``instrument()`` for ``names`` (default: all): the original methods are restored and
    instrumentations still waiting for their library's import are cancelled."""
    with _lock:
        wanted = set(INSTRUMENTATIONS if names is None else check_names(names))
        _deferred.difference_update(wanted)
        for name, instrumentor in list(_active.items()):
            if name not in wanted:
                continue
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
        from llmtrace.sdk.request_context import install_when_used

        # Under opentelemetry-instrument the distro set the provider: request context goes on it
        # (from the first context entered).
        install_when_used()
        instrument(
            None,
            tracer_provider=kwargs.get("tracer_provider"),
            meter_provider=kwargs.get("meter_provider"),
        )

    def _uninstrument(self, **kwargs: Any) -> None:
        uninstrument()
