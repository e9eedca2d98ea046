"""Auto-instrumentation: one module per instrumented library, each a ``BaseInstrumentor``.

Use ``llmtrace.init()`` (instruments everything installed), ``llmtrace.instrument([...])`` or
``opentelemetry-instrument python app.py``; :mod:`llmtrace.instrumentation.registry` lists them.
"""
