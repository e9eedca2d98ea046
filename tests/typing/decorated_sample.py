"""Checked by mypy in tests/typing/test_decorator_types.py: never run."""

from collections.abc import AsyncIterator, Iterator
from typing import reveal_type

import llmtrace


@llmtrace.workflow
def answer(question: str, *, top_k: int = 3) -> str:
    return question * top_k


@llmtrace.retrieval(data_source="docs", top_k=3)
async def search(query: str) -> list[str]:
    return [query]


@llmtrace.llm(model="tiny")
def stream(prompt: str) -> Iterator[str]:
    yield prompt


@llmtrace.tool
async def agen(limit: int) -> AsyncIterator[int]:
    yield limit


@llmtrace.stage("prompt")
def build(parts: list[str]) -> str:
    return "".join(parts)


class Service:
    @llmtrace.embedding(model="minilm")
    def embed(self, text: str) -> list[float]:
        return [float(len(text))]

    @llmtrace.rerank
    @staticmethod
    def rerank(candidates: list[str]) -> list[str]:
        return candidates

    @llmtrace.tool(name="lookup")
    @classmethod
    def lookup(cls, key: str) -> int:
        return len(key)


reveal_type(answer)
reveal_type(search)
reveal_type(stream)
reveal_type(agen)
reveal_type(build)
reveal_type(Service().embed)
reveal_type(Service.rerank)
reveal_type(Service.lookup)
answer(1)  # an error: the signature is kept, so a wrong argument is caught
