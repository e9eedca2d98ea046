"""The HTTP hop, shared by the ``httpx`` and ``httpx2`` instrumentors (same API, two modules).

Every request sent through ``Client.send`` / ``AsyncClient.send``:

- carries the W3C ``traceparent`` of the span it belongs to (the model span inside a model call,
  else its own CLIENT span), so a model server or downstream service joins the trace;
- reports its transport phases from the client's own ``trace`` request extension (any callback
  the application installed is still called) as ``llmtrace.http.*`` durations in seconds:

  ======================== =====================================================================
  ``llmtrace.http.connect`` TCP connect of a new connection (absent when a pooled one is reused)
  ``llmtrace.http.tls``     TLS handshake of a new connection
  ``request_sent``         first request header byte written → request body written
  ``response_headers``     request written → response headers received (server think time)
  ``body_complete``        response headers → last body byte (the transfer, or the whole stream)
  ======================== =====================================================================

Inside a model call the phases enrich the model span and no span is added (DESIGN.md rule 4).
Outside one, the request gets a CLIENT span with stage ``network`` named after its method, unless
OpenTelemetry's own httpx instrumentation is active for the library, which then owns HTTP spans.
Headers are never recorded; ``url.full`` has credentials and secret-looking query values removed.
"""

from __future__ import annotations

import importlib
import logging
import sys
import time
import weakref
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from opentelemetry import baggage, propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace import INVALID_SPAN_CONTEXT, Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from llmtrace import semconv
from llmtrace._safety import log_once
from llmtrace.instrumentation._base import (
    ModelCall,
    current_model_call,
    get_tracer,
    is_suppressed,
    should_trace_http,
)
from llmtrace.server.timings import server_timings_from_raw_headers
from llmtrace.span_errors import end_failed, record_error_code

logger = logging.getLogger(__name__)

_SECRET_WORDS = (
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "auth",
    "signature",
    "sig",
    "credential",
    "session",
    "code",
)


def _is_secret_name(name: str) -> bool:
    lowered = name.lower().replace("-", "_")
    return any(word in lowered for word in _SECRET_WORDS)


