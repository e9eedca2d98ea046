"""Model providers' client SDKs: one module per SDK, each a model call on the shared lifecycle
(``llmtrace.instrumentation.model_call``)."""
