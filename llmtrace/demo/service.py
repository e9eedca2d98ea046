"""Assembles the demo's RAG service: handbook passages, embeddings, index, model client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmtrace.demo.corpus import load_passages
from llmtrace.demo.embedder import load_embedding_model
from llmtrace.demo.rag import RagService, RagSettings
from llmtrace.demo.vector_index import build_index


def openai_is_instrumented() -> bool:
    from llmtrace.instrumentation.registry import instrumented

    return "openai" in instrumented()


def build_service(
    *,
    base_url: str,
    model: str,
    settings: RagSettings,
    embedder: Any | None = None,
    cache_dir: Path | None = None,
) -> RagService:
    from openai import AsyncOpenAI

    embedder = embedder if embedder is not None else load_embedding_model()
    index = build_index(load_passages(), embedder, cache_dir)
    # llama-cpp-python's server needs no key; the client insists on one.
    client = AsyncOpenAI(base_url=base_url, api_key="not-needed", max_retries=0)
    return RagService(
        embedder=embedder,
        index=index,
        client=client,
        model=model,
        settings=settings,
        # The openai auto-instrumentation makes the model-call span when it is active.
        trace_llm_call=not openai_is_instrumented(),
    )
