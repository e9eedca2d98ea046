"""The two llmtrace services around the Node.js orchestrator of the hop tests, as a script.

``python services.py gateway PORT`` serves POST /ask, which calls ORCHESTRATOR_URL/answer with
httpx (llmtrace's network span, W3C traceparent); ``python services.py rag PORT`` serves POST
/rag: a retrieval of RETRIEVAL_MS, then a streamed chat completion with the real ``openai``
client from MODEL_URL (the suite's simulated model server). Both are Starlette apps behind
llmtrace's ASGI middleware on uvicorn, exporting to LLMTRACE_FILE_PATH, and to the OTLP/gRPC
endpoint HOPS_OTLP_ENDPOINT too when it is set (the Collector in front of Jaeger).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import llmtrace
from llmtrace.server import LLMTraceMiddleware


def _also_export_to(endpoint: str) -> None:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True))
    )


def gateway() -> Starlette:
    client = httpx.AsyncClient(base_url=os.environ["ORCHESTRATOR_URL"], timeout=30)

    async def ask(request: Request) -> JSONResponse:
        response = await client.post("/answer", json=await request.json())
        return JSONResponse(response.json(), status_code=response.status_code)

    return Starlette(routes=[Route("/ask", ask, methods=["POST"])])


def rag() -> Starlette:
    from openai import AsyncOpenAI

    model = AsyncOpenAI(base_url=os.environ["MODEL_URL"], api_key="test-key")
    retrieval_seconds = float(os.environ["RETRIEVAL_MS"]) / 1000

    @llmtrace.retrieval(data_source="docs", top_k=4)
    async def search(question: str) -> list[str]:
        await asyncio.sleep(retrieval_seconds)
        return [f"{question} doc {i}" for i in range(4)]

    async def answer(request: Request) -> JSONResponse:
        question = (await request.json())["question"]
        documents = await search(question)
        stream = await model.chat.completions.create(
            model="sim-model",
            messages=[{"role": "user", "content": " ".join(documents)}],
            stream=True,
        )
        parts: list[Any] = []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
        return JSONResponse({"answer": "".join(parts)})

    return Starlette(routes=[Route("/rag", answer, methods=["POST"])])


def main(role: str, port: int) -> None:
    llmtrace.init(service_name=os.environ["OTEL_SERVICE_NAME"])
    if os.environ.get("HOPS_OTLP_ENDPOINT"):
        _also_export_to(os.environ["HOPS_OTLP_ENDPOINT"])
    app = LLMTraceMiddleware(gateway() if role == "gateway" else rag())
    try:
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    except KeyboardInterrupt:
        pass  # uvicorn stopped on SIGINT and raised it again once shut down
    finally:
        llmtrace.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
