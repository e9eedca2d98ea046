"""Retries are seen: a model call whose client retried shows each refused attempt and the wait
before the retry, its last attempt describes the answer the caller got, and the report gives
the time lost its own stage, ``retry``, with advice that names rate limiting.

The real ``openai`` and ``anthropic`` clients (their own retry loops, default ``max_retries=2``)
against the simulated server refusing the first attempt of each request."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest

from llmtrace import semconv
from llmtrace.analysis.report import Report, build_report
from llmtrace.analysis.sources import load_traces
from llmtrace.sdk.exporters.otlp_json import encode_request
from tests.instrumentation.conftest import model_spans

pytestmark = pytest.mark.usefixtures("instrumented")

MESSAGES = [{"role": "user", "content": "Say hello"}]
FIRST_TOKEN_DELAY = 0.09
# The recorded wait runs from the refused answer read to its end to the retry's request leaving:
# the client's sleep, and its own steps around it (closing the answer, logging, building the
# request again). It is checked against the client's stated sleep (never less) and against the
# gap the server saw between sending the refusal and the retry arriving (never more: both ends
# of the wait lie inside that gap). How far beyond the stated sleep it runs depends on the load
# of the machine; on a quiet one 1-6 ms (benchmarks/README.md, retries).
LOOPBACK = 0.002
# What the clients log before sleeping: "Retrying request to /chat/completions in 0.400000
# seconds" (the words before "in" differ between releases).
_RETRYING = re.compile(r"Retrying request\b.*? in ([0-9.]+) seconds")

# (status, headers, what the client sleeps): a provider's refusal with its hint, or without one
# (the client's own backoff, with jitter: only a range is known).
REFUSALS = {
    "429 retry-after-ms": (429, {"retry-after-ms": "400"}),
    "503 retry-after": (503, {"retry-after": "0.3"}),
    "429 no hint": (429, {}),
}


def _openai(server: Any, mode: str) -> Any:
    if mode == "async":
        client: Any = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
    else:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
    return client.chat.completions.create(
        model="m", messages=MESSAGES, stream=mode == "stream", max_tokens=20
    )


def _anthropic(server: Any, mode: str) -> Any:
    if mode == "async":
        client: Any = anthropic.AsyncAnthropic(base_url=server.url, api_key="sk-ant-test")
    else:
        client = anthropic.Anthropic(base_url=server.url, api_key="sk-ant-test")
    return client.messages.create(
        model="claude-x", max_tokens=20, messages=MESSAGES, stream=mode == "stream"
    )


CLIENTS: dict[str, Callable[[Any, str], Any]] = {"openai": _openai, "anthropic": _anthropic}


def _call(client: str, server: Any, mode: str) -> None:
    result = CLIENTS[client](server, mode)
    if mode == "async":

        async def run() -> None:
            await result

        asyncio.run(run())
    elif mode == "stream":
        for _ in result:
            pass


def _slept(caplog: pytest.LogCaptureFixture) -> list[float]:
    return [float(m.group(1)) for m in _RETRYING.finditer(caplog.text)]


def _report(spans: Any, tmp_path: Any) -> Report:
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(encode_request(spans.get_finished_spans())) + "\n")
    return build_report(load_traces(str(path)))


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_each_refused_attempt_and_the_wait_before_its_retry_are_on_the_span(
    client, mode, refusal, model_server, spans, caplog, tmp_path
):
    caplog.set_level(logging.INFO)
    status, headers = REFUSALS[refusal]
    model_server.configure(first_token_delay=FIRST_TOKEN_DELAY, refusals=[(status, headers)])
    _call(client, model_server, mode)

    (span,) = model_spans(spans)
    attributes = span.attributes
    assert attributes[semconv.HTTP_REQUEST_RESEND_COUNT] == 1
    assert attributes[semconv.RETRY_ERROR_TYPES] == (str(status),)
    assert semconv.ERROR_TYPE not in attributes  # the call itself succeeded
    (event,) = [e for e in span.events if e.name == semconv.RETRY_EVENT]
    assert event.attributes[semconv.HTTP_RESPONSE_STATUS_CODE] == status
    assert event.attributes[semconv.ERROR_TYPE] == str(status)
    assert event.attributes[semconv.HTTP_REQUEST_RESEND_COUNT] == 1
    assert 0 <= event.attributes[semconv.ATTEMPT_TIME_TO_HEADERS] < 0.1
    (slept,) = _slept(caplog)
    if headers:  # the provider's hint was followed
        hint = headers.get("retry-after-ms")
        assert slept == pytest.approx(float(hint) / 1000 if hint else float(headers["retry-after"]))
    wait = event.attributes[semconv.RETRY_WAIT]
    refused, retried = model_server.requests[-2:]
    assert refused.refused_at is not None
    gap = retried.arrived_at - refused.refused_at
    assert slept <= wait <= gap + LOOPBACK, (slept, wait, gap)
    # The last attempt's time to headers: after the wait, not the refused attempt's.
    retry_time = attributes[semconv.RETRY_TIME]
    assert slept <= retry_time < slept + 0.1
    assert attributes[semconv.TIME_TO_HEADERS] > retry_time

    report = _report(spans, tmp_path)
    assert report.stages["retry"].distribution.mean == pytest.approx(retry_time, abs=0.002)
    ttft = report.stages["ttft"].distribution.mean
    network = report.stages["network"].distribution.mean if "network" in report.stages else 0.0
    # What is left of the time to first token once the retry is taken out: the last attempt's,
    # no shorter than the server's own first-token time for it.
    # (A call not streamed has its first token with its last: all of it is time to first token.)
    first_token = attributes.get(
        semconv.TIME_TO_FIRST_TOKEN, (span.end_time - span.start_time) / 1e9
    )
    last_attempt = first_token - retry_time
    # (within the few milliseconds between the call's monotonic start and its span's start)
    assert ttft + network == pytest.approx(last_attempt, abs=0.005), (
        {name: s.distribution.mean for name, s in report.stages.items()},
        dict(attributes),
    )
    server_first_token = (
        retried.first_token_sent_at or retried.last_token_sent_at or 0.0
    ) - retried.arrived_at
    assert last_attempt > min(server_first_token, FIRST_TOKEN_DELAY) - 0.005
    assert report.bottleneck is not None and report.bottleneck.stage == "retry"


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_rate_limited_requests_are_named_in_the_report(client, model_server, spans, tmp_path):
    """Every request's first attempt refused with 429 and ``retry-after-ms: 400``: the retry
    stage is the bottleneck, ttft is the model's, and the advice names rate limiting with the
    share of calls retried and the status seen."""
    model_server.configure(first_token_delay=FIRST_TOKEN_DELAY)
    for _ in range(4):
        model_server.configure(refusals=[(429, {"retry-after-ms": "400"})])
        _call(client, model_server, "stream")
    report = _report(spans, tmp_path)
    assert report.bottleneck is not None and report.bottleneck.stage == "retry"
    assert 0.4 <= report.stages["retry"].distribution.mean < 0.45
    assert report.stages["ttft"].distribution.mean < FIRST_TOKEN_DELAY + 0.1
    advice = " ".join(report.bottleneck.advice)
    assert "4 of 4 model calls (100.0%) were retried after 429 (4)" in advice
    assert "rate limiting" in advice and "rate limit" in advice


def test_a_call_that_was_not_retried_has_no_retry_attributes(model_server, spans, tmp_path):
    model_server.configure(first_token_delay=FIRST_TOKEN_DELAY)
    _call("openai", model_server, "stream")
    (span,) = model_spans(spans)
    assert not [e for e in span.events if e.name == semconv.RETRY_EVENT]
    for name in (semconv.HTTP_REQUEST_RESEND_COUNT, semconv.RETRY_TIME, semconv.RETRY_ERROR_TYPES):
        assert name not in span.attributes
    assert "retry" not in _report(spans, tmp_path).stages


def test_every_attempt_refused_is_an_error_with_each_attempt_seen(model_server, spans, caplog):
    caplog.set_level(logging.INFO)
    refusal = (429, {"retry-after-ms": "50"})
    model_server.configure(refusals=[refusal, refusal, refusal])
    with pytest.raises(openai.RateLimitError):
        _call("openai", model_server, "sync")
    (span,) = model_spans(spans)
    assert span.attributes[semconv.HTTP_REQUEST_RESEND_COUNT] == 2
    assert span.attributes[semconv.RETRY_ERROR_TYPES] == ("429", "429")
    assert span.attributes[semconv.ERROR_TYPE] == "RateLimitError"
    events = [e for e in span.events if e.name == semconv.RETRY_EVENT]
    assert [e.attributes[semconv.HTTP_REQUEST_RESEND_COUNT] for e in events] == [1, 2]
    requests = model_server.requests
    for index, (event, slept) in enumerate(zip(events, _slept(caplog), strict=True)):
        refused_at = requests[index].refused_at
        assert refused_at is not None
        gap = requests[index + 1].arrived_at - refused_at
        assert slept <= event.attributes[semconv.RETRY_WAIT] <= gap + LOOPBACK
