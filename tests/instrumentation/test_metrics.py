"""The GenAI client metrics: one set of histogram points per model call, fine TTFT buckets."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from llmtrace.sdk import metrics as llmtrace_metrics

pytestmark = pytest.mark.usefixtures("instrumented")


def histograms(reader: Any) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else []:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def points_for(found: dict[str, list[Any]], name: str, model: str) -> list[Any]:
    return [p for p in found.get(name, []) if p.attributes.get("gen_ai.request.model") == model]


def test_streamed_and_plain_calls_record_the_genai_histograms(model_server, spans, metric_reader):
    model_server.configure(first_token_delay=0.05, token_delay=0.01)
    client = openai.OpenAI(base_url=model_server.base_url, api_key="k", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    client.chat.completions.create(model="metrics-plain", messages=messages)
    stream = client.chat.completions.create(
        model="metrics-stream",
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
    )
    for _ in stream:
        pass

    found = histograms(metric_reader)
    (plain,) = points_for(found, "gen_ai.client.operation.duration", "metrics-plain")
    assert plain.count == 1
    assert plain.attributes["gen_ai.operation.name"] == "chat"
    assert plain.attributes["server.address"] == "127.0.0.1"
    tokens = points_for(found, "gen_ai.client.token.usage", "metrics-plain")
    assert sorted(p.attributes["gen_ai.token.type"] for p in tokens) == ["input", "output"]

    (ttfc,) = points_for(found, "gen_ai.client.operation.time_to_first_chunk", "metrics-stream")
    assert ttfc.count == 1
    assert list(ttfc.explicit_bounds) == list(llmtrace_metrics.TIME_TO_FIRST_CHUNK_BUCKETS)
    (per_chunk,) = points_for(
        found, "gen_ai.client.operation.time_per_output_chunk", "metrics-stream"
    )
    assert 0.005 < per_chunk.sum / per_chunk.count < 0.5
    assert not points_for(found, "gen_ai.client.operation.time_to_first_chunk", "metrics-plain")
