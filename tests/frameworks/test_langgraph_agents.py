"""LangGraph's prebuilt agents, run for real: ``create_react_agent`` (``langgraph.prebuilt``) and
LangChain's ``create_agent`` (``langchain.agents``), invoked, awaited, streamed and streamed
asynchronously, with ``ChatOpenAI`` sending through the real ``openai`` client (both instrumented)
to the simulated server. The server answers the first model call with a tool call, so each
invocation runs the agent's loop: model, tool, model.

Every invocation is one trace; each model call is under the node that called it (the provider's
span under LangChain's, under the node's function), and the report's ``ttft`` and ``generation``
are the server's delays. ``create_react_agent``'s node function hands the model the config it was
given rather than its own run's (see ``LLMTraceCallbackHandler._calling_run``): before that was
followed, the function's span and the model's came out as siblings and the function's span, ending
last, took the whole critical path as ``other``. Traces written that way are still read right: the
breakdown passes over a stage-less leaf a sibling covers almost wholly (the last test).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

from llmtrace import semconv
from tests.frameworks.langchain_support import (
    assert_tree,
    by_trace,
    chat_model,
    langchain_traced,
    one,
    report_of,
)
from tests.frameworks.timing import DELIVERY_BOUND, LATE_BOUND, assert_ttft, chat_requests

FIRST_TOKEN = 0.3
TOKEN_DELAY = 0.05
TOOL_DELAY = 0.1
TOKENS = ["Hello", ",", " world", "!"]
TOOL_CALL = ("look_up_stock", '{"item": "hub"}')
INVOCATIONS = 2
# Per invocation: the tool call (its arguments one token after its first fragment), then the
# answer.
MODEL_CALLS = 2
# What the client adds to one call, to its first token (building and sending the request, reading
# the first chunk: 3-9 ms measured) or to its generation (reading the last chunks and ending the
# stream: 1-5 ms); the late bound of one request, for a machine whose other work holds the CPU.
CLIENT_SHARE = LATE_BOUND
# The breakdown takes each model call's split from its span: the report's figures are the spans'
# own, to rounding.
ROUNDING = 1e-6

# The spans from a provider's model span up to the root: the model under the node that called it.
MODEL_PATHS = {
    # the "agent" node runs its function, call_model, which runs the prompt and the model
    "create_react_agent": ["chat sim-model-1", "RunnableSequence", "call_model", "agent"],
    # the "model" node calls the model itself
    "create_agent": ["chat sim-model-1", "model"],
}
BUILDERS = {"create_react_agent": create_react_agent, "create_agent": create_agent}


@pytest.fixture
def traced() -> Iterator[None]:
    """LangChain and OpenAI instrumentation for the test, checked for runs left in flight."""
    with langchain_traced("openai"):
        yield


@tool
def look_up_stock(item: str) -> str:
    """How many of an item are in stock."""
    time.sleep(TOOL_DELAY)
    return f"3 {item} in stock"


def _question() -> dict[str, Any]:
    return {"messages": [("user", "How many hubs are in stock?")]}


def _answer(result: Any) -> str:
    """The agent's last message, from its final state or from the last update streamed."""
    if isinstance(result, list):  # stream: the last update is the model node's
        (update,) = result[-1].values()
        result = update
    message = result["messages"][-1]
    assert isinstance(message, AIMessage)
    return str(message.content)


def _run(agent: Any, model: Any, call: str, spans: Any) -> list[str]:
    """``INVOCATIONS`` requests to the agent, one after the other; their answers."""
    if call in ("invoke", "stream"):
        spans.clear()
        if call == "invoke":
            return [_answer(agent.invoke(_question())) for _ in range(INVOCATIONS)]
        return [_answer(list(agent.stream(_question()))) for _ in range(INVOCATIONS)]

    async def requests() -> list[str]:
        # The async client's first connection, in this event loop, is not the model's TTFT.
        await model.ainvoke("warm up")
        spans.clear()
        answers = []
        for _ in range(INVOCATIONS):
            if call == "ainvoke":
                answers.append(_answer(await agent.ainvoke(_question())))
            else:
                answers.append(_answer([update async for update in agent.astream(_question())]))
        return answers

    return asyncio.run(requests())


def _path_up(span: Any, trace: list[Any]) -> list[str]:
    """The names from ``span`` up to the root (left out)."""
    by_id = {s.context.span_id: s for s in trace}
    names = []
    while span.parent is not None:
        names.append(span.name)
        span = by_id[span.parent.span_id]
    return names


