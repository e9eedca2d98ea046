"""Cost of llmtrace's decorators, measured side by side in one run.

Prints, per call of a no-op function:
  - a bare OpenTelemetry span (``tracer.start_as_current_span``) around it, the reference;
  - ``@llmtrace.tool`` around it (target: <= 1.3x the reference);
  - ``@llmtrace.tool`` when the span is not sampled, over the undecorated call (target: < 1 µs):
    once with llmtrace's sampler at ratio 0, once under a parent a parent-based sampler dropped.

Both sampled variants use the same SDK TracerProvider with a no-op exporter, so the figures
compare the wrappers, not the export. Each figure is the best of several repeats (the least
disturbed by other work on a shared machine).

Then the request breakdown at the source (``llmtrace.sdk.request_metrics``), on a RAG-like request
of seven spans exported through a batch processor and the OTLP encoder: the processor's added
CPU time per request and per span (over the CPU time the request's spans cost without it), where
it goes (the breakdown, the histogram points), the same with the points recorded through the
OpenTelemetry SDK instead of llmtrace's own aggregation, what recording unsampled traces costs,
and the memory it holds with 10,000 requests in flight. The added cost is also counted in CPU
instructions under callgrind (when valgrind is installed): CPU times on a shared machine swing
by a third from run to run, instruction counts repeat. They are the mean over three hash seeds,
each one layout of every dict and set, which alone moves a request's count by a few thousand.
The target (the breakdown adds < 10% to the cost of the request's spans) is judged on the
instructions, the figure of record here as in the peer comparison; the CPU-time share is printed
beside it (the hooks run cold between the SDK's own work, so it reads higher).

    python benchmarks/overhead_core.py [--calls 200000] [--requests 3000] [--only-requests]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import timeit
from collections.abc import Callable, Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

REPEATS = 7


class DiscardExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def per_call_ns(func: Callable[[], object], calls: int) -> float:
    return min(timeit.repeat(func, number=calls, repeat=REPEATS)) / calls * 1e9


def noop() -> None:
    return None


def unsampled_ratio_zero(calls: int) -> tuple[float, float]:
    """Run in a fresh process: llmtrace owns the provider there and samples nothing."""
    import llmtrace

    llmtrace.init(service_name="bench", exporter="none", sample_ratio=0.0, instrument=False)
    decorated = llmtrace.tool(name="noop")(noop)
    return per_call_ns(noop, calls), per_call_ns(decorated, calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--ratio-zero-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--only-requests", action="store_true")
    parser.add_argument("--request-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.request_child:
        breakdown, requests, library = args.request_child
        _request_instruction_child(breakdown == "1", int(requests), library)
        return
    if args.ratio_zero_child:
        bare, decorated = unsampled_ratio_zero(args.calls)
        print(f"{bare} {decorated}")
        return
    if args.only_requests:
        request_breakdown(args.requests)
        return

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(DiscardExporter()))
    trace.set_tracer_provider(provider)
    import llmtrace

    llmtrace.init(exporter="none", instrument=False)  # the provider above is the application's
    tracer = trace.get_tracer("bench")

    def hand_written() -> None:
        with tracer.start_as_current_span("noop"):
            noop()

    decorated = llmtrace.tool(name="noop")(noop)
    calls = args.calls // 4  # sampled calls are ~100x slower than the bare one
    bare = per_call_ns(noop, args.calls)
    reference = per_call_ns(hand_written, calls)
    with_llmtrace = per_call_ns(decorated, calls)

    dropped_parent = NonRecordingSpan(
        SpanContext(trace_id=1, span_id=1, is_remote=True, trace_flags=TraceFlags(0))
    )
    with trace.use_span(dropped_parent):
        bare_in_parent = per_call_ns(noop, args.calls)
        unsampled_parent = per_call_ns(decorated, args.calls)

    child = subprocess.run(
        [sys.executable, __file__, "--calls", str(args.calls), "--ratio-zero-child"],
        capture_output=True,
        text=True,
        check=True,
    )
    bare_zero, decorated_zero = (float(x) for x in child.stdout.split())

    ratio = with_llmtrace / reference
    print(f"undecorated no-op call                     {bare:10.0f} ns")
    print(f"hand-written start_as_current_span         {reference:10.0f} ns")
    print(f"@llmtrace.tool (sampled)                   {with_llmtrace:10.0f} ns")
    print(f"  ratio to the hand-written span           {ratio:10.2f} x   (target <= 1.3x)")
    added_parent = unsampled_parent - bare_in_parent
    added_zero = decorated_zero - bare_zero
    print(
        f"@llmtrace.tool, parent not sampled         {added_parent:10.0f} ns added (target < 1000 ns)"
    )
    print(
        f"@llmtrace.tool, sample_ratio=0             {added_zero:10.0f} ns added (target < 1000 ns)"
    )
    ok = ratio <= 1.3 and added_parent < 1000 and added_zero < 1000
    print("targets met" if ok else "TARGETS MISSED")
    print()
    request_breakdown(args.requests)


class EncodingExporter(SpanExporter):
    """Encodes each batch as the OTLP exporter does before sending it, and drops the bytes."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        encode_spans(spans).SerializeToString()
        return SpanExportResult.SUCCESS


