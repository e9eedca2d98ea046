"""LangChain and LangGraph, run for real against the simulated model server and an in-memory
vector store: every request is one trace, every run a span in its stage, the model's TTFT as the
server delayed it, and the report names the stage each test made slowest.

The simulated server cannot return tool calls, so the agent is a small deterministic LangGraph
graph whose nodes call the tools directly (two tool calls per request).

Replay: every OpenAI chat or text completion exchange in ``../shared/fixtures/recorded/langchain``
(32 exchanges from 25 cassettes, streamed or not, tools, parallel tool calls, functions,
structured output, LCEL, LangGraph, agents, vLLM) is served locally and sent through the real
``ChatOpenAI`` or ``OpenAI``; the model span carries the recorded token counts, response model
(chat; LangChain's completion models do not pass it on) and finish reasons. The Anthropic
(``chat_anthropic``, ``tool_calls_anthropic_text_block*``), Cohere (``*chain_stream_cohere``,
``documents_chain_cohere``) and Bedrock (``chat_bedrock``) cassettes are replayed through
``ChatAnthropic``, ``ChatCohere`` and ``ChatBedrock`` (see "replay of the other providers'
cassettes" below for what is not replayed and the known gaps). Not replayed either: the LangSmith
hub and Tavily requests of ``agent_openai_tools_tavily_streaming`` (not model calls; its model
calls are replayed).
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import time
from collections.abc import Iterator
from typing import Any, TypedDict
from urllib.parse import unquote

import openai
import pytest
import yaml
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
from langchain_core.tools import tool
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_openai import ChatOpenAI, OpenAI
from langgraph.graph import END, START, StateGraph
from opentelemetry import trace as otel_trace
from opentelemetry.trace import StatusCode

from llmtrace import semconv
from llmtrace.instrumentation import registry
from tests.frameworks.langchain_support import (
    assert_bottleneck,
    assert_tree,
    by_trace,
    chat_model,
    langchain_traced,
    one,
    report_of,
)
from tests.frameworks.timing import (
    CONCURRENT_DELIVERY_BOUND,
    CONCURRENT_LATE_BOUND,
    assert_ttft,
    chat_requests,
)
from tests.servers.fixtures import RECORDED, sse_events

FIRST_TOKEN = 0.08
RETRIEVAL_DELAY = 0.3
TOOL_DELAY = 0.25
TEXTS = [
    "The backup battery lasts twelve hours.",
    "The hub costs ninety dollars.",
    "The hub supports Zigbee and Thread radios.",
    "Firmware updates install at night.",
]


@pytest.fixture
def traced() -> Iterator[None]:
    """LangChain (and thread) instrumentation for the test, checked for runs left in flight."""
    with langchain_traced():
        yield


class SlowEmbedding(DeterministicFakeEmbedding):
    """Deterministic vectors; the query embedding takes a known time (inside the retriever)."""

    delay: float = 0.0

    def embed_query(self, text: str) -> list[float]:
        time.sleep(self.delay)
        return super().embed_query(text)


def _retriever(delay: float = RETRIEVAL_DELAY) -> Any:
    store = InMemoryVectorStore(SlowEmbedding(size=32))
    store.add_texts(TEXTS)
    store.embedding.delay = delay  # type: ignore[attr-defined]
    return store.as_retriever(search_kwargs={"k": 2})


def _rag_chain(
    model_server: Any, model: Any = None, retrieval_delay: float = RETRIEVAL_DELAY
) -> Any:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the context:\n{context}"), ("human", "{question}")]
    )
    context = _retriever(retrieval_delay) | RunnableLambda(
        lambda docs: "\n".join(d.page_content for d in docs)
    )
    return (
        {"context": context, "question": RunnablePassthrough()}
        | prompt
        | (model if model is not None else chat_model(model_server))
        | StrOutputParser()
    )


def _rag_chain_without_warm_up(model_server: Any) -> Any:
    model = ChatOpenAI(
        model="sim-model-1", base_url=model_server.base_url, api_key="k", max_retries=0
    )
    return _rag_chain(model_server, model, retrieval_delay=0.0)


def _assert_model_span(trace: list[Any], model_server: Any = None) -> Any:
    """The trace's model span; its TTFT checked against the server's last request if given."""
    (chat,) = [span for span in trace if span.name == "chat sim-model-1"]
    attributes = chat.attributes
    assert attributes[semconv.STAGE] == semconv.LLM_STAGE
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert attributes[semconv.GEN_AI_REQUEST_MODEL] == "sim-model-1"
    assert attributes[semconv.GEN_AI_REQUEST_STREAM] is True  # the chain streams its answer
    assert [event.name for event in chat.events][-1] == semconv.FIRST_TOKEN_EVENT
    if model_server is not None:
        assert_ttft([chat], chat_requests(model_server), FIRST_TOKEN)
    assert attributes[semconv.GENERATION_TIME] > 0
    return chat


def _assert_concurrent_ttft(models: list[Any], model_server: Any, delay: float) -> None:
    assert_ttft(
        models,
        chat_requests(model_server, len(models)),
        delay,
        delivery_bound=CONCURRENT_DELIVERY_BOUND,
        late_bound=CONCURRENT_LATE_BOUND,
    )


def _assert_rag_trace(trace: list[Any], model_server: Any) -> None:
    root = assert_tree(trace)
    assert root.name == "RunnableSequence"
    assert root.attributes[semconv.STAGE] == "other"
    retrieval = one(trace, "retrieval InMemoryVectorStore")
    assert retrieval.attributes[semconv.STAGE] == "retrieval"
    assert retrieval.attributes[semconv.GEN_AI_OPERATION_NAME] == "retrieval"
    assert retrieval.attributes[semconv.GEN_AI_DATA_SOURCE_ID] == "InMemoryVectorStore"
    assert retrieval.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 2
    assert retrieval.attributes[semconv.RETRIEVAL_RETURNED] == 2
    assert one(trace, "ChatPromptTemplate").attributes[semconv.STAGE] == "prompt"
    assert one(trace, "StrOutputParser").attributes[semconv.STAGE] == "postprocess"
    _assert_model_span(trace, model_server)


def _retrieval_time(trace: list[Any]) -> float:
    """How long the trace's retrieval spans lasted (they run one after another here)."""
    retrievals = [s for s in trace if s.attributes.get(semconv.STAGE) == "retrieval"]
    assert retrievals
    return sum((s.end_time - s.start_time) / 1e9 for s in retrievals)


