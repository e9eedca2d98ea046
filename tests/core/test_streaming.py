"""The shared stream lifecycle ends its span exactly once, with the right status, on every path."""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from llmtrace import semconv
from llmtrace.sdk.streaming import StreamRecorder, TracedAsyncStream, TracedStream

tracer = trace.get_tracer("tests")


class Chunk:
    def __init__(self, text: str | None, tokens: int | None = None) -> None:
        self.text = text
        self.tokens = tokens


class Parser:
    """A provider parser as the instrumentations write them: O(1) state."""

    def __init__(self) -> None:
        self.tokens: int | None = None

    def has_content(self, chunk: Chunk) -> bool:
        return bool(chunk.text)

    def observe(self, chunk: Chunk) -> None:
        if chunk.tokens is not None:
            self.tokens = chunk.tokens

    def finish(self, span: Any) -> None:
        if self.tokens is not None:
            span.set_attribute(semconv.GEN_AI_USAGE_OUTPUT_TOKENS, self.tokens)

    def output_tokens(self) -> int | None:
        return self.tokens


class ProviderStream:
    """Like a provider SDK stream: iterable, closeable, a context manager, with its own attributes."""

    def __init__(
        self, chunks: list[Chunk], fail_after: int | None = None, delay: float = 0.0
    ) -> None:
        self.chunks = chunks
        self.fail_after = fail_after
        self.delay = delay
        self.closed = False
        self.response = "provider-object"

    def __iter__(self) -> Any:
        for index, chunk in enumerate(self.chunks):
            if self.fail_after is not None and index == self.fail_after:
                raise ConnectionError("stream broke")
            time.sleep(self.delay)
            yield chunk

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> ProviderStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncProviderStream:
    def __init__(
        self, chunks: list[Chunk], fail_after: int | None = None, delay: float = 0.0
    ) -> None:
        self.chunks = chunks
        self.fail_after = fail_after
        self.delay = delay
        self.closed = False

    async def _iterate(self) -> Any:
        for index, chunk in enumerate(self.chunks):
            if self.fail_after is not None and index == self.fail_after:
                raise ConnectionError("stream broke")
            await asyncio.sleep(self.delay)
            yield chunk

    def __aiter__(self) -> Any:
        return self._iterate()

    async def close(self) -> None:
        self.closed = True

    async def __aenter__(self) -> AsyncProviderStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


def chunks() -> list[Chunk]:
    return [Chunk(None), Chunk(""), Chunk("Hel"), Chunk("lo"), Chunk(None, tokens=2)]


def traced(stream: Any, parser: Parser | None = None) -> Any:
    span = tracer.start_span("chat m")
    recorder = StreamRecorder(span, time.monotonic(), parser or Parser())
    if isinstance(stream, AsyncProviderStream):
        return TracedAsyncStream(stream, recorder)
    return TracedStream(stream, recorder)


def only_span(spans: Any) -> ReadableSpan:
    gc.collect()
    finished = spans.get_finished_spans()
    assert len(finished) == 1, [s.name for s in finished]
    return finished[0]


