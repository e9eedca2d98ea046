"""Whether the native breakdown earns its keep: the report's work with each breakdown engine.

On the trace files ``report_throughput.py`` generates (RAG-shaped requests of 10 spans, OTLP JSON
lines in batches of 512), does the whole work of ``llmtrace report`` up to the report model
(reading, linking, breaking every request down, ``build_report``; no rendering) three ways:

  (a) all-native: today's path. ``load_traces`` with the native reader, whose store also breaks
      every request down (``native/src/analysis.rs``) when the report collects its columns.
  (b) native parse, Python breakdown: the same native reading and linking, then every request's
      spans handed to Python (``TraceStore.trace_spans``, the call ``NativeTraces.trace`` makes
      for the slowest trace's waterfall) and broken down by the reference rules
      (``collect.TraceList``: ``breakdown.py``, ``evidence.py``).
  (c) all-Python (``LLMTRACE_NATIVE=0``), for context.

Each case runs in a child process of its own, so that its peak resident memory (``VmHWM``, which
unlike tracemalloc sees the Rust allocations) is its own. Rounds interleave the cases, each round
in another order, so a busy moment on the machine slows all three alike; the median round of each
case counts, and (b)/(a) is also taken round by round. All three must build the same report.

    python benchmarks/report_engines.py [--traces 10000 100000] [--rounds 5] [--keep]

The files are those of ``report_throughput.py`` (same generator and seed, same paths), reused
when they exist and removed afterwards unless ``--keep`` or they were there before.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ALL_NATIVE = "(a) all-native"
NATIVE_PARSE_PYTHON_BREAKDOWN = "(b) native parse + Python breakdown"
ALL_PYTHON = "(c) all-Python"
CASES = (ALL_NATIVE, NATIVE_PARSE_PYTHON_BREAKDOWN, ALL_PYTHON)
PHASES = ("read", "handover", "breakdown", "rest")


# --- one case, in a child process --------------------------------------------------------------


class TimedCollector:
    """A collector that remembers how long the report's one ``collect`` call took: the
    breakdown of every request, in whichever engine the wrapped collector uses."""

    def __init__(self, collector: Any) -> None:
        self.collector = collector
        self.seconds = 0.0

    def collect(self, run: str | None, group_by: str | None = None) -> Any:
        started = time.perf_counter()
        try:
            return self.collector.collect(run, group_by)
        finally:
            self.seconds += time.perf_counter() - started

    def traces(self) -> Any:
        return self.collector.traces()


def native_traces_in_python(path: Path) -> tuple[Any, float]:
    """The file read and linked by the native reader, its traces made Python trees for the Python
    breakdown; and the seconds the handover took.

    The reading is ``native.read_files`` step by step (a new store, ``read_file``, ``assembled``)
    so that the store stays at hand for the instrumentation counts ``load_traces`` would
    otherwise hand over only inside the native breakdown's columns."""
    from llmtrace.analysis import native
    from llmtrace.analysis.collect import TraceList
    from llmtrace.analysis.model import TraceSet, cyclic_gc_paused

    # load_traces reads with the cyclic collector paused; the handover makes as many objects
    with cyclic_gc_paused():
        store = native.new_store()
        warnings = store.read_file(str(path), native.is_whole_document(path))
        chosen = native.assembled(
            store, trace_id=None, service=None, since=None, until=None, limit=None, attributes={}
        )
        started = time.perf_counter()
        traces = chosen.traces()
        handover = time.perf_counter() - started
    families, unassigned = store.recognised()
    collector = TraceList(traces, dict(families), unassigned)
    traceset = TraceSet(str(path), collector, excluded_open=store.excluded_open, warnings=warnings)
    return traceset, handover


