"""Memory over a long run: does llmtrace hold on to anything after a request is done?

Runs requests one after another, each shaped like a RAG answer: a ``@llmtrace.workflow`` that
queries a qdrant ``:memory:`` store (instrumented), streams a chat completion with the real
``openai`` client from the simulated model server (``stream=True``, consumed to the end) and calls
a ``@llmtrace.tool``. llmtrace is initialised as an application would: its embedded file exporter
(OTLP JSON lines, rotated by size) behind the normal ``BatchSpanProcessor``, or with
``--exporter drop`` an exporter that discards.

The model server runs in a child process, so the resident set size (RSS) measured is the
client's alone, and the server's record of requests is emptied there as the run goes.

Prints the RSS after the first 1,000 requests (the level once every cache and pool is warm) and
then every 10,000, with the change since that level. Target: the final RSS within 20 MiB of the
level after 1,000 requests.

    python benchmarks/soak.py [--requests 100000] [--client async|sync] [--exporter file|drop]
                              [--tracemalloc]

``--tracemalloc`` also prints where the Python memory allocated after the 1,000-request mark and
still held at the end was allocated: what grows. Tracing starts at that mark and makes every later
request tens of times slower, so pair it with a short run (``--requests 11000``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

COLLECTION = "handbook"
QUERY = [0.9, 0.1, 0.0, 0.0]
MODEL = "sim-model-1"
MESSAGES = [{"role": "user", "content": "Where is my order?"}]
BASELINE_AT = 1_000
REPORT_EVERY = 10_000
TARGET_MIB = 20.0
SPANS_PER_REQUEST = 4
TRACEBACK_FRAMES = 12


def resident_mib() -> float:
    """The process's current resident set size (not the peak), from /proc."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


# --- the model server, in a child process -----------------------------------------------------


def serve() -> None:
    """Child mode: run the simulated server, print its port, run until stdin closes."""
    from tests.servers.model_server import ModelServer

    server = ModelServer().start()

    def forget_requests() -> None:
        # The server records every request for the tests; a soak would make that a leak of its own.
        while True:
            time.sleep(1)
            server.requests.clear()

    threading.Thread(target=forget_requests, daemon=True).start()
    print(server.port, flush=True)
    sys.stdin.read()
    server.stop()


def start_server() -> tuple[subprocess.Popen[str], str]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    port = int(child.stdout.readline())
    return child, f"http://127.0.0.1:{port}/v1"


# --- span pipeline --------------------------------------------------------------------------


