"""Runs llmtrace and its peers side by side: one subprocess per configuration, one pipeline for all.

The peers pin other OpenTelemetry versions than llmtrace's ``.venv``, and an instrumentation cannot
be removed cleanly from a process once installed, so each configuration runs in its own process of
the peers' virtualenv (``scripts/peers.sh`` creates it on demand, cached under
``~/.cache/llmtrace/peers-venv``; ``LLMTRACE_PEERS_VENV`` overrides the place). For each child the
parent starts simulated model servers of its own (``tests/servers/model_server.py``), which the
child talks to over loopback HTTP with the real ``openai`` and ``anthropic`` clients. They send
each response in one write: a client that reads a response in more pieces (a server busy
answering another child, a response written event by event) runs more of its own code, which
moved a configuration's count by up to 20 k instructions per call, and a per-chunk figure by
several thousand, from one run to the next. Now llmtrace's figures repeat to within about 2 k
per call under each seed; OpenTelemetry's openai-v2 still moves by up to 30 k per streamed call
under one seed between runs, for a reason not found here.

Two measurements per configuration:

- **instructions** (the figure of record): the child runs under ``valgrind --tool=callgrind`` with
  instrumentation off while it imports and sets up (a third of a minute instead of two), turns it
  on through a client request (a tiny C library built once with the machine's ``cc`` and
  ``valgrind/callgrind.h``), warms each scenario up, then runs it between two calls of
  ``os.getloadavg()``, on which callgrind dumps its counters (``--dump-before=getloadavg``). So each
  scenario's measured calls are one dump of their own: start-up, imports and warm-up never count,
  and instruction counts do not depend on what else the machine is doing. Without ``cc`` or the
  header, instrumentation is on from the start (the same figures, several times slower).

  One hash seed gives one layout of every dictionary and set, and with it one path through the
  allocator: the same code's count per call moves by 10-25 k instructions from one seed to
  another (and a per-chunk figure, the difference of two streams of millions of instructions,
  by several thousand). So the child runs under callgrind once per seed of ``--seeds`` (0, 1 and
  2 by default: ``PYTHONHASHSEED`` fixed, each run repeatable), and the tables print the mean of
  what a configuration adds with the spread beside it: the lowest and highest of the seeds'
  figures, each the configuration's count less no instrumentation's under the same seed. A
  difference between two configurations smaller than their spreads is noise.
- **wall clock**: the same child without valgrind, each call timed; the median per call (noisy on a
  shared machine; beside the instruction counts for scale only).

The pipeline is the same for every configuration: a global SDK ``TracerProvider`` set before
anything is instrumented, with a ``SimpleSpanProcessor`` and an exporter that counts spans and
drops them, so the span count printed beside each cost says what the configuration recorded. The
peers that build their own pipeline are pointed at it (see ``_setup``). No ``MeterProvider`` or
``LoggerProvider`` is set: metrics and log events cost what recording into OpenTelemetry's no-op
API costs, for every configuration alike. Each configuration otherwise keeps its defaults (what it
records, whether it captures message content): that is what its users get.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("LLMTRACE_CACHE", Path.home() / ".cache" / "llmtrace"))
MESSAGES = [{"role": "user", "content": "Say hello"}]
# Content tokens of the short and the long stream: the difference, per chunk, is the per-chunk cost.
SHORT_TOKENS = 4
LONG_TOKENS = 104
# Calls of each scenario before its measured ones (see child()).
WARM_UP_CALLS = int(os.environ.get("LLMTRACE_PEERS_WARM_UP", "10"))
# How many more calls a plain (wall clock) run makes than a run under callgrind.
WALL_CLOCK_FACTOR = 4
# The hash seeds each configuration runs under callgrind with (see the module docstring): three
# keep the whole comparison under ten minutes on two cores.
SEEDS = (0, 1, 2)

# What a configuration is called in the tables, in the order printed. "llmtrace-unpropagated" is
# llmtrace with ``OTEL_PROPAGATORS=none``: the request goes out without the ``traceparent`` header
# llmtrace adds by default (so that a model server or the next service joins the trace), which
# none of the peers' rows sends (OpenTelemetry's httpx instrumentation would, with a span of its
# own). One more request header costs the client itself tens of thousands of instructions per
# call (httpx, httpcore and h11 each handle it): that row compares like with like, the "llmtrace"
# row says what propagation costs beside it.
LABELS = {
    "none": "no instrumentation",
    "anthropic-own": "the anthropic client's own span (on by default)",
    "hand": "hand-written span, one attribute",
    "otel": "OpenTelemetry openai-v2",
    "llmtrace": "llmtrace",
    "llmtrace-unpropagated": "llmtrace, no traceparent (OTEL_PROPAGATORS=none)",
    "openlit": "OpenLIT",
    "openinference": "OpenInference",
    "langfuse": "Langfuse",
    "openllmetry": "OpenLLMetry",
}


# ----------------------------------------------------------------------------------------------
# Parent side


def arguments(description: str, argv: list[str] | None) -> argparse.Namespace:
    """The options both comparisons take."""
    parser = argparse.ArgumentParser(description=description)
    # Instruction counts repeat to within a few thousand per call: a handful of calls is enough.
    parser.add_argument("--calls", type=int, default=8, help="measured calls per scenario")
    parser.add_argument("--no-instructions", action="store_true", help="wall clock only")
    parser.add_argument(
        "--seeds",
        default=os.environ.get("LLMTRACE_PEERS_SEEDS", ",".join(map(str, SEEDS))),
        help="comma-separated PYTHONHASHSEED values, one callgrind run each (default: 0,1,2)",
    )
    parser.add_argument(
        "--at",
        default=os.environ.get("LLMTRACE_BENCH_AT"),
        help="measure llmtrace as of this commit (default: $LLMTRACE_BENCH_AT, else the working tree)",
    )
    parser.add_argument(
        "--configs", default="", help="comma-separated configurations to run (default: all)"
    )
    args = parser.parse_args(argv)
    args.seeds = [int(seed) for seed in args.seeds.split(",")]
    print(f"llmtrace at {revision(args.at)}; hash seeds {', '.join(map(str, args.seeds))}")
    return args


def chosen(args: argparse.Namespace, configs: Iterable[str]) -> list[str]:
    """``configs`` less those ``--configs`` leaves out (the baseline "none" always runs)."""
    wanted = args.configs.split(",") if args.configs else None
    return [config for config in configs if config == "none" or not wanted or config in wanted]


def revision(at: str | None = None) -> str:
    """The llmtrace commit measured, and whether the working tree's llmtrace/ differs from it."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", at or "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if at is not None:
        return commit
    changed = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", "llmtrace"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"{commit or 'unknown'}{' with uncommitted changes in llmtrace/' if changed else ''}"


