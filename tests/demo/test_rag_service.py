"""The demo's RAG service against the real model: every stage is a span, the answer streams."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from llmtrace import semconv
from llmtrace.demo.corpus import load_passages
from llmtrace.demo.minilm import MiniLMEmbedder
from llmtrace.demo.model_server import MODEL_NAME, LlamaServer
from llmtrace.demo.rag import RagService, RagSettings
from llmtrace.demo.vector_index import build_index

pytestmark = pytest.mark.model


@pytest.fixture
async def service(embedder: MiniLMEmbedder, llama_server: LlamaServer) -> AsyncIterator[RagService]:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=llama_server.base_url, api_key="not-needed", max_retries=0)
    # The passages that answer the questions below, plus a few others, keep indexing quick.
    passages = load_passages()[:12]
    yield RagService(
        embedder=embedder,
        index=build_index(passages, embedder),
        client=client,
        model=MODEL_NAME,
        settings=RagSettings(top_k=3, max_tokens=12),
        trace_llm_call=True,
    )
    await client.close()


async def test_answer_records_every_stage_of_the_request(
    service: RagService, spans: InMemorySpanExporter
) -> None:
    answer = await service.answer("How much does the Lumora Hub 2 cost in Europe?")
    assert answer.strip()
    finished = spans.get_finished_spans()
    stages = {(s.attributes or {}).get(semconv.STAGE) for s in finished}
    assert {"embedding", "retrieval", "rerank", "prompt", semconv.LLM_STAGE} <= stages
    (retrieval,) = [s for s in finished if s.name == "retrieval lumora-handbook"]
    assert (retrieval.attributes or {})[semconv.GEN_AI_RETRIEVAL_TOP_K] == 3
    assert (retrieval.attributes or {})[semconv.RETRIEVAL_RETURNED] == 3
    chat = [s for s in finished if s.name == f"chat {MODEL_NAME}"]
    assert chat, [s.name for s in finished]
    attributes = chat[0].attributes or {}
    assert attributes[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 12
    first_token = attributes[semconv.TIME_TO_FIRST_TOKEN]
    assert isinstance(first_token, float)
    assert 0 < first_token < (chat[0].end_time - chat[0].start_time) / 1e9  # type: ignore[operator]
    # Every span of the request is in one trace.
    assert len({s.context.trace_id for s in finished}) == 1


async def test_max_tokens_bounds_the_streamed_answer(
    service: RagService, spans: InMemorySpanExporter
) -> None:
    service.settings = RagSettings(top_k=2, max_tokens=4)
    await service.answer("What does a solid amber status ring mean?")
    (chat,) = [s for s in spans.get_finished_spans() if s.name == f"chat {MODEL_NAME}"]
    attributes = chat.attributes or {}
    # The demo's server reports usage in streams: real counts, no estimates.
    assert 1 <= attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] <= 4  # type: ignore[operator]
    assert attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] > 20  # type: ignore[operator]
    assert semconv.USAGE_OUTPUT_TOKENS_ESTIMATED not in attributes
