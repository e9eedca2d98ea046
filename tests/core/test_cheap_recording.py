"""The shortcuts a model call's tracing takes must record exactly what the plain way would.

Attributes put straight into the SDK's span (``set_span_attributes``), model spans started
without attributes under samplers that never read them (``start_client_span``), and plain
functions standing in for wrapped methods (``Patches.wrap``).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from typing import Any

from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)

from llmtrace.instrumentation import model_call
from llmtrace.sdk import _compat
from llmtrace.sdk.gate import Patches, is_wrapped_by_llmtrace
from llmtrace.sdk.streaming import set_span_attributes


def _provider(**kwargs: Any) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(**kwargs)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


class _Reason(enum.StrEnum):
    STOP = "stop"


ATTRIBUTES = {
    "gen_ai.response.id": "r1",
    "gen_ai.usage.input_tokens": 3,
    "llmtrace.time_to_headers": 0.25,
    "gen_ai.request.stream": True,
    "gen_ai.response.finish_reasons": ["stop", "length"],
}


def _recorded(provider: TracerProvider, exporter: InMemorySpanExporter, how: Any) -> dict[str, Any]:
    exporter.clear()
    span = provider.get_tracer("t").start_span("call")
    how(span)
    span.end()
    (finished,) = exporter.get_finished_spans()
    return dict(finished.attributes or {})


def test_attributes_set_at_once_are_what_set_attributes_records():
    provider, exporter = _provider()
    plain = _recorded(provider, exporter, lambda span: span.set_attributes(ATTRIBUTES))
    direct = _recorded(provider, exporter, lambda span: set_span_attributes(span, ATTRIBUTES))
    assert direct == plain
    assert direct["gen_ai.response.finish_reasons"] == (
        "stop",
        "length",
    )  # a tuple, as the SDK keeps it


def test_values_the_sdk_would_change_and_span_limits_go_through_the_sdk():
    # An enum value and None: the SDK's own checks decide (it keeps the str enum, drops None).
    provider, exporter = _provider()
    odd = {"a": _Reason.STOP, "b": None, "c": 1}
    assert _recorded(provider, exporter, lambda s: set_span_attributes(s, odd)) == _recorded(
        provider, exporter, lambda s: s.set_attributes(odd)
    )
    # A string length limit and an attribute count limit are applied as set_attributes would.
    limited, limited_exporter = _provider(
        span_limits=SpanLimits(max_attribute_length=4, max_span_attributes=3)
    )
    long = {"text": "abcdefgh", "d": 1, "e": 2, "f": 3}
    assert _recorded(limited, limited_exporter, lambda s: set_span_attributes(s, long)) == (
        _recorded(limited, limited_exporter, lambda s: s.set_attributes(long))
    )


def test_an_ended_span_takes_no_attributes():
    provider, exporter = _provider()
    span = provider.get_tracer("t").start_span("call")
    span.end()
    set_span_attributes(span, {"late": 1})
    assert "late" not in (exporter.get_finished_spans()[0].attributes or {})


class _ReadsAttributes(Sampler):
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None):  # type: ignore[no-untyped-def]
        self.seen.append(dict(attributes or {}))
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "reads attributes"


def test_model_spans_start_with_their_attributes_for_samplers_that_read_them(monkeypatch):
    attributes = {"gen_ai.request.model": "m", "server.port": 8000}
    for sampler, blind in (
        (ParentBased(ALWAYS_ON), True),
        (TraceIdRatioBased(1.0), True),
        (ParentBased(_ReadsAttributes()), False),
        (_ReadsAttributes(), False),
    ):
        provider, exporter = _provider(sampler=sampler)
        tracer = provider.get_tracer("t")
        monkeypatch.setattr(model_call, "get_tracer", lambda tracer=tracer: tracer)
        # A ParentBased sampler's delegates are read through a fast path (llmtrace.sdk._compat):
        # with it off, llmtrace assumes they may read attributes.
        if isinstance(sampler, ParentBased) and not _compat.enabled("sampler-delegates"):
            blind = False
        assert model_call._attribute_blind(tracer) is blind
        model_call.start_client_span("chat m", attributes).end()
        (span,) = exporter.get_finished_spans()
        assert dict(span.attributes or {}) == attributes
        reader = getattr(sampler, "_root", sampler)
        if isinstance(reader, _ReadsAttributes):
            assert reader.seen == [attributes]  # the sampler decided on them


class _Target:
    def send(self, value: int) -> int:
        return value + 1

    async def asend(self, value: int) -> int:
        return value + 2


def test_a_plain_function_stands_in_for_a_method_and_is_restored(monkeypatch):
    import sys
    import types

    module = types.ModuleType("llmtrace_test_target")
    module.Target = _Target  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    originals = (_Target.send, _Target.asend)
    calls: list[tuple[Any, tuple[Any, ...]]] = []

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        calls.append((instance, args))
        return wrapped(*args, **kwargs)

    patches = Patches()
    try:
        assert patches.wrap(module.__name__, "Target.send", wrapper)
        assert patches.wrap(module.__name__, "Target.asend", wrapper)
        assert not patches.wrap(module.__name__, "Target.send", wrapper)  # never twice
        target = _Target()
        assert target.send(1) == 2 and _Target.send(target, 1) == 2
        assert asyncio.run(target.asend(1)) == 3
        assert inspect.iscoroutinefunction(_Target.asend)
        assert _Target.send.__wrapped__ is originals[0]  # type: ignore[attr-defined]
        assert is_wrapped_by_llmtrace(_Target.send)
        assert calls == [(target, (1,)), (target, (1,)), (target, (1,))]
    finally:
        patches.restore()
    assert (_Target.send, _Target.asend) == originals


def test_a_method_another_instrumentation_wrapped_with_wrapt_keeps_its_instance(monkeypatch):
    # A wrapt proxy reports the class of the function it wraps: it must still be wrapped by
    # wrapt, so that the other instrumentation's wrapper keeps receiving the instance.
    import sys
    import types

    import wrapt

    class Client:
        def call(self, value: int) -> int:
            return value * 10

    module = types.ModuleType("llmtrace_test_client")
    module.Client = Client  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    seen: list[tuple[str, Any]] = []

    def other(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        seen.append(("other", instance))
        return wrapped(*args, **kwargs)

    def ours(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        seen.append(("llmtrace", instance))
        return wrapped(*args, **kwargs)

    wrapt.wrap_function_wrapper(module.__name__, "Client.call", other)
    patches = Patches()
    try:
        assert patches.wrap(module.__name__, "Client.call", ours)
        client = Client()
        assert client.call(2) == 20
        assert seen == [("llmtrace", client), ("other", client)]
    finally:
        patches.restore()


def test_a_streams_response_fields_of_any_shape_are_recorded_as_set_attributes_would():
    # The chat parser hands over the values it made plain itself apart from the rest; whatever
    # a server put in a chunk's fields, the span ends with what set_attributes would record.
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    from llmtrace.instrumentation.providers.openai import ChatChunkParser
    from llmtrace.sdk.streaming import StreamRecorder

    provider, exporter = _provider()
    keys = ("gen_ai.response.id", "gen_ai.response.model", "gen_ai.response.finish_reasons")
    for response_id, model, reason in (
        ("r1", "m", "stop"),
        (7, "m", 3),
        # Each alone, or the others' odd values would send them all through the SDK's checks.
        (["r1"], "m", "stop"),
        ("r1", ["m", "n"], "stop"),
        ("r1", "m", ["odd"]),
        ("r1", {"odd": 1}, "stop"),
    ):
        base = {"id": response_id, "object": "chat.completion.chunk", "created": 1, "model": model}
        chunks = [
            {**base, "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]},
            {**base, "choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 1}},
        ]
        exporter.clear()
        span = provider.get_tracer("t").start_span("call")
        recorder = StreamRecorder(span, parser=ChatChunkParser())
        for chunk in chunks:
            recorder.on_chunk(construct_type(type_=ChatCompletionChunk, value=chunk))
        recorder.end("completed")
        recorded = dict(exporter.get_finished_spans()[0].attributes or {})
        expected = _recorded(
            provider,
            exporter,
            lambda s, v=(response_id, model, [reason]): s.set_attributes(
                dict(zip(keys, v, strict=True))
            ),
        )
        assert {key: recorded.get(key) for key in keys} == {key: expected.get(key) for key in keys}
        assert recorded["gen_ai.usage.input_tokens"] == 2
        assert recorded["gen_ai.usage.output_tokens"] == 1
        assert recorded["llmtrace.stream.end"] == "completed"


def _has_content_read_field_by_field(chunk: Any) -> bool:
    # What the chat parser's first-token check answers, read the general way (every value
    # through field_of / fields_of, as before the check read pydantic models' dicts at once).
    from llmtrace.instrumentation.model_call import field_of, fields_of

    for choice in chunk.choices or ():
        delta = field_of(choice, "delta")
        if delta is None:
            if field_of(choice, "text"):
                return True
            continue
        get = fields_of(delta).get
        names = ("content", "tool_calls", "function_call", "refusal", "reasoning_content")
        if any(get(name) for name in names):
            return True
    return False


def test_the_first_token_check_answers_for_every_chunk_shape_as_reading_field_by_field():
    from types import SimpleNamespace

    from openai._models import construct_type
    from openai.types import Completion
    from openai.types.chat import ChatCompletionChunk

    from llmtrace.instrumentation.providers.openai import ChatChunkParser

    def chat(delta: dict[str, Any]) -> Any:
        value = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        value["choices"] = [{"index": 0, "delta": delta, "finish_reason": None}]
        return construct_type(type_=ChatCompletionChunk, value=value)

    def legacy(text: str) -> Any:
        value = {"id": "c", "object": "text_completion", "created": 1, "model": "m"}
        value["choices"] = [{"index": 0, "text": text, "finish_reason": None, "logprobs": None}]
        return construct_type(type_=Completion, value=value)

    tool_call = {"index": 0, "id": "t", "type": "function", "function": {"name": "f"}}
    cases = {
        "role only": (chat({"role": "assistant", "content": ""}), False),
        "empty delta": (chat({}), False),
        "content": (chat({"content": "x"}), True),
        "tool call": (chat({"tool_calls": [tool_call]}), True),
        "refusal": (chat({"refusal": "no"}), True),
        # A server's field the SDK does not declare (vLLM's, DeepSeek's) is an extra value.
        "reasoning as an extra": (chat({"role": "assistant", "reasoning_content": "hm"}), True),
        "empty extra": (chat({"role": "assistant", "reasoning_content": ""}), False),
        "other extra": (chat({"content": "", "logits": [1]}), False),
        "legacy text": (legacy("x"), True),
        "legacy empty": (legacy(""), False),
        "plain objects": (
            SimpleNamespace(choices=[SimpleNamespace(delta=SimpleNamespace(content="x"))]),
            True,
        ),
        "a dict delta": (SimpleNamespace(choices=[SimpleNamespace(delta={"refusal": "no"})]), True),
        "a dict delta, empty": (
            SimpleNamespace(choices=[SimpleNamespace(delta={"role": "a"})]),
            False,
        ),
        "no choices": (SimpleNamespace(choices=None), False),
        "two choices": (
            construct_type(
                type_=ChatCompletionChunk,
                value={
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": "m",
                    "choices": [
                        {"index": 0, "delta": {"content": ""}, "finish_reason": None},
                        {"index": 1, "delta": {"content": "y"}, "finish_reason": None},
                    ],
                },
            ),
            True,
        ),
    }
    parser = ChatChunkParser()
    # Twice: the first time a class is new to the check (read the general way), then known.
    model_call._model_fields.clear()
    for _ in range(2):
        for name, (chunk, expected) in cases.items():
            assert _has_content_read_field_by_field(chunk) is expected, name
            assert parser.has_content(chunk) is expected, name


def test_a_stream_ended_from_two_threads_at_once_ends_once():
    import sys
    import threading

    from llmtrace.sdk.streaming import NullParser, StreamRecorder

    class CountingParser(NullParser):
        finished = 0

        def finish(self, span: Any) -> None:
            CountingParser.finished += 1

    provider, exporter = _provider()
    tracer = provider.get_tracer("t")
    interval = sys.getswitchinterval()
    # Threads switched as often as the interpreter allows, so that two ends meet.
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(300):
            recorder = StreamRecorder(tracer.start_span("call"), parser=CountingParser())
            start = threading.Barrier(2)

            def end(how: str, recorder: StreamRecorder = recorder, start: Any = start) -> None:
                start.wait()
                recorder.end(how)

            threads = [threading.Thread(target=end, args=(how,)) for how in ("closed", "abandoned")]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert CountingParser.finished == 300
    ended = exporter.get_finished_spans()
    assert len(ended) == 300
    assert {span.attributes["llmtrace.stream.end"] for span in ended} <= {"closed", "abandoned"}


_OWN_PROVIDER = r"""
import json, sys
import llmtrace
from llmtrace.sdk import _compat
from llmtrace.instrumentation import model_call
from llmtrace.sdk.gate import get_tracer
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

