"""``httpx`` (older ``openai``/``anthropic`` clients, most Python services): spans, phases, traceparent.

See :mod:`llmtrace.instrumentation._http` for what is recorded.
"""

from __future__ import annotations

from collections.abc import Iterable

from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow


class HTTPXInstrumentor(LibraryInstrumentor):
    """Traces every request of ``httpx.Client`` and ``httpx.AsyncClient``."""

    package = "httpx"
    supported = ">= 0.27, < 1"

    def patches(self) -> Iterable[PatchRow]:
        from llmtrace.instrumentation._http import client_patches

        return client_patches("httpx")
