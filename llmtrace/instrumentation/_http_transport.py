"""The HTTP hop's transport hooks: the steps of ``httpcore``/``httpcore2`` connections that
report a traced request's phases (see :mod:`llmtrace.instrumentation._http`, which uses them).

Kept apart from the client side because everything here reaches into the transport's private
steps (``_send_request_headers``, ``_receive_response_headers``, ``_connect``, a body's
``_h11_state``): one place to read against a new httpcore release. When a step is missing,
``transport_patches`` returns no rows and the request's public ``trace`` extension reports the
phases instead.
"""

from __future__ import annotations

import importlib
import logging
import time
from typing import Any

from llmtrace import semconv
from llmtrace.instrumentation._base import direct_method

logger = logging.getLogger(__name__)

# The request extension a traced request carries its recorder in, for the transport hooks (an
# extension is never sent).
RECORDER_KEY = "llmtrace.phases"

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


def _marking(before: int, after: int | None = None) -> tuple[Any, Any]:
    """(sync, async) wrappers of a connection step ``step(self, request)`` that note the moment
    it starts in ``moments[before]`` of a traced request's recorder, and the moment it returns in
    ``moments[after]`` (when given): the phases are worked out from them once, when the request
    returns."""
    monotonic = time.monotonic

    def make(original: Any) -> Any:
        # The steps take the request alone: no arguments to pack and unpack, on two steps of
        # every request.
        def step(self: Any, request: Any) -> Any:
            recorder = request.extensions.get(RECORDER_KEY)
            if recorder is None:
                return original(self, request)
            moments = recorder.moments
            moments[before] = monotonic()
            if after is None:
                return original(self, request)
            result = original(self, request)
            moments[after] = monotonic()
            return result

        return step

    def make_async(original: Any) -> Any:
        async def step(self: Any, request: Any) -> Any:
            recorder = request.extensions.get(RECORDER_KEY)
            if recorder is None:
                return await original(self, request)
            moments = recorder.moments
            moments[before] = monotonic()
            if after is None:
                return await original(self, request)
            result = await original(self, request)
            moments[after] = monotonic()
            return result

        return step

    return direct_method(make), direct_method(make_async)


def _plain_tcp(connection: Any) -> bool:
    """Whether an ``HTTPConnection`` opens a plain TCP connection (no TLS, no Unix socket)."""
    # (Attributes read directly, a missing one caught: getattr with a default is a builtin call
    # each, on every new connection.)
    try:
        return connection._origin.scheme == b"http" and connection._uds is None
    except AttributeError:
        return False


def _tracing(restore: bool) -> tuple[Any, Any]:
    """(sync, async) wrappers of a connection step ``step(self, request)`` that install a
    traced request's recorder as its ``trace`` extension while the step runs (``restore``), or
    for the rest of the request: the events of what the step does reach the recorder. A step
    that opens a plain TCP connection (no TLS to tell apart: the step is the connect) is timed
    instead."""

    def uninstall(extensions: Any, existing: Any) -> None:
        if existing is None:
            extensions.pop("trace", None)
        else:
            extensions["trace"] = existing

    # The steps take the request alone, as the transport's steps do (see _marking).
    def make(original: Any) -> Any:
        def step(self: Any, request: Any) -> Any:
            extensions = request.extensions
            recorder = extensions.get(RECORDER_KEY)
            if recorder is None:
                return original(self, request)
            if restore and _plain_tcp(self):
                started = time.monotonic()
                stream = original(self, request)
                recorder.set(semconv.HTTP_CONNECT, time.monotonic() - started)
                return stream
            extensions["trace"] = recorder
            if not restore:
                return original(self, request)
            try:
                return original(self, request)
            finally:
                uninstall(extensions, recorder.existing)

        return step

    def make_async(original: Any) -> Any:
        async def step(self: Any, request: Any) -> Any:
            extensions = request.extensions
            recorder = extensions.get(RECORDER_KEY)
            if recorder is None:
                return await original(self, request)
            if restore and _plain_tcp(self):
                started = time.monotonic()
                stream = await original(self, request)
                recorder.set(semconv.HTTP_CONNECT, time.monotonic() - started)
                return stream
            extensions["trace"] = recorder
            if not restore:
                return await original(self, request)
            try:
                return await original(self, request)
            finally:
                uninstall(extensions, recorder.existing)

        return step

    return direct_method(make), direct_method(make_async)


