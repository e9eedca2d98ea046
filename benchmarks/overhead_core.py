"""Cost of llmtrace's decorators, measured side by side in one run.

Prints, per call of a no-op function:
  - a bare OpenTelemetry span (``tracer.start_as_current_span``) around it, the reference;
  - ``@llmtrace.tool`` around it (target: <= 1.3x the reference);
  - ``@llmtrace.tool`` when the span is not sampled, over the undecorated call (target: < 1 µs):
    once with llmtrace's sampler at ratio 0, once under a parent a parent-based sampler dropped.

Both sampled variants use the same SDK TracerProvider with a no-op exporter, so the figures
compare the wrappers, not the export. Each figure is the best of several repeats (the least
disturbed by other work on a shared machine).

    python benchmarks/overhead_core.py [--calls 200000]
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
    args = parser.parse_args()
    if args.ratio_zero_child:
        bare, decorated = unsampled_ratio_zero(args.calls)
        print(f"{bare} {decorated}")
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


if __name__ == "__main__":
    main()
