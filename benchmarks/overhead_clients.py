"""What llmtrace's client instrumentation adds to a model call, against a local simulated server.

Prints, for the real ``openai`` client talking to the simulated server (no injected delays):

- per non-streaming call: time added over no instrumentation by a hand-written OpenTelemetry span
  around the call, and by llmtrace (the ratio is what the target is about: <= 1.5x);
- per streamed chunk: time added by llmtrace, measured twice: end to end over a long stream, and
  in-process over the same parsed chunks without the network (the precise figure; target < 2 us).

Rounds of each variant are interleaved and medians taken, so a machine busy with other work
disturbs all variants alike. Spans go to an SDK provider with a batch processor and an exporter
that drops them: the cost of recording, not of shipping.

    python benchmarks/overhead_clients.py [--calls 400] [--chunks 2000]
"""

from __future__ import annotations

import argparse
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

from llmtrace.instrumentation import registry
from llmtrace.instrumentation.openai import ChatChunkParser
from llmtrace.streaming import StreamRecorder, TracedStream
from tests.servers.model_server import ModelServer

MESSAGES = [{"role": "user", "content": "Say hello"}]


class _Drop(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def _median_per_call(run: Callable[[], Any], calls: int) -> float:
    timings = []
    for _ in range(calls):
        started = time.perf_counter()
        run()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=2000, help="tokens in the long stream")
    args = parser.parse_args(argv)

    import openai

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_Drop()))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("hand-written")

    server = ModelServer().start()
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)

        def plain_call() -> Any:
            return client.chat.completions.create(model="m", messages=MESSAGES)

        def hand_written() -> Any:
            with tracer.start_as_current_span("chat m", kind=trace.SpanKind.CLIENT) as span:
                span.set_attribute("gen_ai.request.model", "m")
                result = plain_call()
                span.set_attribute("gen_ai.usage.output_tokens", result.usage.completion_tokens)
                return result

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
    finally:
        server.stop()
        provider.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
