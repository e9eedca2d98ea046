"""LlamaIndex (``llama-index-core`` 0.14): its instrumentation dispatcher's spans, in their stages.

How it hooks in: LlamaIndex reports every call of its components to the root dispatcher
(``llama_index.core.instrumentation.get_dispatcher()``) as span enter/exit/drop notices, each with
a span id and its parent's, and as events (a model's start, each streamed chunk, its end). A span
handler and an event handler are added to the root dispatcher by ``instrument()`` and removed by
``uninstrument()``. One method is wrapped (and restored),
``BaseNodePostprocessor.apostprocess_nodes``: a reranker's own async implementation (``LLMRerank``,
RankGPT) is the one call LlamaIndex 0.14 sends no notice for; it is given a span id in LlamaIndex's
own context variable, as the dispatcher would.

Which kinds are kept, their names and attributes, and what a model response says are in
:mod:`llmtrace.instrumentation.frameworks.llama_index_spans`; this module turns the notices into spans.

Which of LlamaIndex's spans are kept (every other one, such as ``_query``, ``_retrieve``,
``predict``, ``get_response``, text splitters and prompt programs, is internal plumbing: it makes
no span, and its children are parented to its nearest kept ancestor). Each kept span is the one
call a user would name, so the tree reads like the application and a request is not buried
under dozens of one-line method spans:

- a query engine's ``query``/``aquery``, a chat engine's ``chat``/``stream_chat`` (and async):
  stage ``other``, named after the engine's class (a top-level one with no current span is the
  trace's root);
- a workflow's ``run`` (stage ``other``, named after the workflow), ``invoke_agent {name}`` when
  it is an agent (LlamaIndex's agent workflows, or a class whose name says agent); each of its
  steps, named after the step;
- a retriever's ``retrieve``/``aretrieve``: ``retrieval {vector store}`` (``retrieval``), with
  ``gen_ai.retrieval.top_k`` when the retriever has one and ``llmtrace.retrieval.returned``;
- a node postprocessor (reranker): ``rerank {class}`` (``rerank``), with the candidates in and out;
- a response synthesizer's ``synthesize``/``asynthesize``: stage ``postprocess`` (the response
  assembly; the model call inside is a span of its own);
- an LLM's ``chat``/``complete``/``stream_chat``/``stream_complete`` (and async): ``chat {model}``
  or ``text_completion {model}`` (CLIENT, stage ``ttft``); a model call made inside another one
  of the same LLM (``complete`` sending ``chat``) is the same call, not a second span. TTFT is
  the first streamed chunk with content (``LLMChatInProgressEvent``), timed by the shared
  :class:`~llmtrace.sdk.streaming.StreamRecorder`; response model, id, finish reasons and usage are
  read from the responses' ``raw`` provider objects (reported values only);
- an embedding model's ``get_query_embedding``/``get_text_embedding(_batch)`` (and async):
  ``embeddings {model}`` (``embedding``);
- a tool's ``call``/``acall``: ``execute_tool {name}`` (``tool``).

Parents come from the dispatcher's parent ids, through a bounded map of the spans in flight;
a span whose parent LlamaIndex does not know (a thread it did not hand its context to) is
parented by the current OpenTelemetry context instead.

Context (rule 3 of docs/architecture.md): a kept span is made current from its enter notice to
its exit, which LlamaIndex sends from the same call (sync) or the same task (async), so provider
calls, HTTP hops and application code inside it nest beneath it; nothing is held across a yield.
A workflow's ``run`` returns a future whose exit arrives in a callback: it is never made current
(its steps are parented by id). The context is detached only where it was attached.

Streams: a streamed query returns a ``StreamingResponse`` whose generator runs the model only
when read, after ``query()`` returned, with no LlamaIndex span active. Its ``response_gen`` is
replaced by an equivalent generator that runs each step with the synthesizer's span current (and
once the model call has started, the model span), and the query and synthesizer spans end when
that generator ends (the user waits for the stream). A streamed model span ends with
``LLMChatEndEvent``, an ``ExceptionEvent`` (failed, closed) or when its stream is dropped.

One model span per call (rule 8): like LangChain's, the LlamaIndex model span is current while
its request is sent, so a provider instrumentation (OpenAI, Anthropic, LiteLLM) records its span
beneath it and notes it (:func:`~llmtrace.sdk.gate.note_provider_call`); the
LlamaIndex span then ends as stage ``other`` without TTFT or usage.

Known limits: a model stream read by application code itself (``llm.stream_chat()`` iterated
outside a query engine's streamed response) is read with no LlamaIndex span current, so a
provider span made then is a sibling of the LlamaIndex model span (both keep their timing). A
chat engine's streamed response (``StreamingAgentChatResponse``, whose generator cannot be
replaced) is one trace, but the engine's span ends when it returns; the model span beneath it
ends with the stream.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Iterable, Iterator
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from llmtrace import semconv
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.frameworks.llama_index_spans import (
    EMBEDDING,
    ENGINE,
    MODEL,
    ONE_PER_OBJECT,
    RERANK,
    RETRIEVAL,
    STEP,
    SYNTHESIZER,
    WORKFLOW,
    ResponseParser,
    describe,
    method_of,
    span_kinds,
)
from llmtrace.sdk._safety import log_once
from llmtrace.sdk.gate import (
    get_tracer,
    provider_calls_under,
    should_trace,
    watch_provider_calls,
)
from llmtrace.sdk.span_errors import record_error
from llmtrace.sdk.streaming import STATUS_OK, StreamRecorder

logger = logging.getLogger(__name__)

# Spans in flight are bounded: past this many, new ones are not traced (a stream that is never
# read and never dropped must not grow the map without limit).
_MAX_SPANS = 10_000

# A span that is not traced (unsampled, suppressed): its children are not traced either.
_SKIPPED = object()


class _Entry:
    """One kept span in flight."""

    __slots__ = (
        "context_tokens",
        "ended",
        "instance",
        "kind",
        "recorder",
        "span",
        "streaming",
    )

    def __init__(self, kind: str, span: Span, instance: Any) -> None:
        self.kind = kind
        self.span = span
        self.instance = instance
        self.recorder: StreamRecorder | None = None
        self.context_tokens: Any = None
        self.streaming = False
        self.ended = False


class _Link:
    """An internal LlamaIndex span: its children belong to ``entry`` (None: the current context)."""

    __slots__ = ("entry",)

    def __init__(self, entry: _Entry | None) -> None:
        self.entry = entry


# A marker set from a kept span's enter notice to its exit: when the exit arrives in another
# context (a future's callback), resetting it fails and the OpenTelemetry context, attached in a
# context that is not this one, is left alone.
_entered: ContextVar[str | None] = ContextVar("llmtrace_llama_index_span", default=None)


class _StreamSlot:
    """A streamed response being read: the span its steps run under, and the model span once the
    model call has started (made current in every later step)."""

    __slots__ = ("model", "model_token", "parent", "thread")

    def __init__(self, parent: Span) -> None:
        self.parent = parent
        self.model: Span | None = None
        self.model_token: Any = None
        self.thread = 0


# Set only during one step of a streamed response (never across a yield).
_stream_slot: ContextVar[_StreamSlot | None] = ContextVar(
    "llmtrace_llama_index_stream", default=None
)


def _enter_step(slot: _StreamSlot) -> tuple[Any, Any]:
    slot.thread = threading.get_ident()
    span = slot.model if slot.model is not None else slot.parent
    return _stream_slot.set(slot), otel_context.attach(trace.set_span_in_context(span))


def _leave_step(slot: _StreamSlot, entered: tuple[Any, Any]) -> None:
    slot_token, context_token = entered
    if slot.model_token is not None:
        otel_context.detach(slot.model_token)
        slot.model_token = None
    otel_context.detach(context_token)
    _stream_slot.reset(slot_token)


class _Waiters:
    """The spans that end when a streamed response ends (its synthesizer's, its engine's)."""

    __slots__ = ("__weakref__", "done", "entries")

    def __init__(self) -> None:
        self.entries: list[_Entry] = []
        self.done = False


class LlamaIndexTracer:
    """Turns the dispatcher's notices into spans. Never raises into LlamaIndex (rule 1)."""

    def __init__(self) -> None:
        from llama_index.core.base.response.schema import (
            AsyncStreamingResponse,
            StreamingResponse,
        )

        self._kinds = span_kinds()
        # The streamed responses of query engines and synthesizers (dataclasses: the generator
        # field can be replaced).
        self._streamed_responses = (StreamingResponse, AsyncStreamingResponse)
        self._spans: dict[str, Any] = {}
        self._streams: weakref.WeakKeyDictionary[Any, _Waiters] = weakref.WeakKeyDictionary()

    # --- which span, under which parent ------------------------------------------------------

    def _parent(self, parent_id: str | None) -> Any:
        """The kept ancestor's entry, None for the current context, or ``_SKIPPED``."""
        state = self._spans.get(parent_id) if parent_id is not None else None
        if isinstance(state, _Link):
            return state.entry
        return state

    def _kind(self, instance: Any, method: str, parent: Any) -> str | None:
        if instance is None:
            # A workflow's step is a function, called with the workflow's run as its parent.
            return STEP if isinstance(parent, _Entry) and parent.kind == WORKFLOW else None
        for base, methods, kind in self._kinds:
            if method in methods and isinstance(instance, base):
                if (
                    kind in ONE_PER_OBJECT
                    and isinstance(parent, _Entry)
                    and parent.instance is instance
                ):
                    return None
                return kind
        return None

    def span_enter(self, id_: str, bound_args: Any, instance: Any, parent_id: str | None) -> None:
        if len(self._spans) >= _MAX_SPANS:
            log_once(logger, "too many LlamaIndex spans in flight; new spans are not traced")
            return
        parent = self._parent(parent_id)
        if parent is _SKIPPED:
            self._spans[id_] = _SKIPPED
            return
        kind = self._kind(instance, method_of(id_), parent)
        if kind is None:
            self._spans[id_] = _Link(parent)
            return
        context = None
        if parent is None:
            if not should_trace():
                self._spans[id_] = _SKIPPED
                return
        else:
            if not parent.span.get_span_context().trace_flags.sampled:
                self._spans[id_] = _SKIPPED
                return
            context = trace.set_span_in_context(parent.span)
        name, attributes = describe(kind, id_, instance, bound_args)
        started_at = time.monotonic()
        span = get_tracer().start_span(
            name,
            context=context,
            kind=SpanKind.CLIENT if kind == MODEL else SpanKind.INTERNAL,
            attributes=attributes,
        )
        entry = _Entry(kind, span, instance)
        if kind == MODEL:
            entry.recorder = StreamRecorder(
                span, started_at=started_at, parser=ResponseParser(), streaming=False
            )
            watch_provider_calls(span)
        self._spans[id_] = entry
        if kind != WORKFLOW:  # its exit comes from a future's callback: never attached
            entry.context_tokens = (
                _entered.set(id_),
                otel_context.attach(trace.set_span_in_context(span)),
            )

    def _leave(self, entry: _Entry) -> None:
        tokens, entry.context_tokens = entry.context_tokens, None
        if tokens is None:
            return
        marker, context_token = tokens
        try:
            _entered.reset(marker)
        except ValueError:
            return  # another context: the one it was attached in is not this one
        otel_context.detach(context_token)

    # --- the end of a span ---------------------------------------------------------------------

    def span_exit(self, id_: str, result: Any) -> None:
        state = self._spans.get(id_)
        if not isinstance(state, _Entry):
            self._spans.pop(id_, None)
            return
        self._leave(state)
        kind = state.kind
        try:
            if kind == MODEL:
                if inspect.isgenerator(result) or inspect.isasyncgen(result):
                    self._stream_started(id_, state, result)
                    return
                self._spans.pop(id_, None)
                self._end_model(state, result, None)
                return
            _record_result(state, result)
            if kind in (ENGINE, SYNTHESIZER) and self._defer_to_stream(state, result):
                self._spans.pop(id_, None)
                return
        except Exception:
            log_once(logger, "LlamaIndex span result recording failed")
        self._spans.pop(id_, None)
        _end(state, None)

    def span_drop(self, id_: str, error: BaseException | None) -> None:
        state = self._spans.pop(id_, None)
        if not isinstance(state, _Entry):
            return
        self._leave(state)
        if state.kind == MODEL:
            self._end_model(state, None, error)
        else:
            _end(state, error)

    def _end_model(self, entry: _Entry, response: Any, error: BaseException | None) -> None:
        if entry.ended:
            return
        entry.ended = True
        recorder = entry.recorder
        assert recorder is not None
        span = entry.span
        if provider_calls_under(span):
            # A provider span beneath owns TTFT and usage: this one is structure only.
            recorder.ended = True
            span.set_attribute(semconv.STAGE, "other")
            _end(entry, error, ended=False)
            return
        try:
            if response is not None:
                recorder.parser.observe(response)
        except Exception:
            log_once(logger, "LlamaIndex model result recording failed")
        if error is not None:
            recorder.end_from_exception(error)
        else:
            recorder.end("completed")

    # --- streams ---------------------------------------------------------------------------------

    def _stream_started(self, id_: str, entry: _Entry, stream: Any) -> None:
        """A model call returned its stream: the span stays open until its end event, and ends
        when the stream is dropped unread."""
        entry.streaming = True
        recorder = entry.recorder
        assert recorder is not None
        recorder.streaming = True
        recorder.span.set_attribute(semconv.GEN_AI_REQUEST_STREAM, True)
        weakref.finalize(stream, self._stream_dropped, id_)
        slot = _stream_slot.get()
        # The model's request is sent by the next step of this stream: while a streamed response
        # is read, its steps run with this span current (detached when the step ends).
        if slot is not None and slot.model is None and slot.thread == threading.get_ident():
            slot.model = entry.span
            slot.model_token = otel_context.attach(trace.set_span_in_context(entry.span))

    def _stream_dropped(self, id_: str) -> None:
        entry = self._spans.pop(id_, None)
        if isinstance(entry, _Entry) and entry.recorder is not None and not entry.ended:
            entry.ended = True
            if provider_calls_under(entry.span):
                entry.span.set_attribute(semconv.STAGE, "other")
            entry.recorder.end("abandoned")

    def _defer_to_stream(self, entry: _Entry, result: Any) -> bool:
        """If ``result`` is a streamed response not read yet, ``entry`` ends when it ends."""
        if not isinstance(result, self._streamed_responses):
            return False
        source = result.response_gen
        if source is None or result.response_txt is not None:
            return False
        waiters = self._streams.get(source)
        if waiters is None:
            waiters = _Waiters()
            if inspect.isgenerator(source):
                wrapped: Any = self._stepped(source, waiters, entry.span)
            elif inspect.isasyncgen(source):
                wrapped = self._astepped(source, waiters, entry.span)
            else:
                return False
            weakref.finalize(wrapped, _end_waiters, waiters, None, "abandoned")
            result.response_gen = wrapped
            self._streams[wrapped] = waiters
        waiters.entries.append(entry)
        return True

    def _stepped(self, source: Iterator[Any], waiters: _Waiters, parent: Span) -> Iterator[Any]:
        slot = _StreamSlot(parent)
        how, error = "closed", None
        try:
            while True:
                entered = _enter_step(slot)
                try:
                    token = next(source)
                except StopIteration:
                    how = "completed"
                    return
                except BaseException as exc:
                    how, error = "error", exc
                    raise
                finally:
                    _leave_step(slot, entered)
                yield token
        finally:
            if how == "closed":
                source.close()  # type: ignore[attr-defined]
            _end_waiters(waiters, error, how)

    async def _astepped(
        self, source: AsyncIterator[Any], waiters: _Waiters, parent: Span
    ) -> AsyncIterator[Any]:
        slot = _StreamSlot(parent)
        how, error = "closed", None
        try:
            while True:
                entered = _enter_step(slot)
                try:
                    token = await source.__anext__()
                except StopAsyncIteration:
                    how = "completed"
                    return
                except BaseException as exc:
                    how, error = "error", exc
                    raise
                finally:
                    _leave_step(slot, entered)
                yield token
        finally:
            if how == "closed":
                await source.aclose()  # type: ignore[attr-defined]
            _end_waiters(waiters, error, how)

    # --- events ------------------------------------------------------------------------------

    def handle_event(self, event: Any) -> None:
        span_id = getattr(event, "span_id", None)
        if not isinstance(span_id, str):
            return
        entry = self._spans.get(span_id)
        if not isinstance(entry, _Entry) or entry.kind != MODEL or not entry.streaming:
            return
        name = type(event).__name__
        recorder = entry.recorder
        assert recorder is not None
        if name in ("LLMChatInProgressEvent", "LLMCompletionInProgressEvent"):
            recorder.on_chunk(event.response)
        elif name in ("LLMChatEndEvent", "LLMCompletionEndEvent"):
            self._spans.pop(span_id, None)
            self._end_model(entry, None, None)
        elif name == "ExceptionEvent":
            self._spans.pop(span_id, None)
            self._end_model(entry, None, event.exception)

    def end_all(self) -> None:
        """End every span still in flight (``uninstrument()``): none is left open."""
        for id_ in list(self._spans):
            entry = self._spans.pop(id_, None)
            if isinstance(entry, _Entry):
                if entry.kind == MODEL:
                    self._end_model(entry, None, None)
                else:
                    _end(entry, None)
        for waiters in list(self._streams.values()):
            _end_waiters(waiters, None, "closed")


