"""``llmtrace compare``: did a change make it faster? Per-stage deltas with confidence intervals."""

from __future__ import annotations

import argparse
import sys

from llmtrace.analysis.compare import compare
from llmtrace.commands.report import add_source_arguments, report_from_source

HELP = "Compare two runs (trace sources or saved JSON reports): per-stage deltas and verdicts."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("baseline", help="trace file/directory, Jaeger URL or saved JSON report")
    parser.add_argument("candidate", help="trace file/directory, Jaeger URL or saved JSON report")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    add_source_arguments(parser)


def run(args: argparse.Namespace) -> int:
    baseline = report_from_source(args.baseline, args)
    candidate = report_from_source(args.candidate, args)
    comparison = compare(baseline, candidate)
    if args.format == "json":
        from llmtrace.render.json import comparison_json

        sys.stdout.write(comparison_json(comparison) + "\n")
    else:
        from llmtrace.render.terminal import print_comparison

        print_comparison(comparison)
    return 0
