"""What llmtrace's client instrumentation adds to a model call, against a local simulated server.

Prints, for the real ``openai`` client talking to the simulated server (no injected delays):

- per non-streaming call: time added over no instrumentation by a hand-written OpenTelemetry span
  around the call recording the same GenAI attributes, and by llmtrace (the ratio is what the
  target is about: <= 1.5x), over loopback HTTP and in process (CPU time, no network);
- per streamed chunk: time added by llmtrace, measured twice: end to end over a long stream, and
  in-process over the same parsed chunks without the network (the precise figure; target < 2 us).

Rounds of each variant are interleaved and medians taken, so a machine busy with other work
disturbs all variants alike. Spans go to an SDK provider with a batch processor and an exporter
that drops them: the cost of recording, not of shipping.

With ``--unsampled`` it counts instead, in CPU instructions under callgrind, what a model call
costs when its trace is not sampled (the common case at a low ``sample_ratio``): a whole and a
streamed call of the real ``openai`` client over an in-process transport, dropped by the sampler
as a root or made under a parent the sampler dropped, with and without a meter provider (the
GenAI client metrics), beside the same call sampled.

    python benchmarks/overhead_clients.py [--calls 400] [--chunks 2000]
    python benchmarks/overhead_clients.py --unsampled [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._peers import callgrind_start_library, instructions_of
from llmtrace.instrumentation import registry
from llmtrace.instrumentation.providers.openai import ChatChunkParser
from llmtrace.sdk.streaming import StreamRecorder, TracedStream
from tests.servers.model_server import Behaviour, ModelServer

MESSAGES = [{"role": "user", "content": "Say hello"}]


class _Drop(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def _hand_written_span(tracer: trace.Tracer, call: Callable[[], Any]) -> Any:
    """What a careful user writes by hand to learn what llmtrace records for a plain chat call:
    the GenAI request attributes at start, the response id, model, finish reasons and usage at
    the end, and the W3C context made current so that the HTTP layer could propagate it. (Fewer
    attributes would be cheaper, and would not answer the same questions.)"""
    with tracer.start_as_current_span(
        "chat m",
        kind=trace.SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "m",
            "server.address": "127.0.0.1",
            "server.port": 9,
            "llmtrace.stage": "ttft",
        },
    ) as span:
        result = call()
        span.set_attributes(
            {
                "gen_ai.response.id": result.id,
                "gen_ai.response.model": result.model,
                "gen_ai.response.finish_reasons": [c.finish_reason for c in result.choices],
                "gen_ai.usage.input_tokens": result.usage.prompt_tokens,
                "gen_ai.usage.output_tokens": result.usage.completion_tokens,
            }
        )
        return result


def _median_per_call(run: Callable[[], Any], calls: int) -> float:
    timings = []
    for _ in range(calls):
        started = time.perf_counter()
        run()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def _in_process_call_overhead(tracer: trace.Tracer, rounds: int) -> None:
    """The same three variants without the network: the real ``openai`` client over an
    ``httpx2.MockTransport`` that answers a recorded-shape completion at once. Loopback HTTP and
    the server thread add hundreds of microseconds of jitter per call on a shared 2-core machine;
    without them the added CPU cost per call is visible to the microsecond. (The transport is a
    stand-in only here, where the quantity measured is the client-side cost.)"""
    client = _mock_client()

    def plain_call() -> Any:
        return client.chat.completions.create(model="m", messages=MESSAGES)

    def hand_written() -> Any:
        return _hand_written_span(tracer, plain_call)

    for _ in range(200):
        plain_call()
    best: dict[str, float] = {"none": 1.0, "hand": 1.0, "llmtrace": 1.0}
    calls = 500
    # CPU time of this thread: the whole call runs here, and neither other processes on a busy
    # machine nor the span processor's export thread count against it. The cyclic GC is paused
    # while timing: the client allocates enough per call that collections land at random and
    # add more jitter than the cost being measured.
    import gc

    gc.disable()
    for _ in range(rounds * 4):
        gc.collect()
        for name, run in (("none", plain_call), ("hand", hand_written)):
            started = time.thread_time()
            for _ in range(calls):
                run()
            best[name] = min(best[name], (time.thread_time() - started) / calls)
        registry.instrument(["openai", "httpx2"])
        try:
            started = time.thread_time()
            for _ in range(calls):
                plain_call()
            best["llmtrace"] = min(best["llmtrace"], (time.thread_time() - started) / calls)
        finally:
            registry.uninstrument()
    gc.enable()
    hand = best["hand"] - best["none"]
    ours = best["llmtrace"] - best["none"]
    print("non-streaming call, in process (CPU time of the calling thread, best round; no network)")
    print(f"  no instrumentation      {best['none'] * 1e6:9.1f} us per call")
    print(f"  hand-written OTel span  {hand * 1e6:+9.1f} us added")
    print(f"  llmtrace                {ours * 1e6:+9.1f} us added")
    print(f"  ratio llmtrace / hand-written: {ours / hand:.2f}x (target <= 1.5x)")


def _stream_body() -> bytes:
    """A chat completion stream as the simulated server sends it: the role-only chunk, four
    content chunks, the finish reason and the usage chunk."""
    usage = {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        payload = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(payload)}\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": token}) for token in ("Hello", ",", " world", "!")]
    events += [chunk({}, "stop"), chunk(None, usage=usage), "data: [DONE]\n\n"]
    return "".join(events).encode()


def _mock_client() -> Any:
    import httpx2
    import openai

    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi"}}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
    stream = _stream_body()

    def answer(request: Any) -> Any:
        if b'"stream":true' in request.content.replace(b" ", b""):
            return httpx2.Response(
                200, content=stream, headers={"content-type": "text/event-stream"}
            )
        return httpx2.Response(200, json=body)

    transport = httpx2.MockTransport(answer)
    return openai.OpenAI(
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
        max_retries=0,
        http_client=httpx2.Client(transport=transport),
    )


def _instruction_child(variant: str, calls: int, callgrind_library: str) -> None:
    """Run inside valgrind: warm up, then ``calls`` calls of one variant. With a library that
    turns callgrind's instrumentation on, imports and set-up run uninstrumented (several times
    faster; they cancel out of the difference anyway)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Drop()))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("hand-written")
    client = _mock_client()

    def call() -> Any:
        return client.chat.completions.create(model="m", messages=MESSAGES)

    if variant == "llmtrace":
        registry.instrument(["openai", "httpx2"])
    run = (lambda: _hand_written_span(tracer, call)) if variant == "hand" else call
    if callgrind_library:
        import ctypes

        ctypes.CDLL(callgrind_library).start()
    for _ in range(20 + calls):
        run()


