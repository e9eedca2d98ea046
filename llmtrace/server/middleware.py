"""ASGI middleware: the SERVER span of a model or RAG service, joined to the caller's trace.

Pure ASGI (no framework import), so it wraps Starlette, FastAPI or any ASGI app::

    app.add_middleware(LLMTraceMiddleware)        # Starlette / FastAPI
    app = LLMTraceMiddleware(app)                 # any ASGI app

For each HTTP request it

- continues the caller's trace from ``traceparent`` (through the globally configured propagator),
- creates a SERVER span named ``{method} {route}`` (HTTP semantic conventions: the route
  template, never the raw path; just ``{method}`` when no route matched),
- when a proxy sent ``X-Request-Start``, records the time the request waited between the proxy
  and the application as ``llmtrace.server.proxy_queue_time`` and as a ``queue``-stage child
  span covering that wait. The SERVER span then starts when the proxy received the request, so
  the wait lies inside it and the report can attribute it.

When an outer layer already made the request's SERVER span (FastAPI >= 0.165 does natively when
a tracer provider is set; so does opentelemetry-instrumentation-asgi), the middleware adds the
stage and the proxy queue to that span instead of making a second one. That span starts when the
application received the request, so a proxy wait then lies just before it; to have the wait
inside the SERVER span, let the middleware own it: ``FastAPI(telemetry={"tracing": False})``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind

from llmtrace import semconv
from llmtrace.sdk.gate import should_trace
from llmtrace.sdk.span_errors import record_error, record_error_code
from llmtrace.server.request_start import parse_request_start

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

logger = logging.getLogger(__name__)

# A longer "wait" means the proxy's and the application's clocks disagree, not a real queue.
_LONGEST_PLAUSIBLE_PROXY_QUEUE_SECONDS = 3600.0
PROXY_QUEUE_NAME = "proxy"


def _headers(scope: Scope) -> dict[str, str]:
    """Request headers with lower-case names; repeated headers joined as HTTP allows."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers") or ():
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    return headers


def _route_template(scope: Scope) -> str | None:
    """The matched route's template once the framework has routed the request."""
    route = scope.get("route")
    path = getattr(route, "path", None) or getattr(route, "path_format", None)
    if isinstance(path, str):
        return path
    if isinstance(route, str):
        return route
    return _match_starlette_route(scope)


def _match_starlette_route(scope: Scope) -> str | None:
    # Starlette's own Route does not put itself into the scope (FastAPI's APIRoute does), so ask
    # the application's routes which one fully matches, as Starlette's router did.
    app = scope.get("app")
    routes = getattr(app, "routes", None)
    if not routes:
        return None
    try:
        from starlette.routing import Match
    except ImportError:
        return None
    for route in routes:
        try:
            match, _ = route.matches(scope)
        except Exception:
            continue
        if match == Match.FULL:
            path = getattr(route, "path", None)
            return path if isinstance(path, str) else None
    return None


