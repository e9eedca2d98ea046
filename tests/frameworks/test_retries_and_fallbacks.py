"""Retries and fallbacks made by frameworks, run for real against the simulated server: LangChain's
``with_retry`` and ``with_fallbacks`` over ``ChatOpenAI`` (its ``openai`` client not retrying, so
the framework does), LiteLLM's router falling back to another deployment, and LiteLLM's
``num_retries`` (which its clients carry out inside the one call).

A framework's retry or fallback is a failed model call followed by the call that answered, in one
trace; the report counts the failed attempt and the wait after it as stage ``retry`` (the
breakdown's rule in docs/architecture.md) and its advice counts the failed calls with their error
types. A retry inside one call is on that call's span, as the provider clients' retries are
(``tests/providers``, ``tests/instrumentation/test_retries.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import litellm
import pytest

import llmtrace
from llmtrace import semconv
from llmtrace.instrumentation import registry
from tests.frameworks.langchain_support import (
    assert_tree,
    by_trace,
    chat_model,
    langchain_traced,
    report_of,
)
from tests.providers.sdk_checks import sleeps

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

FIRST_TOKEN = 0.05
# The wait lies inside the gap the server saw between sending a refusal and the retry arriving.
LOOPBACK = 0.002
# What the server refuses the first attempt with: an overloaded deployment.
UNAVAILABLE = (503, {})


def _failed_then_answered(trace: list[Any]) -> tuple[Any, Any]:
    """The two model calls of a trace: the one that failed, then the one that answered after it."""
    calls = sorted(
        (s for s in trace if semconv.GEN_AI_OPERATION_NAME in s.attributes),
        key=lambda s: s.start_time,
    )
    model_calls = [s for s in calls if s.attributes.get(semconv.STAGE) == semconv.LLM_STAGE]
    failed, answered = model_calls
    assert semconv.ERROR_TYPE in failed.attributes
    assert semconv.ERROR_TYPE not in answered.attributes
    assert failed.end_time <= answered.start_time
    return failed, answered


def _attempt(trace: list[Any], call: Any) -> Any:
    """The span the framework recorded around a model call: the call's parent when that is in
    the trace below the root, else the call itself."""
    by_id = {s.context.span_id: s for s in trace}
    parent = by_id.get(call.parent.span_id) if call.parent is not None else None
    return parent if parent is not None and parent.parent is not None else call


def _assert_retry_stage(spans: Any, tmp_path: Any, error_type: str) -> None:
    """One trace; its report's ``retry`` is the failed attempt and the wait after it, to the
    nanosecond the spans give, and the advice counts the failed call."""
    (trace,) = by_trace(spans).values()
    assert_tree(trace)
    failed, answered = _failed_then_answered(trace)
    lost = (_attempt(trace, answered).start_time - _attempt(trace, failed).start_time) / 1e9
    report = report_of(spans, tmp_path)
    assert report.stages["retry"].distribution.mean == pytest.approx(lost, abs=1e-6)
    assert report.evidence.superseded_calls == 1
    assert report.evidence.superseded_error_counts == {error_type: 1}


@pytest.fixture
def langchain() -> Iterator[None]:
    with langchain_traced("openai"):
        yield


def test_with_retry_counts_the_failed_attempt_and_the_wait_as_retry(
    model_server, spans, tmp_path, langchain
):
    model = chat_model(model_server)
    spans.clear()
    model_server.configure(first_token_delay=FIRST_TOKEN, refusals=[UNAVAILABLE])
    # Its default wait: exponential with jitter, about a second before the second attempt.
    answer = model.with_retry(stop_after_attempt=2).invoke("hello")
    assert answer.content == "Hello, world!"
    _assert_retry_stage(spans, tmp_path, "InternalServerError")
    report = report_of(spans, tmp_path)
    assert report.bottleneck is not None and report.bottleneck.stage == "retry"
    advice = " ".join(report.bottleneck.advice)
    assert "1 of 2 model calls failed (InternalServerError (1))" in advice
    assert "framework's retry or fallback" in advice


async def test_with_fallbacks_counts_the_failed_primary_as_retry(
    model_server, spans, tmp_path, langchain
):
    primary = chat_model(model_server)
    backup = chat_model(model_server, model_kwargs={"user": "backup"})
    spans.clear()
    warm_ups = len(model_server.requests)
    model_server.configure(first_token_delay=FIRST_TOKEN, refusals=[UNAVAILABLE])
    answer = await primary.with_fallbacks([backup]).ainvoke("hello")
    assert answer.content == "Hello, world!"
    _assert_retry_stage(spans, tmp_path, "InternalServerError")
    requests = [r.json() for r in model_server.requests[warm_ups:]]
    assert [r.get("user") for r in requests] == [None, "backup"]


@pytest.fixture
def litellm_traced() -> Iterator[None]:
    registry.instrument(["litellm", "openai", "anthropic", "httpx"])
    yield
    registry.uninstrument()


def test_litellm_router_fallback_is_a_failed_call_then_the_answer(
    model_server, spans, tmp_path, litellm_traced
):
    def deployment(name: str, model: str) -> dict[str, Any]:
        params = {"model": f"openai/{model}", "api_base": model_server.base_url, "api_key": "k"}
        return {"model_name": name, "litellm_params": {**params, "max_retries": 0}}

    router = litellm.Router(
        model_list=[deployment("primary", "m1"), deployment("backup", "m2")],
        fallbacks=[{"primary": ["backup"]}],
        num_retries=0,
    )

    @llmtrace.workflow(name="answer")
    def answer() -> str:
        response = router.completion(model="primary", messages=[{"role": "user", "content": "hi"}])
        return str(response.choices[0].message.content)

    model_server.configure(first_token_delay=FIRST_TOKEN, refusals=[UNAVAILABLE])
    assert answer() == "Hello, world!"
    assert [r.json()["model"] for r in model_server.requests] == ["m1", "m2"]
    # (LiteLLM maps the provider's 503 to its own exception class.)
    _assert_retry_stage(spans, tmp_path, "ServiceUnavailableError")


@pytest.mark.parametrize("route", ["openai", "anthropic"])
def test_litellm_num_retries_are_seen_inside_the_one_call(
    route, model_server, spans, tmp_path, litellm_traced, monkeypatch
):
    base = model_server.base_url if route == "openai" else model_server.url
    slept = sleeps(monkeypatch)
    model_server.configure(refusals=[(429, {"retry-after-ms": "50"})])
    response = litellm.completion(
        model=f"{route}/m",
        api_base=base,
        api_key="k",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=10,
        num_retries=2,
    )
    assert response.choices[0].message.content == "Hello, world!"
    (span,) = [
        s for s in spans.get_finished_spans() if semconv.GEN_AI_OPERATION_NAME in s.attributes
    ]
    assert span.attributes[semconv.HTTP_REQUEST_RESEND_COUNT] == 1
    assert span.attributes[semconv.RETRY_ERROR_TYPES] == ("429",)
    (event,) = [e for e in span.events if e.name == semconv.RETRY_EVENT]
    refused, retried = model_server.requests
    assert refused.refused_at is not None
    # What the client slept lies within the wait, which lies within the gap the server saw. (The
    # openai client sleeps as the hint says; LiteLLM retries its Anthropic route at once.)
    assert len(slept) == (1 if route == "openai" else 0)
    gap = retried.arrived_at - refused.refused_at
    assert sum(slept) <= event.attributes[semconv.RETRY_WAIT] <= gap + LOOPBACK
    report = report_of(spans, tmp_path)
    assert report.stages["retry"].distribution.mean == pytest.approx(
        span.attributes[semconv.RETRY_TIME], abs=0.002
    )
    assert report.evidence.retried_calls == 1
