"""The runtime SDK: what runs inside the traced application.

``init()`` and its options (``config``, with ``llmtrace.options``), the decorators, streamed
calls, the request context and the per-request metrics, the gate every span passes (``gate``:
whether this call is traced at all), the exporters, and ``_compat``, the one module allowed
another library's private names. Nothing here imports the server middleware, the commands or
the CLI, and only ``init()``/``shutdown()`` reach the instrumentations (through their registry:
init composes the two); they import it. See docs/architecture.md, "Layers";
tests/core/test_layers.py holds the code to it.
"""