def test_rag_chain_is_one_trace_with_every_stage(model_server, spans, traced, tmp_path):
    model_server.configure(first_token_delay=FIRST_TOKEN, token_delay=0.002)
    chain = _rag_chain(model_server)
    spans.clear()
    assert chain.invoke("How long does the battery last?") == "Hello, world!"
    (trace,) = by_trace(spans).values()
    _assert_rag_trace(trace, model_server)
    assert_bottleneck(
        report_of(spans, tmp_path), "retrieval", RETRIEVAL_DELAY, _retrieval_time(trace)
    )


def test_streamed_rag_chain_is_one_trace_with_every_stage(model_server, spans, traced, tmp_path):
    model_server.configure(first_token_delay=FIRST_TOKEN, token_delay=0.002)
    chain = _rag_chain(model_server)
    spans.clear()
    assert "".join(chain.stream("How much is the hub?")) == "Hello, world!"
    (trace,) = by_trace(spans).values()
    _assert_rag_trace(trace, model_server)
    assert_bottleneck(
        report_of(spans, tmp_path), "retrieval", RETRIEVAL_DELAY, _retrieval_time(trace)
    )


@tool
def look_up_order(order_id: str) -> str:
    """The status of an order."""
    # The application's own span inside a tool: it must nest under the tool's span.
    with otel_trace.get_tracer("app").start_as_current_span("orders database"):
        time.sleep(TOOL_DELAY)
    return f"order {order_id} shipped"