def _closing(h11: Any) -> tuple[Any, Any]:
    """(sync, async) wrappers of an HTTP/1.1 response body's ``close``/``aclose``: the body is
    complete when the server's side of the exchange is done (a body closed before its end is
    not)."""

    def complete(body: Any) -> None:
        try:
            recorder = body._request.extensions.get(RECORDER_KEY)
            if recorder is None:
                return
            done = body._connection._h11_state.their_state is h11.DONE
        except AttributeError:
            return
        if done:
            recorder.record(_BODY_COMPLETE)

    # httpx closes a body read to its end, then closes it again with the response: the second
    # time there is nothing to record, known before a call.
    # (The body's close takes no arguments: none to pack and unpack, twice per response.)
    def make(original: Any) -> Any:
        def close(self: Any) -> Any:
            if not getattr(self, "_closed", True):
                complete(self)
            return original(self)

        return close

    def make_async(original: Any) -> Any:
        async def aclose(self: Any) -> Any:
            if not getattr(self, "_closed", True):
                complete(self)
            return await original(self)

        return aclose

    return direct_method(make), direct_method(make_async)


_BODY_COMPLETE = PHASE_EVENTS["receive_response_body.complete"]

# (module under the transport package, sync class, async class, attribute, what wraps it)
_TRANSPORT_STEPS: list[tuple[str, str, str, str, str]] = [
    ("connection", "HTTPConnection", "AsyncHTTPConnection", "_connect", "connect"),
    ("http11", "HTTP11Connection", "AsyncHTTP11Connection", "_send_request_headers", "headers"),
    (
        "http11",
        "HTTP11Connection",
        "AsyncHTTP11Connection",
        "_receive_response_headers",
        "response",
    ),
    # (The async module names its body class as the sync one does.)
    ("http11", "HTTP11ConnectionByteStream", "HTTP11ConnectionByteStream", "", "close"),
    ("http2", "HTTP2Connection", "AsyncHTTP2Connection", "handle_request", "http2"),
]


def transport_patches(package: str) -> list[tuple[str, str, Any]]:
    """The rows that hook the steps of ``package``'s (``httpcore``/``httpcore2``) connections, or
    none when one of the HTTP/1.1 and connection steps is missing in this version (the request's
    ``trace`` extension reports the phases then). HTTP/2 is optional (it needs ``h2``)."""
    if not package:
        return []
    try:
        h11 = importlib.import_module("h11")
        modules = {
            name: (
                importlib.import_module(f"{package}._sync.{name}"),
                importlib.import_module(f"{package}._async.{name}"),
            )
            for name in ("connection", "http11")
        }
    except ImportError:
        return []
    wrappers = {
        "connect": _tracing(restore=True),
        "headers": _marking(2),
        # Written (slot 3) when the connection starts waiting for the response headers: one hook
        # for both moments (see the module docstring).
        "response": _marking(3, 4),
        "close": _closing(h11),
        "http2": _tracing(restore=False),
    }
    rows: list[tuple[str, str, Any]] = []
    for module, sync_class, async_class, attribute, kind in _TRANSPORT_STEPS:
        sync_wrapper, async_wrapper = wrappers[kind]
        for side, class_name, wrapper in (
            ("_sync", sync_class, sync_wrapper),
            ("_async", async_class, async_wrapper),
        ):
            name = attribute or ("close" if side == "_sync" else "aclose")
            if module in modules:
                owner = getattr(modules[module][side == "_async"], class_name, None)
                if owner is None or not callable(owner.__dict__.get(name)):
                    logger.debug(
                        "llmtrace: %s has no %s.%s; trace extension used", package, class_name, name
                    )
                    return []
            rows.append((f"{package}.{side}.{module}", f"{class_name}.{name}", wrapper))
    return rows