def _rag_request(tracer: trace.Tracer) -> None:
    from llmtrace import semconv as sc

    with tracer.start_as_current_span(
        "POST /ask", kind=trace.SpanKind.SERVER, attributes={sc.HTTP_ROUTE: "/ask"}
    ):
        with tracer.start_as_current_span("embed", attributes={sc.STAGE: "embedding"}):
            pass
        with tracer.start_as_current_span("search", attributes={sc.STAGE: "retrieval"}):
            pass
        with tracer.start_as_current_span("rerank", attributes={sc.STAGE: "rerank"}):
            pass
        model_call = {
            sc.STAGE: sc.LLM_STAGE,
            sc.GEN_AI_OPERATION_NAME: "chat",
            sc.GEN_AI_REQUEST_MODEL: "m",
            sc.TIME_TO_FIRST_TOKEN: 1e-7,
            sc.GEN_AI_USAGE_INPUT_TOKENS: 100,
            sc.GEN_AI_USAGE_OUTPUT_TOKENS: 20,
        }
        with (
            tracer.start_as_current_span(
                "chat m", kind=trace.SpanKind.CLIENT, attributes=model_call
            ),
            tracer.start_as_current_span("POST", kind=trace.SpanKind.CLIENT),
        ):
            pass
        with tracer.start_as_current_span("format", attributes={sc.STAGE: "postprocess"}):
            pass


SPANS_PER_REQUEST = 7


