"""A retrieval-augmented question-answering service, traced end to end with llmtrace.

Every stage of a request shows up in the trace and in ``llmtrace report``:

    POST /ask                          SERVER span (LLMTraceMiddleware)
    ├── embeddings all-MiniLM-L6-v2    embedding   the question, by MiniLM on the CPU
    ├── retrieval handbook             retrieval   qdrant query (auto-instrumented)
    ├── rerank                         rerank      lexical re-scoring of the candidates
    ├── prompt                         prompt      context packing
    ├── queue model                    queue       waiting for one of the model slots
    └── chat SmolLM2-135M-Instruct     ttft + generation, streamed from llama-cpp-python's
                                       OpenAI-compatible server through the ``openai`` client

Run it (after ``scripts/setup.sh``)::

    .venv/bin/python examples/rag_app.py                    # starts SmolLM2, serves on :8000
    curl -s localhost:8000/ask -H 'content-type: application/json' \\
         -d '{"question": "How long does the backup battery last?"}'
    .venv/bin/python examples/rag_app.py --ask "How much does the hub cost?" --ask "..."
    .venv/bin/llmtrace report                               # where did the time go?

``--model-url`` uses a model server that is already running instead of starting one.
``--model-slots`` is how many model calls may run at once; more concurrent requests queue.
Traces go where ``llmtrace.init()`` sends them: ``.llmtrace/traces.jsonl`` by default, or an
OpenTelemetry Collector when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import openai
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel
from qdrant_client import QdrantClient, models

import llmtrace
from llmtrace.demo.corpus import load_passages
from llmtrace.demo.embedder import load_embedding_model
from llmtrace.demo.model_server import MODEL_NAME, LlamaServer
from llmtrace.server import LLMTraceMiddleware, bounded

COLLECTION = "handbook"
CANDIDATES = 8  # retrieved, then reranked down to CONTEXT_PASSAGES
CONTEXT_PASSAGES = 3
MAX_ANSWER_TOKENS = 96
WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Passage:
    section: str
    text: str
    score: float


class KnowledgeBase:
    """The bundled product handbook, embedded with MiniLM into an in-memory qdrant collection."""

    def __init__(self) -> None:
        self.embedder = load_embedding_model()
        self.store = QdrantClient(":memory:")
        passages = load_passages()
        vectors = self.embed([passage.text for passage in passages])
        self.store.create_collection(
            COLLECTION,
            vectors_config=models.VectorParams(
                size=vectors.shape[1], distance=models.Distance.COSINE
            ),
        )
        self.store.upsert(
            COLLECTION,
            points=[
                models.PointStruct(
                    id=passage.id,
                    vector=vector.tolist(),
                    payload={"section": passage.section, "text": passage.text},
                )
                for passage, vector in zip(passages, vectors, strict=True)
            ],
        )

    @llmtrace.embedding(model="all-MiniLM-L6-v2")
    def embed(self, texts: list[str]) -> np.ndarray:
        return self.embedder.encode(texts)

    def search(self, question: str) -> list[Passage]:
        (query,) = self.embed([question])
        # query_points is auto-instrumented: a "retrieval handbook" span with top_k and returned.
        hits = self.store.query_points(COLLECTION, query=query.tolist(), limit=CANDIDATES).points
        return [
            Passage(str(hit.payload["section"]), str(hit.payload["text"]), hit.score)
            for hit in hits
            if hit.payload
        ]


@llmtrace.rerank(top_n=CONTEXT_PASSAGES)
def rerank(question: str, candidates: list[Passage]) -> list[Passage]:
    """Vector similarity blended with how many of the question's words a passage contains."""
    question_words = set(WORD.findall(question.lower()))

    def blended(passage: Passage) -> float:
        overlap = len(question_words & set(WORD.findall(passage.text.lower())))
        return passage.score + 0.05 * overlap

    return sorted(candidates, key=blended, reverse=True)[:CONTEXT_PASSAGES]


def build_messages(question: str, passages: list[Passage]) -> list[dict[str, str]]:
    with llmtrace.stage("prompt"):
        context = "\n\n".join(f"[{p.section}] {p.text}" for p in passages)
        return [
            {
                "role": "system",
                "content": "Answer the question in one or two sentences, using only this "
                f"handbook excerpt:\n\n{context}",
            },
            {"role": "user", "content": question},
        ]