class ReadsAttributes(Sampler):
    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None,
                      links=None, trace_state=None):
        keep = (attributes or {}).get("gen_ai.request.model") == "keep"
        return SamplingResult(Decision.RECORD_AND_SAMPLE if keep else Decision.DROP, attributes)

    def get_description(self):
        return "reads attributes"

answers = []
for sampler in (None, ReadsAttributes(), None):
    llmtrace.init(exporter="file", file_path=sys.argv[1], instrument=False, sampler=sampler)
    answers.append(model_call._attribute_blind(get_tracer()))
    for model in ("keep", "drop"):
        span = model_call.start_client_span("chat", {"gen_ai.request.model": model})
        answers.append([span.is_recording(), dict(getattr(span, "attributes", None) or {})])
        span.end()
    llmtrace.shutdown()
print(json.dumps(answers))
"""


def test_model_spans_of_llmtraces_own_provider_start_as_its_current_sampler_needs(tmp_path):
    # init() without a provider of the application's makes llmtrace's, whose sampler is a
    # switchable wrapper: model spans start without their attributes while the sampler inside
    # never reads them (cheaper), with them once init() gives it one that does.
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _OWN_PROVIDER, str(tmp_path / "spans.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    keep = [True, {"gen_ai.request.model": "keep"}]
    drop = [True, {"gen_ai.request.model": "drop"}]
    # (The default sampler is parent-based: known blind through the sampler-delegates fast path.)
    blind = _compat.enabled("sampler-delegates")
    assert answers == [blind, keep, drop, False, keep, [False, {}], blind, keep, drop]
