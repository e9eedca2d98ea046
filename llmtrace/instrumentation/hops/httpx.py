"""``httpx`` (older ``openai``/``anthropic`` clients, most Python services): spans, phases, traceparent.

See :mod:`llmtrace.instrumentation.hops.hop` for what is recorded.
"""

from __future__ import annotations

from llmtrace.instrumentation.hops.hop import client_instrumentor

HTTPXInstrumentor = client_instrumentor(
    "httpx",
    ">= 0.27, < 1",
    "Traces every request of ``httpx.Client`` and ``httpx.AsyncClient``.",
)
