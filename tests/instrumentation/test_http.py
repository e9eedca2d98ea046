"""HTTP hops: spans outside model calls, phases, traceparent, redaction, no duplicate spans."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import httpx2
import openai
import pytest
import requests
from opentelemetry import context, propagate, trace
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import SpanKind

from llmtrace import semconv
from llmtrace.instrumentation import registry
from llmtrace.instrumentation.hops.hop import redact_url
from tests.http_server import serving
from tests.instrumentation.conftest import model_spans

pytestmark = pytest.mark.usefixtures("instrumented")


def test_plain_httpx2_call_is_a_network_span_with_phases(model_server, spans):
    with httpx2.Client() as client:
        response = client.get(f"{model_server.url}/tool?api_key=secret123&q=cats")
    assert response.json() == {"ok": True}
    (span,) = spans.get_finished_spans()
    a = span.attributes
    assert span.kind == SpanKind.CLIENT
    assert a[semconv.STAGE] == "network"
    assert a[semconv.HTTP_RESPONSE_STATUS_CODE] == 200
    assert "secret123" not in a[semconv.URL_FULL]
    assert "q=cats" in a[semconv.URL_FULL]
    for phase in (
        semconv.HTTP_CONNECT,
        semconv.HTTP_REQUEST_SENT,
        semconv.HTTP_RESPONSE_HEADERS,
        semconv.HTTP_BODY_COMPLETE,
    ):
        assert a[phase] >= 0, phase
    traceparent = model_server.requests[-1].headers["traceparent"]
    assert traceparent.split("-")[2] == format(span.context.span_id, "016x")


async def test_async_httpx_and_requests_are_traced(model_server, spans):
    async with httpx.AsyncClient() as client:
        await client.get(f"{model_server.url}/a")
    requests.get(f"{model_server.url}/b", timeout=5)
    first, second = sorted(spans.get_finished_spans(), key=lambda s: s.start_time)
    assert first.attributes[semconv.HTTP_RESPONSE_HEADERS] >= 0
    assert second.attributes[semconv.HTTP_RESPONSE_HEADERS] >= 0
    assert "traceparent" in model_server.requests[-1].headers
    assert "traceparent" in model_server.requests[-2].headers


def test_existing_trace_callback_is_still_called(model_server, spans):
    seen: list[str] = []
    with httpx2.Client() as client:
        client.get(
            f"{model_server.url}/x", extensions={"trace": lambda name, info: seen.append(name)}
        )
    assert any(name.endswith("receive_response_headers.complete") for name in seen)
    assert semconv.HTTP_RESPONSE_HEADERS in spans.get_finished_spans()[0].attributes


def test_streamed_response_span_ends_when_body_closed(model_server, spans):
    with httpx2.Client() as client, client.stream("GET", f"{model_server.url}/s") as response:
        assert spans.get_finished_spans() == ()
        response.read()
    assert len(spans.get_finished_spans()) == 1


def test_redact_url_hides_credentials_and_secret_parameters():
    url = redact_url("https://user:pw@host/p?token=abc&key=k&page=2&X-Amz-Signature=s")
    assert "pw" not in url and "abc" not in url and "=k&" not in url and "=s" not in url
    assert "page=2" in url and url.startswith("https://host/p?")


class _Downstream(BaseHTTPRequestHandler):
    """A downstream service that starts a SERVER span from the incoming traceparent."""

    def do_GET(self) -> None:
        parent = propagate.extract(dict(self.headers))
        token = context.attach(parent)
        try:
            with trace.get_tracer("downstream").start_as_current_span(
                "GET /answer", kind=SpanKind.SERVER
            ):
                body = b'{"answer": 42}'
        finally:
            context.detach(token)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def downstream() -> Iterator[str]:
    with serving(_Downstream) as url:
        yield url


def test_gateway_and_downstream_share_one_trace(downstream, spans):
    """A gateway handling a request calls a downstream service with httpx2: one trace."""
    tracer = trace.get_tracer("gateway")
    with tracer.start_as_current_span("POST /ask", kind=SpanKind.SERVER), httpx2.Client() as client:
        client.get(f"{downstream}/answer")
    finished = {s.name: s for s in spans.get_finished_spans()}
    gateway, hop, server = finished["POST /ask"], finished["GET"], finished["GET /answer"]
    assert len({gateway.context.trace_id, hop.context.trace_id, server.context.trace_id}) == 1
    assert hop.parent.span_id == gateway.context.span_id
    assert server.parent.span_id == hop.context.span_id


def test_opentelemetry_httpx_instrumentation_adds_no_model_span(model_server, spans):
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    HTTPXClientInstrumentor().instrument()
    try:
        client = openai.OpenAI(
            base_url=model_server.base_url, api_key="k", max_retries=0, http_client=httpx.Client()
        )
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        with httpx.Client() as plain:
            plain.get(f"{model_server.url}/tool")
    finally:
        HTTPXClientInstrumentor().uninstrument()
    (model,) = model_spans(spans)
    others = [s for s in spans.get_finished_spans() if s is not model]
    # Their HTTP span sits under the model span; the plain call has their span only, not ours too.
    assert len(others) == 2
    assert all(s.instrumentation_scope.name != "llmtrace" for s in others)
    under_model = [s for s in others if s.parent and s.parent.span_id == model.context.span_id]
    assert len(under_model) == 1


def test_uninstrument_restores_originals_and_instrument_is_idempotent(instrumented):
    import openai._base_client as base

    wrapped = base.SyncAPIClient.__dict__["request"]
    assert registry.instrument(["openai"]) == ["openai"]
    assert base.SyncAPIClient.__dict__["request"] is wrapped  # never wrapped twice
    registry.uninstrument()
    assert not hasattr(base.SyncAPIClient.request, "__wrapped__")
    assert not hasattr(httpx2.Client.send, "__wrapped__")


def test_missing_library_is_skipped(monkeypatch):
    monkeypatch.setitem(
        registry.INSTRUMENTATIONS,
        "absent",
        ("faiss_absent", "AbsentInstrumentor", "library_not_installed"),
    )
    assert registry.instrument(["absent"]) == []


@pytest.mark.parametrize("library", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_a_response_stream_never_closed_still_ends_its_span(model_server, spans, library):
    client = library.Client()
    response = client.send(client.build_request("GET", f"{model_server.url}/tool"), stream=True)
    assert response.status_code == 200
    assert spans.get_finished_spans() == ()
    del response  # abandoned: neither read nor closed
    gc.collect()
    (span,) = spans.get_finished_spans()
    assert span.attributes[semconv.STREAM_END] == "abandoned"
    assert span.end_time is not None
    client.close()


@pytest.mark.parametrize("library", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_a_closed_response_stream_ends_its_span_once(model_server, spans, library):
    with library.Client() as client:
        with client.stream("GET", f"{model_server.url}/tool") as response:
            response.read()
        (span,) = spans.get_finished_spans()
        assert semconv.STREAM_END not in span.attributes
        del response
        gc.collect()
        assert len(spans.get_finished_spans()) == 1


class _HeaderPropagator(TextMapPropagator):
    """An application's own propagator: one header of its own, no traceparent."""

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        span_context = trace.get_current_span(context).get_span_context()
        carrier["x-app-trace"] = f"{span_context.trace_id:032x}"

    def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
        return context

    @property
    def fields(self) -> set[str]:
        return {"x-app-trace"}


def test_the_applications_propagator_writes_the_headers_and_the_default_one_w3c(
    model_server, spans
):
    from opentelemetry.baggage import set_baggage

    default = propagate.get_global_textmap()
    token = context.attach(set_baggage("tenant", "t-1"))
    try:
        with httpx.Client() as client:
            client.get(f"{model_server.url}/default")
            propagate.set_global_textmap(_HeaderPropagator())
            try:
                client.get(f"{model_server.url}/own")
            finally:
                propagate.set_global_textmap(default)
    finally:
        context.detach(token)
    first, second = (
        {name.lower(): value for name, value in request.headers.items()}
        for request in model_server.requests
    )
    hops = {
        s.attributes["url.full"].rsplit("/", 1)[1]: s
        for s in spans.get_finished_spans()
        if s.name == "GET"
    }
    sent = hops["default"].context
    assert first["traceparent"] == (
        f"00-{sent.trace_id:032x}-{sent.span_id:016x}-{int(sent.trace_flags):02x}"
    )
    assert first["baggage"] == "tenant=t-1"
    assert "traceparent" not in second and "baggage" not in second
    assert second["x-app-trace"] == f"{hops['own'].context.trace_id:032x}"
