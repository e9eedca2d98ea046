"""Auto-instrumentation: one ``BaseInstrumentor`` per instrumented library, grouped by what it
instruments, beside the machinery they all share.

- ``providers/``: model providers' SDKs (OpenAI, Anthropic, Bedrock, ...);
- ``frameworks/``: LangChain, LlamaIndex, LiteLLM;
- ``vectordb/``: vector stores and the embedding model that fills them;
- ``hops/``: HTTP clients and threads, where a request leaves the process or changes threads;
- shared: ``registry`` (every instrumentation by name, the ``opentelemetry_instrumentor`` entry
  point), ``_instrumentor`` (the patching base class), ``model_call`` and
  ``model_call_methods`` (a model call's span lifecycle), ``provider`` (naming the provider),
  ``server_timings`` (timings a model server reports). The gate every span passes is the
  runtime's, ``llmtrace.sdk.gate``.

Use ``llmtrace.init()`` (instruments everything installed), ``llmtrace.instrument([...])`` or
``opentelemetry-instrument python app.py``.
"""
