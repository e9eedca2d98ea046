"""``httpx`` (older ``openai``/``anthropic`` clients, most Python services): spans, phases, traceparent.

See :mod:`llmtrace.instrumentation._http` for what is recorded.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from llmtrace.instrumentation._base import Patches

_INSTRUMENTS = ("httpx >= 0.23",)


class HTTPXInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Traces every request of ``httpx.Client`` and ``httpx.AsyncClient``."""

    _patches = Patches()

    def instrumentation_dependencies(self) -> Collection[str]:
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        import httpx

        from llmtrace.instrumentation._http import make_send_wrappers

        send, async_send = make_send_wrappers(httpx, "httpx")
        self._patches.wrap("httpx", "Client.send", send)
        self._patches.wrap("httpx", "AsyncClient.send", async_send)

    def _uninstrument(self, **kwargs: Any) -> None:
        self._patches.restore()
