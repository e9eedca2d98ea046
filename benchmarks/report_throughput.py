"""How fast ``llmtrace report`` reads traces: spans per second and peak memory.

Generates 1,000,000 spans (100,000 traces of 10 spans, shaped like a RAG request recorded by
llmtrace: workflow, queue, embedding, retrieval, rerank, prompt, a streamed chat call with its
HTTP hop, a tool and postprocessing) as OTLP JSON lines in batches of 512 spans, the way the
embedded file exporter writes them. Then runs ``llmtrace report FILE --format json`` in a child
process (three times; the median round counts) and reports wall time, spans/s and the child's
peak resident memory.

    python benchmarks/report_throughput.py [--traces 100000] [--file PATH] [--keep] [--rounds 3]

Target: >= 200,000 spans/s and < 1 GiB peak memory. ``LLMTRACE_NATIVE=0`` measures the pure-Python
reader instead of the native one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llmtrace.sdk.exporters.otlp_json import any_value

SPANS_PER_TRACE = 10
BATCH = 512
RESOURCE = {
    "attributes": [
        {"key": "telemetry.sdk.language", "value": {"stringValue": "python"}},
        {"key": "telemetry.sdk.name", "value": {"stringValue": "opentelemetry"}},
        {"key": "telemetry.sdk.version", "value": {"stringValue": "1.45.2"}},
        {"key": "service.name", "value": {"stringValue": "support-bot"}},
    ]
}


def _attr(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": any_value(value)}


def _span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    kind: int,
    start: int,
    end: int,
    attributes: dict[str, Any],
) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": [_attr(k, v) for k, v in attributes.items()],
        "status": {},
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def trace_spans(rng: random.Random, start: int) -> list[dict[str, Any]]:
    """One request's spans, children first (the order a batch exporter sees them end)."""
    trace_id = f"{rng.getrandbits(128):032x}"
    ids = [f"{rng.getrandbits(64):016x}" for _ in range(SPANS_PER_TRACE)]
    t = start
    spans = []

    def step(
        index: int, parent: int, name: str, kind: int, seconds: float, attrs: dict[str, Any]
    ) -> int:
        nonlocal t
        begin = t
        t += int(seconds * 1e9)
        spans.append(_span(trace_id, ids[index], ids[parent], name, kind, begin, t, attrs))
        t += rng.randint(50, 400) * 1000
        return begin

    queue = rng.expovariate(1 / 0.02)
    step(1, 0, "wait for slot", 1, queue, {"llmtrace.stage": "queue", "llmtrace.queue.name": "api"})
    step(
        2,
        0,
        "embeddings all-MiniLM-L6-v2",
        1,
        rng.uniform(0.008, 0.02),
        {
            "llmtrace.stage": "embedding",
            "gen_ai.operation.name": "embeddings",
            "gen_ai.request.model": "all-MiniLM-L6-v2",
            "llmtrace.embedding.input_count": 1,
        },
    )
    step(
        3,
        0,
        "retrieval docs",
        1,
        rng.uniform(0.02, 0.08),
        {
            "llmtrace.stage": "retrieval",
            "gen_ai.operation.name": "retrieval",
            "gen_ai.data_source.id": "docs",
            "gen_ai.retrieval.top_k": 40,
            "llmtrace.retrieval.returned": 40,
            "db.system.name": "chroma",
        },
    )
    step(
        4,
        0,
        "rerank",
        1,
        rng.uniform(0.03, 0.09),
        {"llmtrace.stage": "rerank", "llmtrace.rerank.top_n": 5, "llmtrace.rerank.input_count": 40},
    )
    step(
        5,
        0,
        "build prompt",
        1,
        rng.uniform(0.001, 0.004),
        {"llmtrace.stage": "prompt", "llmtrace.prompt.chars": rng.randint(8000, 14000)},
    )
    ttft = rng.lognormvariate(-1.2, 0.4)
    tokens = rng.randint(80, 600)
    generation = tokens / rng.uniform(40, 60)
    chat_start = t
    http_start = chat_start + 200_000
    spans.append(
        _span(
            trace_id,
            ids[7],
            ids[6],
            "POST",
            3,
            http_start,
            http_start + int((ttft + generation) * 1e9) - 300_000,
            {
                "http.request.method": "POST",
                "server.address": "api.example.com",
                "http.response.status_code": 200,
                "url.full": "https://api.example.com/v1/chat/completions",
            },
        )
    )
    step(
        6,
        0,
        "chat gpt-4o-mini",
        3,
        ttft + generation,
        {
            "llmtrace.stage": "ttft",
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
            "gen_ai.request.stream": True,
            "gen_ai.usage.input_tokens": rng.randint(2500, 4000),
            "gen_ai.usage.output_tokens": tokens,
            "gen_ai.response.time_to_first_chunk": ttft * 0.98,
            "llmtrace.time_to_first_token": ttft,
            "llmtrace.generation_time": generation,
            "llmtrace.http.connect": 0.0,
            "server.address": "api.example.com",
            "gen_ai.response.id": f"chatcmpl-{rng.getrandbits(48):x}",
        },
    )
    step(
        8,
        0,
        "execute_tool lookup_order",
        1,
        rng.uniform(0.005, 0.03),
        {
            "llmtrace.stage": "tool",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup_order",
        },
    )
    step(9, 0, "format answer", 1, rng.uniform(0.002, 0.01), {"llmtrace.stage": "postprocess"})
    spans.append(
        _span(
            trace_id,
            ids[0],
            None,
            "answer",
            2,
            start,
            t,
            {"llmtrace.stage": "other", "http.route": "/answer", "http.request.method": "POST"},
        )
    )
    return spans