def _instructions_per_call() -> None:
    """Instruction counts under callgrind: the same for the same inputs, whatever else the
    machine is doing (wall-clock figures on a shared 2-core machine swing by +-30%). Each
    variant runs twice, with 10 and 110 calls, so start-up and warm-up cancel out."""
    import shutil

    if shutil.which("valgrind") is None:
        print("instruction counts: valgrind not installed (apt-get install valgrind)")
        return
    library = callgrind_start_library() or ""
    per_call: dict[str, float] = {}
    for variant in ("none", "hand", "llmtrace"):
        counts = []
        for calls in (10, 110):
            counts.append(
                instructions_of(__file__, ["--instruction-child", variant, str(calls)], library)
            )
        per_call[variant] = (counts[1] - counts[0]) / 100
    hand = per_call["hand"] - per_call["none"]
    ours = per_call["llmtrace"] - per_call["none"]
    print("non-streaming call, CPU instructions (callgrind; deterministic)")
    print(f"  no instrumentation      {per_call['none'] / 1e3:9.0f} k instructions per call")
    print(f"  hand-written OTel span  {hand / 1e3:+9.0f} k added")
    print(f"  llmtrace                {ours / 1e3:+9.0f} k added")
    print(f"  ratio llmtrace / hand-written: {ours / hand:.2f}x (target <= 1.5x)")


