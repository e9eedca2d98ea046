"""Acceptance: a RAG API calling a model service with a bounded worker pool, both real ASGI apps
served by uvicorn over loopback, under more concurrent requests than the pool has workers.

Every request must come out as one trace spanning both services, and the time each request
waited for a worker must be a queue-stage span as long as the wait the app itself measured.
traceparent crosses the hop through llmtrace's httpx instrumentation (no explicit inject).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Iterator

import faiss
import httpx
import numpy as np
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import llmtrace
from llmtrace import semconv
from llmtrace.instrumentation.hops.httpx import HTTPXInstrumentor
from llmtrace.instrumentation.vectordb.faiss import FaissInstrumentor
from llmtrace.server import LLMTraceMiddleware, bounded

from .asgi_server import serve
from .spans_util import duration

# Serves ASGI applications with uvicorn over loopback.
pytestmark = pytest.mark.integration

WORKERS = 2
CONCURRENT_REQUESTS = 6
WORK_SECONDS = 0.15
TOLERANCE_SECONDS = 0.005


def model_service(measured_waits: dict[str, float]) -> Starlette:
    """Generates "answers" with a pool of WORKERS; records each request's wait by its trace id."""
    workers = asyncio.Semaphore(WORKERS)
    # All requests reach the pool together, however slowly a busy machine delivers them: the
    # waits are then one, two... jobs long by construction, not by luck of arrival times.
    arrived: list[int] = []
    everyone_here = asyncio.Event()

    async def generate(request: Request) -> JSONResponse:
        prompt = (await request.json())["prompt"]
        arrived.append(1)
        if len(arrived) >= CONCURRENT_REQUESTS:
            everyone_here.set()
        await everyone_here.wait()
        started = time.monotonic()
        async with bounded(workers, name="model_workers"):
            waited = time.monotonic() - started
            await asyncio.sleep(WORK_SECONDS)
        trace_id = format(trace.get_current_span().get_span_context().trace_id, "032x")
        measured_waits[trace_id] = waited
        return JSONResponse({"answer": f"about {prompt[:20]}", "waited": waited})

    app = Starlette(routes=[Route("/v1/generate", generate, methods=["POST"])])
    app.add_middleware(LLMTraceMiddleware)
    return app


def rag_api(model_url: str) -> Starlette:
    """Retrieves context from a faiss index, then asks the model service."""
    rng = np.random.default_rng(0)
    index = faiss.IndexFlatIP(16)
    index.add(rng.random((100, 16), dtype=np.float32))

    @llmtrace.llm(model="pool-model", provider="local")
    async def ask_model(client: httpx.AsyncClient, prompt: str) -> str:
        response = await client.post(f"{model_url}/v1/generate", json={"prompt": prompt})
        response.raise_for_status()
        return str(response.json()["answer"])

    async def ask(request: Request) -> JSONResponse:
        question = (await request.json())["question"]
        _, neighbours = index.search(rng.random((1, 16), dtype=np.float32), 3)
        prompt = f"{question} context={neighbours[0].tolist()}"
        async with httpx.AsyncClient() as client:
            answer = await ask_model(client, prompt)
        trace_id = format(trace.get_current_span().get_span_context().trace_id, "032x")
        return JSONResponse({"answer": answer, "trace_id": trace_id})

    app = Starlette(routes=[Route("/ask", ask, methods=["POST"])])
    app.add_middleware(LLMTraceMiddleware)
    return app


@pytest.fixture(scope="module")
def instrumented() -> Iterator[None]:
    instrumentors = [HTTPXInstrumentor(), FaissInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument()
    yield
    for instrumentor in instrumentors:
        instrumentor.uninstrument()


async def ask_concurrently(rag_url: str) -> list[dict[str, str]]:
    async with httpx.AsyncClient(timeout=30) as client:

        async def one(number: int) -> dict[str, str]:
            response = await client.post(f"{rag_url}/ask", json={"question": f"question {number}"})
            response.raise_for_status()
            return dict(response.json())

        return await asyncio.gather(*(one(n) for n in range(CONCURRENT_REQUESTS)))


def wait_for_count(spans, name: str, count: int, timeout: float = 10.0) -> None:
    """Server spans end just after their response is sent: give the last ones a moment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(span.name == name for span in spans.get_finished_spans()) >= count:
            return
        time.sleep(0.01)
    raise AssertionError(f"fewer than {count} {name!r} spans")


def by_trace(finished: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    traces: dict[str, list[ReadableSpan]] = defaultdict(list)
    for span in finished:
        traces[format(span.context.trace_id, "032x")].append(span)
    return traces


def ancestors(span: ReadableSpan, spans_by_id: dict[int, ReadableSpan]) -> list[str]:
    names = []
    while span.parent is not None and span.parent.span_id in spans_by_id:
        span = spans_by_id[span.parent.span_id]
        names.append(span.name)
    return names


async def test_each_request_is_one_trace_across_both_services_with_its_queue_wait(
    spans, instrumented
) -> None:
    measured_waits: dict[str, float] = {}
    with serve(model_service(measured_waits)) as model_url, serve(rag_api(model_url)) as rag_url:
        spans.clear()
        replies = await asyncio.to_thread(asyncio.run, ask_concurrently(rag_url))
        wait_for_count(spans, "POST /ask", CONCURRENT_REQUESTS)

    traces = by_trace(spans.get_finished_spans())
    reply_trace_ids = {reply["trace_id"] for reply in replies}
    assert len(reply_trace_ids) == CONCURRENT_REQUESTS
    assert reply_trace_ids <= set(traces)
    assert set(measured_waits) == reply_trace_ids

    for trace_id in reply_trace_ids:
        trace_spans = traces[trace_id]
        spans_by_id = {span.context.span_id: span for span in trace_spans}
        server_spans = {s.name: s for s in trace_spans if s.kind == SpanKind.SERVER}
        assert set(server_spans) == {"POST /ask", "POST /v1/generate"}, trace_id
        # The model service's span hangs under the RAG API's model call, in the same trace.
        model_server = server_spans["POST /v1/generate"]
        path = ancestors(model_server, spans_by_id)
        assert "chat pool-model" in path and "POST /ask" in path, path
        assert path.index("chat pool-model") < path.index("POST /ask"), path

        (queue,) = [s for s in trace_spans if s.attributes.get(semconv.STAGE) == "queue"]
        assert queue.name == "queue model_workers"
        assert queue.parent is not None and queue.parent.span_id == model_server.context.span_id
        assert duration(queue) == pytest.approx(measured_waits[trace_id], abs=TOLERANCE_SECONDS)

    # More requests than workers: some really waited, roughly a whole job or two.
    waits = sorted(measured_waits.values())
    assert waits[:WORKERS] == pytest.approx([0.0] * WORKERS, abs=0.05)
    assert waits[-1] >= 2 * WORK_SECONDS * 0.9
