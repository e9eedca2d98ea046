"""Replay: every recorded OpenAI and Anthropic exchange, served locally, called with the real client.

The span must carry the recorded token counts, finish reasons, response model and id; an error
exchange must give an ERROR span and the very exception the client raises uninstrumented.
Expected values are read straight from the recorded response, independently of llmtrace's parsers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import yaml
from opentelemetry.trace import StatusCode

from llmtrace import semconv
from llmtrace.instrumentation import registry
from tests.instrumentation.conftest import CLIENT_LIBRARIES, model_spans
from tests.servers.fixtures import cassettes, sse_events


def _expected(provider: str, response: dict[str, Any]) -> dict[str, Any]:
    """What the span must say, read from the recorded response body."""
    body = response["body"]["string"]
    expected: dict[str, Any] = {}
    if body.lstrip().startswith("{"):
        data = json.loads(body)
        items = [data]
    else:
        items = sse_events(body)
    for item in items:
        obj = item.get("response") or item.get("message") or item
        if provider == "anthropic":
            if item.get("type") in ("message_start", "message"):
                expected["id"], expected["model"] = obj["id"], obj["model"]
            usage = obj.get("usage") or item.get("usage") or {}
            for key, attr in (
                ("input_tokens", semconv.GEN_AI_USAGE_INPUT_TOKENS),
                ("output_tokens", semconv.GEN_AI_USAGE_OUTPUT_TOKENS),
            ):
                if isinstance(usage.get(key), int):
                    expected[attr] = usage[key]
            reason = obj.get("stop_reason") or (item.get("delta") or {}).get("stop_reason")
            if reason:
                expected["finish"] = (reason,)
            continue
        if "id" in obj and "model" in obj:
            expected.setdefault("id", obj["id"])
            expected["model"] = obj["model"]
        usage = obj.get("usage")
        if usage:
            tokens_in = usage.get("prompt_tokens", usage.get("input_tokens"))
            tokens_out = usage.get("completion_tokens", usage.get("output_tokens"))
            expected[semconv.GEN_AI_USAGE_INPUT_TOKENS] = tokens_in
            if tokens_out is not None:
                expected[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = tokens_out
        reasons = [c["finish_reason"] for c in obj.get("choices") or () if c.get("finish_reason")]
        if reasons:
            expected["finish"] = tuple(expected.get("finish", ())) + tuple(reasons)
    return expected


def _call(provider: str, server_url: str, request: dict[str, Any]) -> Any:
    path = request["uri"].split("://", 1)[1].split("/", 1)[1].split("?")[0]
    body = json.loads(request["body"]) if request.get("body") else {}
    if provider == "anthropic":
        client = anthropic.Anthropic(base_url=server_url, api_key="k", max_retries=0)
        if "beta=true" in request["uri"]:
            result = client.beta.messages.create(**body)
        else:
            result = client.messages.create(**body)
    else:
        client = openai.OpenAI(base_url=f"{server_url}/v1", api_key="k", max_retries=0)
        method = {
            "v1/chat/completions": client.chat.completions.create,
            "v1/embeddings": client.embeddings.create,
            "v1/responses": client.responses.create,
        }[path]
        result = method(**body)
    if body.get("stream"):
        result = list(result)
    return result


@pytest.mark.parametrize(
    ("provider", "cassette"),
    [(p, c) for p in ("openai", "anthropic") for c in cassettes(p)],
    ids=lambda value: value.stem if isinstance(value, Path) else value,
)
def test_recorded_exchange(provider, cassette, model_server, spans):
    interaction = yaml.safe_load(cassette.read_text())["interactions"][0]
    model_server.play_cassette(interaction)
    status = int(interaction["response"]["status"]["code"])
    if status >= 400:
        with pytest.raises(Exception) as plain:
            _call(provider, model_server.url, interaction["request"])
    registry.instrument(CLIENT_LIBRARIES)
    try:
        spans.clear()
        if status >= 400:
            with pytest.raises(Exception) as traced:
                _call(provider, model_server.url, interaction["request"])
            assert type(traced.value) is type(plain.value)
            assert str(traced.value) == str(plain.value)
            (span,) = model_spans(spans)
            assert span.status.status_code == StatusCode.ERROR
            assert span.attributes[semconv.ERROR_TYPE] == type(traced.value).__qualname__
            return
        _call(provider, model_server.url, interaction["request"])
    finally:
        registry.uninstrument()
    (span,) = model_spans(spans)
    attributes = span.attributes
    expected = _expected(provider, interaction["response"])
    assert expected, "nothing to compare in the recorded response"
    if "id" in expected:
        assert attributes[semconv.GEN_AI_RESPONSE_ID] == expected["id"]
    if "model" in expected:
        assert attributes[semconv.GEN_AI_RESPONSE_MODEL] == expected["model"]
    if (
        ("finish" in expected and provider == "anthropic")
        or "choices" in interaction["response"]["body"]["string"]
    ) and "finish" in expected:
        assert attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == expected["finish"]
    processing_ms = (interaction["response"].get("headers") or {}).get("openai-processing-ms")
    if processing_ms:
        # The server's own processing time, from its response header, in seconds.
        assert attributes[semconv.SERVER_PROCESSING_TIME] == pytest.approx(
            float(processing_ms[0]) / 1000.0
        )
    for name in (semconv.GEN_AI_USAGE_INPUT_TOKENS, semconv.GEN_AI_USAGE_OUTPUT_TOKENS):
        if name in expected:
            assert attributes[name] == expected[name], name
        else:
            assert name not in attributes, name
