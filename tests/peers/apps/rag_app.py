"""A small RAG application instrumented by one peer, run with the peers virtualenv's python.

    python rag_app.py PEER MODEL_BASE_URL TRACE_FILE REQUESTS [OTLP_GRPC_ENDPOINT]

Each request: a retrieval in the peer's own idiom, a streamed chat call through the real
``openai`` client (the peer's instrumentation of it), then a tool call. Spans are written as OTLP
JSON lines by the OpenTelemetry SDK's own OTLP encoder (the protobuf JSON mapping) and, when an
endpoint is given, also sent as OTLP protobuf over gRPC (to a Collector) by the SDK's exporter.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

DOCUMENTS = ["Paris is the capital of France.", "The Seine flows through Paris."]


class OTLPJsonLines(SpanExporter):
    """Every export as one OTLP JSON line, encoded by the SDK's own OTLP encoder."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._file.write(json.dumps(MessageToDict(encode_spans(spans))) + "\n")
        self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._file.close()


def vector_store() -> Any:
    """An in-memory Qdrant collection of the documents, under fixed vectors (no embedding model)."""
    from qdrant_client import QdrantClient
    from qdrant_client.models import Distance, PointStruct, VectorParams

    store = QdrantClient(":memory:")
    store.create_collection("docs", vectors_config=VectorParams(size=4, distance=Distance.COSINE))
    vectors = [[1.0, 0.2, 0.0, 0.1], [0.8, 0.0, 0.5, 0.1]]
    points = [
        PointStruct(id=index, vector=vector, payload={"text": text})
        for index, (text, vector) in enumerate(zip(DOCUMENTS, vectors, strict=True))
    ]
    store.upsert("docs", points=points)
    return store


def retrieve(question: str) -> list[str]:
    time.sleep(0.05)
    return DOCUMENTS


def lookup(term: str) -> str:
    time.sleep(0.03)
    return f"{term}: 2.1 million inhabitants"


def chat(client: Any, question: str, context: list[str]) -> str:
    stream = client.chat.completions.create(
        model="m-small",
        messages=[{"role": "user", "content": "\n".join(context) + "\n" + question}],
        stream=True,
        stream_options={"include_usage": True},
    )
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def run_plain(tracer: Any, client: Any, question: str, kinds: dict[str, dict[str, str]]) -> None:
    """The request with application spans carrying the peer's own span-kind attributes."""
    with tracer.start_as_current_span("answer", attributes=kinds["root"]):
        with tracer.start_as_current_span("retrieve docs", attributes=kinds["retrieval"]):
            context = retrieve(question)
        chat(client, question, context)
        with tracer.start_as_current_span("lookup", attributes=kinds["tool"]):
            lookup("Paris")


def collector_processors(endpoint: str | None) -> list[SpanProcessor]:
    """The OTLP/gRPC exporter to a Collector, when one is given."""
    if not endpoint:
        return []
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return [SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True))]


