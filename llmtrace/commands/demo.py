"""``llmtrace demo``: a real RAG service on SmolLM2-135M, measured, improved and measured again."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

HELP = "Run a traced RAG service on a real local model: report, apply the suggested fix, compare."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from llmtrace.demo.walkthrough import DEFAULT_JAEGER_URL, DemoOptions

    defaults = DemoOptions()
    parser.add_argument(
        "--questions",
        type=int,
        default=defaults.questions,
        metavar="N",
        help=f"how many of the bundled questions to ask (default {defaults.questions})",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=defaults.concurrency,
        metavar="C",
        help=f"requests in flight (default {defaults.concurrency})",
    )
    parser.add_argument(
        "--top-k",
        type=int,
        default=defaults.baseline.top_k,
        metavar="K",
        help=f"passages retrieved per question in the first run (default {defaults.baseline.top_k})",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=defaults.baseline.max_tokens,
        metavar="T",
        help=f"answer length limit in the first run (default {defaults.baseline.max_tokens})",
    )
    parser.add_argument(
        "--otlp",
        metavar="URL",
        default=None,
        help="also send the spans to this OTLP endpoint, e.g. http://localhost:4317 "
        "(default $OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    parser.add_argument(
        "--jaeger-url",
        default=os.environ.get("LLMTRACE_JAEGER_URL", DEFAULT_JAEGER_URL),
        help=f"Jaeger UI for the slowest-trace link with --otlp (default {DEFAULT_JAEGER_URL})",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=defaults.output_dir,
        metavar="DIR",
        help=f"traces, saved runs and the HTML report go here (default {defaults.output_dir})",
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from llmtrace.demo.rag import RagSettings
    from llmtrace.demo.walkthrough import DemoOptions, run_demo

    console = Console()
    started = time.monotonic()
    options = DemoOptions(
        questions=args.questions,
        concurrency=args.concurrency,
        output_dir=args.output_dir,
        otlp=args.otlp or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"),
        jaeger_url=args.jaeger_url,
        baseline=RagSettings(top_k=args.top_k, max_tokens=args.max_tokens),
    )
    run_demo(options, console)
    console.print(f"demo finished in {time.monotonic() - started:.0f}s")
    return 0
