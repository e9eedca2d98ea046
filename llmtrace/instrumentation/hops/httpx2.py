"""``httpx2`` (the HTTP client of ``openai`` 3.x and ``anthropic`` 2.x): spans, phases, traceparent.

See :mod:`llmtrace.instrumentation.hops.hop` for what is recorded.
"""

from __future__ import annotations

from llmtrace.instrumentation.hops.hop import client_instrumentor

HTTPX2Instrumentor = client_instrumentor(
    "httpx2",
    ">= 2, < 3",
    "Traces every request of ``httpx2.Client`` and ``httpx2.AsyncClient``.",
)
