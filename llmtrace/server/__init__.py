"""The server side of a traced request: ASGI middleware, queue timing, server-reported timings.

- ``LLMTraceMiddleware``: SERVER span per request, continuing the caller's trace; proxy queueing
  from ``X-Request-Start``.
- ``bounded`` / ``bounded_sync``: ``queue``-stage spans around semaphore or lock acquisition.
- ``llmtrace.instrumentation.server_timings``: timings a model server returns (llama.cpp, TGI, OpenAI) as
  ``llmtrace.server.*`` attributes.
"""

from __future__ import annotations

from llmtrace.server.middleware import LLMTraceMiddleware
from llmtrace.server.queue import bounded, bounded_sync

__all__ = ["LLMTraceMiddleware", "bounded", "bounded_sync"]