@tool
def look_up_stock(item: str) -> str:
    """How many of an item are in stock."""
    time.sleep(TOOL_DELAY)
    return f"3 {item} in stock"


class AgentState(TypedDict, total=False):
    question: str
    facts: list[str]
    answer: str


def _agent_graph(model_server: Any) -> Any:
    model = chat_model(model_server)

    def tools(state: AgentState) -> AgentState:
        return {"facts": [look_up_order.invoke({"order_id": "42"}), look_up_stock.invoke("hub")]}

    def answer(state: AgentState) -> AgentState:
        reply = model.invoke(f"{state['question']} Facts: {state['facts']}")
        return {"answer": str(reply.content)}

    graph = StateGraph(AgentState)
    graph.add_node("tools", tools)
    graph.add_node("answer", answer)
    graph.add_edge(START, "tools")
    graph.add_edge("tools", "answer")
    graph.add_edge("answer", END)
    return graph.compile(name="support_agent")


def test_langgraph_agent_with_two_tool_calls_is_one_trace(model_server, spans, traced, tmp_path):
    model_server.configure(first_token_delay=FIRST_TOKEN, token_delay=0.002)
    agent = _agent_graph(model_server)
    spans.clear()
    assert agent.invoke({"question": "Where is my order?"})["answer"] == "Hello, world!"
    (trace,) = by_trace(spans).values()
    root = assert_tree(trace)
    assert root.name == "invoke_agent support_agent"
    assert root.attributes[semconv.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert root.attributes[semconv.GEN_AI_AGENT_NAME] == "support_agent"
    tools_node = one(trace, "tools")
    assert tools_node.attributes[semconv.STAGE] == "other"
    assert tools_node.parent.span_id == root.context.span_id
    for name in ("look_up_order", "look_up_stock"):
        span = one(trace, f"execute_tool {name}")
        assert span.attributes[semconv.STAGE] == "tool"
        assert span.attributes[semconv.GEN_AI_TOOL_NAME] == name
        assert span.parent.span_id == tools_node.context.span_id
    database = one(trace, "orders database")
    assert database.parent.span_id == one(trace, "execute_tool look_up_order").context.span_id
    chat = _assert_model_span(trace, model_server)
    assert chat.parent.span_id == one(trace, "answer").context.span_id
    assert_bottleneck(report_of(spans, tmp_path), "tool", 2 * TOOL_DELAY)


def test_async_graph_with_parallel_branches_keeps_one_trace_per_request(
    model_server, spans, traced, tmp_path
):
    model_server.configure(first_token_delay=FIRST_TOKEN, token_delay=0.002)
    model = chat_model(model_server)

    async def fast(state: AgentState) -> AgentState:
        await asyncio.sleep(0.05)
        return {}

    async def slow(state: AgentState) -> AgentState:
        await asyncio.sleep(0.3)
        return {}

    async def answer(state: AgentState) -> AgentState:
        reply = await model.ainvoke(state["question"])
        return {"answer": str(reply.content)}

    graph = StateGraph(AgentState)
    for name, node in (("fast", fast), ("slow", slow), ("answer", answer)):
        graph.add_node(name, node)
    graph.add_edge(START, "fast")
    graph.add_edge(START, "slow")
    graph.add_edge(["fast", "slow"], "answer")
    graph.add_edge("answer", END)
    app = graph.compile()

    async def main() -> list[Any]:
        # the async client's connections, one per concurrent request
        await asyncio.gather(*(model.ainvoke("warm up") for _ in range(3)))
        spans.clear()
        return await asyncio.gather(*(app.ainvoke({"question": f"q{i}"}) for i in range(3)))

    results = asyncio.run(main())
    assert [result["answer"] for result in results] == ["Hello, world!"] * 3
    traces = by_trace(spans)
    assert len(traces) == 3
    models = []
    for spans_of_trace in traces.values():
        root = assert_tree(spans_of_trace)
        assert root.name == "LangGraph"
        for name in ("fast", "slow", "answer"):
            node = one(spans_of_trace, name)
            assert node.attributes[semconv.STAGE] == "other"
            assert node.parent.span_id == root.context.span_id
        models.append(_assert_model_span(spans_of_trace))
    # Three streams share one event loop (and the GIL with the in-process model server).
    _assert_concurrent_ttft(models, model_server, FIRST_TOKEN)
    report = report_of(spans, tmp_path)
    # the slow branch (0.3 s, stage other) is on the critical path; the fast one is not
    assert report.bottleneck is not None and report.bottleneck.stage == "other"
    assert report.stages["ttft"].distribution.mean >= FIRST_TOKEN


def test_runnable_parallel_and_batch_give_one_trace_per_input(
    model_server, spans, traced, tmp_path
):
    model_server.configure(first_token_delay=0.4, token_delay=0.002)
    model = chat_model(model_server)
    chain = RunnableParallel(answer=model | StrOutputParser(), context=_retriever(delay=0.05))
    model.batch(["warm up"] * 3)  # one connection per concurrent request
    spans.clear()
    results = chain.batch(["a", "b", "c"])
    assert [result["answer"] for result in results] == ["Hello, world!"] * 3
    traces = by_trace(spans)
    assert len(traces) == 3
    models = []
    for spans_of_trace in traces.values():
        root = assert_tree(spans_of_trace)
        assert root.name == "RunnableParallel<answer,context>"
        one(spans_of_trace, "retrieval InMemoryVectorStore")
        models.append(one(spans_of_trace, "chat sim-model-1"))
    _assert_concurrent_ttft(models, model_server, 0.4)  # (three threads)
    report = report_of(spans, tmp_path)
    assert_bottleneck(report, "ttft", 0.4)


async def _warm_then(call: Any, spans: Any) -> Any:
    # The async client's first connection, in this event loop, is not the model's TTFT.
    await call("warm up")
    spans.clear()
    return await call("hi")


async def _astream(chain: Any, question: str) -> str:
    return "".join([chunk async for chunk in chain.astream(question)])


@pytest.mark.parametrize("call", ["invoke", "stream", "ainvoke", "astream"])
def test_with_openai_instrumented_too_the_model_call_counts_once(
    call, model_server, spans, traced, tmp_path
):
    model_server.configure(first_token_delay=0.3, token_delay=0.002)
    registry.instrument(["openai"])
    try:
        chain = chat_model(model_server, stream_usage=True) | StrOutputParser()
        spans.clear()
        if call == "invoke":
            answer = chain.invoke("hi")
        elif call == "stream":
            answer = "".join(chain.stream("hi"))
        elif call == "ainvoke":
            answer = asyncio.run(_warm_then(chain.ainvoke, spans))
        else:
            answer = asyncio.run(_warm_then(functools.partial(_astream, chain), spans))
        assert answer == "Hello, world!"
    finally:
        registry.uninstrument(["openai"])
    (trace,) = by_trace(spans).values()
    assert_tree(trace)
    model_calls = [
        span for span in trace if span.attributes.get(semconv.STAGE) == semconv.LLM_STAGE
    ]
    (provider,) = model_calls
    (langchain,) = [span for span in trace if span.name == "chat sim-model-1" and span != provider]
    assert provider.parent.span_id == langchain.context.span_id
    assert langchain.attributes[semconv.STAGE] == "other"
    assert semconv.TIME_TO_FIRST_TOKEN not in langchain.attributes
    assert semconv.GEN_AI_USAGE_OUTPUT_TOKENS not in langchain.attributes
    # The span closest to the wire owns TTFT, and is held to the same precision.
    assert_ttft([provider], chat_requests(model_server), 0.3)
    report = report_of(spans, tmp_path)
    assert sum(usage.calls for usage in report.models.values()) == 1
    # The report's TTFT is the provider span's, which holds the request's preparation too
    # (15-80 ms, more when other work holds the CPU; held above to the server's send times, not
    # here to its nominal delay).
    assert_bottleneck(report, "ttft", provider.attributes[semconv.TIME_TO_FIRST_TOKEN])


def test_failing_tool_ends_every_span_with_the_error(model_server, spans, traced):
    @tool
    def broken(query: str) -> str:
        """Always fails."""
        raise RuntimeError("tool failed")

    chain = RunnableLambda(lambda q: q) | broken
    spans.clear()
    with pytest.raises(RuntimeError, match="tool failed"):
        chain.invoke("x")
    (trace,) = by_trace(spans).values()
    root = assert_tree(trace)
    tool_span = one(trace, "execute_tool broken")
    assert tool_span.attributes[semconv.ERROR_TYPE] == "RuntimeError"
    assert root.attributes[semconv.ERROR_TYPE] == "RuntimeError"
    assert len({span.context.span_id for span in trace}) == len(trace)


def test_failing_model_call_ends_every_span_with_the_error(model_server, spans, traced):
    model_server.configure(status=500)
    chain = _rag_chain_without_warm_up(model_server)
    spans.clear()
    with pytest.raises(openai.InternalServerError) as raised:
        chain.invoke("x")
    (trace_spans,) = by_trace(spans).values()
    root = assert_tree(trace_spans)
    chat = one(trace_spans, "chat sim-model-1")
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes[semconv.ERROR_TYPE] == raised.type.__qualname__
    assert root.status.status_code == StatusCode.ERROR
    # the steps before the failure ended well
    assert one(trace_spans, "ChatPromptTemplate").status.status_code == StatusCode.OK


def test_stream_closed_early_ends_every_span_once(model_server, spans, traced):
    model_server.configure(first_token_delay=0.01, token_delay=0.01)
    chain = chat_model(model_server) | StrOutputParser()
    spans.clear()
    stream = chain.stream("hi")
    assert "Hello" in (next(stream), next(stream))  # (a role-only chunk may come first)
    stream.close()
    (trace_spans,) = by_trace(spans).values()
    root = assert_tree(trace_spans)
    assert root.name == "RunnableSequence"
    chat = one(trace_spans, "chat sim-model-1")
    # LangChain ends a stream closed by its consumer as a completed run, and so does its span.
    assert chat.attributes[semconv.STREAM_END] in ("completed", "closed")
    one(trace_spans, "StrOutputParser")
    assert len({span.context.span_id for span in trace_spans}) == len(trace_spans)


def test_init_instruments_langchain_already_imported(spans):
    try:
        assert "langchain" in registry.instrument()
        spans.clear()
        (RunnableLambda(lambda q: q) | StrOutputParser()).invoke("x")
        assert {span.name for span in spans.get_finished_spans()} >= {"RunnableSequence"}
    finally:
        registry.uninstrument()


def test_uninstrument_removes_the_handler(model_server, spans):
    registry.instrument(["langchain"])
    registry.uninstrument(["langchain"])
    spans.clear()
    (RunnableLambda(lambda q: q) | StrOutputParser()).invoke("x")
    assert spans.get_finished_spans() == ()


# --- replay ----------------------------------------------------------------------------------


def _openai_exchanges() -> list[tuple[str, int]]:
    """(cassette, interaction index) of every OpenAI chat or text completion LangChain sent."""
    exchanges = []
    for path in sorted((RECORDED / "langchain").glob("*.yaml")):
        for index, interaction in enumerate(yaml.safe_load(path.read_text())["interactions"]):
            uri = interaction["request"]["uri"].split("?")[0]
            if uri.endswith(("/v1/chat/completions", "/v1/completions")):
                exchanges.append((path.stem, index))
    return exchanges


def _decoded(raw: str | bytes) -> str:
    """A recorded body as text. Some are stored gzip-compressed with their Content-Encoding, which
    the server does not pass on: they are served decompressed."""
    if isinstance(raw, bytes):
        return gzip.decompress(raw).decode() if raw[:2] == b"\x1f\x8b" else raw.decode()
    return raw


def _recorded_expectations(body: str) -> dict[str, Any]:
    if body.lstrip().startswith("{"):
        items = [json.loads(body)]
    else:
        items = [
            json.loads(line[5:])
            for line in body.splitlines()
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]")
        ]
    expected: dict[str, Any] = {}
    for item in items:
        if item.get("model"):
            expected["model"] = item["model"]
        if item.get("usage"):
            expected["input"] = item["usage"]["prompt_tokens"]
            expected["output"] = item["usage"]["completion_tokens"]
        for choice in item.get("choices") or ():
            if choice.get("finish_reason"):
                expected["finish"] = choice["finish_reason"]
    return expected