def test_exhausted_stream_is_ok_with_timing(spans):
    stream = traced(ProviderStream(chunks(), delay=0.01))
    assert [c.text for c in stream] == [None, "", "Hel", "lo", None]
    span = only_span(spans)
    attrs = span.attributes
    assert span.status.status_code == StatusCode.OK
    assert attrs[semconv.STREAM_END] == "completed"
    assert attrs[semconv.CHUNK_COUNT] == 5
    assert attrs[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0.01
    assert attrs[semconv.TIME_TO_FIRST_TOKEN] >= 0.03  # the third chunk is the first with content
    assert attrs[semconv.GENERATION_TIME] >= 0.02
    assert attrs[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 2
    assert attrs[semconv.OUTPUT_TOKENS_PER_SECOND] > 0


def test_proxy_keeps_the_provider_objects_attributes(spans):
    stream = traced(ProviderStream(chunks()))
    assert stream.response == "provider-object"
    assert isinstance(stream, ProviderStream)
    list(stream)


# What the caller does after it stopped reading: long beside the stream's own times.
CALLER_WORK = 0.5


def duration(span: ReadableSpan) -> float:
    assert span.end_time is not None and span.start_time is not None
    return (span.end_time - span.start_time) / 1e9


def finished(spans: Any) -> list[ReadableSpan]:
    """The spans ended so far, without collecting garbage."""
    return list(spans.get_finished_spans())


def test_break_ends_the_span_as_the_loop_is_left_at_its_last_chunk(spans):
    stream = traced(ProviderStream(chunks(), delay=0.01))
    for chunk in stream:
        if chunk.text == "Hel":
            break
    # Ended as the loop was left, while the caller still holds the stream.
    [span] = finished(spans)
    time.sleep(CALLER_WORK)
    del stream
    gc.collect()
    assert finished(spans) == [span]
    assert span.attributes[semconv.STREAM_END] == "closed"
    assert span.attributes[semconv.CHUNK_COUNT] == 3
    assert span.status.status_code == StatusCode.UNSET
    assert semconv.TIME_TO_FIRST_TOKEN in span.attributes
    assert span.attributes[semconv.GENERATION_TIME] < 0.01  # the first token came last
    assert duration(span) < CALLER_WORK  # the caller's work after its last chunk is not in it


def test_chunks_read_after_leaving_a_loop_are_handed_on_but_not_counted(spans):
    stream = traced(ProviderStream(chunks()))
    for _chunk in stream:
        break
    rest = [chunk.text for chunk in stream]
    assert rest == ["", "Hel", "lo", None]
    span = only_span(spans)
    assert span.attributes[semconv.STREAM_END] == "closed"
    assert span.attributes[semconv.CHUNK_COUNT] == 1


def test_close_after_the_caller_worked_ends_the_span_at_the_last_chunk(spans):
    stream = traced(ProviderStream(chunks(), delay=0.01))
    next(stream)
    next(stream)
    next(stream)  # the first token
    time.sleep(CALLER_WORK)
    stream.close()
    span = only_span(spans)
    assert span.attributes[semconv.STREAM_END] == "closed"
    assert duration(span) < CALLER_WORK  # the caller's work after its last chunk is not in it
    assert span.attributes[semconv.GENERATION_TIME] < 0.01


def test_next_then_drop_ends_as_abandoned_at_the_last_chunk(spans):
    stream = traced(ProviderStream(chunks(), delay=0.01))
    next(stream)
    next(stream)
    next(stream)
    next(stream)
    time.sleep(CALLER_WORK)
    del stream
    span = only_span(spans)
    assert span.attributes[semconv.STREAM_END] == "abandoned"
    assert span.attributes[semconv.CHUNK_COUNT] == 4
    assert span.status.status_code == StatusCode.UNSET
    assert duration(span) < CALLER_WORK  # the caller's work after its last chunk is not in it
    assert 0.005 < span.attributes[semconv.GENERATION_TIME] < CALLER_WORK


def test_close_ends_once_and_closes_the_provider_stream(spans):
    provider = ProviderStream(chunks())
    stream = traced(provider)
    next(stream)
    stream.close()
    stream.close()
    del stream
    span = only_span(spans)
    assert provider.closed
    assert span.attributes[semconv.STREAM_END] == "closed"
    assert span.status.status_code == StatusCode.UNSET


def test_context_manager_exit_ends_once(spans):
    with traced(ProviderStream(chunks())) as stream:
        next(stream)
    span = only_span(spans)
    assert span.attributes[semconv.STREAM_END] == "closed"


def test_never_iterated_stream_dropped_is_abandoned_when_handed_over(spans):
    stream = traced(ProviderStream(chunks()))
    time.sleep(CALLER_WORK)
    del stream
    span = only_span(spans)
    assert span.attributes[semconv.STREAM_END] == "abandoned"
    assert duration(span) < CALLER_WORK
    assert span.attributes[semconv.CHUNK_COUNT] == 0
    assert semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in span.attributes


def test_exception_from_the_stream_is_error_and_unchanged(spans):
    stream = traced(ProviderStream(chunks(), fail_after=3))
    with pytest.raises(ConnectionError, match="stream broke"):
        list(stream)
    span = only_span(spans)
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == "ConnectionError"
    assert span.attributes[semconv.STREAM_END] == "error"
    assert span.attributes[semconv.CHUNK_COUNT] == 3


def test_loop_over_a_stream_nothing_else_holds_completes_it(spans):
    # The proxy is gone once the loop has its iterator: the loop alone keeps the stream going.
    assert sum(1 for _ in traced(ProviderStream(chunks()))) == 5
    span = only_span(spans)
    assert span.attributes[semconv.STREAM_END] == "completed"
    assert span.attributes[semconv.CHUNK_COUNT] == 5
    assert span.status.status_code == StatusCode.OK


def test_next_then_a_loop_read_each_chunk_once(spans):
    stream = traced(ProviderStream(chunks()))
    first = next(stream)
    rest = list(stream)
    assert [first.text, *(chunk.text for chunk in rest)] == [None, "", "Hel", "lo", None]
    span = only_span(spans)
    assert span.attributes[semconv.CHUNK_COUNT] == 5
    assert span.attributes[semconv.STREAM_END] == "completed"
    assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 2


def test_an_exception_in_the_callers_code_is_the_callers_not_the_model_calls(spans):
    """The caller stopped reading: closed, never OK, never the model call's error; the same with
    or without a with-block, in a loop over the stream or not."""
    error = RuntimeError("consumer failed")

    def in_loop_in_with_block() -> None:
        with traced(ProviderStream(chunks())) as stream:
            for _ in stream:
                raise error

    def in_loop() -> None:
        for _ in traced(ProviderStream(chunks())):
            raise error

    def in_with_block() -> None:
        with traced(ProviderStream(chunks())) as stream:
            next(stream)
            raise error

    for caller in (in_loop_in_with_block, in_loop, in_with_block):
        spans.clear()
        with pytest.raises(RuntimeError) as caught:
            caller()
        assert caught.value is error
        [span] = finished(spans)
        assert span.attributes[semconv.STREAM_END] == "closed", caller.__name__
        assert span.status.status_code == StatusCode.UNSET, caller.__name__
        assert semconv.ERROR_TYPE not in span.attributes


async def test_async_exhausted(spans):
    stream = traced(AsyncProviderStream(chunks(), delay=0.005))
    assert [c.text async for c in stream] == [None, "", "Hel", "lo", None]
    span = only_span(spans)
    assert span.status.status_code == StatusCode.OK
    assert span.attributes[semconv.CHUNK_COUNT] == 5


async def test_async_aclose_and_context_manager(spans):
    provider = AsyncProviderStream(chunks())
    stream = traced(provider)
    await stream.__anext__()
    await stream.aclose()
    await stream.aclose()
    assert provider.closed
    async with traced(AsyncProviderStream(chunks())) as other:
        await other.__anext__()
    gc.collect()
    finished = spans.get_finished_spans()
    assert [s.attributes[semconv.STREAM_END] for s in finished] == ["closed", "closed"]


async def test_async_break_ends_the_span_soon_at_its_last_chunk(spans):
    stream = traced(AsyncProviderStream(chunks(), delay=0.01))
    async for chunk in stream:
        if chunk.text == "Hel":
            break
    await asyncio.sleep(0)  # the event loop closes the generator the loop left
    await asyncio.sleep(0)
    [span] = finished(spans)
    await asyncio.sleep(CALLER_WORK)
    del stream
    gc.collect()
    assert finished(spans) == [span]
    assert span.attributes[semconv.STREAM_END] == "closed"
    assert span.attributes[semconv.CHUNK_COUNT] == 3
    assert duration(span) < CALLER_WORK  # the caller's work after its last chunk is not in it


async def test_async_anext_then_drop_is_abandoned_at_the_last_chunk(spans):
    stream = traced(AsyncProviderStream(chunks(), delay=0.01))
    await stream.__anext__()
    await stream.__anext__()
    await asyncio.sleep(CALLER_WORK)
    del stream
    span = only_span(spans)
    assert span.attributes[semconv.STREAM_END] == "abandoned"
    assert duration(span) < CALLER_WORK  # the caller's work after its last chunk is not in it


async def test_async_exception_in_the_callers_loop_is_closed(spans):
    with pytest.raises(RuntimeError):
        async with traced(AsyncProviderStream(chunks())) as stream:
            async for _ in stream:
                raise RuntimeError("consumer failed")
    await asyncio.sleep(0)
    span = only_span(spans)
    assert span.attributes[semconv.STREAM_END] == "closed"
    assert span.status.status_code == StatusCode.UNSET


async def test_async_error_mid_stream(spans):
    with pytest.raises(ConnectionError):
        async for _ in traced(AsyncProviderStream(chunks(), fail_after=2)):
            pass
    span = only_span(spans)
    assert span.status.status_code == StatusCode.ERROR


async def test_async_cancelled_stream_ends_once_as_cancelled(spans):
    stream = traced(AsyncProviderStream(chunks(), delay=1.0))

    async def consume(stream: Any) -> None:
        async for _ in stream:
            pass

    task = asyncio.create_task(consume(stream))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    del stream, task
    span = only_span(spans)
    assert span.attributes[semconv.STREAM_END] == "cancelled"
    assert span.status.status_code == StatusCode.UNSET


def test_failing_parser_never_breaks_the_stream(spans, caplog):
    class BrokenParser(Parser):
        def observe(self, chunk: Chunk) -> None:
            raise RuntimeError("parser bug")

        def finish(self, span: Any) -> None:
            raise RuntimeError("parser bug at end")

    stream = traced(ProviderStream(chunks()), BrokenParser())
    assert len(list(stream)) == 5
    span = only_span(spans)
    assert span.end_time is not None
    assert "parser bug" in caplog.text or "stream" in caplog.text
