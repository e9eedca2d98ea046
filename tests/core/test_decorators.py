"""Every decorator on every kind of callable: span, stage, attributes, parenting, pass-through."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import os
import subprocess
import sys
import textwrap
import threading
import traceback
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

import llmtrace
from llmtrace import semconv

DECORATORS: dict[str, tuple[Callable[..., Any], str, dict[str, Any]]] = {
    # name: (decorator with arguments, expected stage, expected attributes)
    "workflow": (llmtrace.workflow(name="answer"), "other", {}),
    "llm": (
        llmtrace.llm(model="smollm2", provider="llama.cpp"),
        semconv.LLM_STAGE,
        {
            semconv.GEN_AI_OPERATION_NAME: "chat",
            semconv.GEN_AI_REQUEST_MODEL: "smollm2",
            semconv.GEN_AI_PROVIDER_NAME: "llama.cpp",
        },
    ),
    "retrieval": (
        llmtrace.retrieval(data_source="docs", top_k=4),
        "retrieval",
        {
            semconv.GEN_AI_OPERATION_NAME: "retrieval",
            semconv.GEN_AI_DATA_SOURCE_ID: "docs",
            semconv.GEN_AI_RETRIEVAL_TOP_K: 4,
        },
    ),
    "embedding": (
        llmtrace.embedding(model="minilm"),
        "embedding",
        {semconv.GEN_AI_OPERATION_NAME: "embeddings", semconv.GEN_AI_REQUEST_MODEL: "minilm"},
    ),
    "rerank": (llmtrace.rerank(top_n=2), "rerank", {semconv.RERANK_TOP_N: 2}),
    "tool": (
        llmtrace.tool(name="calculator"),
        "tool",
        {semconv.GEN_AI_OPERATION_NAME: "execute_tool", semconv.GEN_AI_TOOL_NAME: "calculator"},
    ),
    "stage": (llmtrace.stage("postprocess"), "postprocess", {}),
}
SPAN_NAMES = {
    "workflow": "answer",
    "llm": "chat smollm2",
    "retrieval": "retrieval docs",
    "embedding": "embeddings minilm",
    "rerank": "rerank",
    "tool": "execute_tool calculator",
}


def _sync(x: int) -> list[int]:
    return [x, x + 1]


async def _coroutine(x: int) -> list[int]:
    await asyncio.sleep(0)
    return [x, x + 1]


def _generator(x: int) -> Any:
    yield x
    yield x + 1


async def _async_generator(x: int) -> Any:
    yield x
    await asyncio.sleep(0)
    yield x + 1


KINDS = {
    "sync": _sync,
    "async": _coroutine,
    "generator": _generator,
    "async_generator": _async_generator,
}


def _call(func: Callable[..., Any], kind: str) -> list[int]:
    if kind == "sync":
        return list(func(1))
    if kind == "async":
        return list(asyncio.run(func(1)))
    if kind == "generator":
        return list(func(1))

    async def collect() -> list[int]:
        return [item async for item in func(1)]

    return asyncio.run(collect())


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("decorator_name", list(DECORATORS))
def test_decorator_makes_one_span_with_stage_and_attributes(spans, decorator_name, kind):
    decorator, expected_stage, expected_attributes = DECORATORS[decorator_name]
    original = KINDS[kind]
    wrapped = decorator(original)

    assert _call(wrapped, kind) == [1, 2]
    assert inspect.signature(wrapped) == inspect.signature(original)
    assert wrapped.__name__ == original.__name__
    assert inspect.isasyncgenfunction(wrapped) == inspect.isasyncgenfunction(original)
    assert inspect.iscoroutinefunction(wrapped) == inspect.iscoroutinefunction(original)

    (span,) = spans.get_finished_spans()
    assert span.name == SPAN_NAMES.get(decorator_name, original.__qualname__)
    assert span.attributes[semconv.STAGE] == expected_stage
    for key, value in expected_attributes.items():
        assert span.attributes[key] == value
    assert span.status.status_code != StatusCode.ERROR
    if decorator_name == "llm":
        assert span.kind == SpanKind.CLIENT
    if decorator_name == "retrieval" and kind in ("sync", "async"):
        assert span.attributes[semconv.RETRIEVAL_RETURNED] == 2


def test_decorators_work_without_parentheses(spans):
    @llmtrace.workflow
    def handle() -> str:
        return retrieve()

    @llmtrace.retrieval
    def retrieve() -> str:
        return use_tool()

    @llmtrace.tool
    def use_tool() -> str:
        return "ok"

    @llmtrace.llm
    def generate() -> str:
        return "text"

    @llmtrace.embedding
    def embed() -> list[float]:
        return [0.1]

    @llmtrace.rerank
    def rerank() -> list[int]:
        return [1]

    assert handle() == "ok"
    generate()
    embed()
    rerank()
    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert set(by_name) == {
        "test_decorators_work_without_parentheses.<locals>.handle",
        "retrieval",
        "execute_tool use_tool",
        "chat",
        "embeddings",
        "rerank",
    }
    root = by_name["test_decorators_work_without_parentheses.<locals>.handle"]
    assert by_name["retrieval"].parent.span_id == root.context.span_id
    assert by_name["execute_tool use_tool"].parent.span_id == by_name["retrieval"].context.span_id


def test_methods_staticmethods_and_classmethods(spans):
    class Service:
        factor = 3

        @llmtrace.tool(name="scale")
        def scale(self, x: int) -> int:
            return x * self.factor

        @llmtrace.stage("prompt")
        @staticmethod
        def build(question: str) -> str:
            return f"Q: {question}"

        @llmtrace.stage("postprocess")
        @classmethod
        def parse(cls, text: str) -> str:
            return text.upper() + str(cls.factor)

        @staticmethod
        @llmtrace.stage("cache")
        def lookup(key: str) -> None:
            return None

    service = Service()
    assert service.scale(2) == 6
    assert Service.build("hi") == "Q: hi"
    assert service.build("hi") == "Q: hi"
    assert Service.parse("a") == "A3"
    assert Service.lookup("k") is None
    stages = [s.attributes[semconv.STAGE] for s in spans.get_finished_spans()]
    assert stages == ["tool", "prompt", "prompt", "postprocess", "cache"]
    assert list(inspect.signature(Service.scale).parameters) == ["self", "x"]


def test_stage_and_span_as_context_managers(spans):
    with llmtrace.workflow(name="request"):
        with llmtrace.stage("queue") as queue_span:
            assert trace.get_current_span() is queue_span
        with llmtrace.span("load index", stage="load", index="docs"):
            pass
        with llmtrace.span("no stage"):
            pass

    async def run() -> None:
        async with llmtrace.stage("queue"):
            await asyncio.sleep(0)

    asyncio.run(run())
    finished = {s.name: s for s in spans.get_finished_spans()}
    assert finished["queue"].attributes[semconv.STAGE] == "queue"
    assert finished["load index"].attributes == {semconv.STAGE: "load", "index": "docs"}
    assert semconv.STAGE not in finished["no stage"].attributes
    assert finished["load index"].parent.span_id == finished["request"].context.span_id
    assert len(spans.get_finished_spans()) == 5
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_one_stage_object_reused_concurrently_keeps_spans_apart(spans):
    queue = llmtrace.stage("queue")

    async def request(i: int) -> None:
        with llmtrace.workflow(name=f"r{i}"):
            async with queue:
                await asyncio.sleep(0.01)

    async def main() -> None:
        await asyncio.gather(*(request(i) for i in range(5)))

    asyncio.run(main())
    finished = spans.get_finished_spans()
    roots = {s.context.span_id: s.name for s in finished if s.name.startswith("r")}
    queues = [s for s in finished if s.name == "queue"]
    assert len(queues) == 5
    assert sorted(roots[q.parent.span_id] for q in queues) == [f"r{i}" for i in range(5)]


def test_unknown_stage_is_a_config_error():
    with pytest.raises(llmtrace.ConfigError, match=r"'retreival'.*accepted: queue"):
        llmtrace.stage("retreival")


def test_exception_passes_through_unchanged(spans):
    error = ValueError("bad input")

    @llmtrace.tool(name="parse")
    def parse() -> None:
        raise error

    with pytest.raises(ValueError) as caught:
        parse()
    assert caught.value is error
    frames = traceback.extract_tb(caught.value.__traceback__)
    assert frames[-1].name == "parse" and frames[-1].line == "raise error"
    (span,) = spans.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == "ValueError"


@pytest.mark.parametrize("kind", ["async", "generator", "async_generator"])
def test_exception_passes_through_every_kind(spans, kind):
    error = KeyError("missing")

    @llmtrace.retrieval(data_source="docs")
    async def coroutine(x: int) -> None:
        raise error

    @llmtrace.retrieval(data_source="docs")
    def generator(x: int) -> Any:
        yield x
        raise error

    @llmtrace.retrieval(data_source="docs")
    async def async_generator(x: int) -> Any:
        yield x
        raise error

    with pytest.raises(KeyError) as caught:
        _call(
            {"async": coroutine, "generator": generator, "async_generator": async_generator}[kind],
            kind,
        )
    assert caught.value is error
    (span,) = spans.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR


def test_return_value_identity_is_kept(spans):
    marker = object()

    @llmtrace.workflow
    def f() -> object:
        return marker

    assert f() is marker


def test_parenting_under_gather_and_taskgroup(spans):
    @llmtrace.retrieval(data_source="a")
    async def search(i: int) -> list[int]:
        await asyncio.sleep(0.001 * i)
        return [i]

    @llmtrace.workflow(name="gather")
    async def with_gather() -> None:
        await asyncio.gather(search(1), search(2), search(3))

    @llmtrace.workflow(name="taskgroup")
    async def with_taskgroup() -> None:
        async with asyncio.TaskGroup() as group:
            for i in range(3):
                group.create_task(search(i))

    asyncio.run(with_gather())
    asyncio.run(with_taskgroup())
    finished = spans.get_finished_spans()
    roots = {s.name: s for s in finished if s.name in ("gather", "taskgroup")}
    for root in roots.values():
        children = [s for s in finished if s.parent and s.parent.span_id == root.context.span_id]
        assert len(children) == 3
        assert all(c.context.trace_id == root.context.trace_id for c in children)


def test_parenting_in_threads_with_copied_context(spans):
    @llmtrace.tool(name="work")
    def work() -> None:
        pass

    with llmtrace.workflow(name="root"):
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(work,)) for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finished = spans.get_finished_spans()
    root = next(s for s in finished if s.name == "root")
    tools = [s for s in finished if s.name == "execute_tool work"]
    assert len(tools) == 3
    assert all(t.parent.span_id == root.context.span_id for t in tools)


def test_partially_consumed_generators_leak_no_span_and_detach_cleanly(spans, caplog):
    caplog.set_level(logging.DEBUG)

    @llmtrace.retrieval(data_source="docs")
    def documents() -> Any:
        for i in range(10):
            assert trace.get_current_span().name == "retrieval docs"
            yield i

    @llmtrace.retrieval(data_source="docs")
    async def async_documents() -> Any:
        for i in range(10):
            yield i

    outside = trace.get_current_span()
    gen = documents()
    assert next(gen) == 0
    assert trace.get_current_span() is outside  # the span is not attached between yields
    assert next(gen) == 1
    del gen  # dropped half-way: closed by garbage collection

    for item in documents():
        if item == 3:
            break

    async def consume() -> None:
        agen = async_documents()
        assert await agen.__anext__() == 0
        assert trace.get_current_span() is outside
        await agen.aclose()
        # An async generator interleaved across two tasks:
        first, second = async_documents(), async_documents()
        await asyncio.gather(first.__anext__(), second.__anext__())
        await asyncio.gather(first.aclose(), second.aclose())

    asyncio.run(consume())
    finished = spans.get_finished_spans()
    assert len(finished) == 5
    assert all(s.end_time is not None for s in finished)
    assert all(s.attributes.get(semconv.STREAM_END) == "closed" for s in finished)
    assert "Failed to detach context" not in caplog.text
    assert trace.get_current_span() is outside


def test_generator_send_and_throw_pass_through(spans):
    @llmtrace.stage("tool")
    def accumulator() -> Any:
        total = 0
        while True:
            try:
                value = yield total
            except ValueError:
                value = -100
            if value is None:
                return total
            total += value

    gen = accumulator()
    assert next(gen) == 0
    assert gen.send(5) == 5
    assert gen.throw(ValueError("reset")) == -95
    with pytest.raises(StopIteration) as stop:
        gen.send(None)
    assert stop.value.value == -95
    (span,) = spans.get_finished_spans()
    assert span.status.status_code != StatusCode.ERROR


def test_llm_generator_records_ttft_at_first_non_empty_item(spans):
    import time

    @llmtrace.llm(model="m")
    def stream() -> Any:
        yield ""  # a role-only / empty chunk does not count as the first token
        time.sleep(0.05)
        yield "Hello"
        time.sleep(0.03)
        yield " world"

    assert "".join(stream()) == "Hello world"
    (span,) = spans.get_finished_spans()
    attrs = span.attributes
    assert attrs[semconv.TIME_TO_FIRST_TOKEN] >= 0.05
    assert attrs[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] < attrs[semconv.TIME_TO_FIRST_TOKEN]
    assert attrs[semconv.GENERATION_TIME] >= 0.03
    assert attrs[semconv.CHUNK_COUNT] == 3
    assert attrs[semconv.STREAM_END] == "completed"
    assert span.status.status_code == StatusCode.OK
    assert attrs[semconv.STAGE] == semconv.LLM_STAGE
    assert attrs[semconv.GEN_AI_REQUEST_STREAM] is True
    (event,) = span.events
    assert event.name == semconv.FIRST_TOKEN_EVENT
    assert (event.timestamp - span.start_time) / 1e9 == pytest.approx(
        attrs[semconv.TIME_TO_FIRST_TOKEN], abs=0.003
    )


def test_llm_async_generator_with_usage_records_tokens_per_second(spans):
    @llmtrace.llm(model="m")
    async def stream() -> Any:
        yield "a"
        await asyncio.sleep(0.02)
        yield "b"
        llmtrace.record_usage(input_tokens=7, output_tokens=2)

    async def collect() -> list[str]:
        return [x async for x in stream()]

    assert asyncio.run(collect()) == ["a", "b"]
    (span,) = spans.get_finished_spans()
    assert span.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 7
    assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 2
    assert span.attributes[semconv.OUTPUT_TOKENS_PER_SECOND] > 0


def test_mark_first_token_and_estimated_usage(spans):
    import time

    @llmtrace.llm(model="m")
    def call() -> str:
        time.sleep(0.02)
        llmtrace.mark_first_token()
        time.sleep(0.01)
        llmtrace.mark_first_token()  # later calls keep the first time
        llmtrace.record_usage(input_tokens=10, output_tokens=5, estimated=True)
        llmtrace.set_attributes({"custom.key": "v"}, other=1, skipped=None)
        return "done"

    assert call() == "done"
    (span,) = spans.get_finished_spans()
    attrs = span.attributes
    duration = (span.end_time - span.start_time) / 1e9
    # The first mark counts: TTFT is at least the first sleep and leaves the second sleep after it.
    assert 0.02 <= attrs[semconv.TIME_TO_FIRST_TOKEN] <= duration - 0.01
    assert attrs[semconv.GENERATION_TIME] >= 0.01
    assert semconv.GEN_AI_USAGE_OUTPUT_TOKENS not in attrs
    assert attrs[semconv.USAGE_OUTPUT_TOKENS_ESTIMATED] == 5
    assert attrs["custom.key"] == "v" and attrs["other"] == 1 and "skipped" not in attrs
    assert semconv.STREAM_END not in attrs  # not a stream
    # it consumed a stream itself (it marked its first token), unless it says otherwise
    assert attrs[semconv.GEN_AI_REQUEST_STREAM] is True
    assert [event.name for event in span.events] == [semconv.FIRST_TOKEN_EVENT]


def test_an_llm_function_that_marks_no_first_token_did_not_stream(spans):
    @llmtrace.llm(model="m", provider="openai")
    def call() -> str:
        return "done"

    @llmtrace.llm(model="m", **{semconv.GEN_AI_REQUEST_STREAM: True})
    def said() -> str:
        return "done"

    call(), said()
    first, second = spans.get_finished_spans()
    assert first.attributes[semconv.GEN_AI_REQUEST_STREAM] is False
    assert second.attributes[semconv.GEN_AI_REQUEST_STREAM] is True
    assert not first.events and not second.events


@pytest.mark.parametrize(
    ("stage", "operation"),
    [
        ("model", "chat"),
        ("ttft", "chat"),
        ("embedding", "embeddings"),
        ("retrieval", "retrieval"),
        ("tool", "execute_tool"),
        ("rerank", None),
    ],
)
def test_stage_spans_name_their_genai_operation(spans, stage, operation):
    with llmtrace.stage(stage):
        pass
    with llmtrace.span("block", stage=stage, **{semconv.GEN_AI_OPERATION_NAME: "mine"}):
        pass
    first, second = spans.get_finished_spans()
    assert first.attributes.get(semconv.GEN_AI_OPERATION_NAME) == operation
    assert second.attributes[semconv.GEN_AI_OPERATION_NAME] == "mine"  # the application's wins


def test_span_blocks_leave_nothing_behind_in_a_long_lived_context(spans):
    before = len(contextvars.copy_context())
    for _ in range(1000):
        with llmtrace.span("block", stage="tool"):
            pass
    assert len(contextvars.copy_context()) <= before + 1
    assert len(spans.get_finished_spans()) == 1000


def test_memory_stays_flat_over_200000_span_blocks_in_one_thread(tmp_path):
    code = textwrap.dedent(
        """
        import os
        import llmtrace

        llmtrace.init(service_name="blocks", exporter="none", instrument=False)
        page = os.sysconf("SC_PAGE_SIZE")

        def rss():
            with open("/proc/self/statm") as statm:
                return int(statm.read().split()[1]) * page

        def blocks(count):
            for _ in range(count):
                with llmtrace.span("block", stage="tool"):
                    pass

        blocks(20_000)
        first = rss()
        blocks(180_000)
        print(rss() - first)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LLMTRACE_"))}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    growth = int(result.stdout.strip())
    assert growth < 4 * 1024 * 1024, f"RSS grew {growth / 1e6:.1f} MB over 180,000 blocks"
