"""The ASGI middleware on real Starlette and FastAPI apps served by uvicorn over loopback."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry.trace import SpanKind, StatusCode
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from llmtrace import semconv
from llmtrace.errors import ConfigError
from llmtrace.server import LLMTraceMiddleware

from .asgi_server import serve
from .spans_util import duration, only

# Serves ASGI applications with uvicorn over loopback.
pytestmark = pytest.mark.integration

CALLER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN_ID = "00f067aa0ba902b7"


async def item(request: Request) -> JSONResponse:
    return JSONResponse({"item": request.path_params["item_id"]})


async def broken(request: Request) -> PlainTextResponse:
    raise RuntimeError("the model fell over")


def starlette_app() -> Starlette:
    app = Starlette(routes=[Route("/items/{item_id}", item), Route("/broken", broken)])
    app.add_middleware(LLMTraceMiddleware)
    return app


def fastapi_app(**options: object) -> FastAPI:
    app = FastAPI(**options)

    @app.post("/v1/chat/completions")
    async def completions() -> dict[str, str]:
        return {"id": "chatcmpl-1"}

    app.add_middleware(LLMTraceMiddleware, stage="ttft")
    return app


@pytest.fixture(scope="module")
def starlette_url() -> Iterator[str]:
    with serve(starlette_app()) as url:
        yield url


def wait_for(spans, name: str, timeout: float = 5.0):
    """The server span ends just after the response is sent: give it a moment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        finished = [span for span in spans.get_finished_spans() if span.name == name]
        if finished:
            return finished[0]
        time.sleep(0.005)
    raise AssertionError(f"no {name!r} span; got {[s.name for s in spans.get_finished_spans()]}")


def test_server_span_continues_the_callers_trace_named_after_the_route(
    spans, starlette_url
) -> None:
    traceparent = f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01"

    response = httpx.get(f"{starlette_url}/items/42", headers={"traceparent": traceparent})

    assert response.json() == {"item": "42"}
    span = wait_for(spans, "GET /items/{item_id}")
    assert span.kind == SpanKind.SERVER
    assert format(span.context.trace_id, "032x") == CALLER_TRACE_ID
    assert span.parent is not None and format(span.parent.span_id, "016x") == CALLER_SPAN_ID
    assert span.attributes[semconv.STAGE] == "other"
    assert span.attributes[semconv.HTTP_ROUTE] == "/items/{item_id}"
    assert span.attributes[semconv.HTTP_REQUEST_METHOD] == "GET"
    assert span.attributes[semconv.URL_PATH] == "/items/42"
    assert span.attributes[semconv.HTTP_RESPONSE_STATUS_CODE] == 200
    assert span.status.status_code == StatusCode.UNSET


def test_proxy_queueing_from_x_request_start_is_a_queue_span(spans, starlette_url) -> None:
    waited = 0.25
    proxy_received_ms = round((time.time() - waited) * 1000)

    httpx.get(f"{starlette_url}/items/1", headers={"X-Request-Start": f"t={proxy_received_ms}"})

    server = wait_for(spans, "GET /items/{item_id}")
    queue = only(spans.get_finished_spans(), "queue proxy")
    proxy_queue_time = server.attributes[semconv.SERVER_PROXY_QUEUE_TIME]
    assert waited - 0.002 <= proxy_queue_time < waited + 0.5
    assert queue.attributes[semconv.STAGE] == "queue"
    assert queue.parent is not None and queue.parent.span_id == server.context.span_id
    assert queue.start_time == server.start_time == proxy_received_ms * 1_000_000
    assert duration(queue) == pytest.approx(proxy_queue_time, abs=1e-6)


def test_a_clock_ahead_of_ours_is_no_queue_and_garbage_is_ignored(spans, starlette_url) -> None:
    ahead = f"t={time.time() + 5:.3f}"
    httpx.get(f"{starlette_url}/items/1", headers={"X-Request-Start": ahead})
    server = wait_for(spans, "GET /items/{item_id}")
    assert server.attributes[semconv.SERVER_PROXY_QUEUE_TIME] == 0.0

    spans.clear()
    httpx.get(f"{starlette_url}/items/1", headers={"X-Request-Start": "t=yesterday"})
    server = wait_for(spans, "GET /items/{item_id}")
    assert semconv.SERVER_PROXY_QUEUE_TIME not in server.attributes
    assert [s.name for s in spans.get_finished_spans()] == ["GET /items/{item_id}"]


def test_an_exception_in_the_app_marks_the_span_and_still_reaches_the_caller(
    spans, starlette_url
) -> None:
    response = httpx.get(f"{starlette_url}/broken")

    assert response.status_code == 500
    span = wait_for(spans, "GET /broken")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == "RuntimeError"
    assert span.events[0].name == "exception"


def test_an_unmatched_path_is_named_by_method_alone(spans, starlette_url) -> None:
    response = httpx.get(f"{starlette_url}/nowhere")

    assert response.status_code == 404
    span = wait_for(spans, "GET")
    assert span.attributes[semconv.HTTP_RESPONSE_STATUS_CODE] == 404
    assert semconv.HTTP_ROUTE not in span.attributes
    assert span.status.status_code == StatusCode.UNSET


def test_an_unsampled_caller_gets_no_spans(spans, starlette_url) -> None:
    traceparent = f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-00"

    response = httpx.get(f"{starlette_url}/items/7", headers={"traceparent": traceparent})

    assert response.status_code == 200
    # A sampled request after it: once its span has ended, the unsampled one's would have too.
    sampled = f"00-{'1' * 32}-{CALLER_SPAN_ID}-01"
    assert (
        httpx.get(f"{starlette_url}/items/8", headers={"traceparent": sampled}).status_code == 200
    )
    marker = wait_for(spans, "GET /items/{item_id}")
    assert marker.context.trace_id == int("1" * 32, 16)
    assert [span.context.trace_id for span in spans.get_finished_spans()] == [int("1" * 32, 16)]


def test_fastapis_own_server_span_is_joined_not_duplicated(spans) -> None:
    with serve(fastapi_app()) as url:
        proxy_received_ms = round((time.time() - 0.1) * 1000)
        headers = {"X-Request-Start": f"t={proxy_received_ms}"}
        response = httpx.post(f"{url}/v1/chat/completions", json={}, headers=headers)
        assert response.json() == {"id": "chatcmpl-1"}
        span = wait_for(spans, "POST /v1/chat/completions")

    server_spans = [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER]
    assert server_spans == [span]
    assert span.attributes[semconv.STAGE] == "ttft"
    assert span.attributes[semconv.SERVER_PROXY_QUEUE_TIME] >= 0.098
    queue = only(spans.get_finished_spans(), "queue proxy")
    assert queue.parent is not None and queue.parent.span_id == span.context.span_id


def test_fastapi_with_its_tracing_off_gets_the_middlewares_span(spans) -> None:
    with serve(fastapi_app(telemetry={"tracing": False})) as url:
        httpx.post(f"{url}/v1/chat/completions", json={})
        span = wait_for(spans, "POST /v1/chat/completions")

    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == semconv.SCOPE_NAME
    assert span.attributes[semconv.STAGE] == "ttft"
    assert span.attributes[semconv.HTTP_ROUTE] == "/v1/chat/completions"


def test_a_stage_outside_the_vocabulary_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="'waiting' is not one of"):
        LLMTraceMiddleware(starlette_app(), stage="waiting")
