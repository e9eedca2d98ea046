"""The demo from start to end: measure, read the report, change one thing, measure, compare."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from llmtrace._urls import jaeger_trace_url
from llmtrace.analysis.compare import Comparison, compare
from llmtrace.analysis.render.html import write_html
from llmtrace.analysis.render.terminal import print_comparison, print_report
from llmtrace.analysis.report_model import Report
from llmtrace.bench.execute import run_bench
from llmtrace.bench.questions import QuestionSet
from llmtrace.bench.reporting import build_run_report, report_document
from llmtrace.bench.runner import BenchPlan, BenchResult
from llmtrace.bench.runs import run_path, save_run
from llmtrace.bench.targets import CallableTarget
from llmtrace.bench.tracing import ensure_tracing
from llmtrace.demo.corpus import load_demo_questions
from llmtrace.demo.embedder import load_embedding_model
from llmtrace.demo.model_server import MODEL_NAME, LlamaServer
from llmtrace.demo.optimise import choose_optimisation
from llmtrace.demo.rag import RagService, RagSettings
from llmtrace.demo.service import build_service
from llmtrace.demo.verdict import verdict_lines
from llmtrace.errors import CommandError

SERVICE_NAME = "lumora-support"
BASELINE_RUN = "demo-baseline"
OPTIMISED_RUN = "demo-optimised"
DEFAULT_JAEGER_URL = "http://localhost:16686"


@dataclass(frozen=True)
class DemoOptions:
    questions: int = 12
    concurrency: int = 1
    warmup: int = 1
    output_dir: Path = Path(".llmtrace")
    otlp: str | None = None
    jaeger_url: str = DEFAULT_JAEGER_URL
    baseline: RagSettings = field(default_factory=lambda: RagSettings(top_k=8, max_tokens=128))

    @property
    def traces_file(self) -> Path:
        return self.output_dir / "demo-traces.jsonl"

    @property
    def runs_dir(self) -> Path:
        return self.output_dir / "runs"

    @property
    def html_path(self) -> Path:
        return self.output_dir / "demo-report.html"

    @property
    def server_log(self) -> Path:
        return self.output_dir / "demo-model-server.log"


@dataclass
class DemoOutcome:
    baseline: Report
    optimised: Report
    html_path: Path
    change: str
    comparison: Comparison
    slowest_trace_url: str | None = None


def run_demo(options: DemoOptions, console: Console | None = None) -> DemoOutcome:
    console = console or Console()
    questions = load_demo_questions()
    if not 1 <= options.questions <= len(questions):
        raise CommandError(f"--questions must be between 1 and {len(questions)}")
    if options.concurrency < 1:
        raise CommandError("--concurrency must be at least 1")
    if options.baseline.top_k < 1 or options.baseline.max_tokens < 1:
        raise CommandError("--top-k and --max-tokens must be at least 1")
    questions = questions.take(options.questions)
    options.output_dir.mkdir(parents=True, exist_ok=True)
    # Each demo starts a fresh trace file, so the file holds exactly the two runs shown.
    options.traces_file.unlink(missing_ok=True)
    ensure_tracing(service_name=SERVICE_NAME, otlp_endpoint=options.otlp, instrument=["openai"])

    started = time.monotonic()
    server = LlamaServer(log_path=options.server_log)
    console.print(
        f"[bold]1.[/] starting {MODEL_NAME} (llama-cpp-python server) and the RAG service"
    )
    server.start()
    try:
        # Loading the embedding model and indexing the handbook overlap with the server's start.
        service = build_service(
            base_url=server.base_url,
            model=MODEL_NAME,
            settings=options.baseline,
            embedder=load_embedding_model(),
            cache_dir=options.output_dir,
        )
        server.wait_ready()
        console.print(
            f"   model server {server.base_url} ready, handbook indexed "
            f"({time.monotonic() - started:.1f}s)"
        )
        return asyncio.run(_measure_change_measure(service, server, questions, options, console))
    finally:
        server.stop()


async def _measure_change_measure(
    service: RagService,
    server: LlamaServer,
    questions: QuestionSet,
    options: DemoOptions,
    console: Console,
) -> DemoOutcome:
    try:
        settings = service.settings
        console.rule(
            f"2. baseline: {len(questions)} questions, concurrency {options.concurrency}, "
            f"top_k={settings.top_k}, max_tokens={settings.max_tokens}"
        )
        baseline, baseline_result = await _bench(
            service, server, questions, BASELINE_RUN, options, console
        )
        html_path = await asyncio.to_thread(write_html, baseline, options.html_path)
        console.print(f"HTML report: [bold]{Path(html_path).resolve()}[/]")

        change = choose_optimisation(baseline, settings)
        console.rule(
            f"3. the report says {change.stage} ({change.share:.0%} of the time): {change.description}"
        )
        if change.reason:
            console.print(f"   max_tokens {change.settings.max_tokens}: {change.reason}")
        service.settings = change.settings
        optimised, _ = await _bench(service, server, questions, OPTIMISED_RUN, options, console)

        console.rule("4. before / after (same questions, same concurrency)")
        comparison = compare(baseline, optimised)
        print_comparison(comparison, console=console)
        for line in verdict_lines(comparison, options.warmup):
            console.print(f"[bold]{line}[/]" if line.startswith("Verdict") else line)
        console.print(
            f"runs saved in {options.runs_dir}: "
            f"llmtrace compare {options.runs_dir / (BASELINE_RUN + '.json')} "
            f"{options.runs_dir / (OPTIMISED_RUN + '.json')}"
        )
        url = None
        if options.otlp:
            url = slowest_trace_url(baseline_result, options.jaeger_url)
            if url:
                console.print(f"slowest trace of the baseline in Jaeger: [bold]{url}[/]")
        return DemoOutcome(
            baseline, optimised, Path(html_path), change.description, comparison, url
        )
    finally:
        await service.client.close()


async def _bench(
    service: RagService,
    server: LlamaServer,
    questions: QuestionSet,
    name: str,
    options: DemoOptions,
    console: Console,
) -> tuple[Report, BenchResult]:
    plan = BenchPlan(name=name, concurrency=options.concurrency, warmup=options.warmup)
    target = CallableTarget(service.answer, "the Lumora RAG service")
    result = await run_bench(
        questions, target, plan, traces_file=options.traces_file, console=console
    )
    if result.interrupted:
        raise KeyboardInterrupt
    if result.requests == 0 or result.errors + result.timeouts == result.requests:
        last_error = result.outcomes[-1].error if result.outcomes else "no request ran"
        raise CommandError(
            server.crash_hint()
            or f"every request of {name} failed ({last_error}): see {options.server_log}"
        )
    # with --otlp the same traces reach Jaeger: the report's traces link to them there
    jaeger_url = options.jaeger_url if options.otlp else None
    report = await asyncio.to_thread(
        build_run_report, options.traces_file, result, jaeger_url=jaeger_url
    )
    document = report_document(report, result, model=MODEL_NAME)
    save_run(document, run_path(name, options.runs_dir))
    report = Report.from_json(document)
    print_report(report, console=console)
    return report, result


def slowest_trace_url(result: BenchResult, jaeger_url: str) -> str | None:
    measured = [o for o in result.measured if o.status == "ok"] or result.measured
    if not measured:
        return None
    slowest = max(measured, key=lambda outcome: outcome.latency)
    return jaeger_trace_url(jaeger_url, slowest.trace_id)
