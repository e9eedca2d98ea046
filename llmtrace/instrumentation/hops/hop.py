"""The HTTP hop, shared by the ``httpx`` and ``httpx2`` instrumentors (same API, two modules).

Every request sent through ``Client.send`` / ``AsyncClient.send``:

- carries the W3C ``traceparent`` of the span it belongs to (the model span inside a model call,
  else its own CLIENT span), so a model server or downstream service joins the trace;
- reports its transport phases as ``llmtrace.http.*`` durations in seconds (any ``trace``
  callback the application installed is still called with every event):

  ======================== =====================================================================
  ``llmtrace.http.connect`` TCP connect of a new connection (absent when a pooled one is reused)
  ``llmtrace.http.tls``     TLS handshake of a new connection
  ``request_sent``         first request header byte written → request body written
  ``response_headers``     request written → response headers received (server think time)
  ``body_complete``        response headers → last body byte (the transfer, or the whole stream)
  ======================== =====================================================================

The phases come from the request's ``trace`` extension, the public interface ``httpcore`` and
``httpcore2`` give for it (their documented ``connection.*``, ``http11.*`` and ``http2.*``
events): llmtrace's recorder is installed as the extension and passes every event on to the
application's callback. (Hooking the connections' private steps instead saved only a few
percent of llmtrace's own cost per model call, measured in benchmarks/README.md,
overhead_peers.py: not worth a silent break on the next ``httpcore`` release.)

Inside a model call the phases enrich the model span and no span is added (docs/architecture.md,
rule 4). Outside one, the request gets a CLIENT span with stage ``network`` named after its
method, unless OpenTelemetry's own httpx instrumentation is active for the library, which then
owns HTTP spans.
Headers are never recorded; ``url.full`` has credentials and secret-looking query values removed.
"""

from __future__ import annotations

import importlib
import logging
import os
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
from opentelemetry.trace.span import DEFAULT_TRACE_STATE, SpanContext, TraceFlags, TraceState

from llmtrace import semconv
from llmtrace._urls import default_port
from llmtrace.instrumentation.server_timings import server_timings_from_raw_headers
from llmtrace.sdk import _context_keys
from llmtrace.sdk._safety import log_once
from llmtrace.sdk.counted_span import traced
from llmtrace.sdk.gate import (
    ModelCall,
    current_context,
    current_model_call,
    direct_method,
    get_tracer,
    is_suppressed,
    should_trace_http,
)
from llmtrace.sdk.span_errors import end_failed, record_error_code

logger = logging.getLogger(__name__)

# The transport events that make up the phases, by name without the connection's prefix
# ("http11.", "http2.", "connection."): (slot the event's moment is kept in, attribute of the
# phase it completes, slot of the moment that phase started). Every other event is passed on.
PhaseEvent = tuple[int | None, str | None, int]
PHASE_EVENTS: dict[str, PhaseEvent] = {
    "connect_tcp.started": (0, None, 0),
    "connect_tcp.complete": (None, semconv.HTTP_CONNECT, 0),
    "start_tls.started": (1, None, 0),
    "start_tls.complete": (None, semconv.HTTP_TLS, 1),
    "send_request_headers.started": (2, None, 0),
    "send_request_body.complete": (3, semconv.HTTP_REQUEST_SENT, 2),
    "receive_response_headers.complete": (4, semconv.HTTP_RESPONSE_HEADERS, 3),
    "receive_response_body.complete": (None, semconv.HTTP_BODY_COMPLETE, 4),
}

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


class _PhaseEventsByName(dict[str, PhaseEvent | None]):
    """Full event name as the transport reports it -> its row above, or None: the prefix is
    taken off once per name, not once per event (about ten events per request)."""

    def __missing__(self, name: str) -> PhaseEvent | None:
        # "http11.send_request_headers.started" -> "send_request_headers.started"
        row = PHASE_EVENTS.get(name.split(".", 1)[1] if name.count(".") >= 2 else name)
        if len(self) < 256:
            self[name] = row
        return row


_phase_events_by_name = _PhaseEventsByName()


