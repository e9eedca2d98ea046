"""``llmtrace report``: where the time went, per stage, at P50/P90/P95/P99."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from llmtrace.errors import CommandError

if TYPE_CHECKING:
    from llmtrace.analysis.model import TraceSet
    from llmtrace.analysis.report_model import Report

HELP = "Break traces down by stage (P50/P90/P95/P99), name the bottleneck and advise."
EXAMPLES = (
    "llmtrace report",
    "llmtrace report .llmtrace/traces.jsonl --lookback 2h --html report.html",
    "llmtrace report --jaeger http://localhost:16686 --service support-bot --limit 500",
    "llmtrace report .llmtrace/traces.jsonl --jaeger http://localhost:16686",
    "llmtrace report --filter user.id=u-42 --group-by session.id",
    "llmtrace report --prometheus http://localhost:9090 --service support-bot --lookback 1h",
)


def default_source() -> str:
    """The application's trace file: ``$LLMTRACE_FILE_PATH``, else ``.llmtrace/traces.jsonl``.

    Never the whole ``.llmtrace/`` directory: the demo and other tools write their own files
    there, and their traces must not mix into the application's report.
    """
    # Imported here: llmtrace.options loads the file exporter, which loads the OpenTelemetry SDK.
    from llmtrace.options import default_trace_file

    return default_trace_file()


_DURATION_FORMS = "a number and a unit: 500ms, 30s, 15m, 2h, 1d, 1w"
_TIME_FORMS = (
    "an ISO 8601 time (2025-01-31T12:00:00Z, 2025-01-31 12:00, 2025-01-31; UTC unless it "
    "gives an offset), a time ago (2h or 2h ago) or now"
)
_AGO = re.compile(r"^(?P<duration>.*?)\s+ago\s*$", re.IGNORECASE)


def _parse_duration(text: str) -> timedelta:
    from llmtrace.analysis.sources import parse_duration

    return parse_duration(text)


def duration_argument(text: str) -> timedelta:
    """``--lookback``: a number and a unit (``ms``, ``s``, ``m``, ``h``, ``d``, ``w``)."""
    try:
        return _parse_duration(text)
    except CommandError:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: use {_DURATION_FORMS}"
        ) from None


def time_argument(text: str) -> datetime:
    """``--since`` / ``--until``: an ISO 8601 time (UTC unless it gives an offset), ``now``, or a
    duration before now (``2h``, or ``2h ago`` as the help says it)."""
    now = datetime.now(UTC)
    stripped = text.strip()
    ago = _AGO.match(stripped)
    try:
        if stripped.lower() == "now":
            return now
        if ago is not None:
            return now - _parse_duration(ago.group("duration"))
        return now - _parse_duration(stripped)
    except CommandError:
        pass
    try:
        # fromisoformat reads "Z" from Python 3.11 on; a lower-case "z" is ISO 8601 too.
        moment = datetime.fromisoformat(re.sub(r"z$", "Z", stripped))
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid time {text!r}: use {_TIME_FORMS}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}: use a whole number above 0")
    return value


def jaeger_url(text: str) -> str:
    """``--jaeger``: the base URL of Jaeger's UI and query API."""
    from llmtrace.analysis.sources import is_jaeger_url

    if not is_jaeger_url(text):
        raise argparse.ArgumentTypeError(
            f"invalid Jaeger URL {text!r}: use a URL like http://localhost:16686"
        )
    return text


def filter_argument(text: str) -> tuple[str, str]:
    """``--filter KEY=VALUE``: a root span attribute and the string it must equal."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(
            f"invalid filter {text!r}: use KEY=VALUE, e.g. session.id=abc123"
        )
    return key.strip(), value


def add_jaeger_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """``--jaeger URL``, spelt the same by every command that reads or checks Jaeger."""
    parser.add_argument("--jaeger", metavar="URL", type=jaeger_url, help=help)


def add_html_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """``--html FILE``, spelt the same by every command that writes the HTML report."""
    parser.add_argument("--html", type=Path, metavar="FILE", help=help)


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The filters every command that reads traces accepts."""
    parser.add_argument("--service", help="only traces with a span of this service")
    window = parser.add_mutually_exclusive_group()
    window.add_argument(
        "--lookback",
        type=duration_argument,
        metavar="DURATION",
        help="only traces started in the last DURATION (30s, 15m, 2h, 1d)",
    )
    window.add_argument(
        "--since",
        type=time_argument,
        metavar="TIME",
        help="only traces started at or after TIME (ISO 8601 like 2025-01-31T12:00Z, "
        "or a time ago like 2h ago)",
    )
    parser.add_argument(
        "--until",
        type=time_argument,
        metavar="TIME",
        help="only traces started before TIME (ISO 8601, or a time ago like 30m ago)",
    )
    parser.add_argument(
        "--limit",
        type=positive_int,
        metavar="N",
        help="only the N most recent traces (Jaeger without --service: N shared among services)",
    )
    parser.add_argument("--trace-id", metavar="ID", help="only this trace")
    parser.add_argument("--run", metavar="NAME", help="only the traces of this benchmark run")