class LLMTraceMiddleware:
    """Wraps an ASGI app; see the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        stage: str = "other",
        excluded_paths: Collection[str] = (),
    ) -> None:
        if stage not in semconv.STAGES:
            from llmtrace.errors import ConfigError

            raise ConfigError(f"stage {stage!r} is not one of: {', '.join(semconv.STAGES)}")
        self.app = app
        self.stage = stage
        self.excluded_paths = frozenset(excluded_paths)
        self._tracer = trace.get_tracer(semconv.SCOPE_NAME)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope.get("type") != "http"
            or scope.get("path") in self.excluded_paths
            or not should_trace()
        ):
            await self.app(scope, receive, send)
            return

        received_ns = time.time_ns()
        headers = _headers(scope)
        proxy_received_ns = self._proxy_received_ns(headers, received_ns)
        outer = trace.get_current_span()
        if outer.is_recording() and getattr(outer, "kind", None) == SpanKind.SERVER:
            # Another layer (FastAPI's native telemetry, opentelemetry-instrumentation-asgi)
            # already made this request's SERVER span: add to it, never a second one (rule 4).
            self._join(outer, proxy_received_ns, received_ns)
            await self.app(scope, receive, send)
            return

        parent = propagate.extract(headers)
        method = str(scope.get("method", "GET"))
        span = self._tracer.start_span(
            method,
            context=parent,
            kind=SpanKind.SERVER,
            attributes=self._request_attributes(scope, method),
            start_time=proxy_received_ns if proxy_received_ns is not None else received_ns,
        )
        if proxy_received_ns is not None and span.is_recording():
            self._record_proxy_queue(span, proxy_received_ns, received_ns)

        status_code: list[int] = []
        raised = False

        async def send_and_observe(message: Message) -> None:
            if message.get("type") == "http.response.start":
                status_code.append(int(message.get("status", 0)))
                self._name_after_route(span, scope, method)
            await send(message)

        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False):
                await self.app(scope, receive, send_and_observe)
        except BaseException as exc:
            raised = True
            record_error(span, exc)
            raise
        finally:
            if span.is_recording():
                self._name_after_route(span, scope, method)
                if status_code:
                    self._record_status(span, status_code[0], error_recorded=raised)
            span.end()

    def _proxy_received_ns(self, headers: dict[str, str], received_ns: int) -> int | None:
        value = headers.get("x-request-start")
        if value is None:
            return None
        started_ns = parse_request_start(value)
        if started_ns is None:
            logger.debug("ignoring unparseable X-Request-Start %r", value)
            return None
        if (received_ns - started_ns) / 1e9 > _LONGEST_PLAUSIBLE_PROXY_QUEUE_SECONDS:
            return None
        # A proxy clock slightly ahead of ours is a zero wait, not a negative one.
        return min(started_ns, received_ns)

    def _join(self, span: Span, proxy_received_ns: int | None, received_ns: int) -> None:
        attributes = getattr(span, "attributes", None) or {}
        if semconv.STAGE not in attributes:
            span.set_attribute(semconv.STAGE, self.stage)
        if proxy_received_ns is not None:
            self._record_proxy_queue(span, proxy_received_ns, received_ns)

    def _record_proxy_queue(self, span: Span, proxy_received_ns: int, received_ns: int) -> None:
        span.set_attribute(semconv.SERVER_PROXY_QUEUE_TIME, (received_ns - proxy_received_ns) / 1e9)
        queue_span = self._tracer.start_span(
            f"queue {PROXY_QUEUE_NAME}",
            context=trace.set_span_in_context(span),
            attributes={semconv.STAGE: "queue", semconv.QUEUE_NAME: PROXY_QUEUE_NAME},
            start_time=proxy_received_ns,
        )
        queue_span.end(end_time=received_ns)

    def _request_attributes(self, scope: Scope, method: str) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            semconv.STAGE: self.stage,
            semconv.HTTP_REQUEST_METHOD: method,
            semconv.URL_PATH: str(scope.get("path", "")),
            semconv.URL_SCHEME: str(scope.get("scheme", "http")),
        }
        server = scope.get("server")
        if server and server[0] is not None:
            attributes[semconv.SERVER_ADDRESS] = str(server[0])
            if server[1] is not None:
                attributes[semconv.SERVER_PORT] = int(server[1])
        return attributes

    @staticmethod
    def _name_after_route(span: Span, scope: Scope, method: str) -> None:
        if not span.is_recording():
            return
        route = _route_template(scope)
        if route:
            span.update_name(f"{method} {route}")
            span.set_attribute(semconv.HTTP_ROUTE, route)

    @staticmethod
    def _record_status(span: Span, status: int, *, error_recorded: bool) -> None:
        span.set_attribute(semconv.HTTP_RESPONSE_STATUS_CODE, status)
        # HTTP semantic conventions: for SERVER spans only 5xx is an error (4xx is the caller's).
        if status >= 500 and not error_recorded:
            record_error_code(span, str(status))
