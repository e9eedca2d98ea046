"""An instrumented RAG-shaped app with known delays per stage, for end-to-end report tests.

Run as a script: ``python delayed_app.py REQUESTS`` with LLMTRACE_* / OTEL_* set by the test.
The delays are exported as DELAYS so the test compares the report against them;
``DELAYED_APP_GENERATION`` (seconds) makes a run whose generation is slower or faster.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator

import llmtrace

# seconds per request, by stage
DELAYS = {
    "queue": 0.010,
    "retrieval": 0.020,
    "rerank": 0.012,
    "ttft": 0.040,
    "generation": 0.070,
    "postprocess": 0.008,
}
TOKENS = 10
DOCUMENTS = 12


@llmtrace.retrieval(data_source="docs", top_k=DOCUMENTS)
def search(question: str) -> list[str]:
    time.sleep(DELAYS["retrieval"])
    return [f"{question} doc {i}" for i in range(DOCUMENTS)]


@llmtrace.rerank(top_n=4)
def rerank(documents: list[str]) -> list[str]:
    time.sleep(DELAYS["rerank"])
    return documents[:4]


@llmtrace.llm(model="delayed-model", provider="test")
def generate(prompt: str) -> Iterator[str]:
    time.sleep(DELAYS["ttft"])
    yield "first"
    # One sleep for the whole generation: per-token sleeps would each overshoot on a busy machine.
    time.sleep(float(os.environ.get("DELAYED_APP_GENERATION", DELAYS["generation"])))
    yield " token" * (TOKENS - 1)
    llmtrace.record_usage(input_tokens=len(prompt.split()), output_tokens=TOKENS)


@llmtrace.workflow(name="answer")
def answer(question: str) -> str:
    with llmtrace.stage("queue", name="wait for slot"):
        time.sleep(DELAYS["queue"])
    documents = rerank(search(question))
    text = "".join(generate(" ".join(documents)))
    with llmtrace.stage("postprocess", name="format answer"):
        time.sleep(DELAYS["postprocess"])
    return text


def _also_export_to(endpoint: str) -> None:
    """Send the same spans to an OTLP endpoint too, so file and Jaeger hold identical traces."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True))
    )


def main(requests: int) -> None:
    llmtrace.init(service_name=os.environ.get("OTEL_SERVICE_NAME", "delayed-app"), instrument=False)
    if os.environ.get("DELAYED_APP_OTLP_ENDPOINT"):
        _also_export_to(os.environ["DELAYED_APP_OTLP_ENDPOINT"])
    for i in range(requests):
        answer(f"question {i}")
    llmtrace.shutdown()
    llmtrace.force_flush()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
