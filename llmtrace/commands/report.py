"""``llmtrace report``: where the time went, per stage, at P50/P90/P95/P99."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from llmtrace.analysis.report import Report, build_report, load_report_file
from llmtrace.analysis.sources import is_jaeger_url, load_traces
from llmtrace.errors import CommandError

HELP = "Break traces down by stage (P50/P90/P95/P99), name the bottleneck and advise."
DEFAULT_SOURCE = ".llmtrace/"


def default_source() -> str:
    return os.environ.get("LLMTRACE_FILE_PATH") or DEFAULT_SOURCE


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The filters every command that reads traces accepts."""
    parser.add_argument("--service", help="only traces with a span of this service")
    window = parser.add_mutually_exclusive_group()
    window.add_argument(
        "--lookback",
        metavar="DURATION",
        help="only traces started in the last DURATION (15m, 2h, 1d)",
    )
    window.add_argument(
        "--since", metavar="TIME", help="only traces started at or after TIME (ISO 8601 or 2h ago)"
    )
    parser.add_argument(
        "--until", metavar="TIME", help="only traces started before TIME (ISO 8601 or 30m ago)"
    )
    parser.add_argument("--limit", type=int, metavar="N", help="only the N most recent traces")
    parser.add_argument("--trace-id", metavar="ID", help="only this trace")
    parser.add_argument("--run", metavar="NAME", help="only the traces of this benchmark run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        nargs="?",
        help="trace file, directory of trace files, Jaeger URL (http://host:16686) or saved "
        f"JSON report (default: $LLMTRACE_FILE_PATH or {DEFAULT_SOURCE})",
    )
    parser.add_argument(
        "--format", choices=("table", "json", "html"), default="table", help="output format"
    )
    parser.add_argument(
        "--output", "-o", metavar="PATH", help="write to PATH (html default: report.html)"
    )
    add_source_arguments(parser)


def report_from_source(source: str, args: argparse.Namespace) -> Report:
    """Build a report from a trace source, or read a saved one."""
    if not is_jaeger_url(source):
        saved = load_report_file(Path(source)) if Path(source).is_file() else None
        if saved is not None:
            return saved
    traceset = load_traces(
        source,
        service=args.service,
        lookback=args.lookback,
        since=args.since,
        until=args.until,
        limit=args.limit,
        trace_id=args.trace_id,
    )
    report = build_report(traceset, run=args.run)
    if report.traces == 0:
        detail = []
        if traceset.excluded_open:
            detail.append(f"{traceset.excluded_open} still open")
        if report.excluded_warmup:
            detail.append(f"{report.excluded_warmup} warm-up")
        if traceset.warnings:
            detail.append(traceset.warnings[0])
        suffix = f" ({'; '.join(detail)})" if detail else ""
        filters = " matching the filters" if _has_filters(args) else ""
        raise CommandError(f"no complete traces{filters} in {source}{suffix}")
    return report


def _has_filters(args: argparse.Namespace) -> bool:
    return any(
        getattr(args, name, None)
        for name in ("service", "lookback", "since", "until", "trace_id", "run")
    )


def run(args: argparse.Namespace) -> int:
    source = args.source or default_source()
    report = report_from_source(source, args)
    for warning in report.warnings:
        print(f"llmtrace report: warning: {warning}", file=sys.stderr)
    if args.format == "json":
        from llmtrace.render.json import report_json

        text = report_json(report)
        if args.output:
            Path(args.output).write_text(text + "\n", encoding="utf-8")
        else:
            sys.stdout.write(text + "\n")
    elif args.format == "html":
        from llmtrace.render.html import write_html

        path = write_html(report, args.output or "report.html")
        print(f"wrote {path}", file=sys.stderr)
    else:
        from rich.console import Console

        from llmtrace.render.terminal import print_report

        if args.output:
            with open(args.output, "w", encoding="utf-8") as handle:
                print_report(report, Console(file=handle, width=100, no_color=True))
        else:
            print_report(report)
    return 0
