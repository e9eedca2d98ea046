"""The application examples/bench_before_after.sh measures: retrieval, a rerank step whose cost
grows with the passages it scores, and a streamed model call.

``RAG_TOP_K`` (default 8) is the one setting the before/after run changes. The reranker stands in
for a cross-encoder that takes ``RERANK_SECONDS`` per passage; the model is whatever
``OPENAI_BASE_URL`` serves (``OPENAI_MODEL``).
"""

import os
import time

from openai import OpenAI

import llmtrace

llmtrace.init(service_name="bench-rag")

client = OpenAI()
MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
TOP_K = int(os.environ.get("RAG_TOP_K", "8"))
RERANK_SECONDS = 0.02
HANDBOOK = [
    f"Handbook paragraph {number}: the hub, its battery and its radios." for number in range(20)
]


@llmtrace.retrieval(data_source="handbook", top_k=TOP_K)
def search(question: str) -> list[str]:
    return HANDBOOK[:TOP_K]


@llmtrace.rerank(top_n=2)
def rerank(question: str, passages: list[str]) -> list[str]:
    for _passage in passages:
        time.sleep(RERANK_SECONDS)  # one cross-encoder pass per passage
    return passages[:2]


def answer(question: str) -> str:
    """One request: what ``llmtrace bench bench_rag:answer`` calls with each question."""
    passages = rerank(question, search(question))
    stream = client.chat.completions.create(
        model=MODEL,
        stream=True,
        messages=[{"role": "user", "content": "\n".join([*passages, question])}],
    )
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
