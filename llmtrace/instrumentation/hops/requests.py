"""``requests``: a CLIENT span per request (stage ``network``) and the W3C ``traceparent``.

``requests`` has no transport hooks, so its phases are what it measures itself:
``llmtrace.http.response_headers`` is ``Response.elapsed`` (request sent until headers parsed),
``llmtrace.http.body_complete`` the rest of ``Session.send`` when the body is read eagerly.
Inside a model call no span is added; the model span is enriched instead.
Headers are never recorded; ``url.full`` has credentials and secret-looking query values removed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import propagate, trace
from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.hops.hop import record_status, start_network_span, untraced
from llmtrace.sdk._safety import log_once
from llmtrace.sdk.counted_span import traced
from llmtrace.sdk.gate import current_model_call
from llmtrace.sdk.span_errors import end_failed

logger = logging.getLogger(__name__)


def _phases(span: Span, response: Any, started_at: float, eager: bool) -> None:
    elapsed = response.elapsed.total_seconds()
    span.set_attribute(semconv.HTTP_RESPONSE_HEADERS, elapsed)
    if eager:
        span.set_attribute(
            semconv.HTTP_BODY_COMPLETE, max(time.monotonic() - started_at - elapsed, 0.0)
        )


def _send(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    request = args[0] if args else kwargs.get("request")
    eager = not kwargs.get("stream", False)
    if untraced(request.headers):
        # The OTLP/HTTP exporter sends through requests: its requests arrive here suppressed.
        return wrapped(*args, **kwargs)
    call = current_model_call()
    if call is not None:
        started_at = time.monotonic()
        try:
            propagate.inject(request.headers, context=trace.set_span_in_context(call.span))
        except Exception:
            log_once(logger, "requests context injection failed")
        response = wrapped(*args, **kwargs)
        try:
            call.headers_received(started_at + response.elapsed.total_seconds())
            if traced(call.span):
                _phases(call.span, response, started_at, eager)
        except Exception:
            log_once(logger, "requests phase recording failed")
        return response
    try:
        url = str(request.url)
        parts = urlsplit(url)
        span = start_network_span(
            str(request.method), url, parts.hostname or "", parts.port, parts.scheme or "http"
        )
        propagate.inject(request.headers, context=trace.set_span_in_context(span))
    except Exception:
        log_once(logger, "requests span start failed")
        return wrapped(*args, **kwargs)
    started_at = time.monotonic()
    try:
        response = wrapped(*args, **kwargs)
    except BaseException as exc:
        end_failed(span, exc)
        raise
    try:
        record_status(span, response)
        _phases(span, response, started_at, eager)
    except Exception:
        log_once(logger, "requests span end failed")
    finally:
        span.end()
    return response


class RequestsInstrumentor(LibraryInstrumentor):
    """Traces every request sent through ``requests.Session.send``."""

    package = "requests"
    supported = ">= 2.31, < 3"

    def patches(self) -> Iterable[PatchRow]:
        yield "requests.sessions", "Session.send", _send