@pytest.mark.parametrize(("name", "index"), _openai_exchanges(), ids=lambda v: str(v))
def test_recorded_langchain_exchange(name, index, model_server, spans, traced):
    interaction = yaml.safe_load((RECORDED / "langchain" / f"{name}.yaml").read_text())[
        "interactions"
    ][index]
    body = json.loads(interaction["request"]["body"])
    raw = _decoded(interaction["response"]["body"]["string"])
    interaction["response"]["body"]["string"] = raw
    model_server.play_cassette(interaction)
    settings = {
        "model": body["model"],
        "base_url": model_server.base_url,
        "api_key": "k",
        "max_retries": 0,
        "streaming": bool(body.get("stream")),
    }
    model: Any
    if "messages" in body:
        model = ChatOpenAI(**settings)
        prompt: Any = [(m["role"], m.get("content") or "") for m in body["messages"][:1]]
        operation = "chat"
    else:
        model = OpenAI(**settings)
        prompt = body["prompt"] if isinstance(body["prompt"], str) else body["prompt"][0]
        operation = "text_completion"
    spans.clear()
    if body.get("stream"):
        list(model.stream(prompt))
    else:
        model.invoke(prompt)
    (span,) = [
        s
        for s in spans.get_finished_spans()
        if s.attributes.get(semconv.STAGE) == semconv.LLM_STAGE
    ]
    expected = _recorded_expectations(raw)
    attributes = span.attributes
    assert span.name == f"{operation} {body['model']}"
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == operation
    if "model" in expected and operation == "chat":
        # (LangChain's completion models do not pass the response's model on.)
        assert attributes[semconv.GEN_AI_RESPONSE_MODEL] == expected["model"]
    if "input" in expected:
        assert attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == expected["input"]
        assert attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == expected["output"]
    else:
        assert semconv.GEN_AI_USAGE_INPUT_TOKENS not in attributes
    if "finish" in expected:
        assert attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == (expected["finish"],)


