"""The one stream lifecycle every provider instrumentation shares.

A :class:`StreamRecorder` owns a model-call span from the moment the request is issued until the
stream ends. It measures on the monotonic clock: time to the first chunk, time to the first chunk
that carries output content (a role-only or empty delta does not count), chunk count and the end.
It ends its span exactly once, whichever way the stream ends:

===============================  =======================  ===========  ======================
how the stream ends               ``llmtrace.stream.end``  span status  the span ends
===============================  =======================  ===========  ======================
read to its end                   ``completed``            OK           at the end
``for`` loop left (``break``,     ``closed``               UNSET        as the loop is left
``return``, the caller's own
exception)
``async for`` loop left           ``closed``               UNSET        at the last chunk
``close()``, ``with`` exit        ``closed``               UNSET        at the last chunk
never read, dropped               ``abandoned``            UNSET        when handed over
read with ``next()``, dropped     ``abandoned``            UNSET        at the last chunk
exception from the stream         ``error``                ERROR        at the exception
``asyncio.CancelledError``        ``cancelled``            UNSET        at the cancellation
===============================  =======================  ===========  ======================

"At the last chunk": at the moment the caller was handed its last chunk (or the stream itself,
if it read none), whenever the stream is closed or collected: what the caller does after that is
its own time, not the model's. A ``for`` loop left early ends the stream as it is left (the
interpreter closes the loop's generator then; an ``async for`` loop's, the event loop soon
after, and the stream ends at its last chunk); chunks read from the same stream after that are
handed on but no longer counted. An
exception in the caller's code is the caller's: recorded on its own span, not the model call's.

Provider-specific knowledge (what a chunk looks like) is plugged in through :class:`ChunkParser`;
the wrappers :class:`TracedStream` and :class:`TracedAsyncStream` are transparent proxies, so the
caller sees the provider's own stream object, attributes and methods.

The recorder never attaches its span to the context (docs/architecture.md, rule 3): nothing leaks into the
caller between chunks, and nothing has to be detached in another context.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Protocol

import wrapt
from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace.sdk import _compat, content
from llmtrace.sdk._safety import log_once
from llmtrace.sdk.counted_span import CountedSpan
from llmtrace.sdk.gate import ModelCall, capture_settings
from llmtrace.sdk.metrics import meter_provider_set, record_model_call
from llmtrace.sdk.span_errors import record_error

logger = logging.getLogger(__name__)


class ChunkParser(Protocol):
    """What a provider instrumentation tells the recorder about its chunks (O(1) state)."""

    def has_content(self, chunk: Any) -> bool:
        """True when the chunk carries output content (counts for time to first token)."""
        ...

    def observe(self, chunk: Any) -> None:
        """Remember what the chunk says: usage, finish reasons, response id and model."""
        ...

    def finish(self, span: Span) -> None:
        """Write what was remembered onto the span, just before it ends."""
        ...

    def output_tokens(self) -> int | None:
        """Output tokens the provider reported, or None when it did not."""
        ...

    # Optional: ``finish_into(plain, attributes)``, called instead of ``finish`` when a parser has
    # it: what ``finish`` would set, added to two dicts, ``plain`` for values the parser made
    # plain itself (a str, int, float or bool, or a tuple of one of those: see
    # set_span_attributes), ``attributes`` for anything else. It saves the recorder a stand-in
    # span for the parser to set attributes on.
    #
    # Optional: ``hides(chunk) -> bool``. A chunk llmtrace itself asked for (the usage-only chunk
    # of an injected ``stream_options.include_usage``) is observed but not handed to a caller who
    # did not ask for it. Looked up once per stream; absent or None means every chunk is
    # delivered (and costs nothing per chunk).


class NullParser:
    """A parser for streams whose chunks need no provider knowledge: every non-empty chunk counts."""

    def has_content(self, chunk: Any) -> bool:
        return bool(chunk)

    def observe(self, chunk: Any) -> None:
        return None

    def finish(self, span: Span) -> None:
        return None

    def output_tokens(self) -> int | None:
        return None


class StreamedText:
    """A stream's output, for ``gen_ai.output.messages`` when content is captured (opt-in): the
    one way a parser keeps it. A parser holds one while content is captured, else None, so that a
    stream without capture pays one ``is None`` per chunk and nothing more.

    Text is kept until ``bytes_left`` runs out: a byte more than ``max_bytes`` (UTF-8), enough
    for the recorded part to be cut to ``max_bytes`` and marked as cut, so a long stream holds
    little more than that. A parser may stop looking for text once ``bytes_left <= 0``. Tool
    calls streamed in pieces (OpenAI's deltas) are assembled with :meth:`add_tool_call`.
    """

    __slots__ = ("bytes_left", "max_bytes", "parts", "redact", "tool_call_pieces")

    def __init__(self, max_bytes: int, redact: Callable[[str], str] | None) -> None:
        self.parts: list[str] = []
        self.bytes_left = max_bytes + 1
        self.max_bytes = max_bytes
        self.redact = redact
        self.tool_call_pieces: dict[Any, list[Any]] | None = None

    def add(self, text: Any) -> None:
        """Keep ``text`` while bytes are left (anything but a non-empty str is ignored)."""
        if isinstance(text, str) and text and self.bytes_left > 0:
            self.parts.append(text)
            self.bytes_left -= len(text.encode("utf-8"))

    def add_tool_call(self, index: Any, call_id: Any, name: Any, arguments: Any) -> None:
        """Add a piece of the tool call at ``index``: its id and name when given, and a piece of
        its arguments' JSON text (kept up to a byte past the budget, like the text)."""
        if self.tool_call_pieces is None:
            self.tool_call_pieces = {}
        call = self.tool_call_pieces.get(index)
        if call is None:
            call = self.tool_call_pieces[index] = [None, "", [], self.max_bytes + 1]
        if call_id:
            call[0] = call_id
        if name:
            call[1] += name if isinstance(name, str) else str(name)
        if isinstance(arguments, str) and arguments and call[3] > 0:
            call[2].append(arguments)
            call[3] -= len(arguments.encode("utf-8"))

    def output_messages(
        self,
        tool_calls: Any = (),
        finish_reason: Any = None,
        reasoning: Any = "",
    ) -> str:
        """``gen_ai.output.messages``: one assistant message with the text kept, the tool calls
        assembled here and those given (as parts), and ``reasoning`` text; each part redacted
        and bounded by the shared builder (see :mod:`llmtrace.sdk.content`)."""
        calls = list(tool_calls or ())
        if self.tool_call_pieces:
            calls.extend(
                content.tool_call_part(call_id, name, "".join(arguments))
                for call_id, name, arguments, _ in self.tool_call_pieces.values()
            )
        message = content.output_message(
            "".join(self.parts),
            calls,
            finish_reason,
            reasoning if isinstance(reasoning, str) else "",
        )
        return content.encode_messages([message], self.max_bytes, self.redact)


# Immutable, so one instance serves every call that ends well.
STATUS_OK = _compat.STATUS_OK


class StreamRecorder:
    """Timing and the end of one streamed model call. Thread-safe to end; O(1) state."""

    __slots__ = (
        "__weakref__",
        "chunk_count",
        "collected",
        "ended",
        "first_chunk_at",
        "first_token_at",
        "first_token_chunk",
        "hides",
        "last_handed_at",
        "observe",
        "once",
        "parser",
        "span",
        "started_at",
        "streaming",
    )

    def __init__(
        self,
        span: Span,
        started_at: float | None = None,
        parser: ChunkParser | None = None,
        streaming: bool = True,
    ) -> None:
        self.span = span
        self.streaming = streaming
        self.started_at = time.monotonic() if started_at is None else started_at
        self.parser: ChunkParser = parser if parser is not None else NullParser()
        # Optional parser method: chunks llmtrace asked for (an injected usage chunk) that the
        # caller must not see. Observed, never delivered.
        self.hides: Any = getattr(self.parser, "hides", None)
        # Bound once: called on every chunk.
        self.observe = self.parser.observe
        self.first_chunk_at: float | None = None
        self.first_token_at: float | None = None
        self.first_token_chunk = 0  # which chunk (1, 2, ...) brought the first token
        self.chunk_count = 0
        # The last moment the caller was handed something (the stream, then each chunk): where
        # a stream the caller stopped reading ends (see end()).
        self.last_handed_at: float | None = None
        self.ended = False
        # Popped by the one end that happens (see end()).
        self.once = [True]
        # Attributes gathered for the end by whoever started the stream (a model call's HTTP
        # phases and time to headers), set with the stream's own: one call to set them all.
        self.collected: dict[str, Any] | None = None

    def on_chunk(self, chunk: Any) -> bool:
        """The per-chunk step, whichever way the stream is read (a ``for`` loop, ``next()``,
        ``async for``, or an instrumentation that sees the chunks itself), before the caller sees
        the chunk: it is counted; the clock is read until the first token (the first chunk comes
        no later than the first token, so no later chunk needs a moment of its own); the parser
        looks at it (a failure there is logged, never raised into the caller's loop). True when
        the caller is to see the chunk, False for one the parser hides."""
        try:
            self.chunk_count += 1
            if self.first_token_at is None:
                now = time.monotonic()
                if self.first_chunk_at is None:
                    self.first_chunk_at = now
                if self.parser.has_content(chunk):
                    self.first_token_at = now
                    self.first_token_chunk = self.chunk_count
            self.observe(chunk)
        except Exception:
            log_once(logger, "stream chunk observation failed")
        hides = self.hides
        return hides is None or not hides(chunk)

    def end(self, how: str, exc: BaseException | None = None, at: float | None = None) -> None:
        """End the span once; later calls do nothing. ``how``: completed/closed/abandoned/error/cancelled.

        ``at``: the moment (monotonic clock) the call ended, when that was before now: a stream
        the caller stopped reading ends at the last moment it handed the caller something
        (``last_handed_at``), since what the caller did after its last chunk, until it closed
        the stream or dropped it, is the caller's time, not the model's."""
        if self.ended:
            return
        # When two threads end it together, one pops the item: a list's pop is one atomic step
        # (a lock taken and released with ``with`` costs several times the rest of this check,
        # its arguments parsed on each call).
        try:
            self.once.pop()
        except IndexError:
            return
        self.ended = True
        span = self.span
        ended_at = time.monotonic() if at is None else at
        # The instants the span's events mark: where the report splits the call (the first token,
        # else the first chunk) and, when the call gathered it, the headers' arrival.
        first = self.first_token_at
        if first is None:
            first = self.first_chunk_at
        time_to_first_token = None if first is None else first - self.started_at
        collected = self.collected
        time_to_headers = collected.get(semconv.TIME_TO_HEADERS) if collected else None
        try:
            # What was gathered during the call (a model call's start attributes, HTTP phases
            # and time to headers) is set with the stream's own measures and what the parser
            # says, in one call. When its values are plain (seen at once, in C) it takes the
            # plain ones too, so that only values nobody made plain are looked at one by one.
            # (Nothing reads the call's gathered attributes after the stream's end: they are
            # added to here.)
            if not collected:
                plain: dict[str, Any] = {}
                attributes: dict[str, Any] = {}
            elif set(map(type, collected.values())) <= _PLAIN_VALUES:
                plain, attributes = collected, {}
            else:
                plain, attributes = {}, collected
            # A completed stream's OK status goes with the attributes (see set_span_attributes),
            # unless the parser failed; its failure loses only what it would have set.
            parsed = False
            parser = self.parser
            try:
                finish_into = getattr(parser, "finish_into", None)
                if finish_into is not None:
                    finish_into(plain, attributes)
                else:
                    parser.finish(GatheredAttributes(span, attributes, plain))  # type: ignore[arg-type]
                parsed = True
            except Exception:
                log_once(logger, "stream end recording failed")
            # The stream's own measures: plain values by construction. (After the parser's:
            # the output token count it set, when it set one plainly, is not read again.)
            if self.streaming:
                plain[semconv.STREAM_END] = how
                plain[semconv.CHUNK_COUNT] = self.chunk_count
            if self.first_chunk_at is not None:
                plain[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (
                    self.first_chunk_at - self.started_at
                )
            if self.first_token_at is not None:
                generation_time = ended_at - self.first_token_at
                plain[semconv.TIME_TO_FIRST_TOKEN] = self.first_token_at - self.started_at
                plain[semconv.GENERATION_TIME] = generation_time
                tokens = plain.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS)
                if tokens is None:
                    tokens = parser.output_tokens()
                if tokens and generation_time > 0:
                    plain[semconv.OUTPUT_TOKENS_PER_SECOND] = tokens / generation_time
            if capture_settings()[0]:
                content.route_content(span, plain, attributes)
            set_span_attributes(span, attributes, parsed and how == "completed", plain)
            if how == "error" and exc is not None:
                record_error(span, exc)
        except Exception:
            log_once(logger, "stream end recording failed")
        finally:
            # The generation time spans the chunks after the one with the first token.
            chunks_after_first_token = (
                self.chunk_count - self.first_token_chunk if self.first_token_at is not None else 0
            )
            end_model_span(
                span,
                self.started_at,
                chunks_after_first_token,
                ended_at,
                time_to_headers,
                time_to_first_token,
            )

    def end_from_exception(self, exc: BaseException) -> None:
        if isinstance(exc, asyncio.CancelledError):
            self.end("cancelled")
        elif isinstance(exc, GeneratorExit):
            self.end("closed")
        else:
            self.end("error", exc)


_PLAIN_VALUES = _compat.PLAIN_VALUES


def _left_by(exc: BaseException | None) -> str:
    """How a stream ends when its ``with`` block is left: ``closed``, whether or not the caller's
    code raised (an exception from the stream itself ended it already, as ``error``: what reaches
    the block's exit unended is the caller's own, recorded on the caller's span, not the model
    call's), or ``cancelled``."""
    return "cancelled" if isinstance(exc, asyncio.CancelledError) else "closed"


def set_span_attributes(
    span: Span,
    attributes: dict[str, Any],
    ok: bool = False,
    plain: dict[str, Any] | None = None,
) -> None:
    """``span.set_attributes(attributes)`` (then ``span.set_status(STATUS_OK)`` when ``ok``), for
    less when ``span`` is the OpenTelemetry SDK's (the ``span-store`` fast path, see
    :func:`llmtrace.sdk._compat.store_attributes`). ``plain``: attributes set before those, whose
    values llmtrace made itself of the classes the SDK keeps as they are (str, int, float, bool,
    or a tuple of values of one of those), so not looked at again."""
    if _compat.store_attributes(span, attributes, ok, plain):
        return
    if plain:
        span.set_attributes(plain)
    span.set_attributes(attributes)
    if ok:
        span.set_status(STATUS_OK)


class GatheredAttributes:
    """What a parser's ``finish`` gets for the span: the attributes it sets are added to the
    stream's own, set on the span together once it returns (each call setting attributes on a
    span costs about as much as several attributes); anything else goes to the span itself.

    ``plain``: where a parser puts attributes whose values it made plain itself (a str, int,
    float or bool, or a tuple of those; see :func:`set_span_attributes`), so that they are not
    looked at again. Anything else goes through ``set_attributes``.
    """

    __slots__ = ("_span", "attributes", "plain")

    # Read by content.set_call_attributes: content is routed at the stream's end, not here.
    gathers_attributes = True

    def __init__(
        self, span: Span, attributes: dict[str, Any], plain: dict[str, Any] | None = None
    ) -> None:
        self._span = span
        self.attributes = attributes
        self.plain: dict[str, Any] = attributes if plain is None else plain

    def set_attributes(self, attributes: Any) -> None:
        self.attributes.update(attributes)

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def __getattr__(self, name: str) -> Any:
        return getattr(self._span, name)


def end_model_span(
    span: Span,
    started_at: float,
    output_chunks: int = 0,
    ended_at: float | None = None,
    time_to_headers: float | None = None,
    time_to_first_token: float | None = None,
) -> None:
    """End a model-call span, recording the GenAI client metrics from its attributes first.

    ``output_chunks``: for a stream, the chunks that arrived after the one with the first token.
    ``ended_at``: the moment (monotonic clock) the call ended, when that was before now.
    ``time_to_headers``, ``time_to_first_token``: seconds from ``started_at``, when known: they
    become the span's events (see :func:`mark_instants`).
    """
    now = time.monotonic()
    if ended_at is None or ended_at > now:
        ended_at = now
    try:
        if time_to_headers is not None or time_to_first_token is not None:
            mark_instants(span, started_at, now, time_to_headers, time_to_first_token)
    except Exception:
        log_once(logger, "model call events failed")
    try:
        if meter_provider_set() and span.is_recording():
            attributes = getattr(span, "attributes", None)
            if attributes is not None:
                record_model_call(attributes, ended_at - started_at, output_chunks)
    finally:
        try:
            if ended_at == now:
                span.end()
            else:
                # Spans take wall-clock times: that of now, less how long ago the call ended.
                span.end(end_time=time.time_ns() - int((now - ended_at) * 1e9))
        except Exception:
            log_once(logger, "span end failed")


def end_model_call(call: ModelCall) -> None:
    """End the span of a model call that did not end as a stream (a whole response, a failure),
    its headers' arrival an event when it was known (see :func:`end_model_span`)."""
    headers_at = call.headers_at
    end_model_span(
        call.span,
        call.started_at,
        time_to_headers=None if headers_at is None else headers_at - call.started_at,
    )


def mark_instants(
    span: Span,
    started_at: float,
    now: float,
    time_to_headers: float | None,
    time_to_first_token: float | None,
) -> None:
    """The response headers' arrival and the first token as span events at the instants they
    happened (``semconv.RESPONSE_HEADERS_EVENT``, ``semconv.FIRST_TOKEN_EVENT``), so that a trace
    viewer draws them on the span's bar: the span's start plus each time (seconds after
    ``started_at``, the monotonic moment the call began; ``now``: a monotonic time read just
    before). Added at the call's end, one event each, only to a span recorded for a trace; they
    carry no attributes, so no content, whatever the capture settings."""
    if span.__class__ is CountedSpan or not span.is_recording():
        return
    events: tuple[tuple[str, float], ...]
    if time_to_headers is None:
        if time_to_first_token is None:
            return
        events = ((semconv.FIRST_TOKEN_EVENT, time_to_first_token),)
    elif time_to_first_token is None:
        events = ((semconv.RESPONSE_HEADERS_EVENT, time_to_headers),)
    else:
        events = (
            (semconv.RESPONSE_HEADERS_EVENT, time_to_headers),
            (semconv.FIRST_TOKEN_EVENT, time_to_first_token),
        )
    if _compat.add_events(span, events):
        return
    start = getattr(span, "start_time", None)
    if start is None:
        # not the SDK's span: its start, on the wall clock, as near as the call's start gives it
        start = time.time_ns() - int((now - started_at) * 1e9)
    for name, seconds in events:
        span.add_event(name, timestamp=start + int(seconds * 1e9))


class _Chunks:
    """A stream's chunks, each reported to the recorder before it is handed on.

    What iterating a traced stream goes through: a plain object, because reading an attribute of
    a wrapt proxy costs as much as the rest of the per-chunk work. It, not the proxy, ends a
    stream dropped unfinished (never iterated or partially read) when it is itself dropped: the
    proxy holds it, and so does a ``for`` loop over the stream (through the iterator it got),
    which may outlive the proxy. ``_iterator``: the source's iterator, shared by every way of
    reading the stream (``next()`` and each ``for`` loop), so each chunk is read and reported
    once.
    """

    __slots__ = ("_iterator", "_recorder", "_source")

    def __init__(self, source: Any, recorder: StreamRecorder) -> None:
        self._source = source
        self._recorder = recorder
        self._iterator: Any = None
        recorder.last_handed_at = time.monotonic()  # the stream, handed to the caller

    def __del__(self) -> None:
        # Dropped: a stream that did not end otherwise is abandoned. (Not weakref.finalize:
        # registering one costs ten times this object's creation, on every stream.)
        recorder = self._recorder
        if not recorder.ended:
            # (At interpreter exit what it needs may be gone already.)
            with contextlib.suppress(Exception):
                recorder.end("abandoned", at=recorder.last_handed_at)


class _RecordedChunks(_Chunks):
    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        return _recorded(self)

    def __next__(self) -> Any:
        recorder = self._recorder
        iterator = self._iterator
        if iterator is None:
            iterator = self._iterator = iter(self._source)
        while True:
            try:
                chunk = next(iterator)
            except StopIteration:
                recorder.end("completed")
                raise
            except BaseException as exc:
                recorder.end_from_exception(exc)
                raise
            if recorder.on_chunk(chunk):
                # Read with next(), the stream may be dropped any time later: it ends then, at
                # this moment. (A for loop's generator ends the stream as the loop is left, so it
                # needs no moment per chunk.)
                recorder.last_handed_at = time.monotonic()
                return chunk


def _recorded(chunks: _RecordedChunks) -> Iterator[Any]:
    """What a ``for`` loop over a traced stream iterates: each chunk through the per-chunk step,
    then handed on.

    A generator, not ``chunks`` itself: the loop resumes a generator for a fraction of what
    calling a Python ``__next__`` costs it, on every chunk. It holds ``chunks`` and is not held
    by it. Closed at a ``yield`` (the loop was left: ``break``, ``return``, an exception in its
    body; the interpreter closes a generator the loop drops), it ends the stream as ``closed``
    then: the caller stopped reading. (The moment is the loop's exit, not the last chunk's: a
    clock read per chunk would cost more than the rest of the step.) Any other exception thrown in there is the caller's, not
    the stream's.
    """
    recorder = chunks._recorder
    on_chunk = recorder.on_chunk
    iterator = chunks._iterator
    if iterator is None:
        iterator = chunks._iterator = iter(chunks._source)
    # The loop's chunks are timed by its exit, not one by one: a moment kept by next() is past.
    recorder.last_handed_at = None
    thrown_in = False
    try:
        for chunk in iterator:
            if on_chunk(chunk):
                # (A try costs nothing until something is raised: less than a flag set around
                # each yield.)
                try:
                    yield chunk
                except GeneratorExit:
                    thrown_in = True
                    recorder.end("closed")
                    raise
                except BaseException:
                    thrown_in = True
                    raise
    except BaseException as exc:
        if not thrown_in:
            recorder.end_from_exception(exc)
        raise
    recorder.end("completed")


async def _recorded_async(chunks: _RecordedAsyncChunks) -> AsyncIterator[Any]:
    """What an ``async for`` loop over a traced stream iterates: :func:`_recorded`'s twin. An
    async generator the loop leaves is closed by the event loop soon after (asyncio's
    async-generator hooks), and ends the stream as ``closed`` at its last chunk."""
    recorder = chunks._recorder
    on_chunk = recorder.on_chunk
    iterator = chunks._iterator
    if iterator is None:
        iterator = chunks._iterator = chunks._source.__aiter__()
    thrown_in = False
    try:
        async for chunk in iterator:
            if on_chunk(chunk):
                # The event loop closes a generator the loop left at one of its next steps,
                # which may come after the caller's own awaits: the stream ends at this moment.
                recorder.last_handed_at = time.monotonic()
                try:
                    yield chunk
                except GeneratorExit:
                    thrown_in = True
                    recorder.end("closed", at=recorder.last_handed_at)
                    raise
                except BaseException:
                    thrown_in = True
                    raise
    except BaseException as exc:
        if not thrown_in:
            recorder.end_from_exception(exc)
        raise
    recorder.end("completed")


class TracedStream(wrapt.ObjectProxy):  # type: ignore[type-arg]
    """A synchronous stream (iterator, optionally a context manager) that reports to a recorder."""

    def __init__(self, wrapped: Any, recorder: StreamRecorder) -> None:
        super().__init__(wrapped)
        # (One attribute of the proxy's own: each costs a dict entry set through the proxy.)
        self._self_chunks = _RecordedChunks(wrapped, recorder)

    def __iter__(self) -> Iterator[Any]:
        return _recorded(self._self_chunks)

    def __next__(self) -> Any:
        return next(self._self_chunks)

    def close(self) -> None:
        try:
            close = getattr(self.__wrapped__, "close", None)
            if close is not None:
                close()
        finally:
            recorder = self._self_chunks._recorder
            recorder.end("closed", at=recorder.last_handed_at)

    def __enter__(self) -> TracedStream:
        enter = getattr(self.__wrapped__, "__enter__", None)
        if enter is not None:
            enter()
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> Any:
        try:
            exit_ = getattr(self.__wrapped__, "__exit__", None)
            return exit_(exc_type, exc, tb) if exit_ is not None else None
        finally:
            recorder = self._self_chunks._recorder
            recorder.end(_left_by(exc), at=recorder.last_handed_at)


class _RecordedAsyncChunks(_Chunks):
    __slots__ = ()

    def __aiter__(self) -> _RecordedAsyncChunks:
        return self

    async def __anext__(self) -> Any:
        recorder = self._recorder
        iterator = self._iterator
        if iterator is None:
            iterator = self._iterator = self._source.__aiter__()
        while True:
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                recorder.end("completed")
                raise
            except BaseException as exc:
                recorder.end_from_exception(exc)
                raise
            if recorder.on_chunk(chunk):
                recorder.last_handed_at = time.monotonic()  # as in _RecordedChunks.__next__
                return chunk


class TracedAsyncStream(wrapt.ObjectProxy):  # type: ignore[type-arg]
    """An asynchronous stream (async iterator, optionally an async context manager)."""

    def __init__(self, wrapped: Any, recorder: StreamRecorder) -> None:
        super().__init__(wrapped)
        # (One attribute of the proxy's own: each costs a dict entry set through the proxy.)
        self._self_chunks = _RecordedAsyncChunks(wrapped, recorder)

    def __aiter__(self) -> AsyncIterator[Any]:
        return _recorded_async(self._self_chunks)

    async def __anext__(self) -> Any:
        return await self._self_chunks.__anext__()

    async def aclose(self) -> None:
        try:
            for name in ("aclose", "close"):
                close = getattr(self.__wrapped__, name, None)
                if close is not None:
                    result = close()
                    if asyncio.iscoroutine(result):
                        await result
                    break
        finally:
            recorder = self._self_chunks._recorder
            recorder.end("closed", at=recorder.last_handed_at)

    async def close(self) -> None:
        await self.aclose()

    async def __aenter__(self) -> TracedAsyncStream:
        enter = getattr(self.__wrapped__, "__aenter__", None)
        if enter is not None:
            await enter()
        return self

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> Any:
        try:
            exit_ = getattr(self.__wrapped__, "__aexit__", None)
            return (await exit_(exc_type, exc, tb)) if exit_ is not None else None
        finally:
            recorder = self._self_chunks._recorder
            recorder.end(_left_by(exc), at=recorder.last_handed_at)
