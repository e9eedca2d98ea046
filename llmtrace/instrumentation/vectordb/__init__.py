"""Vector-store instrumentations (chromadb, qdrant-client, faiss, pgvector, LanceDB, Milvus) and
sentence-transformers, the embedding model that fills them.

Each module holds one ``BaseInstrumentor``; queries become ``retrieval`` spans, writes become
database CLIENT spans with stage ``other``, embeddings ``embedding`` spans. The shared span
lifecycle is in ``_spans``.
"""