class Question(BaseModel):
    question: str


class Answer(BaseModel):
    answer: str
    sections: list[str]
    trace_id: str


def create_app(model_url: str, model_slots: int, knowledge: KnowledgeBase | None = None) -> FastAPI:
    state: dict[str, Any] = {"knowledge": knowledge}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if state["knowledge"] is None:
            state["knowledge"] = await asyncio.to_thread(KnowledgeBase)
        state["model"] = openai.AsyncOpenAI(base_url=model_url, api_key="local-model")
        # llama-cpp-python's server runs one generation at a time; the slots make requests wait
        # here, visibly, instead of inside the model server.
        state["slots"] = asyncio.Semaphore(model_slots)
        yield
        await state["model"].close()

    app = FastAPI(title="handbook answers", lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/ask")
    async def ask(body: Question) -> Answer:
        knowledge: KnowledgeBase = state["knowledge"]
        # CPU-bound steps run in a worker thread; asyncio.to_thread carries the trace context.
        candidates = await asyncio.to_thread(knowledge.search, body.question)
        passages = rerank(body.question, candidates)
        messages = build_messages(body.question, passages)
        async with bounded(state["slots"], name="model"):
            answer = await stream_answer(state["model"], messages)
        span_context = llmtrace_current_span_context()
        return Answer(
            answer=answer,
            sections=[p.section for p in passages],
            trace_id=format(span_context.trace_id, "032x"),
        )

    app.add_middleware(LLMTraceMiddleware, excluded_paths=["/health"])
    return app


async def stream_answer(client: openai.AsyncOpenAI, messages: list[dict[str, str]]) -> str:
    """The model call: streamed, so the trace separates time to first token from generation."""
    stream = await client.chat.completions.create(
        model=MODEL_NAME,
        messages=messages,  # type: ignore[arg-type]
        stream=True,
        max_tokens=MAX_ANSWER_TOKENS,
        temperature=0.2,
    )
    parts: list[str] = []
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
    return "".join(parts).strip()


def llmtrace_current_span_context() -> Any:
    from opentelemetry import trace

    return trace.get_current_span().get_span_context()


@contextmanager
def model_server(model_url: str | None) -> Iterator[str]:
    """The given model server, or SmolLM2 started for the lifetime of this process."""
    if model_url:
        yield model_url
        return
    print("starting SmolLM2 (llama-cpp-python server) ...", file=sys.stderr)
    with LlamaServer() as server:
        yield server.base_url


@contextmanager
def serving(app: FastAPI, host: str, port: int) -> Iterator[str]:
    """Serve ``app`` in a background thread (for --ask); yields its base URL."""
    sock = socket.socket()
    sock.bind((host, port))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise SystemExit("the service failed to start")
        time.sleep(0.05)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


async def ask_all(base_url: str, questions: list[str]) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=300) as client:

        async def one(question: str) -> dict[str, Any]:
            response = await client.post(f"{base_url}/ask", json={"question": question})
            response.raise_for_status()
            return dict(response.json())

        return list(await asyncio.gather(*(one(q) for q in questions)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model-url", help="an OpenAI-compatible base URL (default: start one)")
    parser.add_argument("--model-slots", type=int, default=1, help="model calls at once")
    parser.add_argument(
        "--ask", action="append", metavar="QUESTION", help="ask, print the answers and exit"
    )
    args = parser.parse_args(argv)

    # Indexed before tracing starts, so that the traces (and the report) are the requests only.
    knowledge = KnowledgeBase()
    llmtrace.init(service_name="handbook-rag")
    try:
        with model_server(args.model_url) as model_url:
            app = create_app(model_url, args.model_slots, knowledge)
            if not args.ask:
                uvicorn.run(app, host=args.host, port=args.port)
                return 0
            with serving(app, args.host, 0) as base_url:
                started = time.monotonic()
                answers = asyncio.run(ask_all(base_url, args.ask))
                elapsed = time.monotonic() - started
            for question, answer in zip(args.ask, answers, strict=True):
                print(f"Q: {question}\nA: {answer['answer']}\n   sections: {answer['sections']}")
                print(f"   trace: {answer['trace_id']}\n")
            print(f"{len(answers)} questions in {elapsed:.2f}s; now run: llmtrace report")
    finally:
        llmtrace.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
