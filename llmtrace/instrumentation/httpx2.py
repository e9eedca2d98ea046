"""``httpx2`` (the HTTP client of ``openai`` 3.x and ``anthropic`` 2.x): spans, phases, traceparent.

See :mod:`llmtrace.instrumentation._http` for what is recorded.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from llmtrace.instrumentation._base import Patches

_INSTRUMENTS = ("httpx2 >= 2",)


class HTTPX2Instrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Traces every request of ``httpx2.Client`` and ``httpx2.AsyncClient``."""

    _patches = Patches()

    def instrumentation_dependencies(self) -> Collection[str]:
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        import httpx2

        from llmtrace.instrumentation._http import make_send_wrappers

        send, async_send = make_send_wrappers(httpx2, "httpx2")
        self._patches.wrap("httpx2", "Client.send", send)
        self._patches.wrap("httpx2", "AsyncClient.send", async_send)

    def _uninstrument(self, **kwargs: Any) -> None:
        self._patches.restore()