# (sampling, meter provider set) of each configuration --unsampled counts, after the call with
# no instrumentation: "sampled" (the default parent-based always-on sampler), "dropped" (a root
# call the sampler drops: ratio 0, the path of 9 calls in 10 at ratio 0.1) and "dropped-parent"
# (a call under a parent span the sampler dropped, such as an unsampled server request's).
UNSAMPLED_CONFIGURATIONS = (
    ("sampled", True),
    ("dropped", False),
    ("dropped", True),
    ("dropped-parent", False),
    ("dropped-parent", True),
)


# The attributes a whole chat call's span ends with, as the metrics read them.
_CALL_ATTRIBUTES = {
    "llmtrace.stage": "ttft",
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "m",
    "gen_ai.response.model": "m",
    "gen_ai.response.id": "chatcmpl-1",
    "gen_ai.response.finish_reasons": ("stop",),
    "server.address": "127.0.0.1",
    "server.port": 9,
    "gen_ai.usage.input_tokens": 5,
    "gen_ai.usage.output_tokens": 1,
}


def _unsampled_child(kind: str, sampling: str, metrics: bool, calls: int, library: str) -> None:
    """Run inside valgrind: ``calls`` calls of one configuration (see UNSAMPLED_CONFIGURATIONS;
    ``sampling`` "none" is the call with no instrumentation), after a warm-up. ``kind`` "points":
    only the GenAI histogram points of a whole call, recorded through the SDK."""
    from opentelemetry import context as otel_context
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased

    chosen = ParentBased(ALWAYS_ON) if sampling == "sampled" else ParentBased(TraceIdRatioBased(0))
    provider = TracerProvider(sampler=chosen)
    provider.add_span_processor(SimpleSpanProcessor(_Drop()))
    trace.set_tracer_provider(provider)
    if metrics:
        from opentelemetry import metrics as metrics_api
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        metrics_api.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    if sampling == "dropped-parent":
        parent = trace.get_tracer("application").start_span("request")
        assert not parent.is_recording()
        otel_context.attach(trace.set_span_in_context(parent))
    client = _mock_client()

    def call() -> Any:
        return client.chat.completions.create(model="m", messages=MESSAGES)

    def stream() -> Any:
        return sum(
            1 for _ in client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        )

    def points() -> None:
        from llmtrace.sdk.metrics import record_model_call

        record_model_call(_CALL_ATTRIBUTES, 0.1)

    if sampling != "none":
        registry.instrument(["openai", "httpx2"])
    run = {"stream": stream, "call": call, "points": points}[kind]
    if library:
        import ctypes

        ctypes.CDLL(library).start()
    for _ in range(20 + calls):
        run()


def _unsampled_instructions(seeds: list[int]) -> None:
    """Instructions per call of each configuration, mean over ``seeds``: each runs with 10 and
    110 calls (start-up and warm-up cancel out), its own process each time."""
    import shutil

    if shutil.which("valgrind") is None:
        print("instruction counts: valgrind not installed (apt-get install valgrind)")
        return
    library = callgrind_start_library() or ""
    configurations = [("none", False), *UNSAMPLED_CONFIGURATIONS]
    for kind in ("call", "stream"):
        per_call: dict[tuple[str, bool], float] = {}
        for sampling, metrics in configurations:
            totals = []
            for seed in seeds:
                counts = [
                    instructions_of(
                        __file__,
                        [
                            "--unsampled-child",
                            kind,
                            sampling,
                            "metrics" if metrics else "no-metrics",
                            str(calls),
                        ],
                        library,
                        seed,
                    )
                    for calls in (10, 110)
                ]
                totals.append((counts[1] - counts[0]) / 100)
            per_call[sampling, metrics] = statistics.mean(totals)
        base = per_call["none", False]
        what = "whole call" if kind == "call" else "streamed call (7 chunks)"
        print(f"{what}, CPU instructions (callgrind, mean over hash seeds {seeds})")
        print(f"  no instrumentation                     {base / 1e3:9.0f} k per call")
        for sampling, metrics in UNSAMPLED_CONFIGURATIONS:
            label = f"{sampling}, {'metrics' if metrics else 'no meter provider'}"
            print(f"  {label:<38} {(per_call[sampling, metrics] - base) / 1e3:+9.0f} k added")
    print("of which the GenAI histogram points of a whole call through the SDK (3 points):")
    print(f"  {_points_instructions(library, seeds) / 1e3:47.0f} k")


