"""``llmtrace compare``: did a change make it faster? Per-stage deltas with confidence intervals."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from llmtrace.commands.report import (
    add_html_argument,
    add_jaeger_argument,
    add_prometheus_arguments,
    add_source_arguments,
    report_from_source,
    report_from_traces,
    traces_from_source,
)
from llmtrace.errors import CommandError

if TYPE_CHECKING:
    from llmtrace.analysis.gate import SlowerLimit
    from llmtrace.analysis.report_model import Report

HELP = "Compare two runs (trace sources or saved JSON reports): per-stage deltas and verdicts."
EXAMPLES = (
    "llmtrace compare .llmtrace/runs/before.json .llmtrace/runs/after.json",
    "llmtrace compare --jaeger http://localhost:16686 --service support-bot before after",
    "llmtrace compare before.json after.json --fail-if-slower end_to_end:p95:10% "
    "--fail-if-slower ttft:p50:50ms",
    "llmtrace compare --prometheus http://localhost:9090 --service support-bot "
    "--baseline-window 1h@1d --window 1h",
)

_SIDE_HELP = (
    "trace file/directory, Jaeger URL or saved JSON report; with --jaeger, the name of an "
    "llmtrace bench run whose traces are in that Jaeger"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("baseline", nargs="?", help=_SIDE_HELP)
    parser.add_argument("candidate", nargs="?", help=_SIDE_HELP)
    parser.add_argument(
        "--format", choices=("table", "json"), default="table", help="output format (default table)"
    )
    add_jaeger_argument(
        parser,
        "read both runs from this Jaeger (http://localhost:16686): BASELINE and CANDIDATE are "
        "then llmtrace bench run names; a side read from a file links its traces to it "
        "(default for links: $LLMTRACE_JAEGER_URL)",
    )
    add_html_argument(parser, "also write the comparison as one self-contained HTML page")
    parser.add_argument(
        "--fail-if-slower",
        type=_limit_argument,
        action="append",
        default=[],
        metavar="ROW:STAT:ALLOWANCE",
        help="exit 1 with a one-line reason when ROW's STAT (mean, p50, p90, p95) is "
        "significantly slower by more than ALLOWANCE (10%% of the baseline, or 50ms); "
        "repeatable, e.g. end_to_end:p95:10%% or ttft:p50:50ms",
    )
    parser.add_argument(
        "--require-data",
        action="store_true",
        help="with --fail-if-slower: also fail when the runs are too small to judge a limit's "
        "statistic (by default 'not enough data' never fails)",
    )
    add_source_arguments(parser)
    add_prometheus_arguments(parser, "windows: --baseline-window and --window")
    for flag, side in (("--baseline-window", "the baseline"), ("--window", "the candidate")):
        parser.add_argument(
            flag,
            type=_window_argument,
            metavar="DURATION[@TIME]",
            help=f"with --prometheus: {side}'s window, DURATION long and ending at TIME (an "
            "ISO 8601 time or a time ago like 1d; default now), e.g. 1h@1d",
        )


def _window_argument(text: str) -> tuple[object, object]:
    """``DURATION[@TIME]``: the window's length and its end (None: now)."""
    from llmtrace.commands.report import duration_argument, time_argument

    length, _, end = text.partition("@")
    return duration_argument(length.strip()), time_argument(end) if end.strip() else None


def _prometheus_reports(args: argparse.Namespace) -> tuple[Report, Report]:
    """Both sides from ``--prometheus``: the same filters, two windows."""
    from datetime import UTC, datetime

    from llmtrace.commands.report import prometheus_report

    if args.baseline or args.candidate:
        raise CommandError("with --prometheus, give --baseline-window and --window, not sources")
    if args.baseline_window is None or args.window is None:
        raise CommandError("with --prometheus, give both --baseline-window and --window")
    reports = []
    for length, end in (args.baseline_window, args.window):
        args.lookback, args.since, args.until = length, None, end or datetime.now(UTC)
        reports.append(prometheus_report(args)[0])
    return reports[0], reports[1]


def _limit_argument(text: str) -> SlowerLimit:
    from llmtrace.analysis.gate import SlowerLimit

    try:
        return SlowerLimit.parse(text)
    except CommandError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _is_run_name(side: str, args: argparse.Namespace) -> bool:
    """With ``--jaeger``, a side that is neither a URL nor an existing file names a bench run."""
    from llmtrace.analysis.sources import is_jaeger_url

    return bool(args.jaeger) and not is_jaeger_url(side) and not Path(side).exists()


def _reports(args: argparse.Namespace) -> tuple[Report, Report]:
    if args.prometheus:
        return _prometheus_reports(args)
    if not args.baseline or not args.candidate:
        raise CommandError(
            "give BASELINE and CANDIDATE, or --prometheus URL with two windows "
            "(see llmtrace compare --help)"
        )
    sides = (args.baseline, args.candidate)
    run_names = [side for side in sides if _is_run_name(side, args)]
    if run_names and args.run:
        raise CommandError("with --jaeger, name the runs as BASELINE and CANDIDATE, not --run")
    # Both runs come from one read of Jaeger: the same filters, asked once.
    traceset = traces_from_source(args.jaeger, args) if run_names else None
    reports = []
    for side in sides:
        if traceset is not None and side in run_names:
            reports.append(
                report_from_traces(traceset, f"{args.jaeger} (run {side})", args, run=side)
            )
        else:
            reports.append(report_from_source(side, args))
    return reports[0], reports[1]


def run(args: argparse.Namespace) -> int:
    from llmtrace.analysis.compare import compare

    if args.require_data and not args.fail_if_slower:
        raise CommandError("--require-data applies to --fail-if-slower limits: give one")
    baseline, candidate = _reports(args)
    comparison = compare(baseline, candidate)
    if args.format == "json":
        from llmtrace.analysis.render.json import comparison_json

        sys.stdout.write(comparison_json(comparison) + "\n")
    else:
        from llmtrace.analysis.render.terminal import print_comparison

        print_comparison(comparison)
    if args.html:
        from llmtrace.analysis.render.html import write_comparison_html

        print(f"wrote {write_comparison_html(comparison, args.html)}", file=sys.stderr)
    if args.fail_if_slower:
        from llmtrace.analysis.gate import failures

        reasons = failures(comparison, args.fail_if_slower, require_data=args.require_data)
        if reasons:
            print(f"llmtrace compare: regression: {'; '.join(reasons)}", file=sys.stderr)
            return 1
    return 0
