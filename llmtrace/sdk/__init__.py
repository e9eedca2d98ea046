"""The runtime SDK: what runs inside the traced application.

``init()`` and its options (``config``, with ``llmtrace.options``), the decorators, streamed
calls, the request context and the per-request metrics, the gate every span passes (``gate``:
whether this call is traced at all), the exporters, and ``_compat``, the one module allowed
another library's private names. Nothing here imports the instrumentations, the server
middleware, the analysis commands or the CLI; they import it. See docs/architecture.md.
"""
