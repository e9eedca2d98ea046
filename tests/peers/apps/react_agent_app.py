"""LangGraph's prebuilt ReAct agent instrumented by one peer, run with the peers virtualenv's
python: real LangGraph and LangChain, its model ``ChatOpenAI`` on the simulated server.

    python react_agent_app.py PEER MODEL_BASE_URL TRACE_FILE REQUESTS CALL

PEER is ``openinference`` (its LangChain instrumentation: its OpenAI one would make each request
to the model a trace of its own, since the LangChain spans are never made current) or
``openllmetry`` (Traceloop, which instruments the ``openai`` client too); CALL is ``invoke``, ``stream``, ``ainvoke`` or
``astream``. Each request is one run of ``create_react_agent``'s loop: the model asks for the
tool, the tool answers, the model answers. Spans are written as OTLP JSON lines by the
OpenTelemetry SDK's own encoder (``rag_app.OTLPJsonLines``).
"""

from __future__ import annotations

import asyncio
import sys
import time
import warnings
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from rag_app import OTLPJsonLines


def look_up_stock(item: str) -> str:
    """How many of an item are in stock."""
    time.sleep(0.05)
    return f"3 {item} in stock"


def instrument(peer: str, path: str) -> None:
    if peer == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        provider = TracerProvider(resource=Resource.create({"service.name": "agent-openinference"}))
        provider.add_span_processor(SimpleSpanProcessor(OTLPJsonLines(path)))
        trace.set_tracer_provider(provider)
        LangChainInstrumentor().instrument(tracer_provider=provider)
    else:
        from traceloop.sdk import Traceloop

        Traceloop.init(
            app_name="agent-openllmetry",
            exporter=OTLPJsonLines(path),
            disable_batch=True,
            telemetry_enabled=False,
        )


def main() -> None:
    peer, base_url, path, requests, call = sys.argv[1:6]
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # langgraph 1.x points to langchain's create_agent
        from langgraph.prebuilt import create_react_agent

    model = ChatOpenAI(
        model="sim-model-1", base_url=base_url, api_key="k", streaming=True, max_retries=0
    )
    # Connecting and lazy imports belong to no request: done before anything is traced.
    model.invoke("warm up")
    instrument(peer, path)
    agent = create_react_agent(model, [tool(look_up_stock)])
    question: Any = {"messages": [("user", "How many hubs are in stock?")]}

    async def run_async() -> None:
        for _ in range(int(requests)):
            if call == "ainvoke":
                await agent.ainvoke(question)
            else:
                async for _update in agent.astream(question):
                    pass

    if call == "invoke":
        for _ in range(int(requests)):
            agent.invoke(question)
    elif call == "stream":
        for _ in range(int(requests)):
            for _update in agent.stream(question):
                pass
    else:
        asyncio.run(run_async())


if __name__ == "__main__":
    main()
