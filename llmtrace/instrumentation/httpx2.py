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
        import httpx2

        from llmtrace.instrumentation._http import make_send_wrappers

        send, async_send = make_send_wrappers(httpx2, "httpx2")
        yield "httpx2", "Client.send", send
        yield "httpx2", "AsyncClient.send", async_send
