"""The instrumented application of the Jaeger end-to-end test, run as a process of its own.

It is configured the way a user configures a deployed app: ``llmtrace.init()`` with the standard
``OTEL_SERVICE_NAME``, ``OTEL_EXPORTER_OTLP_ENDPOINT`` and ``OTEL_EXPORTER_OTLP_PROTOCOL``
environment variables, so the exporter, the resource and the auto-instrumentation of the real
``openai`` client are the ones an application gets (the test process has its own in-memory
provider, which a second provider could not replace).

Usage: python jaeger_e2e_app.py MODEL_BASE_URL MODEL [--per-line] [--max-retries N]
                                [--trace-file PATH]
Prints one JSON line: {"trace_id": <32 hex digits>, "answer": <the streamed text>}. With
``--per-line`` it stays up as a service does, answering once per line read from stdin (one JSON
line each) until stdin closes. ``--max-retries`` is the client's (default 0: a refusal fails the
request); with retries, a refused attempt shows as a span event on the model call.
``--trace-file`` writes the same spans to an OTLP JSON lines file as well, as a report's input
whose trace ids are those in Jaeger.
"""

from __future__ import annotations

import json
import sys
import time

import openai
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import llmtrace
from llmtrace.sdk.exporters.file import OTLPJsonFileExporter

ORDER_STATUS = {"A-1001": "shipped"}


@llmtrace.retrieval(data_source="handbook", top_k=2)
def search_handbook(question: str) -> list[str]:
    time.sleep(0.02)
    return ["Orders ship within two days.", "Tracking links arrive by e-mail."]


@llmtrace.tool(name="order_status")
def order_status(order_id: str) -> str:
    time.sleep(0.01)
    return ORDER_STATUS.get(order_id, "unknown")


@llmtrace.workflow(name="answer_question")
def answer_question(client: openai.OpenAI, model: str, question: str) -> tuple[str, str]:
    trace_id = format(trace.get_current_span().get_span_context().trace_id, "032x")
    documents = search_handbook(question)
    status = order_status("A-1001")
    stream = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": "Answer from the context: " + " ".join(documents)},
            {"role": "user", "content": f"{question} (order status: {status})"},
        ],
        stream=True,
        stream_options={"include_usage": True},
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    return trace_id, text


def _also_write_to(path: str) -> None:
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    provider.add_span_processor(BatchSpanProcessor(OTLPJsonFileExporter(path)))


def main(
    base_url: str, model: str, per_line: bool, max_retries: int, trace_file: str | None
) -> None:
    llmtrace.init()
    if trace_file is not None:
        _also_write_to(trace_file)
    client = openai.OpenAI(
        base_url=base_url, api_key="sk-e2e-not-a-secret", max_retries=max_retries
    )
    for _ in sys.stdin if per_line else [""]:
        trace_id, text = answer_question(client, model, "Where is my order A-1001?")
        print(json.dumps({"trace_id": trace_id, "answer": text}), flush=True)
    llmtrace.shutdown()


if __name__ == "__main__":
    options = sys.argv[3:]

    def option(name: str) -> str | None:
        return options[options.index(name) + 1] if name in options else None

    main(
        sys.argv[1],
        sys.argv[2],
        per_line="--per-line" in options,
        max_retries=int(option("--max-retries") or 0),
        trace_file=option("--trace-file"),
    )