def generate(path: Path, traces: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    start = 1_760_000_000 * 1_000_000_000
    pending: list[dict[str, Any]] = []
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for _ in range(traces):
            pending.extend(trace_spans(rng, start))
            start += rng.randint(5, 50) * 1_000_000
            while len(pending) >= BATCH:
                batch, pending = pending[:BATCH], pending[BATCH:]
                out.write(_line(batch))
        if pending:
            out.write(_line(pending))


def _line(spans: list[dict[str, Any]]) -> str:
    request = {
        "resourceSpans": [
            {"resource": RESOURCE, "scopeSpans": [{"scope": {"name": "llmtrace"}, "spans": spans}]}
        ]
    }
    return json.dumps(request, separators=(",", ":")) + "\n"


def measure(path: Path, spans: int) -> dict[str, float]:
    command = [
        sys.executable,
        "-c",
        "import sys; from llmtrace.cli import main; sys.exit(main())",
        "report",
        str(path),
        "--format",
        "json",
        "--output",
        os.devnull,
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run(command, check=True)
    elapsed = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    del before
    return {"seconds": elapsed, "spans_per_second": spans / elapsed, "peak_mib": peak_kib / 1024}


def decode_only(path: Path) -> float:
    """Seconds to decode every line with orjson and nothing else: the floor for any reader."""
    import orjson

    started = time.perf_counter()
    with path.open("rb") as handle:
        for line in handle:
            orjson.loads(line)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--file", type=Path, help="trace file to create (or reuse when it exists)")
    parser.add_argument("--keep", action="store_true", help="keep the generated file")
    parser.add_argument("--rounds", type=int, default=3, help="runs of the report (median taken)")
    args = parser.parse_args()
    spans = args.traces * SPANS_PER_TRACE
    path = args.file or Path(tempfile.gettempdir()) / f"llmtrace-bench-{args.traces}.jsonl"
    if not path.exists():
        started = time.perf_counter()
        generate(path, args.traces)
        print(
            f"generated {spans:,} spans ({path.stat().st_size / 2**20:.0f} MiB) "
            f"in {time.perf_counter() - started:.1f} s: {path}"
        )
    from llmtrace.analysis import native

    reader = "native reader (llmtrace._native)" if native.available() else "Python reader"
    rounds = [measure(path, spans) for _ in range(args.rounds)]
    for number, run in enumerate(rounds, start=1):
        print(
            f"round {number}: llmtrace report --format json, {reader}: {spans:,} spans in "
            f"{run['seconds']:.2f} s = {run['spans_per_second']:,.0f} spans/s"
        )
    # The median round is the figure: one round can be slowed by whatever else the machine does.
    result = sorted(rounds, key=lambda run: run["seconds"])[len(rounds) // 2]
    peak = max(run["peak_mib"] for run in rounds)
    print(
        f"median of {len(rounds)}: {result['seconds']:.2f} s = "
        f"{result['spans_per_second']:,.0f} spans/s, peak memory {peak:.0f} MiB"
    )
    floor = decode_only(path)
    print(
        f"for scale, JSON decoding alone (orjson, no analysis) on this machine: {floor:.2f} s = "
        f"{spans / floor:,.0f} spans/s; load average {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} CPUs"
    )
    if not args.keep and args.file is None:
        path.unlink()
    ok = result["spans_per_second"] >= 200_000 and peak < 1024
    print("target (>= 200,000 spans/s, < 1 GiB):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