class PhaseRecorder:
    """Turns the transport's trace events into ``llmtrace.http.*`` durations on one span.

    Its ``event`` method is installed as the request's ``trace`` extension (see
    :class:`SyncPhaseRecorder` and :class:`AsyncPhaseRecorder`), passing every event on to the
    callback it replaced, if any. A bound method, not the recorder itself: the transport calls it
    about a dozen times per request, and the interpreter calls a method as it calls a function,
    where calling an instance goes through its class's ``__call__`` slot, several times the cost.
    The durations known when the request returns (or fails) are handed over in one
    :meth:`flush` with the model call's time to headers (to the model call, which sets them with
    its response's): setting one span attribute per event costs more than the rest of the
    recording. A phase that completes later (the body of a stream) is set when it does.
    """

    __slots__ = ("call", "existing", "moments", "pending", "span")

    def __init__(self, span: Span, call: ModelCall | None, existing: Any) -> None:
        self.span = span
        self.call = call
        self.existing = existing
        self.moments: list[float | None] = [None, None, None, None, None]
        self.pending: dict[str, Any] | None = {}

    def record(self, row: PhaseEvent) -> None:
        try:
            now = time.monotonic()
            slot, attribute, started_slot = row
            if slot is not None:
                self.moments[slot] = now
            if attribute is None:
                return
            started = self.moments[started_slot]
            if started is not None:
                # (Gathered for the flush, in the common case, without a call of set.)
                pending = self.pending
                if pending is not None:
                    pending[attribute] = now - started
                else:
                    self.set(attribute, now - started)
            if attribute is semconv.HTTP_RESPONSE_HEADERS and self.call is not None:
                time_to_headers = self.call.note_headers(now)
                if time_to_headers is not None:
                    self.set(semconv.TIME_TO_HEADERS, time_to_headers)
            elif attribute is semconv.HTTP_BODY_COMPLETE and self.call is not None:
                # The attempt's answer read to its end: a retry's wait is counted from here.
                self.call.answered_at = now
        except Exception:
            log_once(logger, "HTTP phase recording failed")

    def set(self, attribute: str, value: Any) -> None:
        pending = self.pending
        if pending is None and self.call is not None:
            # Gathered for the model call's end (a stream's), when it gathers any.
            pending = self.call.collected
        if pending is not None:
            pending[attribute] = value
        elif self.span.is_recording():
            self.span.set_attribute(attribute, value)

    def flush(self, response: Any = None, streamed: bool = False) -> None:
        """Hand over what was collected so far at once (later phases are set directly): with
        the phases up to the response headers (the ``trace`` events computed them as they came)
        and, for a model call, its time to headers and what its ``response`` says once back.

        ``response``: the model call's response, whose timing headers (OpenAI
        ``openai-processing-ms``, TGI ``x-*-time``) become ``llmtrace.server.*`` seconds;
        ``streamed``: its body is still to come, so the headers are known now at the latest.
        (One step, not one per kind of attribute: it runs on every model call.)
        """
        pending = self.pending or {}
        self.pending = None
        call = self.call
        moments = self.moments
        headers_at = moments[4]
        if headers_at is not None and semconv.HTTP_RESPONSE_HEADERS not in pending:
            written = moments[3]
            if written is not None:
                sending = moments[2]
                if sending is not None:
                    pending[semconv.HTTP_REQUEST_SENT] = written - sending
                pending[semconv.HTTP_RESPONSE_HEADERS] = headers_at - written
        elif headers_at is None and streamed:
            headers_at = time.monotonic()
        if call is not None and headers_at is not None:
            time_to_headers = call.note_headers(headers_at)
            if time_to_headers is not None:
                pending[semconv.TIME_TO_HEADERS] = time_to_headers
        if response is not None:
            try:
                # (Most responses have no timing headers: the span is asked only when one has.)
                timings = _server_timings(response.headers)
                if timings and self.span.is_recording():
                    pending.update(timings)
            except Exception:
                log_once(logger, "server timing headers unreadable")
        try:
            if not pending:
                return
            if call is not None:
                call.add_attributes(pending)
            elif self.span.is_recording():
                self.span.set_attributes(pending)
        except Exception:
            log_once(logger, "HTTP phase recording failed")


