"""The example RAG service (examples/rag_app.py) end to end: real MiniLM embeddings, real qdrant,
the real ``openai`` client streaming from the simulated model server (exact, fast timing; the
real SmolLM2 needs minutes on this machine), more concurrent questions than model slots.

Every request must show every stage, and the report's breakdown must name them.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from llmtrace import semconv
from llmtrace.analysis.breakdown import breakdown
from llmtrace.analysis.sources import load_traces
from llmtrace.instrumentation.hops.httpx2 import HTTPX2Instrumentor
from llmtrace.instrumentation.providers.openai import OpenAIInstrumentor
from llmtrace.instrumentation.vectordb.qdrant import QdrantInstrumentor
from llmtrace.sdk.exporters.otlp_json import encode_request

from .asgi_server import serve

# Serves ASGI applications with uvicorn over loopback.
pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rag_app.py"
QUESTIONS = [
    "How long does the backup battery last?",
    "How much does the hub cost?",
    "Which radios does the hub support?",
]
FIRST_TOKEN_SECONDS = 0.15


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rag_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["rag_app"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def instrumented() -> Iterator[None]:
    instrumentors = [OpenAIInstrumentor(), HTTPX2Instrumentor(), QdrantInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument()
    yield
    for instrumentor in instrumentors:
        instrumentor.uninstrument()


def test_every_stage_of_every_request_is_traced(
    spans, model_server, instrumented, tmp_path
) -> None:
    rag_app = load_example()
    model_server.configure(first_token_delay=FIRST_TOKEN_SECONDS, token_delay=0.005)
    app = rag_app.create_app(model_server.base_url, model_slots=1)

    with serve(app, lifespan="on") as url:
        spans.clear()  # indexing at start-up is its own trace
        answers = asyncio.run(rag_app.ask_all(url, QUESTIONS))

    assert all(answer["answer"] == "Hello, world!" for answer in answers)
    finished = spans.get_finished_spans()
    traces = defaultdict(list)
    for span in finished:
        traces[format(span.context.trace_id, "032x")].append(span)
    for answer in answers:
        names = {span.name for span in traces[answer["trace_id"]]}
        assert {
            "POST /ask",
            "embeddings all-MiniLM-L6-v2",
            "retrieval handbook",
            "rerank",
            "prompt",
            "queue model",
        } <= names, names
        (chat,) = [s for s in traces[answer["trace_id"]] if s.name.startswith("chat ")]
        assert chat.attributes[semconv.TIME_TO_FIRST_TOKEN] >= FIRST_TOKEN_SECONDS
        (retrieval,) = [s for s in traces[answer["trace_id"]] if s.name == "retrieval handbook"]
        assert retrieval.attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] == 8
        assert retrieval.attributes[semconv.RETRIEVAL_RETURNED] == 8
        (queue,) = [s for s in traces[answer["trace_id"]] if s.name == "queue model"]
        assert queue.attributes[semconv.STAGE] == "queue"
        # How long each waited depends on how the CPU-bound embedding steps interleave; the
        # accuracy of queue spans is pinned by test_two_services.
        assert queue.end_time is not None and queue.end_time <= chat.start_time

    traces_file = tmp_path / "traces.jsonl"
    traces_file.write_text(json.dumps(encode_request(finished)) + "\n")
    stages = set()
    for trace in load_traces(str(traces_file)).traces:
        stages |= set(breakdown(trace).stages)
    assert {"embedding", "retrieval", "rerank", "prompt", "queue", "ttft", "generation"} <= stages