# --- replay of the other providers' cassettes --------------------------------------------------

# Replayed through LangChain's own integration for each provider (langchain-anthropic,
# langchain-cohere, langchain-aws; test-only dependencies in the ``dev`` extra), against the
# local server serving the recorded response. Not replayed: ``vertexai_gemini*`` (langchain-google-
# vertexai pulls the Google Cloud SDK) and ``custom_llm_huggingface_endpoint`` (langchain-
# huggingface pulls torch and transformers).
_OTHER_PROVIDERS = {
    "chat_anthropic": "anthropic",
    "tool_calls_anthropic_text_block": "anthropic",
    "tool_calls_anthropic_text_block_and_history": "anthropic",
    "documents_chain_cohere": "cohere",
    "chain_stream_cohere": "cohere",
    "async_chain_stream_cohere": "cohere",
    "chat_bedrock": "bedrock",
}


def _recorded_other(provider: str, request: dict[str, Any], body: str) -> dict[str, Any]:
    """Model, token counts and finish reason as the provider sent them (read without llmtrace)."""
    sent = json.loads(request["body"])
    if provider == "cohere":
        # Cohere's v2 chat answers no model: the requested one. Streamed, the counts and the
        # finish reason come in the ``message-end`` event. Cohere records two counts, ``tokens``
        # and ``billed_units``: langchain-cohere passes on the first for a whole answer and the
        # second for a stream.
        if body.lstrip().startswith("{"):
            end, counts = json.loads(body), "tokens"
        else:
            end, counts = sse_events(body)[-1]["delta"], "billed_units"
        return {
            "model": sent["model"],
            "input": end["usage"][counts]["input_tokens"],
            "output": end["usage"][counts]["output_tokens"],
            "finish": end["finish_reason"],
        }
    item = json.loads(
        body
    )  # the Anthropic Messages response (also what Bedrock's InvokeModel sends)
    return {
        # ChatBedrock reports the model id it invoked, not the one in the response body.
        "model": unquote(request["uri"].split("/model/")[1].split("/")[0])
        if provider == "bedrock"
        else item["model"],
        "input": item["usage"]["input_tokens"],
        "output": item["usage"]["output_tokens"],
        "finish": item["stop_reason"],
    }