def add_prometheus_arguments(
    parser: argparse.ArgumentParser,
    window: str = "window: --lookback (default 1h) or --since/--until",
) -> None:
    """``--prometheus URL`` and the filters only the request metrics carry."""
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        help="read the request metrics every replica exported (llmtrace.sdk.request_metrics) from "
        f"this Prometheus (http://localhost:9090) instead of traces; {window}",
    )
    parser.add_argument("--route", help="with --prometheus: only requests of this route or root")
    parser.add_argument("--model", help="with --prometheus: only requests whose main model is this")


def prometheus_report(args: argparse.Namespace) -> tuple[Report, dict[str, object]]:
    """The report from ``--prometheus``, and where its figures came from."""
    from llmtrace.analysis.prometheus import Filters, Window, report_from_prometheus

    until = args.until or datetime.now(UTC)
    default = args.lookback or timedelta(hours=1)
    length = until - args.since if args.since is not None else default
    if length.total_seconds() <= 0:
        raise CommandError("the window is empty: --since must be before --until")
    report, origin = report_from_prometheus(
        args.prometheus,
        filters=Filters(args.service, args.route, args.model),
        window=Window(until, length),
    )
    if report.traces == 0:
        raise CommandError(
            f"no requests in {args.prometheus} in that window{' matching the filters' if _has_filters(args) else ''}"
        )
    return report, origin


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        nargs="?",
        help="trace file, directory of trace files, Jaeger URL or saved JSON report "
        "(default: the application's trace file, $LLMTRACE_FILE_PATH or .llmtrace/traces.jsonl)",
    )
    add_jaeger_argument(
        parser,
        "the Jaeger (http://localhost:16686) the traces are in: without SOURCE, read them from "
        "it; always, link the traces the report names to its UI (default for links: "
        "$LLMTRACE_JAEGER_URL)",
    )
    parser.add_argument(
        "--format",
        # "html" is the older spelling of --html FILE: still accepted, no longer listed.
        choices=("table", "json", "html"),
        metavar="{table,json}",
        default="table",
        help="output format (default table)",
    )
    parser.add_argument(
        "--output", "-o", metavar="PATH", help="write the table or JSON to PATH instead of stdout"
    )
    add_html_argument(parser, "also write the report as one self-contained HTML page to FILE")
    add_source_arguments(parser)
    parser.add_argument(
        "--filter",
        type=filter_argument,
        action="append",
        metavar="KEY=VALUE",
        help="only traces whose root span has attribute KEY equal to VALUE (repeatable, all "
        "must match; KEY: session.id, user.id, gen_ai.conversation.id, set by "
        "llmtrace.context()), e.g. --filter user.id=u-42",
    )
    parser.add_argument(
        "--group-by",
        metavar="KEY",
        help="also one stage table per value of the root span's attribute KEY (session.id, "
        "user.id, gen_ai.conversation.id): the 20 largest groups, the rest counted",
    )
    add_prometheus_arguments(parser)


def link_base(args: argparse.Namespace) -> str | None:
    """The Jaeger UI that the traces a report names link to, when the report did not read them
    from a Jaeger (which is then their link): ``--jaeger``, else ``LLMTRACE_JAEGER_URL``.

    One flag, not a second one for the UI: Jaeger serves its UI and its query API from one base
    URL, so the URL a report reads traces from is the URL their pages are at, and a trace file
    sent through the Collector holds the traces of that same Jaeger.
    """
    from llmtrace.options import jaeger_url

    return getattr(args, "jaeger", None) or jaeger_url()


