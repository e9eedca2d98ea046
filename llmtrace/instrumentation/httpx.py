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
        import httpx

        from llmtrace.instrumentation._http import make_send_wrappers

        send, async_send = make_send_wrappers(httpx, "httpx")
        yield "httpx", "Client.send", send
        yield "httpx", "AsyncClient.send", async_send
