"""``httpx2`` (the HTTP client of ``openai`` 3.x and ``anthropic`` 2.x): spans, phases, traceparent.

See :mod:`llmtrace.instrumentation._http` for what is recorded.
"""

from __future__ import annotations

from collections.abc import Iterable

from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow


class HTTPX2Instrumentor(LibraryInstrumentor):
    """Traces every request of ``httpx2.Client`` and ``httpx2.AsyncClient``."""

    package = "httpx2"
    supported = ">= 2, < 3"

    def patches(self) -> Iterable[PatchRow]:
        from llmtrace.instrumentation._http import client_patches

        return client_patches("httpx2")