def peers_python() -> str:
    """The peers' interpreter, after ``scripts/peers.sh`` made sure the environment is current."""
    subprocess.run(["bash", str(ROOT / "scripts" / "peers.sh")], check=True)
    venv = Path(os.environ.get("LLMTRACE_PEERS_VENV", CACHE / "peers-venv"))
    return str(venv / "bin" / "python")


def callgrind_start_library() -> str | None:
    """A shared library whose ``start()`` turns callgrind's instrumentation on, built once."""
    source = (
        "#include <valgrind/callgrind.h>\nvoid start(void) { CALLGRIND_START_INSTRUMENTATION; }\n"
    )
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or not Path("/usr/include/valgrind/callgrind.h").exists():
        return None
    library = CACHE / "callgrind-start.so"
    if not library.exists():
        library.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as work:
            c_file = Path(work) / "start.c"
            c_file.write_text(source)
            built = Path(work) / "start.so"
            subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", built, c_file], check=True)
            shutil.move(built, library)
    return str(library)


def instructions_of(script: str, arguments: list[str], library: str, seed: int = 0) -> int:
    """CPU instructions callgrind counts for ``python script arguments...``: with ``library``
    (from :func:`callgrind_start_library`) only from the moment the script calls its ``start()``,
    else from the start. The hash seed is fixed (``seed``) so that dictionary layouts are the same
    from run to run."""
    result = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            f"--instr-atstart={'no' if library else 'yes'}",
            sys.executable,
            script,
            *arguments,
            library,
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": str(seed)},
    )
    found = re.search(r"Collected : (\d+)", result.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count: {result.stderr[-500:]}")
    return int(found.group(1))


@dataclass
class Servers:
    """The simulated model servers: one answering short responses, one long streams."""

    short_url: str
    long_url: str


def start_servers() -> tuple[Servers, Callable[[], None]]:
    sys.path.insert(0, str(ROOT))
    from tests.servers.model_server import ModelServer

    # Each response in one write: the client reads it in the same pieces however busy the
    # machine is, so its instruction count repeats (see the module docstring).
    short = ModelServer().start().configure(tokens=["x"] * SHORT_TOKENS, whole_writes=True)
    long = ModelServer().start().configure(tokens=["x"] * LONG_TOKENS, whole_writes=True)

    def stop() -> None:
        short.stop()
        long.stop()

    return Servers(short.url, long.url), stop


@dataclass
class Measured:
    """One configuration's figures per scenario: instructions per call under each hash seed (in
    the order of the seeds) and their mean, seconds per call, spans and span attributes per
    call."""

    instructions: dict[str, float]
    seconds: dict[str, float]
    spans: dict[str, float]
    attributes: dict[str, float]
    instructions_per_seed: dict[str, list[float]]


def measure(
    configs: Sequence[str],
    scenarios: dict[str, Sequence[str]],
    calls: dict[str, int],
    *,
    instructions: bool = True,
    workers: int = 2,
    at: str | None = None,
    seeds: Sequence[int] = (0,),
) -> dict[str, Measured]:
    """Run every configuration in ``configs`` over its ``scenarios[config]``, ``calls[scenario]``
    calls each: once plainly, and under callgrind once per hash seed of ``seeds``; the children
    run ``workers`` at a time (instruction counts do not mind). llmtrace is the working tree's,
    or commit ``at``'s."""
    python = peers_python()
    if at is not None:
        snapshot = tempfile.TemporaryDirectory(prefix="llmtrace-at-")
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", at, "llmtrace"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", snapshot.name], input=archive, check=True)
        source = Path(snapshot.name)
    else:
        source = ROOT
    library = callgrind_start_library() if instructions else None
    if instructions and shutil.which("valgrind") is None:
        print("valgrind not installed (apt-get install valgrind): wall clock only")
        instructions = False
    # Plain runs are cheap: more calls there steady the medians.
    more = {name: count * WALL_CLOCK_FACTOR for name, count in calls.items()}

    def run(job: tuple[str, int | None]) -> dict[str, dict[str, float]]:
        config, seed = job
        wanted = list(scenarios[config])
        # Servers of its own for each child: a server that answers another child at the same
        # time answers this one in other pieces or later, which moved a child's count by 20k
        # instructions per call now and then.
        servers, stop = start_servers()
        try:
            if seed is None:
                return _run_child(python, source, config, wanted, more, servers, None)
            return _run_child(python, source, config, wanted, calls, servers, library or "", seed)
        finally:
            stop()

    # One job per child, the configurations' seeds side by side: the pool stays busy to the end
    # instead of waiting on the last configuration's runs one after another.
    jobs = [(config, None) for config in configs]
    if instructions:
        jobs += [(config, seed) for seed in seeds for config in configs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = dict(zip(jobs, pool.map(run, jobs), strict=True))
    measured = {}
    for config in configs:
        plain = results[(config, None)]
        counted = [results[(config, seed)] for seed in seeds] if instructions else []
        per_seed = {name: [child[name]["instructions"] for child in counted] for name in plain}
        measured[config] = Measured(
            instructions={
                name: statistics.fmean(figures) for name, figures in per_seed.items() if figures
            },
            seconds={name: plain[name]["seconds"] for name in plain},
            spans={name: plain[name]["spans"] for name in plain},
            attributes={name: plain[name]["attributes"] for name in plain},
            instructions_per_seed={name: figures for name, figures in per_seed.items() if figures},
        )
    return measured


def _run_child(
    python: str,
    source: Path,
    config: str,
    scenarios: list[str],
    calls: dict[str, int],
    servers: Servers,
    callgrind_library: str | None,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """One child process; ``callgrind_library`` None runs it plainly, a path (or "" for none
    available) under callgrind; ``seed``: its ``PYTHONHASHSEED``."""
    with tempfile.TemporaryDirectory(prefix="llmtrace-peers-") as work:
        results = Path(work) / "results.json"
        request = {
            "config": config,
            "scenarios": scenarios,
            "calls": {name: calls[name] for name in scenarios},
            "short_url": servers.short_url,
            "long_url": servers.long_url,
            "results": str(results),
            "callgrind_library": callgrind_library,
        }
        command = [python, str(Path(__file__).resolve()), json.dumps(request)]
        if callgrind_library is not None:
            command = [
                "valgrind",
                "--tool=callgrind",
                f"--instr-atstart={'no' if callgrind_library else 'yes'}",
                "--dump-before=getloadavg",
                f"--callgrind-out-file={work}/callgrind.out",
                *command,
            ]
        env = {
            **os.environ,
            "PYTHONHASHSEED": str(seed),
            # The llmtrace measured (the peers' environment has none installed).
            "PYTHONPATH": str(source),
            # Peers that phone home or look for their cloud keys: off, so nothing leaves the machine.
            "TRACELOOP_TELEMETRY": "false",
            "OTEL_SDK_DISABLED": "false",
        }
        if config == "llmtrace-unpropagated":
            # llmtrace sending the request the peers send (see LABELS).
            env["OTEL_PROPAGATORS"] = "none"
        if config != "anthropic-own":
            # The anthropic client makes a span of its own per call when a provider is set; off,
            # so that each row is the cost of the configuration alone (the row "anthropic-own"
            # is that span's cost; llmtrace turns it off itself, the others keep it beside theirs).
            env["ANTHROPIC_OPEN_TELEMETRY"] = "false"
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if os.environ.get("LLMTRACE_PEERS_VERBOSE"):
            mode = "plain" if callgrind_library is None else f"callgrind, hash seed {seed}"
            print(f"  {config} ({mode}): {time.monotonic() - started:.0f} s", file=sys.stderr)
        if done.returncode != 0 or not results.exists():
            raise RuntimeError(f"{config} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        measured: dict[str, dict[str, float]] = json.loads(results.read_text())
        if callgrind_library is not None:
            # Markers: before and after each scenario's measured calls, so dump 2i+2 holds them.
            for index, name in enumerate(scenarios):
                dump = Path(f"{work}/callgrind.out.{2 * index + 2}").read_text()
                total = int(re.search(r"^summary: (\d+)", dump, re.MULTILINE).group(1))  # type: ignore[union-attr]
                measured[name]["instructions"] = total / calls[name]
        return measured


# ----------------------------------------------------------------------------------------------
# Tables


def added(measured: dict[str, Measured], config: str, scenario: str, kind: str) -> float | None:
    """What ``config`` adds per call of ``scenario`` over no instrumentation (for instructions,
    the mean over the hash seeds)."""
    figures = getattr(measured[config], kind)
    base = getattr(measured["none"], kind)
    if scenario not in figures or scenario not in base:
        return None
    return figures[scenario] - base[scenario]


def added_per_seed(measured: dict[str, Measured], config: str, scenario: str) -> list[float]:
    """The instructions ``config`` adds per call of ``scenario`` under each hash seed: its count
    less no instrumentation's under the same seed (none when either did not run it)."""
    figures = measured[config].instructions_per_seed.get(scenario, [])
    base = measured["none"].instructions_per_seed.get(scenario, [])
    return [figure - without for figure, without in zip(figures, base, strict=False)]


def _chunk_and_call(added_short: float, added_long: float) -> tuple[float, float]:
    chunk = (added_long - added_short) / (LONG_TOKENS - SHORT_TOKENS)
    return chunk, added_short - chunk * (SHORT_TOKENS + 2)


def per_chunk(
    measured: dict[str, Measured], config: str, short: str, long: str, kind: str
) -> tuple[float, float] | None:
    """Added per streamed chunk (the long stream's extra cost over the short one's, per extra
    chunk) and per streamed call (the short stream's added cost less its chunks' share)."""
    added_short = added(measured, config, short, kind)
    added_long = added(measured, config, long, kind)
    if added_short is None or added_long is None:
        return None
    return _chunk_and_call(added_short, added_long)


def per_chunk_per_seed(
    measured: dict[str, Measured], config: str, short: str, long: str
) -> list[tuple[float, float]]:
    """:func:`per_chunk` of the instructions under each hash seed."""
    return [
        _chunk_and_call(added_short, added_long)
        for added_short, added_long in zip(
            added_per_seed(measured, config, short),
            added_per_seed(measured, config, long),
            strict=False,
        )
    ]


def print_table(title: str, header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    rows = [list(header), *[list(row) for row in rows]]
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    print(f"\n{title}\n")
    for number, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)
        ]
        print("| " + " | ".join(cells) + " |")
        if number == 0:
            print("|" + "|".join("-" * (width + 2) for width in widths) + "|")


def kilo(value: float | None, spread: Sequence[float] = ()) -> str:
    """Thousands of instructions, with the lowest and highest of the seeds' figures when there
    were several: ``+309 k (301..318)``."""
    if value is None:
        return "n/a"
    if len(spread) < 2:
        return f"{value / 1e3:+,.0f} k"
    return f"{value / 1e3:+,.0f} k ({min(spread) / 1e3:,.0f}..{max(spread) / 1e3:,.0f})"


def added_kilo(measured: dict[str, Measured], config: str, scenario: str) -> str:
    """:func:`kilo` of the instructions ``config`` adds per call of ``scenario``, with its seeds'
    spread."""
    return kilo(
        added(measured, config, scenario, "instructions"),
        added_per_seed(measured, config, scenario),
    )


def spans(measured: dict[str, Measured], config: str, scenario: str) -> str:
    """Spans per call, and their attributes (all spans' together) per call."""
    count = measured[config].spans.get(scenario)
    if count is None:
        return "n/a"
    return f"{count:g} ({measured[config].attributes[scenario]:g})"


def wall_clock(measured: dict[str, Measured], config: str, scenario: str) -> str:
    """The median wall clock of one call, whole: on a shared machine the differences between
    configurations drown in noise, so they are not printed (the instruction counts are)."""
    seconds = measured[config].seconds.get(scenario)
    return "n/a" if seconds is None else f"{seconds * 1e6:,.0f} µs"


def per_call_table(
    title: str, measured: dict[str, Measured], scenario: str, configs: Sequence[str]
) -> None:
    """One row per configuration: instructions added per call (the seeds' mean and spread), wall
    clock and spans per call."""
    base = measured["none"].instructions.get(scenario)
    print_table(
        title
        + ("" if base is None else f" (no instrumentation: {base / 1e3:,.0f} k instructions)"),
        [
            "configuration",
            "added instructions per call (seeds' lowest..highest)",
            "wall clock per call",
            "spans (attributes) per call",
        ],
        (
            [
                LABELS[config],
                added_kilo(measured, config, scenario),
                wall_clock(measured, config, scenario),
                spans(measured, config, scenario),
            ]
            for config in configs
            if scenario in measured[config].spans
        ),
    )


def stream_table(
    title: str, measured: dict[str, Measured], short: str, long: str, configs: Sequence[str]
) -> None:
    """Per stream: what the short and the long stream each add, whole (instructions: the seeds'
    mean and spread; the figures of record), then the straight line through those two, split
    into a fixed part and a part per chunk; wall clock and spans per call.

    The fixed part is the line at no chunk at all (an OpenAI chat stream has a role chunk and a
    finish chunk besides its content chunks): what such a stream would add, which no call is.
    A configuration whose work per chunk is small has a larger fixed part than one that does its
    work chunk by chunk, and still costs less on every stream: hence the whole streams first.
    """
    rows = []
    for config in configs:
        if short not in measured[config].spans:
            continue
        counted = per_chunk(measured, config, short, long, "instructions")
        per_seed = per_chunk_per_seed(measured, config, short, long)
        rows.append(
            [
                LABELS[config],
                added_kilo(measured, config, short),
                added_kilo(measured, config, long),
                kilo(counted[1] if counted else None, [call for _, call in per_seed]),
                kilo(counted[0] if counted else None, [chunk for chunk, _ in per_seed]),
                wall_clock(measured, config, short),
                spans(measured, config, short),
            ]
        )
    print_table(
        f"{title} (streams of {SHORT_TOKENS} and {LONG_TOKENS} content chunks; wall clock: the short"
        " stream)",
        [
            "configuration",
            "added per short stream, whole (seeds' lowest..highest)",
            "per long stream, whole",
            "of which fixed (derived)",
            "per chunk (derived)",
            "wall clock per call",
            "spans (attributes) per call",
        ],
        rows,
    )


# ----------------------------------------------------------------------------------------------
# Child side: runs in the peers' virtualenv


class _CountingExporter:
    """Drops spans, counting them and their attributes (what the configuration recorded)."""

    def __init__(self) -> None:
        self.count = 0
        self.attributes = 0

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.count += len(spans)
        self.attributes += sum(len(span.attributes or ()) for span in spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _setup(config: str, exporter: _CountingExporter) -> dict[str, Any]:
    """Install ``config``'s instrumentation the way its documentation says; returns what the
    scenarios need to differ by (a client class to use, a decorator)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    # Traceloop and Langfuse add their own span processor to the provider they find (Langfuse's
    # is a batch processor: its export runs on its thread, flushed inside the measured calls);
    # they get the counting exporter instead of a second processor of ours.
    if config not in ("openllmetry", "langfuse"):
        provider.add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[arg-type]
    tracer = trace.get_tracer("hand-written")

    def hand_span(function: Callable[..., Any]) -> Callable[..., Any]:
        def traced(*args: Any, **kwargs: Any) -> Any:
            with tracer.start_as_current_span("call", attributes={"gen_ai.request.model": "m"}):
                return function(*args, **kwargs)

        return traced

    extras: dict[str, Any] = {"wrap": None, "decorator": None}
    if config in ("none", "anthropic-own"):
        pass
    elif config == "hand":
        extras["wrap"] = extras["decorator"] = hand_span
    elif config == "otel":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument()
    elif config in ("llmtrace", "llmtrace-unpropagated"):
        import llmtrace

        # The application's provider is reused; every installed library llmtrace knows is
        # instrumented, as ``llmtrace.init()`` does by default.
        llmtrace.init()
        extras["decorator"] = llmtrace.workflow
    elif config == "openlit":
        import openlit

        # It reuses the provider it finds and adds no processor; metrics and events off, or it
        # would install an SDK MeterProvider and LoggerProvider of its own.
        openlit.init(disable_metrics=True, disable_events=True, disable_batch=True)
    elif config == "openinference":
        from openinference.instrumentation.anthropic import AnthropicInstrumentor
        from openinference.instrumentation.langchain import LangChainInstrumentor
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIOpenAI

        for instrumentor in (
            OIOpenAI(),
            AnthropicInstrumentor(),
            LangChainInstrumentor(),
            LlamaIndexInstrumentor(),
        ):
            instrumentor.instrument(tracer_provider=provider)
    elif config == "langfuse":
        from langfuse import Langfuse, observe

        # Its batch processor exports to the counting exporter instead of a Langfuse server
        # (the address given is never reached).
        Langfuse(
            public_key="pk-lf-bench",
            secret_key="sk-lf-bench",
            base_url="http://127.0.0.1:9",
            tracer_provider=provider,
            span_exporter=exporter,
        )
        import langfuse.openai  # noqa: F401  (the drop-in wrapper patches the openai client)

        extras["decorator"] = observe
    elif config == "openllmetry":
        from traceloop.sdk import Traceloop
        from traceloop.sdk.decorators import workflow

        # Reuses the global provider and adds a simple processor with this exporter; every
        # installed library it knows is instrumented, as by default.
        Traceloop.init(
            app_name="bench", exporter=exporter, disable_batch=True, telemetry_enabled=False
        )
        # A decorator factory: bare ``@workflow`` would take the function for its name.
        extras["decorator"] = workflow(name="answer")
    return extras


def _scenario(name: str, request: dict[str, Any], extras: dict[str, Any]) -> Callable[[], Any]:
    """One call of scenario ``name``."""
    url = request["long_url"] if name.endswith("-long") else request["short_url"]
    wrap = extras["wrap"] or (lambda function: function)
    if name.startswith("openai"):
        import openai

        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        create = client.chat.completions.create
        if name == "openai":
            return wrap(lambda: create(model="m", messages=MESSAGES))
        return wrap(lambda: sum(1 for _ in create(model="m", messages=MESSAGES, stream=True)))
    if name.startswith("anthropic"):
        import anthropic

        messages = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0).messages
        return wrap(
            lambda: sum(
                1 for _ in messages.create(model="m", max_tokens=64, messages=MESSAGES, stream=True)
            )
        )
    if name == "decorator":
        decorator = extras["decorator"] or (lambda function: function)

        @decorator
        def answer(question: str) -> str:
            return question

        return lambda: answer("q")
    if name == "langchain":
        from langchain_core.output_parsers import StrOutputParser
        from langchain_core.prompts import ChatPromptTemplate
        from langchain_openai import ChatOpenAI

        chain = (
            ChatPromptTemplate.from_messages([("user", "Answer briefly: {question}")])
            | ChatOpenAI(model="m", base_url=f"{url}/v1", api_key="k", max_retries=0)  # type: ignore[arg-type]
            | StrOutputParser()
        )
        return wrap(lambda: chain.invoke({"question": "Say hello"}))
    if name == "llama-index":
        # LlamaIndex's own mock model and embeddings: its OpenAI model package caps openai below 3
        # (the version every other row uses), and what is measured here is the framework's
        # instrumentation, not a client's (the client rows above have those).
        from llama_index.core import Document, Settings, VectorStoreIndex
        from llama_index.core.embeddings import MockEmbedding
        from llama_index.core.llms import MockLLM

        Settings.embed_model = MockEmbedding(embed_dim=8)
        Settings.llm = MockLLM(max_tokens=8)
        documents = [Document(text=f"document {number} about latency") for number in range(4)]
        engine = VectorStoreIndex.from_documents(documents).as_query_engine(similarity_top_k=2)
        return wrap(lambda: engine.query("Where did the time go?"))
    raise ValueError(f"unknown scenario {name}")


def child(request: dict[str, Any]) -> None:
    import ctypes

    from opentelemetry import trace

    exporter = _CountingExporter()
    extras = _setup(request["config"], exporter)
    calls_for = {name: _scenario(name, request, extras) for name in request["scenarios"]}
    library = request["callgrind_library"]
    if library:
        ctypes.CDLL(library).start()
    results = {}
    for name, call in calls_for.items():
        calls = request["calls"][name]
        # Lazy imports and first-call caches, and Python's own warm-up: the interpreter
        # specializes a function's code after it ran a few times (eight in 3.11), so with fewer
        # calls first what runs once per call would be specialized inside the measured calls.
        for _ in range(WARM_UP_CALLS):
            call()
        trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
        # The same start for every configuration: no garbage left over from the setup and the
        # warm-up for a collection inside the measured calls to go through.
        gc.collect()
        spans_before, attributes_before = exporter.count, exporter.attributes
        timings = []
        os.getloadavg()  # a callgrind dump: what came before is not counted
        for _ in range(calls):
            started = time.perf_counter()
            call()
            timings.append(time.perf_counter() - started)
        trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
        os.getloadavg()  # a callgrind dump: this scenario's calls, and nothing else
        results[name] = {
            "seconds": statistics.median(timings),
            "spans": (exporter.count - spans_before) / calls,
            "attributes": (exporter.attributes - attributes_before) / calls,
        }
    Path(request["results"]).write_text(json.dumps(results))


if __name__ == "__main__":
    child(json.loads(sys.argv[1]))