class Drop(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


class CountEnded(SpanProcessor):
    """Counts ended spans: every request must end exactly its four."""

    def __init__(self) -> None:
        self.ended = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1


class CountDropped(logging.Filter):
    """Counts the spans the batch processor dropped (it logs each one when its queue is full)."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("Queue full"):
            self.dropped += 1
            return False
        return True


def init_llmtrace(exporter: str, file_path: Path) -> CountEnded:
    import llmtrace

    if exporter == "drop":
        # The application's own pipeline; llmtrace reuses its provider.
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Drop()))
        trace.set_tracer_provider(provider)
        llmtrace.init(service_name="soak", instrument=["openai", "httpx2", "qdrant"])
    else:
        llmtrace.init(
            service_name="soak",
            exporter="file",
            file_path=file_path,
            instrument=["openai", "httpx2", "qdrant"],
        )
        provider = trace.get_tracer_provider()  # type: ignore[assignment]
    counter = CountEnded()
    provider.add_span_processor(counter)
    return counter


# --- one request ------------------------------------------------------------------------------


def sync_request(base_url: str) -> Callable[[int], str]:
    """The request function, its store filled (which records spans of its own)."""
    import openai
    from qdrant_client import QdrantClient, models

    import llmtrace

    store = QdrantClient(":memory:")
    store.create_collection(
        COLLECTION, vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE)
    )
    store.upsert(COLLECTION, points=points())
    client = openai.OpenAI(base_url=base_url, api_key="sk-soak", max_retries=0)

    @llmtrace.tool(name="look_up_order")
    def look_up_order(request: int) -> str:
        return f"order {request}"

    @llmtrace.workflow(name="answer")
    def answer(request: int) -> str:
        store.query_points(COLLECTION, query=QUERY, limit=2)
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        text = [c.choices[0].delta.content or "" for c in stream if c.choices]
        return "".join(text) + look_up_order(request)

    return answer


def async_request(base_url: str) -> tuple[Callable[[], Any], Callable[[int], Any]]:
    """A coroutine function filling the store, and the request function."""
    import openai
    from qdrant_client import AsyncQdrantClient, models

    import llmtrace

    store = AsyncQdrantClient(":memory:")
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-soak", max_retries=0)

    async def set_up() -> None:
        await store.create_collection(
            COLLECTION, vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE)
        )
        await store.upsert(COLLECTION, points=points())

    @llmtrace.tool(name="look_up_order")
    async def look_up_order(request: int) -> str:
        return f"order {request}"

    @llmtrace.workflow(name="answer")
    async def answer(request: int) -> str:
        await store.query_points(COLLECTION, query=QUERY, limit=2)
        stream = await client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        text = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        return "".join(text) + await look_up_order(request)

    return set_up, answer


def points() -> list[Any]:
    from qdrant_client import models

    return [
        models.PointStruct(id=1, vector=[1.0, 0.0, 0.0, 0.0], payload={"text": "refunds: 5 days"}),
        models.PointStruct(id=2, vector=[0.0, 1.0, 0.0, 0.0], payload={"text": "shipping: free"}),
        models.PointStruct(id=3, vector=[0.7, 0.7, 0.0, 0.0], payload={"text": "returns: label"}),
    ]


# --- the run --------------------------------------------------------------------------------


class Progress:
    """The RSS at the checkpoints, printed as they are reached."""

    def __init__(self, total: int, tracing_memory: bool) -> None:
        self.total = total
        self.tracing_memory = tracing_memory
        self.started = time.monotonic()
        self.baseline: float | None = None
        self.last: float | None = None

    def start(self) -> None:
        self.started = time.monotonic()
        print(f"{'requests':>10} {'elapsed s':>10} {'RSS MiB':>9} {'vs 1,000':>9} {'objects':>9}")

    def after(self, done: int) -> None:
        if done != BASELINE_AT and done % REPORT_EVERY and done != self.total:
            return
        rss = resident_mib()
        if self.baseline is None:
            self.baseline = rss
            if self.tracing_memory:
                # Only what is allocated from now on is traced: what is still held at the end is
                # what grew (a steady state frees as much as it allocates).
                tracemalloc.start(TRACEBACK_FRAMES)
        self.last = rss
        elapsed = time.monotonic() - self.started
        change = rss - self.baseline
        objects = len(gc.get_objects())
        print(f"{done:>10,} {elapsed:>10.1f} {rss:>9.1f} {change:>+9.1f} {objects:>9,}", flush=True)


def run(args: argparse.Namespace) -> None:
    child, base_url = start_server()
    with tempfile.TemporaryDirectory(prefix="llmtrace-soak-") as scratch:
        file_path = Path(scratch) / "traces.jsonl"
        counter = init_llmtrace(args.exporter, file_path)
        drops = CountDropped()
        logging.getLogger("opentelemetry.sdk._shared_internal").addFilter(drops)
        progress = Progress(args.requests, args.tracemalloc)
        if args.client == "sync":
            answer = sync_request(base_url)
            counter.ended = 0
            progress.start()
            for request in range(args.requests):
                answer(request)
                progress.after(request + 1)
        else:
            set_up, answer_async = async_request(base_url)

            async def all_requests() -> None:
                await set_up()
                counter.ended = 0
                progress.start()
                for request in range(args.requests):
                    await answer_async(request)
                    progress.after(request + 1)

            asyncio.run(all_requests())
        elapsed = time.monotonic() - progress.started

        import llmtrace

        llmtrace.force_flush()
        held = None
        if tracemalloc.is_tracing():
            gc.collect()  # garbage in reference cycles is not held, only not collected yet
            held = tracemalloc.take_snapshot()
        written = sum(p.stat().st_size for p in Path(scratch).glob("traces.jsonl*"))
        llmtrace.shutdown()
    assert child.stdin is not None
    child.stdin.close()
    child.wait(10)

    assert progress.baseline is not None and progress.last is not None
    growth = progress.last - progress.baseline
    print()
    print(
        f"model call: real openai {'OpenAI' if args.client == 'sync' else 'AsyncOpenAI'} client, "
        "stream=True, consumed to the end, simulated server in a child process"
    )
    exported = (
        f"file exporter, {written / 2**20:.0f} MiB kept after rotation"
        if args.exporter == "file"
        else "an exporter that drops"
    )
    print(
        f"spans: {counter.ended:,} ended (expected {SPANS_PER_REQUEST * args.requests:,}), "
        f"{drops.dropped:,} dropped by the batch processor; {exported}"
    )
    print(
        f"{args.requests:,} requests in {elapsed:.0f} s "
        f"({elapsed / args.requests * 1e3:.2f} ms per request)"
    )
    met = abs(growth) <= TARGET_MIB
    print(
        f"RSS change from 1,000 requests to the end: {growth:+.1f} MiB "
        f"(target: within {TARGET_MIB:.0f} MiB) -> {'target met' if met else 'TARGET MISSED'}"
    )
    if held is not None:
        print_growth(held)


def print_growth(held: tracemalloc.Snapshot) -> None:
    """Python memory allocated after the 1,000-request mark and still held, by allocation site."""
    held = held.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    total = sum(stat.size for stat in held.statistics("filename"))
    print(f"\nPython memory allocated since 1,000 requests and still held: {total / 1024:.1f} KiB")
    for stat in held.statistics("lineno")[:15]:
        print(f"  {stat.size / 1024:9.1f} KiB {stat.count:8d} blocks  {stat.traceback}")
    for stat in held.statistics("traceback")[:3]:
        print(f"\n{stat.size / 1024:.1f} KiB in {stat.count} blocks allocated at:")
        for line in stat.traceback.format()[-16:]:
            print(f"  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--client", choices=["async", "sync"], default="async")
    parser.add_argument("--exporter", choices=["file", "drop"], default="file")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.requests < BASELINE_AT:
        parser.error(f"--requests must be at least {BASELINE_AT:,} (the baseline is taken there)")
    run(args)


if __name__ == "__main__":
    main()