def redact_url(url: str) -> str:
    """``url`` without user info and with the values of secret-looking query parameters hidden."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode(
                [(name, "REDACTED" if _is_secret_name(name) else value) for name, value in pairs]
            )
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except Exception:
        return ""


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


class PhaseRecorder:
    """Turns the transport's trace events into ``llmtrace.http.*`` durations on one span.

    Installed as the request's ``trace`` extension itself (see :class:`SyncPhaseRecorder` and
    :class:`AsyncPhaseRecorder`), passing every event on to the callback it replaced, if any.
    """

    __slots__ = ("_marks", "call", "existing", "span")

    def __init__(self, span: Span, call: ModelCall | None, existing: Any) -> None:
        self.span = span
        self.call = call
        self.existing = existing
        self._marks: dict[str, float] = {}

    def on_event(self, name: str, info: Any) -> None:
        try:
            now = time.monotonic()
            # "http11.send_request_headers.started" -> "send_request_headers.started"
            event = name.split(".", 1)[1] if name.count(".") >= 2 else name
            marks = self._marks
            marks[event] = now
            attribute: str | None = None
            since: float | None = None
            if event == "connect_tcp.complete":
                attribute, since = semconv.HTTP_CONNECT, marks.get("connect_tcp.started")
            elif event == "start_tls.complete":
                attribute, since = semconv.HTTP_TLS, marks.get("start_tls.started")
            elif event == "send_request_body.complete":
                attribute = semconv.HTTP_REQUEST_SENT
                since = marks.get("send_request_headers.started")
            elif event == "receive_response_headers.complete":
                attribute = semconv.HTTP_RESPONSE_HEADERS
                since = marks.get("send_request_body.complete")
                if self.call is not None:
                    self.call.headers_received(now)
            elif event == "receive_response_body.complete":
                attribute = semconv.HTTP_BODY_COMPLETE
                since = marks.get("receive_response_headers.complete")
            if attribute is not None and since is not None and self.span.is_recording():
                self.span.set_attribute(attribute, now - since)
        except Exception:
            log_once(logger, "HTTP phase recording failed")


class SyncPhaseRecorder(PhaseRecorder):
    __slots__ = ()

    def __call__(self, name: str, info: Any) -> None:
        self.on_event(name, info)
        if self.existing is not None:
            self.existing(name, info)


class AsyncPhaseRecorder(PhaseRecorder):
    __slots__ = ()

    async def __call__(self, name: str, info: Any) -> None:
        self.on_event(name, info)
        if self.existing is not None:
            await self.existing(name, info)


# The global propagator last seen to be OpenTelemetry's default (W3C trace context, then baggage).
_default_propagator: object = None
_BAGGAGE = W3CBaggagePropagator()


def _is_default_propagator(propagator: object) -> bool:
    global _default_propagator
    if propagator is _default_propagator:
        return True
    inner = getattr(propagator, "_propagators", None)
    if type(propagator) is CompositePropagator and [type(p) for p in inner or ()] == [
        TraceContextTextMapPropagator,
        W3CBaggagePropagator,
    ]:
        _default_propagator = propagator
        return True
    return False


def inject_trace_context(headers: Any, span: Span) -> None:
    """Write ``span``'s context into outgoing headers with the global propagator.

    With the default propagator (unless ``OTEL_PROPAGATORS`` or the application chose another),
    the ``traceparent``/``tracestate`` headers are written here, as its trace-context part would
    write them, without building a context for it: that part alone costs several microseconds on
    every model call. Baggage, when the current context has any, goes through the propagator.
    """
    propagator = propagate.get_global_textmap()
    if propagator is not _default_propagator and not _is_default_propagator(propagator):
        propagator.inject(headers, context=trace.set_span_in_context(span))
        return
    span_context = span.get_span_context()
    if span_context != INVALID_SPAN_CONTEXT:
        headers["traceparent"] = (
            f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}"
            f"-{span_context.trace_flags:02x}"
        )
        if span_context.trace_state:
            headers["tracestate"] = span_context.trace_state.to_header()
    if baggage.get_all():
        _BAGGAGE.inject(headers)


def untraced(headers: Any) -> bool:
    """True when this request is not to be traced (the gate said no); its headers then carry
    only what :func:`propagate_untraced` adds. One check for every HTTP client wrapper."""
    if should_trace_http():
        return False
    propagate_untraced(headers)
    return True


def propagate_untraced(headers: Any) -> None:
    """A request that is not traced still carries an unsampled parent's context, so the next
    service keeps the decision instead of starting a sampled trace of its own; while
    instrumentation is suppressed (an exporter's own request) nothing is added at all."""
    try:
        if not is_suppressed():
            propagate.inject(headers)
    except Exception:
        log_once(logger, "HTTP context injection failed")


def _prepare(request: Any, span: Span, call: ModelCall | None, is_async: bool) -> None:
    """Inject the trace context of ``span`` and hook the transport's phase events."""
    inject_trace_context(request.headers, span)
    if not span.is_recording():
        return
    extensions = request.extensions
    recorder = AsyncPhaseRecorder if is_async else SyncPhaseRecorder
    extensions["trace"] = recorder(span, call, extensions.get("trace"))


def start_network_span(method: str, url: str, host: str, port: int | None, scheme: str) -> Span:
    """A CLIENT span (stage ``network``) for an HTTP request outside any model call."""
    attributes: dict[str, Any] = {
        semconv.STAGE: "network",
        semconv.HTTP_REQUEST_METHOD: method,
        semconv.URL_FULL: redact_url(url),
        semconv.SERVER_ADDRESS: host,
        semconv.SERVER_PORT: port or _default_port(scheme),
    }
    return get_tracer().start_span(method, kind=SpanKind.CLIENT, attributes=attributes)


def _start_network_span(request: Any) -> Span:
    url = request.url
    return start_network_span(
        str(request.method), str(url), str(url.host), url.port, str(url.scheme)
    )


def record_status(span: Span, response: Any) -> None:
    """The response's status code, and ERROR for 4xx and 5xx."""
    status = int(response.status_code)
    span.set_attribute(semconv.HTTP_RESPONSE_STATUS_CODE, status)
    if status >= 400:
        record_error_code(span, str(status))


class _SpanEnd:
    """Ends a span once: when the response body is closed, or when the response is garbage
    collected without being closed (rule 2: an abandoned stream still ends its span)."""

    __slots__ = ("done", "finalizer", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.done = False
        self.finalizer: weakref.finalize[Any, Any] | None = None

    def __call__(self) -> None:
        if not self.done:
            self.done = True
            if self.finalizer is not None:
                self.finalizer.detach()
            self.span.end()

    def watch(self, response: Any) -> None:
        finalizer = weakref.finalize(response, self.abandoned)
        # At interpreter exit the exporter may be gone already: nothing to end then.
        finalizer.atexit = False
        self.finalizer = finalizer

    def abandoned(self) -> None:
        if not self.done:
            self.done = True
            try:
                if self.span.is_recording():
                    self.span.set_attribute(semconv.STREAM_END, "abandoned")
            finally:
                self.span.end()


def _other_instrumentation_owns_spans(library: str) -> bool:
    """True when OpenTelemetry's httpx instrumentation is active for this library."""
    module = sys.modules.get("opentelemetry.instrumentation.httpx")
    if module is None:
        return False
    class_name = "HTTPX2ClientInstrumentor" if library == "httpx2" else "HTTPXClientInstrumentor"
    instrumentor = getattr(module, class_name, None)
    instance = getattr(instrumentor, "_instance", None) if instrumentor is not None else None
    return bool(getattr(instance, "_is_instrumented_by_opentelemetry", False))


def make_send_wrappers(library: Any, library_name: str) -> tuple[Any, Any]:
    """The (sync, async) wrappers of ``Client.send`` / ``AsyncClient.send`` for one library."""

    class EndingSyncStream(library.SyncByteStream):  # type: ignore[misc,name-defined,unused-ignore]
        def __init__(self, inner: Any, end: _SpanEnd) -> None:
            self._inner = inner
            self._end = end

        def __iter__(self) -> Iterator[bytes]:
            yield from self._inner

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._end()

    class EndingAsyncStream(library.AsyncByteStream):  # type: ignore[misc,name-defined,unused-ignore]
        def __init__(self, inner: Any, end: _SpanEnd) -> None:
            self._inner = inner
            self._end = end

        async def __aiter__(self) -> Any:
            async for part in self._inner:
                yield part

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._end()

    def send(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        request = args[0] if args else kwargs.get("request")
        if untraced(request.headers):
            return wrapped(*args, **kwargs)
        call = current_model_call()
        if call is not None:
            try:
                _prepare(request, call.span, call, is_async=False)
            except Exception:
                log_once(logger, "HTTP request preparation failed")
            response = wrapped(*args, **kwargs)
            if kwargs.get("stream"):
                call.headers_received()
            _record_server_timings(call.span, response)
            return response
        if _other_instrumentation_owns_spans(library_name):
            return wrapped(*args, **kwargs)
        try:
            span = _start_network_span(request)
            _prepare(request, span, None, is_async=False)
        except Exception:
            log_once(logger, "HTTP span start failed")
            return wrapped(*args, **kwargs)
        try:
            response = wrapped(*args, **kwargs)
        except BaseException as exc:
            end_failed(span, exc)
            raise
        return _after_response(span, response, EndingSyncStream)

    async def async_send(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        request = args[0] if args else kwargs.get("request")
        if untraced(request.headers):
            return await wrapped(*args, **kwargs)
        call = current_model_call()
        if call is not None:
            try:
                _prepare(request, call.span, call, is_async=True)
            except Exception:
                log_once(logger, "HTTP request preparation failed")
            response = await wrapped(*args, **kwargs)
            if kwargs.get("stream"):
                call.headers_received()
            _record_server_timings(call.span, response)
            return response
        if _other_instrumentation_owns_spans(library_name):
            return await wrapped(*args, **kwargs)
        try:
            span = _start_network_span(request)
            _prepare(request, span, None, is_async=True)
        except Exception:
            log_once(logger, "HTTP span start failed")
            return await wrapped(*args, **kwargs)
        try:
            response = await wrapped(*args, **kwargs)
        except BaseException as exc:
            end_failed(span, exc)
            raise
        return _after_response(span, response, EndingAsyncStream)

    return send, async_send


def _record_server_timings(span: Span, response: Any) -> None:
    """Timings a server reports in headers (OpenAI ``openai-processing-ms``, TGI ``x-*-time``)
    go on the model span as ``llmtrace.server.*`` seconds."""
    try:
        if span.is_recording():
            timings = server_timings_from_raw_headers(response.headers.raw)
            if timings:
                span.set_attributes(timings)
    except Exception:
        log_once(logger, "server timing headers unreadable")


def _after_response(span: Span, response: Any, ending_stream: Any) -> Any:
    end = _SpanEnd(span)
    try:
        record_status(span, response)
        if response.is_closed:
            end()
        else:
            response.stream = ending_stream(response.stream, end)
            end.watch(response)
    except Exception:
        log_once(logger, "HTTP span end failed")
        end()
    return response


def client_patches(module_name: str) -> list[tuple[str, str, Any]]:
    """The patch rows of an httpx-like library: ``Client.send`` and ``AsyncClient.send``."""
    library = importlib.import_module(module_name)
    send, async_send = make_send_wrappers(library, module_name)
    return [(module_name, "Client.send", send), (module_name, "AsyncClient.send", async_send)]


def client_instrumentor(library: str, supported: str, doc: str) -> type[Any]:
    """The instrumentor class of an httpx-like library (``httpx`` and ``httpx2``: the same API in
    two modules): its ``Client.send`` and ``AsyncClient.send`` rows."""
    from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow

    class ClientInstrumentor(LibraryInstrumentor):
        __doc__ = doc
        package = library

        def patches(self) -> list[PatchRow]:
            return client_patches(library)

    ClientInstrumentor.supported = supported
    ClientInstrumentor.__name__ = ClientInstrumentor.__qualname__ = f"{library.upper()}Instrumentor"
    return ClientInstrumentor