def _end(entry: _Entry, error: BaseException | None, ended: bool = True) -> None:
    """End a kept span once: OK, or failed with ``error``."""
    if ended:
        if entry.ended:
            return
        entry.ended = True
    span = entry.span
    try:
        if error is not None:
            record_error(span, error)
        else:
            span.set_status(STATUS_OK)
    except Exception:
        log_once(logger, "LlamaIndex span status failed")
    finally:
        span.end()


def _end_waiters(waiters: _Waiters, error: BaseException | None, how: str) -> None:
    if waiters.done:
        return
    waiters.done = True
    for entry in waiters.entries:
        if how in ("completed", "error"):
            _end(entry, error)
        elif not entry.ended:
            entry.ended = True
            entry.span.set_attribute(semconv.STREAM_END, how)
            entry.span.end()


def _record_result(entry: _Entry, result: Any) -> None:
    """What a kept span's result says: documents returned, embedding dimensions."""
    kind, span = entry.kind, entry.span
    if kind in (RETRIEVAL, RERANK) and isinstance(result, list):
        span.set_attribute(semconv.RETRIEVAL_RETURNED, len(result))
    elif kind == EMBEDDING and isinstance(result, list) and result:
        vector = result[0] if isinstance(result[0], list) else result
        span.set_attribute(semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT, len(vector))


