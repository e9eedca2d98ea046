"""The orchestrator as a plain OpenTelemetry Python service, without llmtrace: Starlette behind
opentelemetry-instrumentation-asgi, httpx instrumented by opentelemetry-instrumentation-httpx
(W3C propagation), spans exported over OTLP/gRPC to OTEL_EXPORTER_OTLP_ENDPOINT.

``python plain_service.py PORT``: POST /answer spends POLICY_MS on its own work, then POSTs the
body to RAG_URL and answers with what came back. At exit it writes how many spans it exported
to SPAN_COUNT_FILE, so the test knows when Jaeger holds them all.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import httpx
import uvicorn
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


class Counted(SpanProcessor):
    def __init__(self) -> None:
        self.ended = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1


def main(port: int) -> None:
    provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ["OTEL_SERVICE_NAME"]})
    )
    counted = Counted()
    provider.add_span_processor(counted)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(insecure=True)))
    trace.set_tracer_provider(provider)
    HTTPXClientInstrumentor().instrument()
    client = httpx.AsyncClient(timeout=30)
    policy_seconds = float(os.environ["POLICY_MS"]) / 1000

    async def answer(request: Request) -> JSONResponse:
        body = await request.body()
        await asyncio.sleep(policy_seconds)  # the service's own work, which no stage claims
        response = await client.post(
            os.environ["RAG_URL"], content=body, headers={"content-type": "application/json"}
        )
        return JSONResponse(response.json(), status_code=response.status_code)

    app = OpenTelemetryMiddleware(Starlette(routes=[Route("/answer", answer, methods=["POST"])]))
    try:
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    except KeyboardInterrupt:
        pass  # uvicorn stopped on SIGINT and raised it again once shut down
    finally:
        provider.shutdown()
        Path(os.environ["SPAN_COUNT_FILE"]).write_text(str(counted.ended))


if __name__ == "__main__":
    main(int(sys.argv[1]))
