"""The demo's vector store: an exact inner-product faiss index over normalised embeddings."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmtrace.demo.corpus import Passage


class VectorIndex:
    """Cosine similarity search (inner product of unit vectors) over the passages."""

    def __init__(self, passages: Sequence[Passage], embeddings: Any) -> None:
        import faiss
        import numpy as np

        vectors = np.ascontiguousarray(embeddings, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(passages):
            raise ValueError("one embedding row per passage is required")
        self.passages = list(passages)
        self.dimension = int(vectors.shape[1])
        self._index = faiss.IndexFlatIP(self.dimension)
        self._index.add(vectors)

    def __len__(self) -> int:
        return len(self.passages)

    def search(self, query: Any, top_k: int) -> list[tuple[Passage, float]]:
        import numpy as np

        vector = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dimension)
        scores, ids = self._index.search(vector, min(top_k, len(self.passages)))
        return [
            (self.passages[int(i)], float(s))
            for s, i in zip(scores[0], ids[0], strict=True)
            if i >= 0
        ]


def build_index(
    passages: Sequence[Passage], embedder: Any, cache_dir: Path | None = None
) -> VectorIndex:
    """Embeds the passages (or reads the embeddings cached in ``cache_dir`` by an earlier run)."""
    import numpy as np

    texts = [f"{p.section}: {p.text}" for p in passages]
    digest = hashlib.sha256("\n".join([embedder.model_name, *texts]).encode()).hexdigest()[:16]
    cache = cache_dir / f"demo-index-{digest}.npy" if cache_dir is not None else None
    if cache is not None and cache.is_file():
        return VectorIndex(passages, np.load(cache))
    embeddings = embedder.encode(texts)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, embeddings)
    return VectorIndex(passages, embeddings)