def traces_from_source(source: str, args: argparse.Namespace) -> TraceSet:
    """Read a trace source with the command line's filters; the traces link to ``link_base``
    unless they were read from a Jaeger."""
    from llmtrace.analysis.sources import load_traces

    traceset = load_traces(
        source,
        service=args.service,
        lookback=args.lookback,
        since=args.since,
        until=args.until,
        limit=args.limit,
        trace_id=args.trace_id,
        attributes=dict(getattr(args, "filter", None) or []),
    )
    if traceset.jaeger_url is None:
        traceset.jaeger_url = link_base(args)
    return traceset


def report_from_traces(
    traceset: TraceSet, source: str, args: argparse.Namespace, *, run: str | None = None
) -> Report:
    """The report of ``traceset`` (of one benchmark run when ``run`` or ``--run`` names one);
    no complete trace is an error that says what was left out."""
    from llmtrace.analysis.report import build_report

    report = build_report(traceset, run=run or args.run, group_by=getattr(args, "group_by", None))
    if report.traces == 0:
        detail = []
        if traceset.excluded_open:
            detail.append(f"{traceset.excluded_open} still open")
        if report.excluded_warmup:
            detail.append(f"{report.excluded_warmup} warm-up")
        if traceset.warnings:
            detail.append(traceset.warnings[0])
        suffix = f" ({'; '.join(detail)})" if detail else ""
        filters = " matching the filters" if run or _has_filters(args) else ""
        raise CommandError(f"no complete traces{filters} in {source}{suffix}")
    return report


def report_from_source(source: str, args: argparse.Namespace) -> Report:
    """Build a report from a trace source, or read a saved one (its traces linked to
    ``link_base`` when it has no links of its own)."""
    from llmtrace.analysis.report_model import linked, load_report_file
    from llmtrace.analysis.sources import is_jaeger_url

    if not is_jaeger_url(source):
        saved = load_report_file(Path(source)) if Path(source).is_file() else None
        if saved is not None:
            base = link_base(args)
            return linked(saved, base) if base else saved
    return report_from_traces(traces_from_source(source, args), source, args)


def _has_filters(args: argparse.Namespace) -> bool:
    return any(
        getattr(args, name, None)
        for name in (
            "service",
            "lookback",
            "since",
            "until",
            "trace_id",
            "run",
            "filter",
            "route",
            "model",
        )
    )


def run(args: argparse.Namespace) -> int:
    from llmtrace.analysis.sources import is_jaeger_url

    if args.source and args.jaeger and is_jaeger_url(args.source):
        raise CommandError("give the Jaeger URL as SOURCE or as --jaeger URL, not both")
    if args.prometheus and (args.source or args.jaeger):
        raise CommandError("give either SOURCE, --jaeger URL or --prometheus URL, not two")
    origin = None
    if args.prometheus:
        report, origin = prometheus_report(args)
        print(
            f"llmtrace report: figures from Prometheus {args.prometheus}, "
            f"{origin['window_seconds']:g} s to {origin['until']}: each percentile is exact to "
            "within the histogram bucket it falls in (figures_from.resolution in the JSON)",
            file=sys.stderr,
        )
    else:
        source = args.source or args.jaeger or default_source()
        report = report_from_source(source, args)
    for warning in report.warnings:
        print(f"llmtrace report: warning: {warning}", file=sys.stderr)
    if args.format == "json":
        from llmtrace.analysis.render.json import report_json

        text = report_json(report)
        if args.output:
            Path(args.output).write_text(text + "\n", encoding="utf-8")
        else:
            sys.stdout.write(text + "\n")
    elif args.format == "html":
        from llmtrace.analysis.render.html import write_html

        path = write_html(report, args.output or "report.html")
        print(f"wrote {path}", file=sys.stderr)
    else:
        from rich.console import Console

        from llmtrace.analysis.render.terminal import print_report

        if args.output:
            with open(args.output, "w", encoding="utf-8") as handle:
                print_report(report, Console(file=handle, width=100, no_color=True))
        else:
            print_report(report)
    if args.html:
        from llmtrace.analysis.render.html import write_html

        print(f"wrote {write_html(report, args.html)}", file=sys.stderr)
    return 0
