"""Facts from span attributes that advice can cite: model calls, context sizes, connections."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from llmtrace import semconv as sc
from llmtrace.analysis.breakdown import ModelPhases, first_token_time, is_model_call, model_phases
from llmtrace.analysis.model import Span, Trace


class ModelCall(NamedTuple):
    """One model call as the client saw it (seconds, token counts as reported).

    A tuple: the native reader hands over a hundred thousand of them at a time.
    """

    model: str
    duration: float
    time_to_first_token: float | None
    generation_time: float | None
    output_tokens_per_second: float | None
    input_tokens: int | None
    output_tokens: int | None
    streamed: bool | None
    queue: float
    network: float
    server_joined: bool
    connect: float | None
    finish_reasons: list[str]
    max_tokens: int | None
    input_hash: int | None
    # Time before the last attempt, when the client retried (stage retry), and each refused
    # attempt's error type.
    retry: float
    retry_error_types: list[str]


def _number(value: Any) -> float | None:
    if value.__class__ is float:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    if value.__class__ is int:
        return value
    number = _number(value)
    return None if number is None else int(number)


def model_call(span: Span, phases: ModelPhases | None = None) -> ModelCall:
    attributes = span.attributes
    duration = max(span.duration, 0.0)
    ttft = first_token_time(span)
    generation = _number(attributes.get(sc.GENERATION_TIME))
    if generation is None and ttft is not None:
        generation = max(duration - ttft, 0.0)
    output_tokens = _count(attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS))
    speed = _number(attributes.get(sc.OUTPUT_TOKENS_PER_SECOND))
    if speed is None and output_tokens and generation:
        speed = output_tokens / generation
    stream = attributes.get(sc.GEN_AI_REQUEST_STREAM)
    reasons = attributes.get(sc.GEN_AI_RESPONSE_FINISH_REASONS)
    if phases is None:
        phases = model_phases(span)
    model = attributes.get(sc.GEN_AI_RESPONSE_MODEL) or attributes.get(sc.GEN_AI_REQUEST_MODEL)
    input_hash = attributes.get(sc.GEN_AI_INPUT_MESSAGES)
    retry_errors = attributes.get(sc.RETRY_ERROR_TYPES)
    return ModelCall(
        model=str(model) if model else "unknown",
        duration=duration,
        time_to_first_token=ttft,
        generation_time=generation,
        output_tokens_per_second=speed,
        input_tokens=_count(attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS)),
        output_tokens=output_tokens,
        streamed=stream if isinstance(stream, bool) else (True if ttft is not None else None),
        queue=phases.queue,
        network=phases.network,
        server_joined=phases.server_joined,
        connect=_number(attributes.get(sc.HTTP_CONNECT)),
        finish_reasons=[str(r) for r in reasons] if isinstance(reasons, list) else [],
        max_tokens=_count(attributes.get(sc.GEN_AI_REQUEST_MAX_TOKENS)),
        input_hash=input_hash if isinstance(input_hash, int) else None,
        retry=phases.retry,
        retry_error_types=(
            [str(e) for e in retry_errors] if isinstance(retry_errors, list | tuple) else []
        ),
    )


@dataclass(slots=True)
class RootFacts:
    """What a trace's root says about the run it belongs to (``llmtrace bench`` sets these)."""

    bench_run: str | None = None
    bench_concurrency: int | None = None
    bench_question_set_hash: str | None = None
    warmup: bool = False


def root_facts(trace: Trace) -> RootFacts:
    attributes = trace.root.attributes
    if sc.BENCH_RUN not in attributes and sc.BENCH_WARMUP not in attributes:
        return RootFacts()
    question_set = attributes.get(sc.BENCH_QUESTION_SET_HASH)
    run = attributes.get(sc.BENCH_RUN)
    return RootFacts(
        bench_run=str(run) if run is not None else None,
        bench_concurrency=_count(attributes.get(sc.BENCH_CONCURRENCY)),
        bench_question_set_hash=str(question_set) if question_set else None,
        warmup=attributes.get(sc.BENCH_WARMUP) is True,
    )


@dataclass(slots=True)
class FactSink:
    """Facts gathered across traces: model calls and the sizes that drive latency."""

    model_calls: list[ModelCall] = field(default_factory=list)
    retrieval_returned: list[int] = field(default_factory=list)
    retrieval_top_k: list[int] = field(default_factory=list)
    retrieval_query_hashes: list[int] = field(default_factory=list)
    rerank_inputs: list[int] = field(default_factory=list)
    embedding_inputs: list[int] = field(default_factory=list)
    prompt_chars: list[int] = field(default_factory=list)
    tool_durations: dict[str, list[float]] = field(default_factory=dict)
    # The error type of each model call that failed and that a later model call of its request
    # answered after (a framework's retry or fallback), in the order found.
    superseded_errors: list[str] = field(default_factory=list)

    def add_trace(self, trace: Trace, phases: dict[int, ModelPhases] | None = None) -> None:
        """Add one trace's facts; ``phases`` holds model phases the breakdown already computed."""
        known = phases or {}
        by_stage = self._by_stage
        failed: list[Span] | None = None
        answered_from: int | None = None  # when the last answered model call began
        stack = [trace.root]
        while stack:
            span = stack.pop()
            if span.children:
                stack.extend(span.children)
            attributes = span.attributes
            if not attributes:
                continue
            if is_model_call(span):
                self.model_calls.append(model_call(span, known.get(id(span))))
                if sc.ERROR_TYPE in attributes:
                    failed = failed or []
                    failed.append(span)
                elif answered_from is None or span.start > answered_from:
                    answered_from = span.start
                continue
            stage = attributes.get(sc.STAGE)
            # Sizes are read from the spans of their own stage (a retrieval span's returned
            # count, a rerank span's input count); a span without a stage may carry any of them.
            for name, bucket in by_stage.get(stage, ()) if stage is not None else self._all:
                value = attributes.get(name)
                if value is not None:
                    count = _count(value)
                    if count is not None:
                        bucket.append(count)
            if stage == "retrieval" or stage is None:
                query_hash = attributes.get(sc.GEN_AI_RETRIEVAL_QUERY_TEXT)
                if query_hash.__class__ is int:
                    self.retrieval_query_hashes.append(query_hash)
            elif stage == "tool":
                tool = str(attributes.get(sc.GEN_AI_TOOL_NAME) or span.name)
                self.tool_durations.setdefault(tool, []).append(max(span.duration, 0.0))
        if failed and answered_from is not None:
            for span in failed:
                if span.end <= answered_from:
                    self.superseded_errors.append(str(span.attributes[sc.ERROR_TYPE]))

    @property
    def _by_stage(self) -> dict[str, tuple[tuple[str, list[int]], ...]]:
        return {
            "retrieval": (
                (sc.RETRIEVAL_RETURNED, self.retrieval_returned),
                (sc.GEN_AI_RETRIEVAL_TOP_K, self.retrieval_top_k),
            ),
            "rerank": ((sc.RERANK_INPUT_COUNT, self.rerank_inputs),),
            "embedding": ((sc.EMBEDDING_INPUT_COUNT, self.embedding_inputs),),
            "prompt": ((sc.PROMPT_CHARS, self.prompt_chars),),
        }

    @property
    def _all(self) -> tuple[tuple[str, list[int]], ...]:
        return tuple(pair for pairs in self._by_stage.values() for pair in pairs)
