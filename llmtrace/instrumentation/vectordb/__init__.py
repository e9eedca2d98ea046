"""Vector-store instrumentations: chromadb, qdrant-client, faiss.

Each module holds one ``BaseInstrumentor`` (``ChromaInstrumentor``, ``QdrantInstrumentor``,
``FaissInstrumentor``); queries become ``retrieval`` spans, writes become database CLIENT spans
with stage ``other``. The shared span lifecycle is in ``_spans``.
"""
