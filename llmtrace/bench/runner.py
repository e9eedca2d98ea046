"""Replays a question set against a target with exactly N requests in flight.

Every request is the root span of its own trace (``bench {run}``) carrying the run name, the
question id, the concurrency and the question-set hash, so the report of one run can be built
from a trace file that holds many. Warmup requests run first, at the same concurrency, and are
marked so the report leaves them out. Errors and timeouts are outcomes, not failures of the run:
a timeout is bench's own ``--timeout`` running out; a ``TimeoutError`` the target raises itself
is an error of that request, like any other exception.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from llmtrace import semconv
from llmtrace.bench.questions import Question, QuestionSet
from llmtrace.bench.targets import HTTPAnswer, Target
from llmtrace.sdk.span_errors import record_error, record_error_code

Status_ = Literal["ok", "error", "timeout", "cancelled"]
TIMEOUT_ERROR_TYPE = "timeout"
CANCELLED_ERROR_TYPE = "cancelled"


@dataclass(frozen=True)
class BenchPlan:
    name: str
    concurrency: int = 1
    repeat: int = 1
    warmup: int = 0
    rate: float | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.repeat < 1:
            raise ValueError("repeat must be at least 1")
        if self.warmup < 0:
            raise ValueError("warmup cannot be negative")
        # "not > 0" also turns away NaN, which every comparison with it would let through.
        if self.rate is not None and not self.rate > 0:
            raise ValueError("rate must be positive")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError("timeout must be positive")


@dataclass(frozen=True)
class Outcome:
    question_id: str
    warmup: bool
    status: Status_
    latency: float
    trace_id: str
    error: str | None = None
    # When the client first saw the answer of a streaming HTTP target (seconds, else None).
    time_to_first_byte: float | None = None
    time_to_first_event: float | None = None


@dataclass
class BenchResult:
    plan: BenchPlan
    question_set_hash: str
    total: int
    started_at: datetime
    ended_at: datetime | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    interrupted: bool = False

    @property
    def measured(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.warmup and o.status != "cancelled"]

    @property
    def requests(self) -> int:
        return len(self.measured)

    @property
    def errors(self) -> int:
        return sum(1 for o in self.measured if o.status == "error")

    @property
    def timeouts(self) -> int:
        return sum(1 for o in self.measured if o.status == "timeout")


class BenchListener(Protocol):
    """Sees the run as it goes (the live progress bar is one)."""

    def run_started(self, total: int, warmup: int) -> None: ...

    def request_finished(self, outcome: Outcome) -> None: ...

    def run_stopping(self) -> None: ...


def warmup_questions(questions: QuestionSet, count: int) -> list[Question]:
    """The first ``count`` questions, cycling when the set is smaller."""
    items = questions.questions
    return [items[i % len(items)] for i in range(count)]


def measured_questions(questions: QuestionSet, repeat: int) -> list[Question]:
    """The whole set ``repeat`` times, in order (pass 1, then pass 2, ...)."""
    return [q for _ in range(repeat) for q in questions.questions]


class BenchRunner:
    def __init__(
        self,
        questions: QuestionSet,
        target: Target,
        plan: BenchPlan,
        listener: BenchListener | None = None,
    ) -> None:
        if not len(questions):
            raise ValueError("the question set is empty")
        self.questions = questions
        self.target = target
        self.plan = plan
        self.listener = listener
        self._stopping = False
        self._workers: list[asyncio.Task[None]] = []
        self._next_start = 0.0

    def stop(self) -> None:
        """Start no new request; the ones in flight finish and are reported."""
        if not self._stopping:
            self._stopping = True
            if self.listener:
                self.listener.run_stopping()

    def cancel(self) -> None:
        """Stop now: requests in flight are cancelled and left out of the counts."""
        self.stop()
        for worker in self._workers:
            worker.cancel()

    @property
    def stopping(self) -> bool:
        return self._stopping

    async def run(self) -> BenchResult:
        warmups = warmup_questions(self.questions, self.plan.warmup)
        measured = measured_questions(self.questions, self.plan.repeat)
        result = BenchResult(
            plan=self.plan,
            question_set_hash=self.questions.hash,
            total=len(measured),
            started_at=datetime.now(UTC),
        )
        if self.listener:
            self.listener.run_started(len(measured), len(warmups))
        self._next_start = time.monotonic()
        await self._run_phase(warmups, warmup=True, result=result)
        await self._run_phase(measured, warmup=False, result=result)
        result.ended_at = datetime.now(UTC)
        result.interrupted = self._stopping
        return result

    async def _run_phase(
        self, jobs: Sequence[Question], *, warmup: bool, result: BenchResult
    ) -> None:
        if not jobs or self._stopping:
            return
        pending = iter(jobs)
        self._workers = [
            asyncio.create_task(self._worker(pending, warmup, result))
            for _ in range(min(self.plan.concurrency, len(jobs)))
        ]
        # A cancelled worker (cancel()) ends with CancelledError: that is the requested stop.
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []

    async def _worker(self, pending: Iterator[Question], warmup: bool, result: BenchResult) -> None:
        while not self._stopping:
            question = next(pending, None)
            if question is None:
                return
            await self._wait_for_rate()
            if self._stopping:
                return
            outcome = await self._request(question, warmup, result)
            if outcome.status != "cancelled" and self.listener:
                self.listener.request_finished(outcome)

    async def _wait_for_rate(self) -> None:
        if self.plan.rate is None:
            return
        # One shared schedule: request k starts no earlier than start + k / rate.
        now = time.monotonic()
        slot = max(now, self._next_start)
        self._next_start = slot + 1.0 / self.plan.rate
        if slot > now:
            await asyncio.sleep(slot - now)

    async def _request(self, question: Question, warmup: bool, result: BenchResult) -> Outcome:
        span = _start_request_span(self.plan, question, self.questions.hash, warmup)
        trace_id = format(span.get_span_context().trace_id, "032x")
        started = time.perf_counter()
        status: Status_ = "ok"
        error: str | None = None
        answer: object = None
        # No deadline without --timeout; with one, only this deadline makes a "timeout".
        deadline = asyncio.timeout(self.plan.timeout)
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False):
                async with deadline:
                    answer = await self.target(question)
        except TimeoutError as exc:
            if deadline.expired():
                status, error = "timeout", f"no answer within {self.plan.timeout:g}s"
                record_error_code(span, TIMEOUT_ERROR_TYPE, error)
            else:
                # The target's own timeout (its HTTP client's, its backend's) is its error.
                status, error = "error", _record_error(span, exc)
        except asyncio.CancelledError:
            status, error = "cancelled", "cancelled"
            record_error_code(span, CANCELLED_ERROR_TYPE, "cancelled")
            raise
        except Exception as exc:
            status, error = "error", _record_error(span, exc)
        finally:
            latency = time.perf_counter() - started
            first_byte, first_event = _first_output(answer)
            if first_byte is not None:
                span.set_attribute(semconv.CLIENT_TIME_TO_FIRST_BYTE, first_byte)
            if first_event is not None:
                span.set_attribute(semconv.CLIENT_TIME_TO_FIRST_EVENT, first_event)
            span.end()
            outcome = Outcome(
                question.id, warmup, status, latency, trace_id, error, first_byte, first_event
            )
            result.outcomes.append(outcome)
        return outcome


def _first_output(answer: object) -> tuple[float | None, float | None]:
    """When the client first saw a streamed HTTP answer: first byte, first SSE event."""
    if isinstance(answer, HTTPAnswer):
        return answer.time_to_first_byte, answer.time_to_first_event
    return None, None


def _record_error(span: Span, exc: Exception) -> str:
    """Mark ``span`` as failed by ``exc``; return the outcome's error text."""
    record_error(span, exc)
    return f"{type(exc).__name__}: {exc}"


def _start_request_span(
    plan: BenchPlan, question: Question, question_set_hash: str, warmup: bool
) -> Span:
    attributes: dict[str, str | int | bool] = {
        semconv.STAGE: "other",
        semconv.BENCH_RUN: plan.name,
        semconv.BENCH_QUESTION_ID: question.id,
        semconv.BENCH_CONCURRENCY: plan.concurrency,
        semconv.BENCH_QUESTION_SET_HASH: question_set_hash,
    }
    if warmup:
        attributes[semconv.BENCH_WARMUP] = True
    tracer = trace.get_tracer(semconv.SCOPE_NAME)
    # An empty context makes every request the root of its own trace, whatever the caller had.
    return tracer.start_span(
        f"bench {plan.name}",
        context=otel_context.Context(),
        kind=SpanKind.INTERNAL,
        attributes=attributes,
    )