class SyncPhaseRecorder(PhaseRecorder):
    __slots__ = ()

    def event(self, name: str, info: Any) -> None:
        row = _phase_events_by_name[name]
        if row is not None:
            self.record(row)
        if self.existing is not None:
            self.existing(name, info)


class AsyncPhaseRecorder(PhaseRecorder):
    __slots__ = ()

    async def event(self, name: str, info: Any) -> None:
        row = _phase_events_by_name[name]
        if row is not None:
            self.record(row)
        if self.existing is not None:
            await self.existing(name, info)


# The global propagator last seen to be OpenTelemetry's default (W3C trace context, then baggage).
_default_propagator: object = None
# The global propagator last seen to be another one.
_other_propagator: object = None
_BAGGAGE = W3CBaggagePropagator()
# Where the context keeps baggage (found through the public API, see llmtrace.sdk._context_keys):
# read directly, without the copy baggage.get_all() returns.
_BAGGAGE_KEY: str | None = _context_keys.BAGGAGE


def _span_context_is_a_tuple() -> bool:
    """Whether a SpanContext is the tuple (trace id, span id, remote, flags, state, valid) it
    has been in every OpenTelemetry API release: unpacked at once, it costs a fraction of its
    properties, one Python call each."""
    try:
        state = TraceState([("k", "v")])
        context = SpanContext(1, 2, False, TraceFlags(1), state)
        return tuple(context) == (1, 2, False, 1, state, True)
    except Exception:
        return False


_TUPLE_SPAN_CONTEXT = _span_context_is_a_tuple()


def _server_timings(headers: Any) -> dict[str, float]:
    """The server's timing headers (``llmtrace.server.*`` seconds; most responses have none)."""
    return server_timings_from_raw_headers(headers.raw)


# The headers OpenTelemetry's default propagator writes (W3C trace context, then baggage).
_DEFAULT_FIELDS = frozenset(("traceparent", "tracestate", "baggage"))


def _is_default_propagator(propagator: object) -> bool:
    """Whether ``propagator`` is the one the API makes when nothing chose another: a composite
    of the W3C trace-context and baggage propagators (``OTEL_PROPAGATORS`` unset or naming
    exactly those), told by its public ``fields``."""
    global _default_propagator, _other_propagator
    if propagator is _default_propagator:
        return True
    if propagator is _other_propagator:
        return False
    named = os.environ.get("OTEL_PROPAGATORS", "tracecontext,baggage")
    if (
        type(propagator) is CompositePropagator
        and [name.strip() for name in named.split(",")] == ["tracecontext", "baggage"]
        and set(propagator.fields) == _DEFAULT_FIELDS
    ):
        _default_propagator = propagator
        return True
    _other_propagator = propagator
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
    if _TUPLE_SPAN_CONTEXT:
        trace_id, span_id, _, flags, trace_state, valid = span_context
    else:
        trace_id, span_id = span_context.trace_id, span_context.span_id
        flags, trace_state = span_context.trace_flags, span_context.trace_state
        valid = span_context != INVALID_SPAN_CONTEXT
    if valid:
        # As the W3C propagator writes it (lowercase hex).
        headers["traceparent"] = f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"
        if trace_state is not DEFAULT_TRACE_STATE and trace_state:
            headers["tracestate"] = trace_state.to_header()
    if current_context().get(_BAGGAGE_KEY) if _BAGGAGE_KEY else baggage.get_all():
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


def _prepare(
    request: Any, span: Span, call: ModelCall | None, is_async: bool
) -> PhaseRecorder | None:
    """Inject the trace context of ``span`` and hand the request a recorder of its phases, as
    its ``trace`` extension. Never raises: a request it fails to prepare is sent as it is,
    still traced, without phases."""
    try:
        inject_trace_context(request.headers, span)
        if not traced(span):
            # Not recorded, or only counted in the metrics (which read no phase).
            return None
        extensions = request.extensions
        recorder_class = AsyncPhaseRecorder if is_async else SyncPhaseRecorder
        recorder = recorder_class(span, call, extensions.get("trace"))
        extensions["trace"] = recorder.event
        return recorder
    except Exception:
        log_once(logger, "HTTP request preparation failed")
        return None