def _make_handlers(tracer: LlamaIndexTracer) -> tuple[Any, Any]:
    """The span and event handler the root dispatcher calls (LlamaIndex's pydantic classes)."""
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.span_handlers import BaseSpanHandler

    class SpanHandler(BaseSpanHandler[Any]):
        """Every notice goes to the tracer; LlamaIndex's own open-span bookkeeping is unused."""

        def span_enter(
            self,
            id_: str,
            bound_args: Any,
            instance: Any = None,
            parent_id: str | None = None,
            tags: Any = None,
            **kwargs: Any,
        ) -> None:
            try:
                tracer.span_enter(id_, bound_args, instance, parent_id)
            except Exception:
                log_once(logger, "LlamaIndex span start failed")

        def span_exit(
            self, id_: str, bound_args: Any, instance: Any = None, result: Any = None, **kwargs: Any
        ) -> None:
            try:
                tracer.span_exit(id_, result)
            except Exception:
                log_once(logger, "LlamaIndex span end failed")

        def span_drop(
            self,
            id_: str,
            bound_args: Any,
            instance: Any = None,
            err: BaseException | None = None,
            **kwargs: Any,
        ) -> None:
            try:
                tracer.span_drop(id_, err)
            except Exception:
                log_once(logger, "LlamaIndex span end failed")

        def new_span(self, *args: Any, **kwargs: Any) -> None:
            return None

        def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> None:
            return None

        def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> None:
            return None

    class EventHandler(BaseEventHandler):
        def handle(self, event: Any, **kwargs: Any) -> None:
            try:
                tracer.handle_event(event)
            except Exception:
                log_once(logger, "LlamaIndex event recording failed")

    return SpanHandler(), EventHandler()


