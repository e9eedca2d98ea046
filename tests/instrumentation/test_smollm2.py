"""End to end on a real model: SmolLM2-135M behind llama-cpp-python's OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from llmtrace import semconv
from llmtrace.demo.model_server import LlamaServer
from tests.instrumentation.conftest import model_spans

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("instrumented")]


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    server = LlamaServer(n_ctx=2048)
    server.start()
    try:
        server.wait_ready(timeout=300)
        yield server
    finally:
        server.stop()


def test_streamed_completion_has_consistent_ttft_chunks_and_generation(llama_server, spans):
    client = openai.OpenAI(base_url=llama_server.base_url, api_key="none", max_retries=0)
    stream = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Name three colours."}],
        max_tokens=24,
        temperature=0.0,
        stream=True,
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text.strip()
    (span,) = model_spans(spans)
    a = span.attributes
    total = (span.end_time - span.start_time) / 1e9
    assert 0 < a[semconv.TIME_TO_FIRST_TOKEN] < total
    assert a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] <= a[semconv.TIME_TO_FIRST_TOKEN]
    assert a[semconv.CHUNK_COUNT] > 1
    assert a[semconv.GENERATION_TIME] > 0
    assert a[semconv.TIME_TO_FIRST_TOKEN] + a[semconv.GENERATION_TIME] <= total + 0.001
    assert a[semconv.GEN_AI_PROVIDER_NAME] in ("openai", "vllm", "llama_cpp")
    assert a[semconv.STREAM_END] == "completed"
