"""``opentelemetry-instrument python app.py`` traces an unmodified app through llmtrace's entry
points: the ``llmtrace`` instrumentor and the ``llmtrace_file`` traces exporter."""

from __future__ import annotations

import json
import textwrap

from llmtrace import semconv
from tests.subprocesses import run_instrumented_app

APP = textwrap.dedent(
    """
    import sys
    import openai

    client = openai.OpenAI(base_url=sys.argv[1], api_key="test-key")
    reply = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
    stream = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    print(reply.choices[0].message.content == text)
    """
)


def test_unmodified_app_is_traced_with_no_code_change(tmp_path, model_server):
    result, traces = run_instrumented_app(APP, tmp_path, "unmodified-app", model_server.base_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
    spans = []
    for line in traces.read_text().splitlines():
        for resource_spans in json.loads(line)["resourceSpans"]:
            attributes = {a["key"]: a["value"] for a in resource_spans["resource"]["attributes"]}
            assert attributes["service.name"] == {"stringValue": "unmodified-app"}
            for scope_spans in resource_spans["scopeSpans"]:
                spans.extend(scope_spans["spans"])
    model_spans = [s for s in spans if s["name"] == "chat tiny"]
    assert len(model_spans) == 2  # one per call: no duplicate from the HTTP layer
    streamed = next(
        s
        for s in model_spans
        if any(a["key"] == "llmtrace.time_to_first_token" for a in s["attributes"])
    )
    stage = {a["key"]: a["value"] for a in streamed["attributes"]}["llmtrace.stage"]
    assert stage == {"stringValue": semconv.LLM_STAGE}
