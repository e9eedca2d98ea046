"""llmtrace.context(): request attributes on every span started inside it, across tasks and
threads; current_trace_id() and trace_url()."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

import llmtrace
from llmtrace.instrumentation import registry

REQUEST = {"session.id": "s-1", "user.id": "u-1", "gen_ai.conversation.id": "c-1", "tenant": "acme"}


@pytest.fixture
def threads_instrumented() -> Iterator[None]:
    registry.instrument(["threading"])
    yield
    registry.uninstrument(["threading"])


def _context_of(span: object) -> dict[str, object]:
    attributes = dict(span.attributes or {})  # type: ignore[attr-defined]
    return {key: attributes[key] for key in REQUEST if key in attributes}


def test_every_span_inside_carries_the_request_attributes(spans):
    @llmtrace.workflow
    def answer() -> None:
        with llmtrace.span("inner", stage="tool"):
            pass

    with llmtrace.context(session_id="s-1", user_id="u-1", conversation_id="c-1", tenant="acme"):
        answer()
    answer()  # outside: nothing
    inside_inner, inside_answer, outside_inner, outside_answer = spans.get_finished_spans()
    assert _context_of(inside_inner) == _context_of(inside_answer) == REQUEST
    assert _context_of(outside_inner) == _context_of(outside_answer) == {}


def test_contexts_nest_and_inner_values_win(spans):
    with (
        llmtrace.context(session_id="outer", tenant="acme"),
        llmtrace.context(session_id="inner"),
        llmtrace.span("block"),
    ):
        pass
    (span,) = spans.get_finished_spans()
    assert span.attributes["session.id"] == "inner"
    assert span.attributes["tenant"] == "acme"


async def test_asyncio_tasks_started_inside_carry_it(spans):
    @llmtrace.tool
    async def step(number: int) -> int:
        await asyncio.sleep(0.001)
        return number

    async with llmtrace.context(session_id="s-1"):
        await asyncio.gather(*(asyncio.create_task(step(n)) for n in range(3)))
    assert [s.attributes["session.id"] for s in spans.get_finished_spans()] == ["s-1"] * 3


def test_threads_and_pools_started_inside_carry_it_and_stay_in_the_trace(
    spans, threads_instrumented
):
    @llmtrace.tool
    def step() -> None:
        pass

    with llmtrace.context(session_id="s-1"), llmtrace.span("request") as request:
        thread = threading.Thread(target=step)
        thread.start()
        thread.join()
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda _: step(), range(4)))
    finished = spans.get_finished_spans()
    steps = [s for s in finished if s.name == "execute_tool step"]
    assert len(steps) == 5
    trace_id = request.get_span_context().trace_id
    for span in steps:
        assert span.attributes["session.id"] == "s-1"
        assert span.context.trace_id == trace_id
        assert span.parent.span_id == request.get_span_context().span_id


def test_a_thread_subclass_overriding_run_is_carried_and_keeps_its_run(spans, threads_instrumented):
    @llmtrace.tool
    def step() -> None:
        pass

    class Worker(threading.Thread):
        def run(self) -> None:
            self.ran_as = type(self).run
            step()

    with llmtrace.context(session_id="s-2"), llmtrace.span("request") as request:
        worker = Worker()
        worker.start()
        worker.join()
    (span,) = [s for s in spans.get_finished_spans() if s.name == "execute_tool step"]
    assert span.attributes["session.id"] == "s-2"
    assert span.parent.span_id == request.get_span_context().span_id
    # the instance attribute that carried the context is gone once the thread ran
    assert "run" not in worker.__dict__ and worker.ran_as is Worker.run


def test_worker_threads_do_not_keep_an_earlier_requests_context(spans, threads_instrumented):
    @llmtrace.tool
    def step() -> None:
        pass

    with ThreadPoolExecutor(max_workers=1) as pool:
        with llmtrace.context(session_id="first"):
            pool.submit(step).result()
        pool.submit(step).result()  # submitted outside any request context
    first, second = spans.get_finished_spans()
    assert first.attributes["session.id"] == "first"
    assert "session.id" not in second.attributes
    assert first.context.trace_id != second.context.trace_id


def test_decorator_form_sync_and_async(spans):
    @llmtrace.context(user_id="u-9")
    @llmtrace.workflow
    def handle() -> str:
        return "ok"

    @llmtrace.context(user_id="u-10")
    @llmtrace.workflow
    async def handle_async() -> str:
        return "ok"

    assert handle() == "ok"
    assert asyncio.run(handle_async()) == "ok"
    assert [s.attributes["user.id"] for s in spans.get_finished_spans()] == ["u-9", "u-10"]


def test_user_ids_go_through_the_redaction_hook(spans):
    llmtrace.init(exporter="none", instrument=False, redact=lambda text: "redacted")
    try:
        with llmtrace.context(user_id="alice@example.com", session_id="s-1"), llmtrace.span("x"):
            pass
    finally:
        llmtrace.shutdown()
    (span,) = spans.get_finished_spans()
    assert span.attributes["user.id"] == "redacted"
    assert span.attributes["session.id"] == "s-1"


def test_current_trace_id_and_trace_url(spans):
    assert llmtrace.current_trace_id() is None
    assert llmtrace.trace_url() is None
    with llmtrace.span("request") as span:
        trace_id = llmtrace.current_trace_id()
        assert trace_id == f"{span.get_span_context().trace_id:032x}"
        assert llmtrace.trace_url() is None  # no Jaeger configured
    llmtrace.init(exporter="none", instrument=False, jaeger_url="http://jaeger:16686/")
    try:
        with llmtrace.span("request"):
            assert llmtrace.trace_url() == (
                f"http://jaeger:16686/trace/{llmtrace.current_trace_id()}"
            )
        assert llmtrace.trace_url("abc") == "http://jaeger:16686/trace/abc"
    finally:
        llmtrace.shutdown()


_FIRST_CONTEXT = r"""
import json, sys
import llmtrace
from llmtrace.sdk.request_context import RequestContextProcessor
from opentelemetry import trace

def processors():
    provider = trace.get_tracer_provider()
    chain = provider._active_span_processor._span_processors
    return sum(isinstance(p, RequestContextProcessor) for p in chain)

if sys.argv[1] == "before init":
    early = llmtrace.context(session_id="early")
    early.__enter__()
llmtrace.init(exporter="file", file_path=sys.argv[2], instrument=False)
counts = [processors()]
with llmtrace.span("outside", stage="tool"):
    pass
with llmtrace.context(session_id="s-1"):
    with llmtrace.span("inside", stage="tool"):
        pass
counts.append(processors())
llmtrace.shutdown()
print(json.dumps(counts))
"""


@pytest.mark.parametrize("entered", ["after init", "before init"])
def test_the_processor_arrives_with_the_first_context_entered(tmp_path, entered):
    # Until a request context is entered no span can carry one, and the processor (a call per
    # span start and end) is not there; a context entered before init() still gets it.
    import json
    import subprocess
    import sys

    out = tmp_path / "spans.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_CONTEXT, entered, str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts == ([0, 1] if entered == "after init" else [1, 1])
    sessions = {}
    for line in out.read_text().splitlines():
        for resource_spans in json.loads(line).get("resourceSpans", []):
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    values = {a["key"]: a["value"] for a in span.get("attributes", [])}
                    sessions[span["name"]] = values.get("session.id", {}).get("stringValue")
    expected_outside = None if entered == "after init" else "early"
    assert sessions == {"outside": expected_outside, "inside": "s-1"}
