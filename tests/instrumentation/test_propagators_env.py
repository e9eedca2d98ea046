"""``OTEL_PROPAGATORS`` decides which context headers a model call's request carries, as it does for
any OpenTelemetry HTTP hop: set in the environment of a real application process, the way users
set it (the API reads it once, when the propagator is first made)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.subprocesses import clean_environment, run

_APP = """
import sys

import openai
from opentelemetry import baggage, context

import llmtrace

llmtrace.init(exporter="none")
context.attach(baggage.set_baggage("tenant", "t-1"))
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="k", max_retries=0)
answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
print(answer.choices[0].message.content)
"""

_CONTEXT_HEADERS = {"traceparent", "tracestate", "baggage"}


@pytest.mark.parametrize(
    ("propagators", "sent"),
    [
        (None, {"traceparent", "baggage"}),
        ("tracecontext,baggage", {"traceparent", "baggage"}),
        ("tracecontext", {"traceparent"}),
        ("baggage", {"baggage"}),
        ("none", set()),
    ],
)
def test_otel_propagators_chooses_the_headers_a_model_call_sends(
    model_server, tmp_path: Path, propagators: str | None, sent: set[str]
) -> None:
    (tmp_path / "app.py").write_text(_APP)
    env = clean_environment(**({"OTEL_PROPAGATORS": propagators} if propagators else {}))
    done = run([sys.executable, "app.py", model_server.url], tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the application printed no answer"
    headers = {name.lower(): value for name, value in model_server.requests[-1].headers.items()}
    assert _CONTEXT_HEADERS & set(headers) == sent
    if "traceparent" in sent:
        assert len(headers["traceparent"].split("-")) == 4
    if "baggage" in sent:
        assert headers["baggage"] == "tenant=t-1"
