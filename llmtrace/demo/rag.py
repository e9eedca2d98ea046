"""The demo's RAG service: embed the question, search, rerank, build the prompt, stream the answer.

Every step is a span with its stage, so the report can say which one a slow answer spent its
time in. The two knobs the demo turns are ``top_k`` (how many passages reach the reranker and
the prompt: retrieval, rerank and prompt-processing time) and ``max_tokens`` (generation time).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, replace
from typing import Any

import llmtrace
from llmtrace import semconv
from llmtrace.demo.corpus import Passage
from llmtrace.demo.embedder import EMBEDDING_MODEL_NAME
from llmtrace.demo.vector_index import VectorIndex

DATA_SOURCE = "lumora-handbook"
PROVIDER = "openai"  # the wire protocol: llama-cpp-python serves the OpenAI API
SYSTEM_PROMPT = (
    "You are the support assistant for the Lumora Home Hub. Answer the question using only the "
    "numbered passages. Be brief."
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class RagSettings:
    top_k: int = 8
    max_tokens: int = 256
    temperature: float = 0.0

    def with_changes(self, **changes: Any) -> RagSettings:
        return replace(self, **changes)


@dataclass(frozen=True)
class ScoredPassage:
    passage: Passage
    score: float


def split_sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def build_messages(question: str, passages: list[ScoredPassage]) -> list[dict[str, str]]:
    context = "\n".join(f"[{i}] {p.passage.text}" for i, p in enumerate(passages, start=1))
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Passages:\n{context}\n\nQuestion: {question}"},
    ]


class RagService:
    """Answers questions about the bundled handbook with a model behind an OpenAI-compatible API.

    ``client`` is an ``openai.AsyncOpenAI``; ``embedder`` has ``encode(texts)`` → unit vectors. CPU-bound
    steps run in worker threads so that concurrent requests overlap as they would in a server.
    """

    def __init__(
        self,
        *,
        embedder: Any,
        index: VectorIndex,
        client: Any,
        model: str,
        settings: RagSettings | None = None,
        trace_llm_call: bool = True,
    ) -> None:
        self.embedder = embedder
        self.index = index
        self.client = client
        self.model = model
        self.settings = settings or RagSettings()
        # False when the openai auto-instrumentation already makes the model-call span.
        self.trace_llm_call = trace_llm_call

    async def answer(self, question: str) -> str:
        settings = self.settings
        async with llmtrace.span("rag answer", stage="other"):
            query = await self._embed_query(question)
            candidates = await self._retrieve(query, settings.top_k)
            ranked = await self._rerank(query, candidates)
            messages = self._build_prompt(question, ranked)
            return await self._generate(messages, settings)

    async def _embed_query(self, question: str) -> Any:
        attributes: dict[str, Any] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EMBEDDINGS,
            semconv.GEN_AI_REQUEST_MODEL: EMBEDDING_MODEL_NAME,
            semconv.EMBEDDING_INPUT_COUNT: 1,
        }
        async with llmtrace.span(
            f"embeddings {EMBEDDING_MODEL_NAME}", stage="embedding", **attributes
        ):
            vectors = await asyncio.to_thread(self._encode, [question])
            return vectors[0]

    async def _retrieve(self, query: Any, top_k: int) -> list[ScoredPassage]:
        attributes: dict[str, Any] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_RETRIEVAL,
            semconv.GEN_AI_DATA_SOURCE_ID: DATA_SOURCE,
            semconv.GEN_AI_RETRIEVAL_TOP_K: top_k,
        }
        async with llmtrace.span(f"retrieval {DATA_SOURCE}", stage="retrieval", **attributes):
            hits = await asyncio.to_thread(self.index.search, query, top_k)
            llmtrace.set_attributes({semconv.RETRIEVAL_RETURNED: len(hits)})
            return [ScoredPassage(passage, score) for passage, score in hits]

    async def _rerank(self, query: Any, candidates: list[ScoredPassage]) -> list[ScoredPassage]:
        """Sentence-level re-scoring: a passage's best sentence decides as much as the whole.

        The index scores whole paragraphs; a paragraph that answers the question in one sentence
        among unrelated ones is pulled up. Costs one embedding batch of all candidate sentences.
        """
        attributes: dict[str, Any] = {
            semconv.GEN_AI_REQUEST_MODEL: EMBEDDING_MODEL_NAME,
            semconv.RERANK_INPUT_COUNT: len(candidates),
            semconv.RERANK_TOP_N: len(candidates),
        }
        async with llmtrace.span("rerank sentence-max-sim", stage="rerank", **attributes):
            return await asyncio.to_thread(self._rerank_sync, query, candidates)

    def _rerank_sync(self, query: Any, candidates: list[ScoredPassage]) -> list[ScoredPassage]:
        if not candidates:
            return []
        sentences: list[str] = []
        owners: list[int] = []
        for position, candidate in enumerate(candidates):
            for sentence in split_sentences(candidate.passage.text):
                sentences.append(sentence)
                owners.append(position)
        similarities = self._encode(sentences) @ query
        best = [-1.0] * len(candidates)
        for owner, similarity in zip(owners, similarities, strict=True):
            best[owner] = max(best[owner], float(similarity))
        rescored = [
            ScoredPassage(c.passage, 0.5 * c.score + 0.5 * best[i])
            for i, c in enumerate(candidates)
        ]
        return sorted(rescored, key=lambda p: p.score, reverse=True)

    def _build_prompt(self, question: str, passages: list[ScoredPassage]) -> list[dict[str, str]]:
        with llmtrace.span("build prompt", stage="prompt"):
            messages = build_messages(question, passages)
            llmtrace.set_attributes(
                {semconv.PROMPT_CHARS: sum(len(m["content"]) for m in messages)}
            )
            return messages

    async def _generate(self, messages: list[dict[str, str]], settings: RagSettings) -> str:
        if not self.trace_llm_call:
            return await self._stream_answer(messages, settings, mark_first_token=False)
        attributes: dict[str, Any] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
            semconv.GEN_AI_PROVIDER_NAME: PROVIDER,
            semconv.GEN_AI_REQUEST_MODEL: self.model,
            semconv.GEN_AI_REQUEST_MAX_TOKENS: settings.max_tokens,
            semconv.GEN_AI_REQUEST_TEMPERATURE: settings.temperature,
            semconv.GEN_AI_REQUEST_STREAM: True,
        }
        async with llmtrace.span(f"chat {self.model}", stage=semconv.LLM_STAGE, **attributes):
            return await self._stream_answer(messages, settings, mark_first_token=True)

    async def _stream_answer(
        self, messages: list[dict[str, str]], settings: RagSettings, *, mark_first_token: bool
    ) -> str:
        stream = await self.client.chat.completions.create(
            model=self.model,
            messages=messages,
            max_tokens=settings.max_tokens,
            temperature=settings.temperature,
            stream=True,
        )
        parts: list[str] = []
        finish_reason: str | None = None
        usage = None
        async for chunk in stream:
            # The demo's server reports usage on its last chunk (llama_usage_server).
            usage = getattr(chunk, "usage", None) or usage
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            content = choice.delta.content if choice.delta else None
            if content:
                if mark_first_token and not parts:
                    llmtrace.mark_first_token()
                parts.append(content)
            finish_reason = choice.finish_reason or finish_reason
        if mark_first_token:
            if usage is not None:
                llmtrace.record_usage(usage.prompt_tokens, usage.completion_tokens)
            else:
                # llama.cpp streams one token per chunk; without usage that is an estimate.
                llmtrace.record_usage(output_tokens=len(parts), estimated=True)
            if finish_reason:
                llmtrace.set_attributes({semconv.GEN_AI_RESPONSE_FINISH_REASONS: [finish_reason]})
        return "".join(parts)

    def _encode(self, texts: list[str]) -> Any:
        # Unit-length rows: a dot product is the cosine similarity.
        return self.embedder.encode(texts)