# (langgraph 1.x deprecates create_react_agent for create_agent; it remains in use, and traced)
@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
@pytest.mark.parametrize("builder", sorted(BUILDERS))
@pytest.mark.parametrize("call", ["invoke", "ainvoke", "stream", "astream"])
def test_prebuilt_agent_nests_each_model_call_under_its_node(
    builder, call, model_server, spans, traced, tmp_path
):
    model_server.configure(
        first_token_delay=FIRST_TOKEN, token_delay=TOKEN_DELAY, tokens=TOKENS, tool_call=TOOL_CALL
    )
    model = chat_model(model_server)
    agent = BUILDERS[builder](model, [look_up_stock])
    assert _run(agent, model, call, spans) == ["Hello, world!"] * INVOCATIONS
    traces = by_trace(spans)
    assert len(traces) == INVOCATIONS
    providers = []
    for trace in traces.values():
        root = assert_tree(trace)
        assert root.name == "LangGraph"
        calls = [span for span in trace if span.attributes.get(semconv.STAGE) == semconv.LLM_STAGE]
        assert len(calls) == MODEL_CALLS
        for provider in calls:
            assert _path_up(provider, trace)[1:] == MODEL_PATHS[builder]
        tool_span = one(trace, "execute_tool look_up_stock")
        assert _path_up(tool_span, trace) == ["execute_tool look_up_stock", "tools"]
        providers.append(calls)
    # The spans that own the first token report the one the server sent (the suite's bounds).
    every_call = [span for calls in providers for span in calls]
    requests = chat_requests(model_server, len(every_call))
    # Async modes: the graph runs each model call in a task of its own, on an event loop also
    # serving the tool and the callbacks, so the first token can wait a scheduling step or two
    # longer before the client's parser sees it than in a plain async client.
    bound = 2 * DELIVERY_BOUND if call.startswith("a") else DELIVERY_BOUND
    assert_ttft(every_call, requests, FIRST_TOKEN, delivery_bound=bound)

    report = report_of(spans, tmp_path)
    assert report.bottleneck is not None and report.bottleneck.stage == "ttft"
    ttft = report.stages["ttft"].distribution.mean
    generation = report.stages["generation"].distribution.mean
    # The report's figures are the model spans' own: every call on the critical path, whole.
    spans_ttft = sum(s.attributes[semconv.TIME_TO_FIRST_TOKEN] for s in every_call)
    spans_generation = sum((s.end_time - s.start_time) / 1e9 for s in every_call) - spans_ttft
    assert ttft == pytest.approx(spans_ttft / INVOCATIONS, abs=ROUNDING)
    assert generation == pytest.approx(spans_generation / INVOCATIONS, abs=ROUNDING)
    # And they are what the server did, plus what the client adds to each call.
    server_ttft = sum(r.first_token_sent_at - r.arrived_at for r in requests) / INVOCATIONS
    server_generation = (
        sum(r.last_token_sent_at - r.first_token_sent_at for r in requests) / INVOCATIONS
    )
    assert server_ttft >= MODEL_CALLS * FIRST_TOKEN
    assert server_generation >= TOKEN_DELAY * (1 + len(TOKENS) - 1)
    assert 0 < ttft - server_ttft < MODEL_CALLS * CLIENT_SHARE
    # (a first token read late and a last one read at once make the client's generation the
    # shorter: either way, within the client's share)
    assert abs(generation - server_generation) < MODEL_CALLS * CLIENT_SHARE


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
def test_traces_written_with_the_node_beside_the_model_still_give_its_time(
    model_server, spans, traced, tmp_path, monkeypatch
):
    """Files llmtrace wrote before it nested the model under ``call_model`` (the parent LangChain
    names, followed as given): ``call_model`` (stage ``other``) ends just after the model's
    chain beside it, and the breakdown passes over it for the chain, in both readers."""
    from llmtrace.instrumentation.frameworks.langchain import LLMTraceCallbackHandler

    monkeypatch.setattr(LLMTraceCallbackHandler, "_calling_run", lambda self, claimed: claimed)
    model_server.configure(
        first_token_delay=FIRST_TOKEN, token_delay=TOKEN_DELAY, tokens=TOKENS, tool_call=TOOL_CALL
    )
    model = chat_model(model_server)
    agent = create_react_agent(model, [look_up_stock])
    assert _run(agent, model, "invoke", spans) == ["Hello, world!"] * INVOCATIONS
    every_call = []
    for trace in by_trace(spans).values():
        calls = [span for span in trace if span.attributes.get(semconv.STAGE) == semconv.LLM_STAGE]
        for provider in calls:
            # the old shape: the model's chain beside call_model, not under it
            assert _path_up(provider, trace)[1:] == [
                "chat sim-model-1",
                "RunnableSequence",
                "agent",
            ]
        every_call += calls
    spans_ttft = sum(s.attributes[semconv.TIME_TO_FIRST_TOKEN] for s in every_call)
    reports = []
    for native in ("1", "0"):
        monkeypatch.setenv("LLMTRACE_NATIVE", native)
        report = report_of(spans, tmp_path)
        assert report.bottleneck is not None and report.bottleneck.stage == "ttft"
        reports.append(report.stages["ttft"].distribution.mean)
    assert reports[0] == reports[1] == pytest.approx(spans_ttft / INVOCATIONS, abs=ROUNDING)
