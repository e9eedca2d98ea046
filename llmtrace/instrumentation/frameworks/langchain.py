"""LangChain and LangGraph (``langchain-core`` 1.x): every run a span, in the stage it belongs to.

How the callbacks are installed: ``langchain_core.callbacks.manager._configure`` builds the
callback manager of every run (``CallbackManager.configure`` and ``AsyncCallbackManager.configure``
both call it, and a child run's manager is built from its parent's). Wrapping that one function
adds llmtrace's handler to every manager, so existing code is traced with no change. It is chosen
over ``register_configure_hook``: a hook registered there cannot be removed (``uninstrument()``
must restore the original), and its context variable would have to be set in every thread.

What becomes which span (each parented by ``parent_run_id`` through a map of the runs in flight,
never by the ambient context alone; an entry leaves the map when its run ends or fails). One
correction: a run started from inside the step of a run *below* the parent LangChain names is
put under that deeper run. LangGraph's node functions (``create_react_agent``'s ``call_model``,
any node taking ``config``) hand on the config they were called with, which names the node, not
the function's own run, as the parent: followed as given, the model's span would be a sibling of
the function's span that called it (``LLMTraceCallbackHandler._calling_run``).

- a chain or graph run: stage ``other``, named after the run (a top-level run with no current
  span is the trace's root); a LangGraph node is named after the node; a run whose name says
  it is an agent is ``invoke_agent {name}`` (``gen_ai.operation.name=invoke_agent``);
- a prompt template: ``prompt``; an output parser: ``postprocess``;
- a retriever: ``retrieval {data source}`` (``retrieval``), with ``llmtrace.retrieval.returned``;
- a tool: ``execute_tool {name}`` (``tool``);
- a chat model or LLM: ``chat {model}`` (CLIENT, stage ``ttft``), timed by the shared
  :class:`~llmtrace.sdk.streaming.StreamRecorder` from the first ``on_llm_new_token`` with content;
  usage from the messages' ``usage_metadata`` or ``llm_output`` (reported counts only).

One model span per call (rule 8 of docs/architecture.md): the LangChain model span stays the
parent. While the model sends its request, its span is the current span
(``BaseChatModel._generate_with_cache`` is wrapped for that, and each step of
``BaseChatModel.stream()`` / ``astream()``), so a provider instrumentation (OpenAI, Anthropic)
records its own model span beneath it and notes that it did
(:func:`~llmtrace.sdk.gate.note_provider_call`). At its end the LangChain span then becomes
stage ``other`` without TTFT or usage: the span closest to the wire owns them. Without a
provider span beneath, the LangChain span keeps them.

Context: the callbacks attach nothing across calls (rule 3). The span of a run is made current
only inside LangChain's own per-step context copies (``runnables.config._set_config_context``,
the same place LangChain puts its LangSmith parent run), so the spans of code inside a tool or a
chain step nest under it; around a chat model's request, as above; and around a vector store
retriever's search (``VectorStoreRetriever._get_relevant_documents``), which also gives
``gen_ai.retrieval.top_k`` from its ``search_kwargs``, and nests an instrumented vector store's
own span under the retrieval span.

Known limits: a legacy completion model (``BaseLLM``), or a chat model whose class overrides
``stream()`` itself, sends its request with no LangChain span current, so a provider span made
then is a sibling of the LangChain model span (both keep their timing; the breakdown still
counts the time once, along the critical path). LangChain has no embeddings callback: embedding calls made by a vector store are not spans
unless their provider is instrumented. ``gen_ai.retrieval.top_k`` is known for vector store
retrievers only.

Why one module of over 800 lines: it is one callback handler whose methods share one map of the
runs in flight and the parent correction above; split, every part would reach into the same
state, and the project keeps one module per instrumented library.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables.config import var_child_runnable_config
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from llmtrace import semconv
from llmtrace._checks import is_int
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
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

# Runs in flight are bounded: past this many, new runs are not traced (a run that never ends,
# such as an abandoned stream, must not grow the map without limit).
_MAX_RUNS = 10_000

# A run that is not traced (unsampled, suppressed): its children are not traced either, rather
# than becoming roots of traces of their own.
_SKIPPED = object()

_RUN_TYPE_STAGES = {"prompt": "prompt", "parser": "postprocess"}

# How many runs up from the run whose step is running the search for the claimed parent goes (a
# bound, not a depth met in practice: it only guards against a cycle of reused run ids).
_MAX_ANCESTRY = 256


class _UsageParser:
    """What a LangChain result says about one model call, written onto its span at the end."""

    def __init__(self) -> None:
        self.attributes: dict[str, Any] = {}

    def has_content(self, chunk: Any) -> bool:
        return bool(chunk)

    def observe(self, chunk: Any) -> None:
        return None

    def finish(self, span: Span) -> None:
        if self.attributes:
            span.set_attributes(self.attributes)

    def output_tokens(self) -> int | None:
        value = self.attributes.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS)
        return value if isinstance(value, int) else None


class _StreamSlot:
    """The model span of one ``BaseChatModel.stream()`` call, once its run has started."""

    __slots__ = ("span", "thread", "token")

    def __init__(self) -> None:
        self.span: Span | None = None
        self.token: Any = None
        self.thread = 0


# Set only during one step of a chat model's stream (never across a yield): the model run that
# starts in that step makes its span current until the step ends, so the provider's request,
# sent in the same step, is made beneath it.
_stream_slot: ContextVar[_StreamSlot | None] = ContextVar("llmtrace_langchain_stream", default=None)


def _enter_step(slot: _StreamSlot) -> tuple[bool, Any]:
    if slot.span is None:
        slot.thread = threading.get_ident()
        return True, _stream_slot.set(slot)
    return False, otel_context.attach(trace.set_span_in_context(slot.span))


def _leave_step(slot: _StreamSlot, entered: tuple[bool, Any]) -> None:
    waiting, token = entered
    if waiting:
        if slot.token is not None:
            otel_context.detach(slot.token)
            slot.token = None
        _stream_slot.reset(token)
    else:
        otel_context.detach(token)


def _stepped(iterator: Iterator[Any]) -> Iterator[Any]:
    """``iterator``, each step run with the stream's model span current (see :data:`_stream_slot`)."""
    slot = _StreamSlot()
    try:
        while True:
            entered = _enter_step(slot)
            try:
                chunk = next(iterator)
            except StopIteration:
                return
            finally:
                _leave_step(slot, entered)
            yield chunk
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