def _async_rerank_wrapper(tracer: LlamaIndexTracer) -> Any:
    """``BaseNodePostprocessor.apostprocess_nodes``: when the class has its own
    ``_apostprocess_nodes`` (not a dispatcher span in LlamaIndex 0.14), the call is given a span id
    in LlamaIndex's own context variable, so the model calls inside it are its children."""
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index_instrumentation.span import active_span_id

    default = BaseNodePostprocessor._apostprocess_nodes

    async def apostprocess_nodes(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        if getattr(type(instance), "_apostprocess_nodes", default) is default:
            # LlamaIndex's default runs ``_postprocess_nodes`` in a thread: a dispatcher span.
            return await wrapped(*args, **kwargs)
        id_ = f"{type(instance).__name__}._apostprocess_nodes-{uuid.uuid4()}"
        token = active_span_id.set(id_)
        try:
            try:
                parent_id = token.old_value if isinstance(token.old_value, str) else None
                bound = inspect.signature(wrapped).bind(*args, **kwargs)
                tracer.span_enter(id_, bound, instance, parent_id)
            except Exception:
                log_once(logger, "LlamaIndex rerank span start failed")
            try:
                result = await wrapped(*args, **kwargs)
            except BaseException as exc:
                _safely(tracer.span_drop, id_, exc)
                raise
            _safely(tracer.span_exit, id_, result)
            return result
        finally:
            active_span_id.reset(token)

    return apostprocess_nodes


def _safely(end: Any, id_: str, value: Any) -> None:
    try:
        end(id_, value)
    except Exception:
        log_once(logger, "LlamaIndex rerank span end failed")


class LlamaIndexInstrumentor(LibraryInstrumentor):
    """Traces LlamaIndex through its root instrumentation dispatcher (``llama-index-core``)."""

    package = "llama-index-core"
    supported = ">=0.14,<0.15"

    tracer: LlamaIndexTracer | None = None
    _handlers: tuple[Any, Any] | None = None

    def patches(self) -> Iterable[PatchRow]:
        # Everything else comes from the dispatcher's notices. A node postprocessor's own async
        # implementation (LLMRerank, RankGPT, ...) is the one rerank call LlamaIndex sends none
        # for: it is given a span id of its own, as the dispatcher gives its spans.
        tracer = self.tracer
        assert tracer is not None
        yield (
            "llama_index.core.postprocessor.types",
            "BaseNodePostprocessor.apostprocess_nodes",
            _async_rerank_wrapper(tracer),
        )

    def _instrument(self, **kwargs: Any) -> None:
        from llama_index_instrumentation import get_dispatcher

        # A fresh tracer per instrument(): the class is a singleton the registry may construct
        # again, so the tracer is not made in __init__.
        tracer = self.tracer = LlamaIndexTracer()
        span_handler, event_handler = self._handlers = _make_handlers(tracer)
        dispatcher = get_dispatcher()
        dispatcher.add_span_handler(span_handler)
        dispatcher.add_event_handler(event_handler)
        super()._instrument(**kwargs)

    def _uninstrument(self, **kwargs: Any) -> None:
        from llama_index_instrumentation import get_dispatcher

        super()._uninstrument(**kwargs)
        if self._handlers is not None:
            dispatcher = get_dispatcher()
            span_handler, event_handler = self._handlers
            # New lists, as add_*_handler makes them: a notice being sent keeps its own list.
            dispatcher.span_handlers = [
                h for h in dispatcher.span_handlers if h is not span_handler
            ]
            dispatcher.event_handlers = [
                h for h in dispatcher.event_handlers if h is not event_handler
            ]
            self._handlers = None
        if self.tracer is not None:
            self.tracer.end_all()
            self.tracer = None
