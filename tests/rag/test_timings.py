"""Server-reported timings (llama.cpp body, TGI and OpenAI headers) as llmtrace.server.* seconds."""

from __future__ import annotations

import httpx
import pytest

from llmtrace import semconv
from llmtrace.instrumentation.server_timings import (
    server_timings,
    server_timings_from_body,
    server_timings_from_headers,
)


def test_llama_cpp_body_timings_become_prompt_and_generation_seconds() -> None:
    body = {
        "choices": [],
        "timings": {
            "prompt_n": 12,
            "prompt_ms": 35.5,
            "predicted_n": 40,
            "predicted_ms": 812.25,
            "predicted_per_second": 49.2,
        },
    }

    assert server_timings_from_body(body) == {
        semconv.SERVER_PROMPT_TIME: pytest.approx(0.0355),
        semconv.SERVER_GENERATION_TIME: pytest.approx(0.81225),
    }


def test_tgi_headers_become_queue_inference_and_total_seconds() -> None:
    headers = {"X-Queue-Time": "14", "x-inference-time": "230", "x-total-time": "250"}

    assert server_timings_from_headers(headers) == {
        semconv.SERVER_QUEUE_TIME: pytest.approx(0.014),
        semconv.SERVER_INFERENCE_TIME: pytest.approx(0.230),
        semconv.SERVER_PROCESSING_TIME: pytest.approx(0.250),
    }


def test_openai_processing_ms_from_real_httpx_headers() -> None:
    headers = httpx.Headers({"openai-processing-ms": "1234", "content-type": "application/json"})

    assert server_timings_from_headers(headers) == {
        semconv.SERVER_PROCESSING_TIME: pytest.approx(1.234)
    }


@pytest.mark.parametrize("value", ["", "soon", "-5", "nan", "inf"])
def test_unusable_header_values_are_ignored(value: str) -> None:
    assert server_timings_from_headers({"x-queue-time": value}) == {}


@pytest.mark.parametrize(
    "body",
    [{}, {"timings": None}, {"timings": "fast"}, {"timings": {"prompt_ms": True}}],
)
def test_bodies_without_usable_timings_give_nothing(body: dict[str, object]) -> None:
    assert server_timings_from_body(body) == {}


def test_both_sources_merge_and_the_body_wins() -> None:
    merged = server_timings(
        headers={"x-queue-time": "10"}, body={"timings": {"prompt_ms": 20, "predicted_ms": 30}}
    )

    assert merged == {
        semconv.SERVER_QUEUE_TIME: pytest.approx(0.01),
        semconv.SERVER_PROMPT_TIME: pytest.approx(0.02),
        semconv.SERVER_GENERATION_TIME: pytest.approx(0.03),
    }