async def _astepped(iterator: AsyncIterator[Any]) -> AsyncIterator[Any]:
    slot = _StreamSlot()
    try:
        while True:
            entered = _enter_step(slot)
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                return
            finally:
                _leave_step(slot, entered)
            yield chunk
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


class _ModelRun:
    __slots__ = ("parent_run_id", "recorder", "span")

    def __init__(self, span: Span, recorder: StreamRecorder, parent_run_id: UUID | None) -> None:
        self.span = span
        self.recorder = recorder
        self.parent_run_id = parent_run_id


class _PostprocessRun:
    """An output parser's run, whose span is made when it ends (see ``_end_postprocess``)."""

    __slots__ = ("attributes", "name", "parent", "parent_run_id", "started_at")

    def __init__(
        self,
        name: str,
        attributes: dict[str, Any],
        parent: otel_context.Context | None,
        parent_run_id: UUID | None,
    ) -> None:
        self.name = name
        self.attributes = attributes
        self.parent = parent
        self.parent_run_id = parent_run_id
        self.started_at = time.time_ns()


def _whole_counts(token_count: Any) -> dict[str, Any] | None:
    """langchain-cohere's sync stream passes its counts only as response_metadata's
    ``token_count``, under usage_metadata's key names but as floats (Cohere's billed units)."""
    if not isinstance(token_count, Mapping):
        return None
    counts: dict[str, Any] = {}
    for key in ("input_tokens", "output_tokens"):
        value = token_count.get(key)
        if not isinstance(value, float) or not value.is_integer() or value < 0:
            return None
        counts[key] = int(value)
    return counts


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _result_attributes(response: Any) -> dict[str, Any]:
    """Usage, response model and id, finish reasons from an ``LLMResult`` (reported values only)."""
    attributes: dict[str, Any] = {}
    input_tokens = output_tokens = cache_read = reasoning = 0
    counted = False
    reasons: list[str] = []
    for generations in _field(response, "generations") or ():
        for generation in generations:
            info = _field(generation, "generation_info") or {}
            message = _field(generation, "message")
            metadata = _field(message, "response_metadata") or {}
            # OpenAI-style integrations say finish_reason; Anthropic's and Bedrock's pass the
            # provider's own stop_reason on
            reason = (
                info.get("finish_reason")
                or metadata.get("finish_reason")
                or metadata.get("stop_reason")
                or metadata.get("stopReason")
            )
            if isinstance(reason, str):
                reasons.append(reason)
            model = metadata.get("model_name") or metadata.get("model")
            if isinstance(model, str):
                attributes[semconv.GEN_AI_RESPONSE_MODEL] = model
            response_id = metadata.get("id") or _field(message, "id")
            # LangChain fills a message id with its own run id when the provider gives none
            if isinstance(response_id, str) and not response_id.startswith(("run-", "lc_run-")):
                attributes[semconv.GEN_AI_RESPONSE_ID] = response_id
            usage = _field(message, "usage_metadata") or _whole_counts(metadata.get("token_count"))
            if usage:
                if is_int(usage.get("input_tokens")) and is_int(usage.get("output_tokens")):
                    counted = True
                    input_tokens += usage["input_tokens"]
                    output_tokens += usage["output_tokens"]
                cache_read += (usage.get("input_token_details") or {}).get("cache_read") or 0
                reasoning += (usage.get("output_token_details") or {}).get("reasoning") or 0
    llm_output = _field(response, "llm_output") or {}
    if not counted:
        token_usage = llm_output.get("token_usage") or llm_output.get("usage") or {}
        prompt = token_usage.get("prompt_tokens", token_usage.get("input_tokens"))
        completion = token_usage.get("completion_tokens", token_usage.get("output_tokens"))
        if is_int(prompt):
            attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] = prompt
        if is_int(completion):
            attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = completion
    else:
        attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
        attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
        if cache_read:
            attributes[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = cache_read
        if reasoning:
            attributes[semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = reasoning
    # (Not ``llm_output["model_name"]``: some integrations put the requested model there.)
    if reasons:
        attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = reasons
    return attributes


def _model_request_attributes(
    operation: str, invocation: Mapping[str, Any], metadata: Mapping[str, Any]
) -> tuple[str, dict[str, Any]]:
    model = (
        invocation.get("model")
        or invocation.get("model_name")
        or metadata.get("ls_model_name")
        or "unknown"
    )
    attributes: dict[str, Any] = {
        semconv.STAGE: semconv.LLM_STAGE,
        semconv.GEN_AI_OPERATION_NAME: operation,
        semconv.GEN_AI_REQUEST_MODEL: str(model),
    }
    provider = metadata.get("ls_provider")
    if isinstance(provider, str):
        attributes[semconv.GEN_AI_PROVIDER_NAME] = provider
    for key, attribute in (
        ("temperature", semconv.GEN_AI_REQUEST_TEMPERATURE),
        ("max_tokens", semconv.GEN_AI_REQUEST_MAX_TOKENS),
        ("max_completion_tokens", semconv.GEN_AI_REQUEST_MAX_TOKENS),
        ("top_p", semconv.GEN_AI_REQUEST_TOP_P),
        ("seed", semconv.GEN_AI_REQUEST_SEED),
    ):
        value = invocation.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attributes[attribute] = value
    if isinstance(invocation.get("stream"), bool):
        attributes[semconv.GEN_AI_REQUEST_STREAM] = invocation["stream"]
    return f"{operation} {model}", attributes


class LLMTraceCallbackHandler(BaseCallbackHandler):
    """Turns LangChain's run callbacks into spans. Never raises into LangChain (rule 1)."""

    run_inline = True  # called where the run is, never from an executor: parents stay exact
    raise_error = False

    def __init__(self) -> None:
        super().__init__()
        self._runs: dict[UUID, Any] = {}
        # Run id -> the run its span was started under, for the runs in flight that have one.
        self._parents: dict[UUID, UUID] = {}
        # Parent run id -> when a model run under it last ended (unix ns); removed with the parent.
        self._model_ended: dict[UUID, int] = {}

    # --- the map of runs in flight -----------------------------------------------------------

    def span_of(self, run_id: Any) -> Span | None:
        entry = self._runs.get(run_id)
        if entry is None or entry is _SKIPPED:
            return None
        if isinstance(entry, _PostprocessRun):
            return None
        return entry.span if isinstance(entry, _ModelRun) else entry

    def _run_ids(self, kwargs: dict[str, Any]) -> tuple[UUID, UUID | None]:
        """The run's id and the run it was started from (see :meth:`_calling_run`)."""
        run_id, parent_run_id = _run_ids(kwargs)
        if parent_run_id is None:
            return run_id, None
        try:
            return run_id, self._calling_run(parent_run_id)
        except Exception:
            log_once(logger, "LangChain parent run lookup failed")
            return run_id, parent_run_id

    def _calling_run(self, claimed: UUID) -> UUID:
        """The run a new run is started from: the run LangChain names as its parent, unless the
        code that starts it runs inside the step of a run *under* that parent, which it then is.

        LangGraph's ``RunnableCallable`` (the node functions of ``create_react_agent``, and any
        node or task taking a ``config`` argument) starts a run of its own and hands the function
        the config it was itself given, not its run's child config: every run the function starts
        with that config (``model.invoke(messages, config)``) names the node as its parent, and
        would be a sibling of the function's run that called it. The step a run's code executes
        in is known for certain: LangChain and LangGraph both set the step's child config
        (``var_child_runnable_config``) in the context copy they run the step in. A deeper run in
        flight on the same line of descent is the more exact parent; a run that is not below the
        claimed parent (another branch, a finished run) changes nothing."""
        config = var_child_runnable_config.get()
        if not config:
            return claimed
        running = getattr(config.get("callbacks"), "parent_run_id", None)
        if running is None or running == claimed or running not in self._runs:
            return claimed
        ancestor = self._parents.get(running)
        for _ in range(_MAX_ANCESTRY):
            if ancestor is None:
                return claimed
            if ancestor == claimed:
                return running  # type: ignore[no-any-return]
            ancestor = self._parents.get(ancestor)
        return claimed

    def _parent_context(self, parent_run_id: UUID | None) -> otel_context.Context | object | None:
        """The context to start a run's span in; ``_SKIPPED`` when the run is not traced."""
        if parent_run_id is not None:
            parent = self._runs.get(parent_run_id)
            if parent is _SKIPPED:
                return _SKIPPED
            if isinstance(parent, _PostprocessRun):
                return parent.parent
            if parent is not None:
                span = parent.span if isinstance(parent, _ModelRun) else parent
                if not span.get_span_context().trace_flags.sampled:
                    return _SKIPPED
                return trace.set_span_in_context(span)
        if not should_trace():
            return _SKIPPED
        return None  # the current context

    def _start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        name: str,
        attributes: dict[str, Any],
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Span | None:
        if len(self._runs) >= _MAX_RUNS:
            log_once(logger, "too many LangChain runs in flight; new runs are not traced")
            return None
        parent = self._parent_context(parent_run_id)
        if parent is _SKIPPED:
            self._runs[run_id] = _SKIPPED
            return None
        span = get_tracer().start_span(
            name,
            context=parent,  # type: ignore[arg-type]
            kind=kind,
            attributes=attributes,
        )
        self._runs[run_id] = span
        if parent_run_id is not None:
            self._parents[run_id] = parent_run_id
        return span

    def _end(self, run_id: UUID, error: BaseException | None = None) -> Any:
        entry = self._runs.pop(run_id, None)
        self._parents.pop(run_id, None)
        if entry is None or entry is _SKIPPED:
            return None
        # A model run that ended under this run is of no more use for its parsers' spans.
        self._model_ended.pop(run_id, None)
        if isinstance(entry, _ModelRun):
            return entry
        if isinstance(entry, _PostprocessRun):
            self._end_postprocess(entry, error)
            return None
        try:
            if error is not None:
                record_error(entry, error)
            else:
                entry.set_status(STATUS_OK)
        finally:
            entry.end()
        return None

    # --- chains, graphs, prompts, parsers, agents ---------------------------------------------

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, **kwargs: Any) -> None:
        run_id, parent_run_id = self._run_ids(kwargs)
        metadata = kwargs.get("metadata")
        try:
            name = kwargs.get("name") or _serialized_name(serialized) or "chain"
            metadata = metadata or {}
            stage = _RUN_TYPE_STAGES.get(kwargs.get("run_type") or "", "other")
            attributes: dict[str, Any] = {semconv.STAGE: stage}
            node = metadata.get("langgraph_node")
            if isinstance(node, str) and node == name:
                attributes["langgraph.node"] = node
            elif stage == "other" and "agent" in str(name).lower():
                attributes[semconv.GEN_AI_OPERATION_NAME] = semconv.OP_INVOKE_AGENT
                attributes[semconv.GEN_AI_AGENT_NAME] = str(name)
                name = f"{semconv.OP_INVOKE_AGENT} {name}"
            if stage == "postprocess":
                self._start_postprocess(run_id, parent_run_id, str(name), attributes)
            else:
                self._start(run_id, parent_run_id, str(name), attributes)
        except Exception:
            log_once(logger, "LangChain chain span start failed")

    def _start_postprocess(
        self, run_id: UUID, parent_run_id: UUID | None, name: str, attributes: dict[str, Any]
    ) -> None:
        if len(self._runs) >= _MAX_RUNS:
            return
        parent = self._parent_context(parent_run_id)
        if parent is _SKIPPED:
            self._runs[run_id] = _SKIPPED
            return
        context = parent if isinstance(parent, otel_context.Context) else None
        if context is None:
            # Started now, in the current context: remembered for the span made at the end.
            context = otel_context.get_current()
        self._runs[run_id] = _PostprocessRun(name, attributes, context, parent_run_id)
        if parent_run_id is not None:
            self._parents[run_id] = parent_run_id

    def _end_postprocess(self, run: _PostprocessRun, error: BaseException | None) -> None:
        """In a streamed sequence the parser starts with the model before it and then only waits
        for its chunks: its span starts when that model run ended, so the wait is not counted as
        postprocessing (the model's own span has that time)."""
        started_at = run.started_at
        if run.parent_run_id is not None:
            model_ended = self._model_ended.get(run.parent_run_id, 0)
            started_at = max(started_at, model_ended)
        span = get_tracer().start_span(
            run.name, context=run.parent, attributes=run.attributes, start_time=started_at
        )
        try:
            if error is not None:
                record_error(span, error)
            else:
                span.set_status(STATUS_OK)
        finally:
            span.end()

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._safe_end(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._safe_end(run_id, error)

    def _safe_end(self, run_id: UUID, error: BaseException | None = None) -> None:
        try:
            model_run = self._end(run_id, error)
            if model_run is not None:  # a model run's end came through another callback
                self._end_model(model_run, None, error)
        except Exception:
            log_once(logger, "LangChain span end failed")

    # --- retrievers ---------------------------------------------------------------------------

    def on_retriever_start(
        self, serialized: dict[str, Any] | None, query: str, **kwargs: Any
    ) -> None:
        run_id, parent_run_id = self._run_ids(kwargs)
        metadata = kwargs.get("metadata")
        try:
            metadata = metadata or {}
            source = (
                metadata.get("ls_vector_store_provider")
                or kwargs.get("name")
                or metadata.get("ls_retriever_name")
                or _serialized_name(serialized)
                or "retriever"
            )
            attributes: dict[str, Any] = {
                semconv.STAGE: "retrieval",
                semconv.GEN_AI_OPERATION_NAME: semconv.OP_RETRIEVAL,
                semconv.GEN_AI_DATA_SOURCE_ID: str(source),
            }
            top_k = metadata.get("ls_top_k", metadata.get("k"))
            if is_int(top_k):
                attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] = top_k
            self._start(run_id, parent_run_id, f"retrieval {source}", attributes)
        except Exception:
            log_once(logger, "LangChain retrieval span start failed")

    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        try:
            span = self.span_of(run_id)
            if span is not None:
                span.set_attribute(semconv.RETRIEVAL_RETURNED, len(documents))
        except Exception:
            log_once(logger, "LangChain retrieval result recording failed")
        self._safe_end(run_id)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._safe_end(run_id, error)

    # --- tools --------------------------------------------------------------------------------

    def on_tool_start(
        self, serialized: dict[str, Any] | None, input_str: str, **kwargs: Any
    ) -> None:
        run_id, parent_run_id = self._run_ids(kwargs)
        try:
            name = str(kwargs.get("name") or _serialized_name(serialized) or "tool")
            attributes = {
                semconv.STAGE: "tool",
                semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
                semconv.GEN_AI_TOOL_NAME: name,
            }
            self._start(run_id, parent_run_id, f"{semconv.OP_EXECUTE_TOOL} {name}", attributes)
        except Exception:
            log_once(logger, "LangChain tool span start failed")

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._safe_end(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._safe_end(run_id, error)

    # --- chat models and LLMs -----------------------------------------------------------------

    def on_chat_model_start(
        self, serialized: dict[str, Any] | None, messages: Any, **kwargs: Any
    ) -> None:
        run_id, parent_run_id = self._run_ids(kwargs)
        metadata = kwargs.get("metadata")
        self._start_model(semconv.OP_CHAT, run_id, parent_run_id, metadata, kwargs)

    def on_llm_start(
        self, serialized: dict[str, Any] | None, prompts: list[str], **kwargs: Any
    ) -> None:
        run_id, parent_run_id = self._run_ids(kwargs)
        metadata = kwargs.get("metadata")
        self._start_model(semconv.OP_TEXT_COMPLETION, run_id, parent_run_id, metadata, kwargs)

    def _start_model(
        self,
        operation: str,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: dict[str, Any] | None,
        kwargs: dict[str, Any],
    ) -> None:
        try:
            started_at = time.monotonic()
            invocation = kwargs.get("invocation_params") or {}
            name, attributes = _model_request_attributes(operation, invocation, metadata or {})
            span = self._start(run_id, parent_run_id, name, attributes, SpanKind.CLIENT)
            if span is None:
                return
            recorder = StreamRecorder(
                span, started_at=started_at, parser=_UsageParser(), streaming=False
            )
            self._runs[run_id] = _ModelRun(span, recorder, parent_run_id)
            watch_provider_calls(span)
            slot = _stream_slot.get()
            # Only where the step runs: a callback run in another thread (an executor) must not
            # attach what the step would then fail to detach.
            if slot is not None and slot.span is None and slot.thread == threading.get_ident():
                # Detached by the stream's step that called here, before the step returns.
                slot.span = span
                slot.token = otel_context.attach(trace.set_span_in_context(span))
        except Exception:
            log_once(logger, "LangChain model span start failed")

    def on_llm_new_token(
        self, token: Any, *, chunk: Any = None, run_id: UUID, **kwargs: Any
    ) -> None:
        entry = self._runs.get(run_id)
        if not isinstance(entry, _ModelRun):
            return
        # A token is text, or a list of content blocks; a tool-call fragment is output too.
        message = getattr(chunk, "message", None)
        has_content = bool(token) or bool(getattr(message, "tool_call_chunks", None))
        entry.recorder.streaming = True
        entry.recorder.on_chunk(has_content)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._model_run_ended(run_id, response, None)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._model_run_ended(run_id, None, error)

    def _model_run_ended(self, run_id: UUID, response: Any, error: BaseException | None) -> None:
        entry = self._runs.pop(run_id, None)
        self._parents.pop(run_id, None)
        if isinstance(entry, _ModelRun):
            try:
                self._end_model(entry, response, error)
            except Exception:
                log_once(logger, "LangChain model span end failed")

    def _end_model(self, run: _ModelRun, response: Any, error: BaseException | None) -> None:
        span, recorder = run.span, run.recorder
        if run.parent_run_id is not None and run.parent_run_id in self._runs:
            self._model_ended[run.parent_run_id] = time.time_ns()
        if provider_calls_under(span):
            # A provider span beneath owns TTFT and usage: this one is structure only.
            if recorder.ended:  # its tokens were never fed to the recorder: end here, once
                return
            recorder.ended = True
            try:
                span.set_attribute(semconv.STAGE, "other")
                if error is not None:
                    record_error(span, error)
                else:
                    span.set_status(STATUS_OK)
            finally:
                span.end()
            return
        try:
            if response is not None:
                parser = recorder.parser
                if isinstance(parser, _UsageParser):
                    parser.attributes = _result_attributes(response)
                    # Whether it streamed, when the invocation did not say: its tokens came one
                    # by one (LangChain's callbacks), or with the result.
                    if semconv.GEN_AI_REQUEST_STREAM not in (
                        getattr(span, "attributes", None) or ()
                    ):
                        parser.attributes[semconv.GEN_AI_REQUEST_STREAM] = recorder.streaming
        except Exception:
            log_once(logger, "LangChain model result recording failed")
        if error is not None:
            recorder.end_from_exception(error)
        else:
            recorder.end("completed")

    def end_all(self) -> None:
        """End every span still in flight (``uninstrument()``): none is left open."""
        for run_id in list(self._runs):
            self._safe_end(run_id)


def _record_top_k(span: Span, retriever: Any, kwargs: Mapping[str, Any]) -> None:
    """``gen_ai.retrieval.top_k`` from a vector store retriever's ``k``, when it was given."""
    try:
        search_kwargs = getattr(retriever, "search_kwargs", None) or {}
        top_k = kwargs.get("k", search_kwargs.get("k"))
        if is_int(top_k):
            span.set_attribute(semconv.GEN_AI_RETRIEVAL_TOP_K, top_k)
    except Exception:
        log_once(logger, "LangChain retriever top_k recording failed")


def _run_ids(kwargs: dict[str, Any]) -> tuple[UUID, UUID | None]:
    """The run's id and its parent's, which LangChain passes every callback by keyword."""
    return kwargs["run_id"], kwargs.get("parent_run_id")


def _serialized_name(serialized: Mapping[str, Any] | None) -> str | None:
    if not serialized:
        return None
    name = serialized.get("name")
    if isinstance(name, str):
        return name
    ids = serialized.get("id")
    if isinstance(ids, list) and ids and isinstance(ids[-1], str):
        return ids[-1]
    return None


class LangChainInstrumentor(LibraryInstrumentor):
    """Traces LangChain and LangGraph runs (``langchain-core``)."""

    package = "langchain-core"
    supported = ">=1.0,<2"

    handler: LLMTraceCallbackHandler | None = None

    def patches(self) -> Iterable[PatchRow]:
        # A fresh handler per instrument(): the class is a singleton that the registry may
        # construct again, so the handler is not made in __init__.
        handler = self.handler = LLMTraceCallbackHandler()

        def configure(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            manager = wrapped(*args, **kwargs)
            try:
                if handler not in manager.handlers:
                    manager.add_handler(handler, inherit=True)
            except Exception:
                log_once(logger, "LangChain callback handler registration failed")
            return manager

        def set_config_context(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            # Runs inside the copied context LangChain runs one step in, and is discarded with
            # it: the span of the step's parent run is current there, and never leaks out.
            result = wrapped(*args, **kwargs)
            try:
                config = args[0] if args else kwargs.get("config")
                callbacks = config.get("callbacks") if isinstance(config, Mapping) else None
                span = handler.span_of(getattr(callbacks, "parent_run_id", None))
                if span is not None:
                    otel_context.attach(trace.set_span_in_context(span))
            except Exception:
                log_once(logger, "LangChain step context failed")
            return result

        def generate(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            span = handler.span_of(getattr(kwargs.get("run_manager"), "run_id", None))
            if span is None:
                return wrapped(*args, **kwargs)
            token = otel_context.attach(trace.set_span_in_context(span))
            try:
                return wrapped(*args, **kwargs)
            finally:
                otel_context.detach(token)

        async def agenerate(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            span = handler.span_of(getattr(kwargs.get("run_manager"), "run_id", None))
            if span is None:
                return await wrapped(*args, **kwargs)
            token = otel_context.attach(trace.set_span_in_context(span))
            try:
                return await wrapped(*args, **kwargs)
            finally:
                otel_context.detach(token)

        def retrieve(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            span = handler.span_of(getattr(kwargs.get("run_manager"), "run_id", None))
            if span is None:
                return wrapped(*args, **kwargs)
            _record_top_k(span, instance, kwargs)
            token = otel_context.attach(trace.set_span_in_context(span))
            try:
                return wrapped(*args, **kwargs)
            finally:
                otel_context.detach(token)

        async def aretrieve(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            span = handler.span_of(getattr(kwargs.get("run_manager"), "run_id", None))
            if span is None:
                return await wrapped(*args, **kwargs)
            _record_top_k(span, instance, kwargs)
            token = otel_context.attach(trace.set_span_in_context(span))
            try:
                return await wrapped(*args, **kwargs)
            finally:
                otel_context.detach(token)

        def stream(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            return _stepped(wrapped(*args, **kwargs))

        def astream(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            return _astepped(wrapped(*args, **kwargs))

        chat_models = "langchain_core.language_models.chat_models"
        yield "langchain_core.callbacks.manager", "_configure", configure
        yield "langchain_core.runnables.config", "_set_config_context", set_config_context
        yield chat_models, "BaseChatModel._generate_with_cache", generate
        yield chat_models, "BaseChatModel._agenerate_with_cache", agenerate
        yield chat_models, "BaseChatModel.stream", stream
        yield chat_models, "BaseChatModel.astream", astream
        vectorstores = "langchain_core.vectorstores.base"
        yield vectorstores, "VectorStoreRetriever._get_relevant_documents", retrieve
        yield vectorstores, "VectorStoreRetriever._aget_relevant_documents", aretrieve

    def _uninstrument(self, **kwargs: Any) -> None:
        super()._uninstrument(**kwargs)
        if self.handler is not None:
            self.handler.end_all()
            self.handler = None