def start_network_span(method: str, url: str, host: str, port: int | None, scheme: str) -> Span:
    """A CLIENT span (stage ``network``) for an HTTP request outside any model call."""
    attributes: dict[str, Any] = {
        semconv.STAGE: "network",
        semconv.HTTP_REQUEST_METHOD: method,
        semconv.URL_FULL: redact_url(url),
        semconv.SERVER_ADDRESS: host,
        semconv.SERVER_PORT: port or default_port(scheme),
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
    if instrumentor is None:
        return False
    # An instrumentor is a singleton: constructing it returns the one instance (public API).
    return bool(instrumentor().is_instrumented_by_opentelemetry)


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

    def make_send(original: Any) -> Any:
        def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            call = current_model_call()
            # A model call in flight passed the gate already; unless instrumentation was
            # suppressed since (an exporter's request), the request is part of it.
            if call is None or is_suppressed():
                if untraced(request.headers):
                    return original(self, request, *args, **kwargs)
                call = None
            if call is not None:
                if call.answer is not None and call.refused():
                    call.retrying(time.monotonic())  # the client tries again
                recorder = _prepare(request, call.span, call, False)
                try:
                    response = original(self, request, *args, **kwargs)
                except BaseException as exc:
                    _flush(recorder)
                    call.attempt_failed(exc)
                    raise
                # (Without a recorder of the phases, a bare one hands over the rest.)
                recorder = recorder or PhaseRecorder(call.span, call, None)
                recorder.flush(response, bool(kwargs.get("stream")))
                call.answer = response.status_code
                return response
            if _other_instrumentation_owns_spans(library_name):
                return original(self, request, *args, **kwargs)
            try:
                span = _start_network_span(request)
                recorder = _prepare(request, span, None, False)
            except Exception:
                log_once(logger, "HTTP span start failed")
                return original(self, request, *args, **kwargs)
            try:
                response = original(self, request, *args, **kwargs)
            except BaseException as exc:
                _flush(recorder)
                end_failed(span, exc)
                raise
            _flush(recorder)
            return _after_response(span, response, EndingSyncStream)

        return send

    def make_async_send(original: Any) -> Any:
        async def async_send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            call = current_model_call()
            # A model call in flight passed the gate already; unless instrumentation was
            # suppressed since (an exporter's request), the request is part of it.
            if call is None or is_suppressed():
                if untraced(request.headers):
                    return await original(self, request, *args, **kwargs)
                call = None
            if call is not None:
                if call.answer is not None and call.refused():
                    call.retrying(time.monotonic())  # the client tries again
                recorder = _prepare(request, call.span, call, True)
                try:
                    response = await original(self, request, *args, **kwargs)
                except BaseException as exc:
                    _flush(recorder)
                    call.attempt_failed(exc)
                    raise
                # (Without a recorder of the phases, a bare one hands over the rest.)
                recorder = recorder or PhaseRecorder(call.span, call, None)
                recorder.flush(response, bool(kwargs.get("stream")))
                call.answer = response.status_code
                return response
            if _other_instrumentation_owns_spans(library_name):
                return await original(self, request, *args, **kwargs)
            try:
                span = _start_network_span(request)
                recorder = _prepare(request, span, None, True)
            except Exception:
                log_once(logger, "HTTP span start failed")
                return await original(self, request, *args, **kwargs)
            try:
                response = await original(self, request, *args, **kwargs)
            except BaseException as exc:
                _flush(recorder)
                end_failed(span, exc)
                raise
            _flush(recorder)
            return _after_response(span, response, EndingAsyncStream)

        return async_send

    send = direct_method(make_send)
    async_send = direct_method(make_async_send)
    return send, async_send


def _flush(recorder: PhaseRecorder | None) -> None:
    if recorder is not None:
        recorder.flush()


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
    return [
        (module_name, "Client.send", send),
        (module_name, "AsyncClient.send", async_send),
    ]


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
