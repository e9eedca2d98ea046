"""1,000 requests at once, each in its own trace with every span under the right parent.

Each request is a ``@llmtrace.workflow`` that queries a real qdrant ``:memory:`` store (async
client), streams a chat completion from the simulated model server with the real
``openai.AsyncOpenAI`` client, and calls a ``@llmtrace.tool``. All of them start together under
one ``asyncio.gather``, and two barriers make the interleaving as hard as it gets: every workflow
span is open before any model call starts, and every stream has delivered its first chunk before
any is read further, so 1,000 streamed responses are in progress at the same moment, each on its
own connection. If the client's connection pool or the server could not hold that many, the
barrier would never fill and the test fails on its timeout instead of passing with less
concurrency than it claims.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import openai
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from qdrant_client import AsyncQdrantClient, models

import llmtrace
from llmtrace import semconv
from llmtrace.instrumentation import registry

pytestmark = pytest.mark.integration

REQUESTS = 1_000
COLLECTION = "handbook"
MODEL = "sim-model-1"
REQUEST_ATTRIBUTE = "test.request"
# Generous: the run takes about 15 s; a barrier that never fills must not hang the suite.
RUN_TIMEOUT = 120.0

POINTS = [
    models.PointStruct(id=1, vector=[1.0, 0.0, 0.0, 0.0], payload={"text": "refunds take 5 days"}),
    models.PointStruct(id=2, vector=[0.0, 1.0, 0.0, 0.0], payload={"text": "shipping is free"}),
    models.PointStruct(id=3, vector=[0.7, 0.7, 0.0, 0.0], payload={"text": "returns need a label"}),
]


@pytest.fixture
def instrumented() -> Iterator[None]:
    # The HTTP layer too: under a model call it must add nothing (one span per operation).
    registry.instrument(["openai", "httpx2", "qdrant"])
    yield
    registry.uninstrument()


@pytest.fixture
async def store(spans: Any, instrumented: None) -> AsyncIterator[AsyncQdrantClient]:
    """A filled in-memory store; the spans of filling it are not the test's."""
    client = AsyncQdrantClient(":memory:")
    await client.create_collection(
        COLLECTION, vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE)
    )
    await client.upsert(COLLECTION, points=POINTS)
    spans.clear()
    yield client
    await client.close()


def _by_trace(finished: tuple[ReadableSpan, ...]) -> dict[int, list[ReadableSpan]]:
    traces: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in finished:
        assert span.context is not None
        traces[span.context.trace_id].append(span)
    return traces


def _traceparent_ids(headers: dict[str, str]) -> tuple[int, int]:
    _, trace_id, parent_id, _ = headers["traceparent"].split("-")
    return int(trace_id, 16), int(parent_id, 16)


async def _run_requests(base_url: str, store: AsyncQdrantClient) -> list[str]:
    # Every stream holds its connection until it ends, and a request beyond the pool's limit
    # waits for one: the barrier below needs a pool of 1,000 (and keeping them all alive spares
    # reconnecting). openai's default allows as many but keeps only 100 alive.
    http_client = httpx2.AsyncClient(
        limits=httpx2.Limits(max_connections=REQUESTS, max_keepalive_connections=REQUESTS)
    )
    # openai's default connect timeout is 5 s. On a busy two-core machine this one event loop
    # can take longer than that to get back to 1,000 pending connects: the limit here is the
    # run's own, since what is tested is concurrency, not connect latency.
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key="sk-test",
        max_retries=0,
        http_client=http_client,
        timeout=RUN_TIMEOUT,
    )
    all_retrieved = asyncio.Barrier(REQUESTS)
    all_streaming = asyncio.Barrier(REQUESTS)

    def current_span_id() -> int:
        return trace.get_current_span().get_span_context().span_id

    @llmtrace.tool(name="look_up_order")
    async def look_up_order(request: int) -> str:
        llmtrace.set_attributes({REQUEST_ATTRIBUTE: request})
        await asyncio.sleep(0)
        return f"order {request}"

    @llmtrace.workflow(name="answer")
    async def answer(request: int) -> str:
        llmtrace.set_attributes({REQUEST_ATTRIBUTE: request})
        workflow_span = current_span_id()
        hits = await store.query_points(COLLECTION, query=[0.9, 0.1, 0.0, 0.0], limit=2)
        assert len(hits.points) == 2
        await all_retrieved.wait()
        assert current_span_id() == workflow_span
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": f"request {request}"}],
            stream=True,
        )
        assert current_span_id() == workflow_span, "the stream's span leaked into the caller"
        text = []
        chunks = 0
        async for chunk in stream:
            chunks += 1
            if chunks == 1:
                await all_streaming.wait()
            assert current_span_id() == workflow_span
            if chunk.choices and chunk.choices[0].delta.content:
                text.append(chunk.choices[0].delta.content)
        order = await look_up_order(request)
        assert current_span_id() == workflow_span
        return f"{''.join(text)} {order}"

    try:
        async with asyncio.timeout(RUN_TIMEOUT):
            return await asyncio.gather(*(answer(request) for request in range(REQUESTS)))
    finally:
        await client.close()


async def test_a_thousand_concurrent_requests_each_get_their_own_complete_trace(
    model_server: Any, spans: Any, store: AsyncQdrantClient
) -> None:
    answers = await _run_requests(model_server.base_url, store)

    assert answers == [f"Hello, world! order {request}" for request in range(REQUESTS)]
    finished = spans.get_finished_spans()
    assert len(finished) == 4 * REQUESTS
    traces = _by_trace(finished)
    assert len(traces) == REQUESTS

    model_calls = [r for r in model_server.requests if r.path == "/v1/chat/completions"]
    assert len(model_calls) == REQUESTS
    traceparent_by_request = {
        r.json()["messages"][0]["content"]: _traceparent_ids(r.headers) for r in model_calls
    }

    seen_requests = set()
    span_ids = set()
    for trace_id, trace_spans in traces.items():
        by_name = {s.name: s for s in trace_spans}
        assert sorted(by_name) == sorted(
            ["answer", f"retrieval {COLLECTION}", f"chat {MODEL}", "execute_tool look_up_order"]
        ), [s.name for s in trace_spans]
        assert len(trace_spans) == 4
        root = by_name["answer"]
        assert root.parent is None
        request = root.attributes[REQUEST_ATTRIBUTE]
        seen_requests.add(request)
        for name in (f"retrieval {COLLECTION}", f"chat {MODEL}", "execute_tool look_up_order"):
            child = by_name[name]
            assert child.parent is not None
            assert child.parent.trace_id == trace_id
            assert child.parent.span_id == root.context.span_id, name
        assert by_name["execute_tool look_up_order"].attributes[REQUEST_ATTRIBUTE] == request
        model = by_name[f"chat {MODEL}"]
        assert model.kind == SpanKind.CLIENT
        assert model.attributes[semconv.STREAM_END] == "completed"
        assert model.status.status_code == StatusCode.OK
        # The request the server got for this workflow carried this trace and this model span.
        assert traceparent_by_request[f"request {request}"] == (trace_id, model.context.span_id)
        for span in trace_spans:
            assert span.end_time is not None
            span_ids.add(span.context.span_id)
    assert seen_requests == set(range(REQUESTS))
    assert len(span_ids) == 4 * REQUESTS
