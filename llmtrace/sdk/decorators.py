"""Decorators and context managers that put a function or a block in a stage-tagged span.

``@workflow @llm @retrieval @embedding @rerank @tool @stage(name)`` and ``span(name, ...)``. Each
decorator works with or without parentheses, on functions, coroutines, generators and async
generators, methods, staticmethods and classmethods, and keeps the wrapped function's signature.

Generators get their span attached to the context only while they run a step (rule 3 of
docs/architecture.md): between ``yield``s the caller's context is untouched, so nothing leaks into
the caller and nothing is detached in a context it was not attached in. ``@llm`` generators are
timed by the shared stream lifecycle (``llmtrace.sdk.streaming``): the first non-empty item is
the first token.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import time
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar, cast, overload

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from llmtrace import semconv
from llmtrace.errors import ConfigError
from llmtrace.sdk._async_with import AsyncWithToo
from llmtrace.sdk._safety import log_once
from llmtrace.sdk.gate import should_trace
from llmtrace.sdk.span_errors import record_error
from llmtrace.sdk.streaming import NullParser, StreamRecorder

logger = logging.getLogger(__name__)
_tracer = trace.get_tracer(semconv.SCOPE_NAME)

OptionsP = ParamSpec("OptionsP")

# What a decorator takes and gives back: the wrapper has the decorated function's parameters and
# return type, and a staticmethod or classmethod stays one, so the exact type is kept (as
# pydantic's ``validate_call`` does): a user's type checker sees the original signature.
Decorated = TypeVar(
    "Decorated",
    # A string: staticmethod and classmethod are not subscriptable at run time before 3.12.
    bound="Callable[..., Any] | staticmethod[..., Any] | classmethod[Any, ..., Any]",
)

# Model calls in flight, by span id: mark_first_token() and record_usage() find their timer here.
_llm_calls: dict[int, _LLMCall] = {}


class _LLMCall(NullParser):
    """Timing of one ``@llm`` call: a stream recorder whose output-token count comes from
    ``record_usage()`` (a decorated function knows its usage; the recorder does not)."""

    __slots__ = ("recorder", "stream_given", "tokens_out")

    def __init__(self, span: Span, started_at: float, streaming: bool, stream_given: bool) -> None:
        self.tokens_out: int | None = None
        self.recorder = StreamRecorder(span, started_at, self, streaming=streaming)
        # Whether the application said itself if the call streamed (gen_ai.request.stream).
        self.stream_given = stream_given

    def output_tokens(self) -> int | None:
        return self.tokens_out

    def finish_into(self, plain: dict[str, Any], attributes: dict[str, Any]) -> None:
        """``gen_ai.request.stream``, unless the application set it: a generator streams, and so
        does a function that marked its first token (it consumed a stream itself)."""
        if not self.stream_given:
            recorder = self.recorder
            plain[semconv.GEN_AI_REQUEST_STREAM] = (
                recorder.streaming or recorder.first_token_at is not None
            )


class _SpanSpec:
    """What to create: a span name (or None: the function's name), kind and start attributes."""

    __slots__ = ("attributes", "is_llm", "kind", "name", "returned_count")

    def __init__(
        self,
        name: str | None,
        attributes: Mapping[str, Any],
        kind: SpanKind = SpanKind.INTERNAL,
        is_llm: bool = False,
        returned_count: bool = False,
    ) -> None:
        self.name = name
        self.attributes = {k: v for k, v in attributes.items() if v is not None}
        self.kind = kind
        self.is_llm = is_llm
        self.returned_count = returned_count


def _start(spec: _SpanSpec, name: str) -> Span:
    return _tracer.start_span(name, kind=spec.kind, attributes=spec.attributes)


def _on_result(spec: _SpanSpec, span: Span, result: Any) -> None:
    if spec.returned_count and span.is_recording():
        with contextlib.suppress(TypeError):  # not a sized result: nothing to count
            span.set_attribute(semconv.RETRIEVAL_RETURNED, len(result))


def _end_ok(span: Span, call: _LLMCall | None) -> None:
    if call is not None:
        _llm_calls.pop(span.get_span_context().span_id, None)
        call.recorder.end("completed")
    else:
        span.end()


def _end_error(span: Span, call: _LLMCall | None, exc: BaseException) -> None:
    if call is not None:
        _llm_calls.pop(span.get_span_context().span_id, None)
        call.recorder.end_from_exception(exc)
        return
    try:
        record_error(span, exc)
    finally:
        span.end()


def _begin(
    spec: _SpanSpec, name: str, started_at: float, streaming: bool
) -> tuple[Span, _LLMCall | None]:
    span = _start(spec, name)
    call = None
    if spec.is_llm and span.is_recording():
        call = _LLMCall(
            span, started_at, streaming, semconv.GEN_AI_REQUEST_STREAM in spec.attributes
        )
        _llm_calls[span.get_span_context().span_id] = call
    return span, call


def _wrap_function(func: Callable[..., Any], spec: _SpanSpec) -> Callable[..., Any]:
    name = spec.name or func.__qualname__

    @functools.wraps(func)
    def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
        if not should_trace():
            return func(*args, **kwargs)
        try:
            span, call = _begin(spec, name, time.monotonic(), False)
            token = otel_context.attach(trace.set_span_in_context(span))
        except Exception:
            log_once(logger, f"span start failed for {name}")
            return func(*args, **kwargs)
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            otel_context.detach(token)
            _guarded_end_error(span, call, exc)
            raise
        otel_context.detach(token)
        _guarded_end_ok(spec, span, call, result)
        return result

    return sync_wrapper


def _wrap_coroutine(func: Callable[..., Any], spec: _SpanSpec) -> Callable[..., Any]:
    name = spec.name or func.__qualname__

    @functools.wraps(func)
    async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
        if not should_trace():
            return await func(*args, **kwargs)
        try:
            span, call = _begin(spec, name, time.monotonic(), False)
            token = otel_context.attach(trace.set_span_in_context(span))
        except Exception:
            log_once(logger, f"span start failed for {name}")
            return await func(*args, **kwargs)
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            otel_context.detach(token)
            _guarded_end_error(span, call, exc)
            raise
        otel_context.detach(token)
        _guarded_end_ok(spec, span, call, result)
        return result

    return async_wrapper


def _guarded_end_ok(spec: _SpanSpec, span: Span, call: _LLMCall | None, result: Any) -> None:
    try:
        _on_result(spec, span, result)
    except Exception:
        log_once(logger, "attribute extraction failed")
    try:
        _end_ok(span, call)
    except Exception:
        log_once(logger, "span end failed")
        _end_anyway(span)


def _guarded_end_error(span: Span, call: _LLMCall | None, exc: BaseException) -> None:
    try:
        _end_error(span, call, exc)
    except Exception:
        log_once(logger, "span end failed")
        _end_anyway(span)


def _end_anyway(span: Span) -> None:
    """Rule 2 (every span ends) holds even when llmtrace's own end path failed."""
    with contextlib.suppress(Exception):
        if span.is_recording():
            span.end()


def _wrap_generator(func: Callable[..., Any], spec: _SpanSpec) -> Callable[..., Any]:
    name = spec.name or func.__qualname__

    @functools.wraps(func)
    def gen_wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        if not should_trace():
            return (yield from func(*args, **kwargs))
        try:
            span, call = _begin(spec, name, time.monotonic(), True)
            span_context = trace.set_span_in_context(span)
        except Exception:
            log_once(logger, f"span start failed for {name}")
            return (yield from func(*args, **kwargs))
        recorder = call.recorder if call is not None else None
        generator = func(*args, **kwargs)
        to_send: Any = None
        to_throw: BaseException | None = None
        while True:
            token = otel_context.attach(span_context)
            try:
                if to_throw is not None:
                    exc, to_throw = to_throw, None
                    item = generator.throw(exc)
                else:
                    item = generator.send(to_send)
            except StopIteration as stop:
                otel_context.detach(token)
                _guarded_end_ok(spec, span, call, stop.value)
                return stop.value
            except BaseException as exc:
                otel_context.detach(token)
                _guarded_end_error(span, call, exc)
                raise
            otel_context.detach(token)
            if recorder is not None:
                recorder.on_chunk(item)
            try:
                to_send = yield item
            except GeneratorExit:
                # The caller closed the generator (break, close(), or garbage collection).
                token = otel_context.attach(span_context)
                try:
                    generator.close()
                finally:
                    otel_context.detach(token)
                    _guarded_end_closed(span, call)
                raise
            except BaseException as exc:
                to_throw = exc

    return gen_wrapper


def _guarded_end_closed(span: Span, call: _LLMCall | None) -> None:
    try:
        if call is not None:
            _llm_calls.pop(span.get_span_context().span_id, None)
            call.recorder.end("closed")
        else:
            span.set_attribute(semconv.STREAM_END, "closed")
            span.end()
    except Exception:
        log_once(logger, "span end failed")
        _end_anyway(span)


def _wrap_async_generator(func: Callable[..., Any], spec: _SpanSpec) -> Callable[..., Any]:
    name = spec.name or func.__qualname__

    @functools.wraps(func)
    async def agen_wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        if not should_trace():
            async for item in func(*args, **kwargs):
                yield item
            return
        try:
            span, call = _begin(spec, name, time.monotonic(), True)
            span_context = trace.set_span_in_context(span)
        except Exception:
            log_once(logger, f"span start failed for {name}")
            async for item in func(*args, **kwargs):
                yield item
            return
        recorder = call.recorder if call is not None else None
        generator = func(*args, **kwargs)
        to_send: Any = None
        to_throw: BaseException | None = None
        while True:
            token = otel_context.attach(span_context)
            try:
                if to_throw is not None:
                    exc, to_throw = to_throw, None
                    item = await generator.athrow(exc)
                else:
                    item = await generator.asend(to_send)
            except StopAsyncIteration:
                otel_context.detach(token)
                _guarded_end_ok(spec, span, call, None)
                return
            except BaseException as exc:
                otel_context.detach(token)
                _guarded_end_error(span, call, exc)
                raise
            otel_context.detach(token)
            if recorder is not None:
                recorder.on_chunk(item)
            try:
                to_send = yield item
            except GeneratorExit:
                token = otel_context.attach(span_context)
                try:
                    await generator.aclose()
                finally:
                    otel_context.detach(token)
                    _guarded_end_closed(span, call)
                raise
            except BaseException as exc:
                to_throw = exc

    return agen_wrapper


def _wrap(func: Any, spec: _SpanSpec) -> Any:
    if isinstance(func, staticmethod):
        return staticmethod(_wrap(func.__func__, spec))
    if isinstance(func, classmethod):
        return classmethod(_wrap(func.__func__, spec))
    if not callable(func):
        raise TypeError(f"llmtrace decorators wrap functions, not {type(func).__name__}")
    if inspect.isasyncgenfunction(func):
        return _wrap_async_generator(func, spec)
    if inspect.isgeneratorfunction(func):
        return _wrap_generator(func, spec)
    if inspect.iscoroutinefunction(func):
        return _wrap_coroutine(func, spec)
    return _wrap_function(func, spec)


class _Scope:
    """One entered span: ``with`` / ``async with`` and the decorator form share this."""

    __slots__ = ("_call", "_span", "_token")

    def __init__(self, spec: _SpanSpec, name: str) -> None:
        self._span: Span = trace.INVALID_SPAN
        self._call: _LLMCall | None = None
        self._token: object | None = None
        if not should_trace():
            return
        try:
            self._span, self._call = _begin(spec, name, time.monotonic(), False)
            self._token = otel_context.attach(trace.set_span_in_context(self._span))
        except Exception:
            log_once(logger, f"span start failed for {name}")

    def close(self, exc: BaseException | None) -> None:
        if self._token is None:
            return
        otel_context.detach(self._token)  # type: ignore[arg-type]
        self._token = None
        if exc is None:
            _guarded_end_ok(_NO_RESULT, self._span, self._call, None)
        else:
            _guarded_end_error(self._span, self._call, exc)


_NO_RESULT = _SpanSpec(None, {})


# The blocks entered and not yet exited in this context, innermost last, with the decorator that
# entered each. One variable for the process: a variable per decorator (``with llmtrace.span()``
# makes one per request) would leave an entry per call in a long-lived thread's context.
_open_scopes: ContextVar[tuple[tuple[SpanDecorator, _Scope], ...]] = ContextVar(
    "llmtrace_open_scopes", default=()
)


class SpanDecorator(AsyncWithToo[Span]):
    """A span to create around a function (decorator) or a block (``with`` / ``async with``)."""

    def __init__(self, spec: _SpanSpec, default_name: str | None = None) -> None:
        self._spec = spec
        self._default_name = default_name

    def __call__(self, func: Decorated) -> Decorated:
        return cast(Decorated, _wrap(func, self._spec))

    def __enter__(self) -> Span:
        name = self._spec.name or self._default_name or "span"
        scope = _Scope(self._spec, name)
        _open_scopes.set((*_open_scopes.get(), (self, scope)))
        return scope._span

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        scopes = _open_scopes.get()
        # The innermost block this decorator entered (blocks of one decorator may nest).
        for index in range(len(scopes) - 1, -1, -1):
            if scopes[index][0] is self:
                _open_scopes.set(scopes[:index] + scopes[index + 1 :])
                scopes[index][1].close(exc)
                return


def _check_stage(stage: str) -> str:
    if stage not in semconv.SPAN_STAGES:
        raise ConfigError(
            f"stage {stage!r} is not in the vocabulary; accepted: {', '.join(semconv.SPAN_STAGES)}"
        )
    return stage


# The GenAI operation a span of these stages is, unless its attributes name one: what trace
# backends key GenAI spans on. (A model call's operation may be another: chat is the default of
# ``@llm`` too.)
_STAGE_OPERATIONS: Mapping[str, str] = {
    semconv.LLM_STAGE: semconv.OP_CHAT,
    semconv.EARLIER_LLM_STAGE: semconv.OP_CHAT,
    "embedding": semconv.OP_EMBEDDINGS,
    "retrieval": semconv.OP_RETRIEVAL,
    "tool": semconv.OP_EXECUTE_TOOL,
}


def _stage_attributes(stage: str | None, attributes: dict[str, Any]) -> dict[str, Any]:
    """A span's start attributes: its stage, its GenAI operation (see ``_STAGE_OPERATIONS``),
    then those given."""
    operation = _STAGE_OPERATIONS.get(stage) if stage is not None else None
    if operation is None:
        return {semconv.STAGE: stage, **attributes}
    return {semconv.STAGE: stage, semconv.GEN_AI_OPERATION_NAME: operation, **attributes}


@dataclass(frozen=True)
class _Kind:
    """One kind of stage decorator: its stage, how its span is named, which options become which
    attributes. ``@workflow``, ``@llm``, ... are the rows of a table of these."""

    stage: str
    default_name: str
    # The option whose value completes the span name ("retrieval {data_source}"), if any.
    named_by: str | None
    # Option -> attribute; any other keyword is an attribute as given.
    options: Mapping[str, str] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    kind: SpanKind = SpanKind.INTERNAL
    is_llm: bool = False
    returned_count: bool = False

    def decorator(self, options: dict[str, Any], func: Any = None) -> SpanDecorator:
        name = options.pop("name", None)
        attributes = {self.options.get(key, key): value for key, value in options.items()}
        if name is None:
            if self.is_llm:
                operation = options.get("operation", semconv.OP_CHAT)
                model = options.get("model")
                name = f"{operation} {model}" if model else operation
            elif self.named_by is not None:
                named = options.get(self.named_by)
                if named is None and self.named_by == "name" and func is not None:
                    named = getattr(func, "__name__", None) or getattr(
                        getattr(func, "__func__", None), "__name__", None
                    )
                    attributes[semconv.GEN_AI_TOOL_NAME] = named
                if named:
                    name = f"{self.default_name} {named}"
                elif self.named_by != "name":
                    name = self.default_name  # "retrieval", "embeddings", "rerank"
        elif self.named_by == "name":  # a tool named explicitly
            attributes[semconv.GEN_AI_TOOL_NAME] = name
            name = f"{self.default_name} {name}"
        spec = _SpanSpec(
            name,
            {semconv.STAGE: self.stage, **self.fixed, **attributes},
            kind=self.kind,
            is_llm=self.is_llm,
            returned_count=self.returned_count,
        )
        return SpanDecorator(spec, default_name=self.default_name)

    def apply(self, func: Any, options: dict[str, Any]) -> Any:
        """``@dec`` and ``@dec(...)`` both work: with a function, wrap it; without, return the
        decorator."""
        if func is None:
            return self.decorator(options)
        return self.decorator(options, func)(func)


_WORKFLOW = _Kind("other", "workflow", None)
_LLM = _Kind(
    semconv.LLM_STAGE,
    semconv.OP_CHAT,
    None,
    options={
        "operation": semconv.GEN_AI_OPERATION_NAME,
        "provider": semconv.GEN_AI_PROVIDER_NAME,
        "model": semconv.GEN_AI_REQUEST_MODEL,
    },
    fixed={semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT},
    kind=SpanKind.CLIENT,
    is_llm=True,
)
_RETRIEVAL = _Kind(
    "retrieval",
    "retrieval",
    "data_source",
    options={
        "data_source": semconv.GEN_AI_DATA_SOURCE_ID,
        "top_k": semconv.GEN_AI_RETRIEVAL_TOP_K,
    },
    fixed={semconv.GEN_AI_OPERATION_NAME: semconv.OP_RETRIEVAL},
    returned_count=True,
)
_EMBEDDING = _Kind(
    "embedding",
    "embeddings",
    "model",
    options={"model": semconv.GEN_AI_REQUEST_MODEL},
    fixed={semconv.GEN_AI_OPERATION_NAME: semconv.OP_EMBEDDINGS},
)
_RERANK = _Kind(
    "rerank",
    "rerank",
    "model",
    options={"model": semconv.GEN_AI_REQUEST_MODEL, "top_n": semconv.RERANK_TOP_N},
)
_TOOL = _Kind(
    "tool",
    "execute_tool",
    "name",
    fixed={semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL},
)


class StageDecorator(Generic[OptionsP]):
    """``@llmtrace.workflow``, ``llm``, ``retrieval``, ``embedding``, ``rerank``, ``tool``.

    Bare (``@llmtrace.tool``) the decorated function keeps its own type, for the user's type
    checker too; with options (``@llmtrace.tool(name="search")``) it gives a
    :class:`SpanDecorator`, also usable as ``with``. The options each one takes are the keyword
    parameters of its ``options`` signature.
    """

    def __init__(self, kind: _Kind, options: Callable[OptionsP, None]) -> None:
        self._kind = kind
        self.__doc__ = options.__doc__
        self.__name__ = self.__qualname__ = options.__name__.strip("_").removesuffix("_options")

    def __repr__(self) -> str:
        return f"<llmtrace.{self.__name__} decorator>"

    @overload
    def __call__(self, func: Decorated, /) -> Decorated: ...
    @overload
    def __call__(
        self, func: None = None, /, *args: OptionsP.args, **kwargs: OptionsP.kwargs
    ) -> SpanDecorator: ...
    def __call__(self, func: Any = None, /, *args: Any, **kwargs: Any) -> Any:
        if args:
            raise TypeError(f"llmtrace.{self.__name__}() takes options by keyword only")
        return self._kind.apply(func, kwargs)


# The options of each decorator, as typed signatures (never called).


def _workflow_options(*, name: str | None = None, **attributes: Any) -> None:
    """The request or job as a whole: usually the root span of a trace (stage ``other``)."""


def _llm_options(
    *,
    model: str | None = None,
    provider: str | None = None,
    operation: str = semconv.OP_CHAT,
    name: str | None = None,
    **attributes: Any,
) -> None:
    """A model call: CLIENT span ``{operation} {model}``, split by the report at its first token."""


def _retrieval_options(
    *,
    data_source: str | None = None,
    top_k: int | None = None,
    name: str | None = None,
    **attributes: Any,
) -> None:
    """A vector or keyword search. A returned sequence's length is recorded as the returned count."""


def _embedding_options(
    *, model: str | None = None, name: str | None = None, **attributes: Any
) -> None:
    """Computing embeddings: span ``embeddings {model}``."""


def _rerank_options(
    *,
    model: str | None = None,
    top_n: int | None = None,
    name: str | None = None,
    **attributes: Any,
) -> None:
    """Reranking retrieved candidates: span ``rerank {model}``."""


def _tool_options(*, name: str | None = None, **attributes: Any) -> None:
    """A tool or function execution: span ``execute_tool {name}`` (default: the function's name)."""


workflow = StageDecorator(_WORKFLOW, _workflow_options)
llm = StageDecorator(_LLM, _llm_options)
retrieval = StageDecorator(_RETRIEVAL, _retrieval_options)
embedding = StageDecorator(_EMBEDDING, _embedding_options)
rerank = StageDecorator(_RERANK, _rerank_options)
tool = StageDecorator(_TOOL, _tool_options)


def stage(stage_name: str, *, name: str | None = None, **attributes: Any) -> SpanDecorator:
    """Any stage of the vocabulary, as a decorator or as a (async) context manager."""
    _check_stage(stage_name)
    return SpanDecorator(
        _SpanSpec(
            name,
            _stage_attributes(stage_name, attributes),
            is_llm=stage_name in semconv.MODEL_CALL_STAGES,
        ),
        default_name=stage_name,
    )


def span(
    name: str, *, stage: str | None = None, kind: SpanKind = SpanKind.INTERNAL, **attributes: Any
) -> SpanDecorator:
    """A span around a block: ``with llmtrace.span("load index", stage="load"):``.

    Without ``stage`` the span inherits its parent's stage in the report.
    """
    if stage is not None:
        _check_stage(stage)
    is_llm = stage in semconv.MODEL_CALL_STAGES
    return SpanDecorator(
        _SpanSpec(name, _stage_attributes(stage, attributes), kind=kind, is_llm=is_llm)
    )


# --- helpers acting on the current span ------------------------------------------------------


def set_attributes(attributes: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
    """Set attributes on the current span (``None`` values are skipped)."""
    current = trace.get_current_span()
    if not current.is_recording():
        return
    merged = {**(attributes or {}), **kwargs}
    current.set_attributes({k: v for k, v in merged.items() if v is not None})


def record_usage(
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    *,
    cache_read_input_tokens: int | None = None,
    cache_creation_input_tokens: int | None = None,
    reasoning_output_tokens: int | None = None,
    estimated: bool = False,
) -> None:
    """Token counts of the current model call. Counts the provider did not report are estimates:
    pass ``estimated=True`` and they go to ``llmtrace.usage.*_estimated``, never ``gen_ai.usage.*``."""
    current = trace.get_current_span()
    if not current.is_recording():
        return
    if estimated:
        set_attributes(
            {
                semconv.USAGE_INPUT_TOKENS_ESTIMATED: input_tokens,
                semconv.USAGE_OUTPUT_TOKENS_ESTIMATED: output_tokens,
            }
        )
    else:
        set_attributes(
            {
                semconv.GEN_AI_USAGE_INPUT_TOKENS: input_tokens,
                semconv.GEN_AI_USAGE_OUTPUT_TOKENS: output_tokens,
                semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: cache_read_input_tokens,
                semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: cache_creation_input_tokens,
                semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: reasoning_output_tokens,
            }
        )
    call = _llm_calls.get(current.get_span_context().span_id)
    if call is not None and output_tokens is not None:
        call.tokens_out = output_tokens


def mark_first_token() -> None:
    """The current model call produced its first output token now (for non-generator ``@llm``
    functions that consume a stream themselves). Later calls keep the first time."""
    current = trace.get_current_span()
    call = _llm_calls.get(current.get_span_context().span_id)
    if call is None:
        return
    recorder = call.recorder
    if recorder.first_token_at is None:
        now = time.monotonic()
        recorder.first_token_at = now
        if recorder.first_chunk_at is None:
            recorder.first_chunk_at = now