def peak_resident_mib() -> float:
    """This process's peak resident memory (``VmHWM``; ``ru_maxrss`` where there is no /proc)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(case: str, path: Path) -> dict[str, Any]:
    """Do the report's work on ``path`` one way; return its phases' seconds, peak memory and a
    digest of the report (the same report from every case, or the comparison means nothing)."""
    from llmtrace.analysis import native
    from llmtrace.analysis.report import build_report
    from llmtrace.analysis.sources import load_traces

    wants_native = case != ALL_PYTHON
    if native.available() != wants_native:
        raise SystemExit(f"{case}: the native reader is {'not ' * wants_native}available")
    before = peak_resident_mib()
    started = time.perf_counter()
    handover = 0.0
    if case == NATIVE_PARSE_PYTHON_BREAKDOWN:
        traceset, handover = native_traces_in_python(path)
    else:
        traceset = load_traces(str(path))
    read = time.perf_counter() - started - handover
    timed = TimedCollector(traceset.collector)
    traceset.collector = timed
    report = build_report(traceset)
    total = time.perf_counter() - started
    data = report.to_json()
    data.pop("generated_at")
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    return {
        "total": total,
        "read": read,
        "handover": handover,
        "breakdown": timed.seconds,
        "rest": total - read - handover - timed.seconds,
        "requests": report.traces,
        "peak_mib": peak_resident_mib(),
        "before_mib": before,
        "report": digest,
    }


def measure(case: str, path: Path) -> dict[str, Any]:
    environment = dict(os.environ, LLMTRACE_NATIVE="0" if case == ALL_PYTHON else "1")
    command = [sys.executable, __file__, "--case", case, "--file", str(path)]
    # the child's stderr passes through: a failing case shows its traceback
    done = subprocess.run(command, env=environment, check=True, stdout=subprocess.PIPE, text=True)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


# --- the comparison ----------------------------------------------------------------------------


def median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    return sorted(rounds, key=lambda run: run["total"])[len(rounds) // 2]


def compare(path: Path, traces: int, rounds: int) -> bool:
    """Run every case ``rounds`` times, print the table; False when the reports differ."""
    runs: dict[str, list[dict[str, Any]]] = {case: [] for case in CASES}
    for number in range(rounds):
        # another order each round: no case always runs just after the heaviest one
        shift = number % len(CASES)
        for case in CASES[shift:] + CASES[:shift]:
            runs[case].append(measure(case, path))
    from report_throughput import SPANS_PER_TRACE

    spans = traces * SPANS_PER_TRACE
    print(
        f"\n{traces:,} requests ({spans:,} spans, {path.stat().st_size / 2**20:.0f} MiB): "
        f"median round of {rounds} per case (its phases shown), peak = highest VmHWM of the rounds"
    )
    header = (
        f"{'case':<38}{'wall s':>8}{'req/s':>10}{'read':>8}{'handover':>10}{'breakdown':>11}"
        f"{'rest':>7}{'peak MiB':>10}"
    )
    print(header)
    print("-" * len(header))
    medians = {case: median_round(runs[case]) for case in CASES}
    peaks = {case: max(run["peak_mib"] for run in runs[case]) for case in CASES}
    for case in CASES:
        run = medians[case]
        phases = "".join(
            f"{run[phase]:>{width}.2f}" for phase, width in zip(PHASES, (8, 10, 11, 7), strict=True)
        )
        print(
            f"{case:<38}{run['total']:>8.2f}{run['requests'] / run['total']:>10,.0f}{phases}"
            f"{peaks[case]:>10.0f}"
        )
    print("by round, wall s [of which reading s]:")
    for case in CASES:
        rounds_text = "  ".join(f"{run['total']:.2f} [{run['read']:.2f}]" for run in runs[case])
        print(f"  {case:<36}{rounds_text}")
    a, b, c = (medians[case] for case in CASES)
    per_round = sorted(
        python["total"] / rust["total"]
        for python, rust in zip(runs[NATIVE_PARSE_PYTHON_BREAKDOWN], runs[ALL_NATIVE], strict=True)
    )
    print(
        f"(b)/(a) wall time: {b['total'] / a['total']:.2f}x (medians); round by round "
        f"{statistics.median(per_round):.2f}x median, {per_round[0]:.2f}-{per_round[-1]:.2f}x"
    )
    print(
        f"(b)/(a) peak memory: {peaks[NATIVE_PARSE_PYTHON_BREAKDOWN] / peaks[ALL_NATIVE]:.2f}x; "
        f"(c)/(a) wall time {c['total'] / a['total']:.2f}x, peak memory "
        f"{peaks[ALL_PYTHON] / peaks[ALL_NATIVE]:.2f}x"
    )
    print(
        f"the breakdown alone: Python {b['breakdown']:.2f} s vs Rust {a['breakdown']:.2f} s "
        f"({b['breakdown'] / a['breakdown']:.1f}x); handing the spans to Python costs "
        f"{b['handover']:.2f} s more; interpreter and imports before the work: "
        f"{a['before_mib']:.0f} MiB"
    )
    digests = {run["report"] for case in CASES for run in runs[case]}
    requests = {run["requests"] for case in CASES for run in runs[case]}
    same = len(digests) == 1 and requests == {traces}
    print("same report from all three:", "yes" if same else f"NO ({digests}, {requests} requests)")
    return same


def trace_file(traces: int) -> tuple[Path, bool]:
    """report_throughput's file of ``traces`` requests, made when missing; and whether it was."""
    from report_throughput import generate

    path = Path(tempfile.gettempdir()) / f"llmtrace-bench-{traces}.jsonl"
    if path.exists():
        return path, False
    started = time.perf_counter()
    generate(path, traces)
    print(f"generated {traces:,} requests in {time.perf_counter() - started:.1f} s: {path}")
    return path, True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=5, help="runs of each case (median taken)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # a child's one case
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case is not None:
        print(json.dumps(run_case(args.case, args.file)))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the start")
    same = True
    for traces in args.traces:
        path, generated = trace_file(traces)
        try:
            same = compare(path, traces, args.rounds) and same
        finally:
            if generated and not args.keep:
                path.unlink()
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