def _points_instructions(library: str, seeds: list[int]) -> float:
    """Instructions of ``record_model_call`` for a whole call's attributes (three histogram
    points through the OpenTelemetry SDK), mean over ``seeds``."""
    totals = []
    for seed in seeds:
        counts = [
            instructions_of(
                __file__,
                ["--unsampled-child", "points", "none", "metrics", str(calls)],
                library,
                seed,
            )
            for calls in (10, 110)
        ]
        totals.append((counts[1] - counts[0]) / 100)
    return statistics.mean(totals)


def _other_providers(server: ModelServer, tracer: trace.Tracer, args: argparse.Namespace) -> None:
    """The same comparison for every provider in ``benchmarks/providers`` (one run each)."""
    from benchmarks.providers import factories

    rows = []
    for module_name, factory in factories():
        server.reset()
        try:
            case = factory(server, tracer)
        except ImportError as exc:
            print(f"  {module_name}: left out ({exc})")
            continue
        for _ in range(20):
            case.call()
        samples: dict[str, list[float]] = {"none": [], "hand": [], "llmtrace": []}
        stream_plain: list[float] = []
        stream_traced: list[float] = []
        chunk_count = 0
        for _ in range(args.rounds):
            samples["none"].append(_median_per_call(case.call, args.calls // 4))
            samples["hand"].append(_median_per_call(case.hand_written, args.calls // 4))
            if case.stream is not None:
                server.configure(tokens=["x"] * (args.chunks // 4))
                stream_plain.append(_median_per_call(case.stream, 3))
            registry.instrument(case.instrument)
            try:
                if case.stream is not None:
                    stream_traced.append(_median_per_call(case.stream, 3))
                    chunk_count = case.stream()
                    server.configure(tokens=Behaviour().tokens)
                samples["llmtrace"].append(_median_per_call(case.call, args.calls // 4))
            finally:
                registry.uninstrument()
                server.configure(tokens=Behaviour().tokens)
        base = statistics.median(samples["none"])
        hand = statistics.median(samples["hand"]) - base
        ours = statistics.median(samples["llmtrace"]) - base
        per_chunk = (
            (statistics.median(stream_traced) - statistics.median(stream_plain)) / chunk_count
            if chunk_count
            else None
        )
        rows.append((case, base, hand, ours, per_chunk))
    if not rows:
        return
    print("other providers, over loopback HTTP (median of per-round medians)")
    print(
        f"  {'client':<22} {'no instr.':>10} {'hand-written':>13} {'llmtrace':>10} {'ratio':>6}"
        f" {'per chunk':>10}"
    )
    for case, base, hand, ours, per_chunk in rows:
        chunk = f"{per_chunk * 1e6:+8.2f}us" if per_chunk is not None else "        -"
        print(
            f"  {case.name:<22} {base * 1e6:8.1f}us {hand * 1e6:+11.1f}us {ours * 1e6:+8.1f}us"
            f" {ours / hand if hand > 0 else float('nan'):5.2f}x {chunk:>10}"
        )
        for note in case.notes:
            print(f"    {note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=2000, help="tokens in the long stream")
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions under callgrind"
    )
    parser.add_argument(
        "--unsampled",
        action="store_true",
        help="count the instructions of calls whose trace is not sampled, and nothing else",
    )
    parser.add_argument("--seeds", default="0", help="hash seeds for --unsampled, e.g. 0,1,2")
    parser.add_argument("--instruction-child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--unsampled-child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.instruction_child:
        variant, calls, library = args.instruction_child
        _instruction_child(variant, int(calls), library)
        return 0
    if args.unsampled_child:
        kind, sampling, metrics, calls, library = args.unsampled_child
        _unsampled_child(kind, sampling, metrics == "metrics", int(calls), library)
        return 0
    if args.unsampled:
        _unsampled_instructions([int(seed) for seed in args.seeds.split(",")])
        return 0

    import openai

    provider = TracerProvider()
    # A queue large enough that no span is dropped: dropping would make the traced runs cheaper.
    provider.add_span_processor(BatchSpanProcessor(_Drop(), max_queue_size=1_000_000))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("hand-written")

    server = ModelServer().start()
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)

        def plain_call() -> Any:
            return client.chat.completions.create(model="m", messages=MESSAGES)

        def hand_written() -> Any:
            return _hand_written_span(tracer, plain_call)

        for _ in range(50):
            plain_call()
        samples: dict[str, list[float]] = {"none": [], "hand-written span": [], "llmtrace": []}
        for _ in range(args.rounds):
            samples["none"].append(_median_per_call(plain_call, args.calls))
            samples["hand-written span"].append(_median_per_call(hand_written, args.calls))
            registry.instrument(["openai", "httpx2"])
            try:
                samples["llmtrace"].append(_median_per_call(plain_call, args.calls))
            finally:
                registry.uninstrument()
        base = statistics.median(samples["none"])
        hand = statistics.median(samples["hand-written span"]) - base
        ours = statistics.median(samples["llmtrace"]) - base
        print("non-streaming call (median of per-round medians)")
        print(f"  no instrumentation      {base * 1e6:9.1f} us per call")
        print(f"  hand-written OTel span  {hand * 1e6:+9.1f} us added")
        print(f"  llmtrace                {ours * 1e6:+9.1f} us added")
        print(f"  ratio llmtrace / hand-written: {ours / hand:.2f}x (target <= 1.5x)")
        _in_process_call_overhead(tracer, args.rounds)

        server.configure(tokens=["x"] * args.chunks)

        def stream_call() -> int:
            return sum(
                1 for _ in client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            )

        plain_stream, traced_stream = [], []
        for _ in range(args.rounds):
            plain_stream.append(_median_per_call(stream_call, 5))
            registry.instrument(["openai", "httpx2"])
            try:
                traced_stream.append(_median_per_call(stream_call, 5))
            finally:
                registry.uninstrument()
        chunk_count = args.chunks + 2
        end_to_end = (
            statistics.median(traced_stream) - statistics.median(plain_stream)
        ) / chunk_count

        chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
        real_tracer = trace.get_tracer("llmtrace")
        in_process_plain, in_process_traced = [], []
        for _ in range(args.rounds * 4):
            started = time.perf_counter()
            for _chunk in iter(chunks):
                pass
            in_process_plain.append(time.perf_counter() - started)
            span = real_tracer.start_span("chat m")
            recorder = StreamRecorder(span, parser=ChatChunkParser())
            started = time.perf_counter()
            for _chunk in TracedStream(iter(chunks), recorder):
                pass
            in_process_traced.append(time.perf_counter() - started)
        per_chunk = (
            statistics.median(in_process_traced) - statistics.median(in_process_plain)
        ) / len(chunks)
        # Best of the rounds: the CPU cost itself, without time lost to other processes.
        best_per_chunk = (min(in_process_traced) - min(in_process_plain)) / len(chunks)
        print(f"streamed chunk ({chunk_count} chunks per stream)")
        print(
            f"  llmtrace, end to end    {end_to_end * 1e6:+9.2f} us per chunk (network noise included)"
        )
        print(
            f"  llmtrace, in process    {per_chunk * 1e6:+9.2f} us per chunk, median (target < 2 us)"
        )
        print(f"  llmtrace, in process    {best_per_chunk * 1e6:+9.2f} us per chunk, best round")
        _other_providers(server, tracer, args)
    finally:
        server.stop()
        provider.shutdown()
    if args.instructions:
        _instructions_per_call()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