def _replay_other(name: str, model_server: Any, spans: Any, monkeypatch: Any) -> tuple[Any, dict]:
    """The recorded exchange sent again through LangChain; returns the span that owns the call
    and what was recorded."""
    provider = _OTHER_PROVIDERS[name]
    (interaction,) = yaml.safe_load((RECORDED / "langchain" / f"{name}.yaml").read_text())[
        "interactions"
    ]
    request, response = interaction["request"], interaction["response"]
    raw = _decoded(response["body"]["string"])
    # The recorded headers too: Bedrock's token counts are in them.
    headers = {"Content-Type": ["application/json"], **(response.get("headers") or {})}
    served = {**response, "headers": headers, "body": {"string": raw}}
    model_server.play_cassette({**interaction, "response": served})
    sent = json.loads(request["body"])
    model: Any
    if provider == "anthropic":
        from langchain_anthropic import ChatAnthropic

        model = ChatAnthropic(
            model=sent["model"],
            base_url=model_server.url,
            api_key="k",
            max_tokens=sent["max_tokens"],
            max_retries=0,
        )
    elif provider == "cohere":
        from langchain_cohere import ChatCohere

        model = ChatCohere(model=sent["model"], base_url=model_server.url, cohere_api_key="k")
    else:
        from langchain_aws import ChatBedrock

        for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            monkeypatch.setenv(variable, "k")
        model_id = unquote(request["uri"].split("/model/")[1].split("/")[0])
        model = ChatBedrock(
            model_id=model_id, region_name="us-east-1", endpoint_url=model_server.url
        )
    question = sent["messages"][0]["content"]
    spans.clear()
    if sent.get("stream") and name.startswith("async_"):

        async def consume() -> None:
            async for _chunk in model.astream(question):
                pass

        asyncio.run(consume())
    elif sent.get("stream"):
        list(model.stream(question))
    else:
        model.invoke(question)
    owners = [
        s
        for s in spans.get_finished_spans()
        if s.attributes.get(semconv.STAGE) == semconv.LLM_STAGE
    ]
    (span,) = owners
    return span, _recorded_other(provider, request, raw)


@pytest.mark.parametrize("name", sorted(_OTHER_PROVIDERS))
def test_recorded_langchain_exchange_of_other_providers(
    name, model_server, spans, traced, monkeypatch
):
    span, expected = _replay_other(name, model_server, spans, monkeypatch)
    attributes = span.attributes
    assert span.name == f"chat {attributes[semconv.GEN_AI_REQUEST_MODEL]}"
    model = attributes.get(semconv.GEN_AI_RESPONSE_MODEL, attributes[semconv.GEN_AI_REQUEST_MODEL])
    assert model == expected["model"]
    assert attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == expected["input"]
    assert attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == expected["output"]
    # a response id is the provider's, never LangChain's own run id
    response_id = attributes.get(semconv.GEN_AI_RESPONSE_ID, "")
    assert not response_id.startswith(("run-", "lc_run-")), response_id


@pytest.mark.parametrize("name", sorted(_OTHER_PROVIDERS))
def test_recorded_finish_reason_of_other_providers(name, model_server, spans, traced, monkeypatch):
    span, expected = _replay_other(name, model_server, spans, monkeypatch)
    assert span.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == (expected["finish"],)
