"""``llmtrace bench``: replay a question set at fixed concurrency and report per-stage latency."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from datetime import datetime
from pathlib import Path

from rich.console import Console

from llmtrace.bench.execute import run_bench
from llmtrace.bench.questions import QuestionSet, load_questions
from llmtrace.bench.runner import BenchPlan, BenchResult
from llmtrace.bench.runs import DEFAULT_RUNS_DIR, check_run_name, run_path, save_run
from llmtrace.bench.targets import (
    DEFAULT_BODY,
    HTTPTarget,
    Target,
    load_callable,
    parse_headers,
)
from llmtrace.bench.tracing import (
    DEFAULT_SERVICE_NAME,
    ensure_tracing,
)
from llmtrace.errors import CommandError

HELP = "Replay a question set against your app at a fixed concurrency and report per-stage latency."
DEFAULT_TRACES = ".llmtrace/traces.jsonl"
EXIT_INTERRUPTED = 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        nargs="?",
        metavar="MODULE:FUNCTION",
        help="a Python callable (sync or async) called with each question, e.g. app.rag:answer",
    )
    parser.add_argument(
        "--questions",
        required=True,
        metavar="FILE",
        help="JSONL with a 'question' field (optional 'id'), CSV with a 'question' column, "
        "or plain text, one question per line",
    )
    parser.add_argument("--url", help="send each question to this HTTP endpoint instead")
    parser.add_argument(
        "--body",
        default=DEFAULT_BODY,
        help="JSON body template for --url; {question} and {id} are replaced "
        f"(default: {DEFAULT_BODY})",
    )
    parser.add_argument("--method", default="POST", help="HTTP method for --url (default POST)")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="extra HTTP header for --url (repeatable)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=1, metavar="N", help="requests in flight (default 1)"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, metavar="K", help="passes over the question set"
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=0,
        metavar="W",
        help="requests sent first and left out of the report (default 0)",
    )
    parser.add_argument(
        "--rate", type=float, metavar="R", help="start at most R requests per second"
    )
    parser.add_argument(
        "--timeout", type=float, metavar="S", help="count a request as timed out after S seconds"
    )
    parser.add_argument("--name", metavar="RUN", help="run name (default run-YYYYMMDD-HHMMSS)")
    parser.add_argument(
        "--baseline",
        metavar="RUN",
        help="compare with this saved run (a name in --runs-dir, or a path) when done",
    )
    parser.add_argument("--model", help="the model under test, recorded in the run's metadata")
    parser.add_argument(
        "--traces",
        default=None,
        metavar="FILE",
        help=f"trace file the run appends to (default $LLMTRACE_FILE_PATH or {DEFAULT_TRACES})",
    )
    parser.add_argument(
        "--source",
        metavar="FILE|URL",
        help="build the report from this trace source instead (e.g. a Jaeger URL, when the "
        "service exports there; add --otlp so the bench's request spans get there too)",
    )
    parser.add_argument("--service", help="with --source: the service whose traces to read")
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        metavar="S",
        help="wait S seconds before reading the traces, so that a service in another process "
        "has exported its last spans (OpenTelemetry batches them every 5 s by default)",
    )
    parser.add_argument(
        "--otlp",
        metavar="URL",
        default=None,
        help="also export spans to this OTLP endpoint (default $OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    parser.add_argument(
        "--runs-dir",
        type=Path,
        default=DEFAULT_RUNS_DIR,
        help=f"where runs are saved (default {DEFAULT_RUNS_DIR})",
    )
    parser.add_argument("--html", type=Path, metavar="FILE", help="also write the HTML report")
    parser.add_argument("--no-progress", action="store_true", help="no live progress bar")


def build_target(args: argparse.Namespace) -> Target:
    if args.target and args.url:
        raise CommandError("give either MODULE:FUNCTION or --url, not both")
    if args.url:
        return HTTPTarget(
            args.url, args.body, method=args.method, headers=parse_headers(args.header)
        )
    if args.target:
        return load_callable(args.target)
    raise CommandError("nothing to benchmark: give MODULE:FUNCTION or --url URL")


def build_plan(args: argparse.Namespace) -> BenchPlan:
    name = check_run_name(args.name or datetime.now().strftime("run-%Y%m%d-%H%M%S"))
    try:
        return BenchPlan(
            name=name,
            concurrency=args.concurrency,
            repeat=args.repeat,
            warmup=args.warmup,
            rate=args.rate,
            timeout=args.timeout,
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from None


async def _run_and_close(
    questions: QuestionSet,
    target: Target,
    plan: BenchPlan,
    traces_file: Path,
    console: Console,
    show_progress: bool,
) -> BenchResult:
    try:
        return await run_bench(
            questions,
            target,
            plan,
            traces_file=traces_file,
            console=console,
            show_progress=show_progress,
        )
    finally:
        await target.aclose()


def run(args: argparse.Namespace) -> int:
    from llmtrace.bench import reporting
    from llmtrace.render.terminal import print_comparison, print_report

    console = Console()
    questions = load_questions(args.questions)
    plan = build_plan(args)
    traces_file = Path(args.traces or os.environ.get("LLMTRACE_FILE_PATH") or DEFAULT_TRACES)
    otlp = args.otlp or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    baseline = reporting.load_saved_report(args.baseline, args.runs_dir) if args.baseline else None
    target = build_target(args)
    ensure_tracing(
        service_name=os.environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME,
        otlp_endpoint=otlp,
        # init()'s default: libraries the target imported are instrumented now, the others
        # when (if) they are imported; nothing is imported on the target's behalf.
        instrument=True,
    )

    console.print(
        f"[bold]llmtrace bench[/] {plan.name}: {len(questions)} questions x {plan.repeat} "
        f"at concurrency {plan.concurrency} against {target.description}"
        + (f" (+{plan.warmup} warmup)" if plan.warmup else "")
    )
    result = asyncio.run(
        _run_and_close(questions, target, plan, traces_file, console, not args.no_progress)
    )
    console.print(
        f"{result.requests} requests, {result.errors} errors, {result.timeouts} timeouts"
        + (" (interrupted)" if result.interrupted else "")
    )
    if result.requests == 0:
        console.print("[red]no request completed: nothing to report[/]")
        return EXIT_INTERRUPTED if result.interrupted else 1

    if args.settle > 0:
        time.sleep(args.settle)
    report, traceset = reporting.build_run_report(
        args.source or traces_file, result, service=args.service
    )
    document = reporting.report_document(report, result, model=args.model)
    print_report(report, console=console)
    saved = save_run(document, run_path(plan.name, args.runs_dir))
    console.print(
        f"run saved to {saved}  (later: llmtrace bench ... --baseline {plan.name}, "
        f"or llmtrace compare {saved} OTHER.json)"
    )
    if args.html:
        from llmtrace.render.html import write_html

        write_html(report, args.html, traceset=traceset)
        console.print(f"HTML report: {args.html}")
    if baseline is not None:
        print_comparison(reporting.compare_with_baseline(baseline, document), console=console)
    return EXIT_INTERRUPTED if result.interrupted else 0