def main() -> None:
    peer, base_url, path, requests = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    service = sys.argv[6] if len(sys.argv) > 6 else f"rag-{peer}"
    extra = collector_processors(sys.argv[5] if len(sys.argv) > 5 else None)
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    # Traceloop.init and logfire.configure make their own providers, with these processors
    if peer not in ("openllmetry", "logfire"):
        for processor in [SimpleSpanProcessor(OTLPJsonLines(path)), *extra]:
            provider.add_span_processor(processor)
        trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("rag-app")
    import openai

    request: Callable[[Any, str], None]
    if peer == "opentelemetry-genai":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
        kinds = {
            "root": {"gen_ai.operation.name": "invoke_workflow"},
            "retrieval": {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "docs"},
            "tool": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"},
        }

        def request(client: Any, question: str) -> None:
            run_plain(tracer, client, question, kinds)

    elif peer == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIOpenAI

        OIOpenAI().instrument(tracer_provider=provider)
        kinds = {
            "root": {"openinference.span.kind": "CHAIN"},
            "retrieval": {"openinference.span.kind": "RETRIEVER"},
            "tool": {"openinference.span.kind": "TOOL", "tool.name": "lookup"},
        }

        def request(client: Any, question: str) -> None:
            run_plain(tracer, client, question, kinds)

    elif peer == "openllmetry":
        from traceloop.sdk import Traceloop
        from traceloop.sdk.decorators import task, tool, workflow

        # filled at start-up, before the instrumentation: the filling belongs to no request
        store = vector_store()
        Traceloop.init(
            app_name=service,
            exporter=OTLPJsonLines(path),
            disable_batch=True,
            telemetry_enabled=False,
        )
        for processor in extra:
            trace.get_tracer_provider().add_span_processor(processor)  # type: ignore[attr-defined]

        # a retrieval shows through the instrumented vector store: its query span, inside the
        # @task (structure)
        @task(name="retrieve")
        def traced_retrieve(question: str) -> list[str]:
            hits = store.query_points("docs", query=[0.9, 0.1, 0.2, 0.1], limit=2).points
            return [hit.payload["text"] for hit in hits if hit.payload]

        @tool(name="lookup")
        def traced_lookup(term: str) -> str:
            return lookup(term)

        @workflow(name="answer")
        def request(client: Any, question: str) -> None:
            chat(client, question, traced_retrieve(question))
            traced_lookup("Paris")

    elif peer == "langfuse":
        from langfuse import Langfuse, observe
        from langfuse.openai import OpenAI as LangfuseOpenAI

        Langfuse(
            public_key="pk-lf-local",
            secret_key="sk-lf-local",
            host="http://127.0.0.1:9",
            tracer_provider=provider,
        )

        @observe(as_type="retriever", name="retrieve")
        def traced_retrieve(question: str) -> list[str]:
            return retrieve(question)

        @observe(as_type="tool", name="lookup")
        def traced_lookup(term: str) -> str:
            return lookup(term)

        @observe(name="answer")
        def request(client: Any, question: str) -> None:
            chat(client, question, traced_retrieve(question))
            traced_lookup("Paris")

        openai.OpenAI = LangfuseOpenAI  # type: ignore[misc]
    elif peer == "logfire":
        import logfire

        logfire.configure(
            send_to_logfire=False,
            console=False,
            service_name=service,
            additional_span_processors=[SimpleSpanProcessor(OTLPJsonLines(path)), *extra],
            metrics=False,
        )
        logfire.instrument_openai()

        # Logfire's spans are structure; what they are is said with the GenAI attributes
        def request(client: Any, question: str) -> None:
            with logfire.span("answer {question}", question=question):
                retrieval = {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "docs"}
                with logfire.span("retrieve docs", **retrieval):
                    context = retrieve(question)
                chat(client, question, context)
                tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
                with logfire.span("execute_tool lookup", **tool):
                    lookup("Paris")

    elif peer == "openlit":
        import openlit

        openlit.init(
            application_name=service,
            disable_metrics=True,
            disable_events=True,
            disabled_instrumentors=["langchain", "llama_index", "anthropic"],
        )

        # OpenLIT's manual spans (start_trace), described with its GenAI attributes
        def request(client: Any, question: str) -> None:
            with openlit.start_trace("answer") as root:
                root.set_metadata({"gen_ai.operation.name": "invoke_workflow"})
                with openlit.start_trace("retrieve docs") as span:
                    span.set_metadata(
                        {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "docs"}
                    )
                    context = retrieve(question)
                chat(client, question, context)
                with openlit.start_trace("execute_tool lookup") as span:
                    span.set_metadata(
                        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
                    )
                    lookup("Paris")

    else:
        raise SystemExit(f"unknown peer {peer}")
    client = openai.OpenAI(base_url=base_url, api_key="sk-local", max_retries=0)
    for index in range(requests):
        request(client, f"question {index}")
    current = trace.get_tracer_provider()
    if hasattr(current, "force_flush"):
        current.force_flush()


if __name__ == "__main__":
    main()