def _pipeline(
    breakdown: bool,
    sampler: object = None,
    record_unsampled: bool = False,
    aggregation: str = "llmtrace",
    export_at_flush: bool = False,
) -> tuple:
    """A private tracer provider (spans batched to the encoding exporter) and, with ``breakdown``,
    the request metrics processor recording into its own meter provider: its histograms
    aggregated by llmtrace and exported by that provider's reader (``aggregation="llmtrace"``,
    what ``llmtrace.init()`` sets up when it exports metrics itself) or recorded through the SDK
    (``"sdk"``, as on an application's own MeterProvider). ``export_at_flush``: the batch
    processor's thread never exports; ``force_flush`` does, in the caller's thread."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    from llmtrace.sdk._compat import RequestMetricsReader
    from llmtrace.sdk.request_metrics import (
        RecordUnsampled,
        RequestMetricsProcessor,
        request_histograms,
    )

    chosen = sampler or ALWAYS_ON
    provider = TracerProvider(sampler=RecordUnsampled(chosen) if record_unsampled else chosen)  # type: ignore[arg-type]
    # a queue that never fills: every span is exported, none dropped for want of room
    queue = 1 << 22
    # a batch as large as the queue and a delay past any run: the thread never wakes to export
    never = {"max_export_batch_size": queue, "schedule_delay_millis": 3_600_000}
    provider.add_span_processor(
        BatchSpanProcessor(
            EncodingExporter(), max_queue_size=queue, **(never if export_at_flush else {})
        )
    )
    processor = None
    if breakdown:
        if aggregation == "sdk":
            meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
            processor = RequestMetricsProcessor(meters)
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            histograms = request_histograms()
            reader = RequestMetricsReader(
                OTLPMetricExporter(endpoint="http://127.0.0.1:9/v1/metrics"),
                histograms,
                Resource.create({}),
                AggregationTemporality.CUMULATIVE,
                export_interval_millis=3_600_000,  # never during the run
            )
            meters = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
            processor = RequestMetricsProcessor(meters, histograms=histograms)
        provider.add_span_processor(processor)
    return provider, processor


def _request_instruction_child(breakdown: bool, requests: int, callgrind_library: str) -> None:
    """Run inside valgrind: a pipeline with or without the breakdown, warmed up, then
    ``requests`` requests. With a library that turns callgrind's instrumentation on, imports and
    set-up run uninstrumented.

    The spans are exported by a flush every ``FLUSH_EVERY`` requests, in batches of the SDK's
    default size, in this thread: the batch processor's own thread, woken while the requests
    run, takes the interpreter lock from them at moments that depend on the machine's load,
    which moved the count by several thousand instructions per request between runs."""
    import gc

    provider, _ = _pipeline(breakdown, export_at_flush=True)
    tracer = provider.get_tracer("bench")
    for _ in range(200):
        _rag_request(tracer)
    provider.force_flush()
    gc.collect()
    if callgrind_library:
        import ctypes

        ctypes.CDLL(callgrind_library).start()
    for number in range(1, requests + 1):
        _rag_request(tracer)
        if number % FLUSH_EVERY == 0:
            provider.force_flush()
    provider.force_flush()


# Requests whose spans fill one batch of the SDK's default size (512 spans) at most.
FLUSH_EVERY = 512 // SPANS_PER_REQUEST
# Requests of the two runs of each pipeline: start-up cancels out in their difference.
INSTRUCTION_REQUESTS = (300, 2300)


def _instructions_per_request() -> tuple[tuple[int, ...], dict[bool, list[float]]] | None:
    """The hash seeds of the callgrind runs (the peer comparison's: one seed is one layout of
    every dict and set, which moves the same code's count by several thousand instructions per
    request), and the CPU instructions per request under callgrind without and with the
    breakdown under each: the figure that repeats on a shared machine, where CPU times swing by
    a third from run to run. Each pipeline runs twice (``INSTRUCTION_REQUESTS``) so start-up
    cancels out; the runs go two at a time (instruction counts do not mind)."""
    import shutil
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks._peers import SEEDS, callgrind_start_library, instructions_of

    if shutil.which("valgrind") is None:
        return None
    library = callgrind_start_library() or ""

    def count(job: tuple[bool, int, int]) -> int:
        breakdown, requests, seed = job
        arguments = ["--request-child", "1" if breakdown else "0", str(requests)]
        return instructions_of(__file__, arguments, library, seed)

    jobs = [
        (breakdown, requests, seed)
        for seed in SEEDS
        for breakdown in (False, True)
        for requests in INSTRUCTION_REQUESTS
    ]
    with ThreadPoolExecutor(2) as pool:
        counts = dict(zip(jobs, pool.map(count, jobs), strict=True))
    few, many = INSTRUCTION_REQUESTS
    return SEEDS, {
        breakdown: [
            (counts[(breakdown, many, seed)] - counts[(breakdown, few, seed)]) / (many - few)
            for seed in SEEDS
        ]
        for breakdown in (False, True)
    }


def _cpu_per_request_us(provider: TracerProvider, requests: int) -> float:
    """Process CPU time (every thread: the batch exporter's too) per request, in microseconds."""
    import time

    tracer = provider.get_tracer("bench")
    best = float("inf")
    for _ in range(REPEATS):
        started = time.process_time()
        for _ in range(requests):
            _rag_request(tracer)
        provider.force_flush()
        best = min(best, time.process_time() - started)
    return best / requests * 1e6


def request_breakdown(requests: int) -> None:
    """Print the request breakdown processor's costs (see the module docstring)."""
    import gc
    import tracemalloc

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    from llmtrace.sdk.request_metrics import figures, hold

    spans_only, _ = _pipeline(False)
    with_breakdown, processor = _pipeline(True)
    through_sdk, sdk_processor = _pipeline(True, aggregation="sdk")
    # interleaved, so that all see the same machine load; each one's best
    best = {"base": float("inf"), "full": float("inf"), "sdk": float("inf")}
    for _ in range(3):
        for name, pipeline in (
            ("base", spans_only),
            ("full", with_breakdown),
            ("sdk", through_sdk),
        ):
            best[name] = min(best[name], _cpu_per_request_us(pipeline, requests // 3))
    base, full, full_sdk = best["base"], best["full"], best["sdk"]
    added = full - base

    # where the added time goes: a child span's start and end, the breakdown, the points
    captured = InMemorySpanExporter()
    plain = TracerProvider()
    plain.add_span_processor(SimpleSpanProcessor(captured))
    _rag_request(plain.get_tracer("bench"))
    finished = captured.get_finished_spans()
    inferred: list = []
    declared: list = []
    root = finished[-1]
    children = [hold(span, span.context.span_id, inferred, declared) for span in finished[:-1]]
    assert processor is not None
    open_root = with_breakdown.get_tracer("bench").start_span("open root")
    child = with_breakdown.get_tracer("bench").start_span(
        "child", context=trace.set_span_in_context(open_root)
    )
    child.end()
    calls = requests * 10
    processor.max_spans = calls * REPEATS + 1  # every end is kept, as in a request

    def start_and_end() -> None:
        processor.on_start(child)  # type: ignore[arg-type]
        processor.on_end(child)  # type: ignore[arg-type]

    per_span_ns = per_call_ns(start_and_end, calls)
    breakdown_us = (
        min(
            timeit.repeat(
                lambda: figures(root, children, inferred, True, declared),
                number=requests,
                repeat=REPEATS,
            )
        )
        / requests
        * 1e6
    )
    request = figures(root, children, inferred, True, declared)
    record_us = (
        min(timeit.repeat(lambda: processor._record(request), number=requests, repeat=REPEATS))
        / requests
        * 1e6
    )
    assert sdk_processor is not None
    record_sdk_us = (
        min(timeit.repeat(lambda: sdk_processor._record(request), number=requests, repeat=REPEATS))
        / requests
        * 1e6
    )

    # sampling: 1% kept; the breakdown of every request needs every span recorded
    ratio = ParentBased(TraceIdRatioBased(0.01))
    sampled_only, _ = _pipeline(False, ratio)
    every_request, _ = _pipeline(True, ratio, record_unsampled=True)
    unsampled_base = min(_cpu_per_request_us(sampled_only, requests // 3) for _ in range(2))
    unsampled_full = min(_cpu_per_request_us(every_request, requests // 3) for _ in range(2))

    # memory: 10,000 requests in flight, each with its six children ended and held
    in_flight = 10_000
    gc.collect()
    memory = {}
    for held in (False, True):
        # no exporter: without the processor the ended children are freed at once
        provider = TracerProvider()
        if held:
            from llmtrace.sdk.request_metrics import RequestMetricsProcessor

            provider.add_span_processor(RequestMetricsProcessor())
        tracer = provider.get_tracer("bench")
        tracemalloc.start()
        roots = []
        for _ in range(in_flight):
            open_request = tracer.start_span("POST /ask")
            context = trace.set_span_in_context(open_request)
            for name in ("embed", "search", "rerank", "chat", "POST", "format"):
                tracer.start_span(name, context=context).end()
            roots.append(open_request)
        memory[held], _peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del roots
        gc.collect()
    held_bytes = memory[True] - memory[False]

    per_span = added / SPANS_PER_REQUEST
    print(
        f"request breakdown at the source, a request of {SPANS_PER_REQUEST} spans (OTLP-encoded, batched):"
    )
    print(f"  CPU per request, spans only                 {base:10.1f} us")
    print(f"  CPU per request, with the breakdown         {full:10.1f} us")
    print(
        f"  added per request                           {added:10.1f} us  ({added / base:.0%} of the spans' CPU time; the target is judged on the instructions)"
    )
    print(f"  added per span (averaged over the request)  {per_span:10.1f} us")
    print(f"  of which: a child span's start and end      {per_span_ns / 1000:10.2f} us")
    print(f"            the breakdown at the root's end   {breakdown_us:10.1f} us")
    points = 1 + len(request.stages) + 3
    print(f"            the {points} histogram points          {record_us:10.1f} us")
    counted = _instructions_per_request()
    if counted is None:
        print("  CPU instructions: valgrind not installed (apt-get install valgrind)")
    else:
        import statistics

        seeds, instructions = counted
        shares = [
            (with_it - spans_only) / spans_only
            for spans_only, with_it in zip(instructions[False], instructions[True], strict=True)
        ]
        spans_only = statistics.fmean(instructions[False])
        added_instructions = statistics.fmean(instructions[True]) - spans_only
        print(
            f"  CPU instructions per request (callgrind, mean of hash seeds"
            f" {', '.join(map(str, seeds))}):\n"
            f"    {spans_only / 1e3:.0f} k spans only, {added_instructions / 1e3:+.0f} k with the"
            f" breakdown ({added_instructions / spans_only:.1%}, seeds {min(shares):.1%} to"
            f" {max(shares):.1%}; target < 10%)"
        )
    print("through the OpenTelemetry SDK (an application's own MeterProvider):")
    print(
        f"  CPU per request, with the breakdown         {full_sdk:10.1f} us"
        f"  (+{full_sdk - base:.1f} us, {(full_sdk - base) / base:.0%})"
    )
    print(f"  the {points} histogram points                  {record_sdk_us:10.1f} us")
    print("sampling 1%, CPU per request:")
    print(f"  unsampled traces dropped (counted only if sampled)  {unsampled_base:8.1f} us")
    print(f"  unsampled traces recorded for the breakdown         {unsampled_full:8.1f} us")
    print(f"memory held with {in_flight} requests in flight (6 ended spans each):")
    print(f"  {held_bytes / 1e6:.1f} MB, {held_bytes / in_flight / 1000:.1f} kB per request")


if __name__ == "__main__":
    main()
