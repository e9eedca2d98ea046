"""``llmtrace bench``: replay a question set at fixed concurrency and report per-stage latency."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from llmtrace.commands.report import add_html_argument, add_jaeger_argument
from llmtrace.errors import CommandError

if TYPE_CHECKING:
    from rich.console import Console

    from llmtrace.bench.questions import QuestionSet
    from llmtrace.bench.runner import BenchPlan, BenchResult
    from llmtrace.bench.targets import Target

HELP = "Replay a question set against your app at a fixed concurrency and report per-stage latency."
EXAMPLES = (
    "llmtrace bench myapp.rag:answer --questions questions.jsonl --concurrency 4 --name before",
    "llmtrace bench myapp.rag:answer --questions questions.jsonl --concurrency 4 --name after "
    "--baseline before --html after.html",
    "llmtrace bench --url http://localhost:8000/ask --questions questions.csv "
    "--otlp http://localhost:4317 --jaeger http://localhost:16686 --settle 6",
)
# The defaults of llmtrace.bench.targets and llmtrace.bench.runs, written out here so that
# building the parser does not import the benchmark machinery (httpx, asyncio, OpenTelemetry);
# tests/core/test_cli_vocabulary.py keeps them equal.
DEFAULT_BODY = '{"question": "{question}"}'
DEFAULT_RUNS_DIR = Path(".llmtrace") / "runs"
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
        help="trace file the run appends to "
        "(default $LLMTRACE_FILE_PATH or .llmtrace/traces.jsonl)",
    )
    parser.add_argument(
        "--otlp",
        metavar="URL",
        default=None,
        help="also export spans to this OTLP endpoint (default $OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    add_jaeger_argument(
        parser,
        "build the report from this Jaeger instead of the trace file, when the service exports "
        "there (add --otlp so the bench's request spans get there too)",
    )
    # The older spelling of --jaeger, which also took a trace file.
    parser.add_argument("--source", metavar="FILE|URL", help=argparse.SUPPRESS)
    parser.add_argument("--service", help="with --jaeger: the service whose traces to read")
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        metavar="S",
        help="wait S seconds before reading the traces, so that a service in another process "
        "has exported its last spans (OpenTelemetry batches them every 5 s by default)",
    )
    parser.add_argument(
        "--runs-dir",
        type=Path,
        default=DEFAULT_RUNS_DIR,
        metavar="DIR",
        help=f"where runs are saved (default {DEFAULT_RUNS_DIR})",
    )
    add_html_argument(parser, "also write the HTML report to FILE")
    parser.add_argument("--no-progress", action="store_true", help="no live progress bar")


def build_target(args: argparse.Namespace) -> Target:
    from llmtrace.bench.targets import HTTPTarget, load_callable, parse_headers

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
    from datetime import datetime

    from llmtrace.bench.runner import BenchPlan
    from llmtrace.bench.runs import check_run_name

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


def report_source(args: argparse.Namespace, traces_file: Path) -> str | Path:
    """Where the run's report is read from: ``--jaeger`` (or the older ``--source``), else the
    trace file the run appended to."""
    if args.jaeger and args.source:
        raise CommandError("give either --jaeger URL or --source, not both")
    return str(args.jaeger or args.source or traces_file)


async def _run_and_close(
    questions: QuestionSet,
    target: Target,
    plan: BenchPlan,
    traces_file: Path,
    console: Console,
    show_progress: bool,
) -> BenchResult:
    from llmtrace.bench.execute import run_bench

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
    import asyncio
    import time

    from rich.console import Console

    from llmtrace.analysis.render.terminal import print_comparison, print_report
    from llmtrace.bench import reporting
    from llmtrace.bench.questions import load_questions
    from llmtrace.bench.runs import run_path, save_run
    from llmtrace.bench.tracing import DEFAULT_SERVICE_NAME, ensure_tracing
    from llmtrace.options import default_trace_file, jaeger_url, settings

    console = Console()
    questions = load_questions(args.questions)
    plan = build_plan(args)
    traces_file = Path(args.traces or default_trace_file())
    source = report_source(args, traces_file)
    environment = settings()
    otlp = args.otlp or environment.endpoint
    baseline = reporting.load_saved_report(args.baseline, args.runs_dir) if args.baseline else None
    target = build_target(args)
    ensure_tracing(
        service_name=(
            environment.service_name if environment.service_name_given else DEFAULT_SERVICE_NAME
        ),
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
    # a report read from the trace file links its traces to the Jaeger configured in this
    # process (init(jaeger_url=) or LLMTRACE_JAEGER_URL)
    report = reporting.build_run_report(
        source, result, service=args.service, jaeger_url=jaeger_url()
    )
    document = reporting.report_document(report, result, model=args.model)
    print_report(report, console=console)
    saved = save_run(document, run_path(plan.name, args.runs_dir))
    console.print(
        f"run saved to {saved}  (later: llmtrace bench ... --baseline {plan.name}, "
        f"or llmtrace compare {saved} OTHER.json)"
    )
    if args.html:
        from llmtrace.analysis.render.html import write_html

        write_html(report, args.html)
        console.print(f"HTML report: {args.html}")
    if baseline is not None:
        print_comparison(reporting.compare_with_baseline(baseline, document), console=console)
    return EXIT_INTERRUPTED if result.interrupted else 0
