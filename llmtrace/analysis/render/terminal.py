"""The report for people at a terminal: rich tables that stay readable at 80 columns.

A trace the report names links to its page in Jaeger when a Jaeger URL is known. Where the
output is a terminal that takes escape codes (rich's test: a tty or ``FORCE_COLOR``, and not
``TERM=dumb``) and colour is not turned off (``NO_COLOR``), the trace id itself is the link (an
OSC 8 hyperlink, which terminals that do not know it show as the plain id). Anywhere else (a
pipe, a file, ``--output``, ``NO_COLOR``) the URL is printed on a line of its own, never
wrapped, so that a terminal or editor finds it as a URL and a script can read it.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.style import Style
from rich.table import Table
from rich.text import Text

from llmtrace.analysis.compare import (
    COMPARED,
    FASTER,
    NOT_ENOUGH_DATA,
    SLOWER,
    Comparison,
    Delta,
)
from llmtrace.analysis.render.labels import (
    bottleneck_traces_heading,
    changed_row_heading,
    changes_text,
    link_target,
    method_note,
    not_enough_note,
    row_name,
    settings_text,
    slowest_traces_heading,
    stage_times_text,
)
from llmtrace.analysis.render.recognised import recognised_line
from llmtrace.analysis.render.services import SERVICES_NOTE, SERVICES_TITLE, bottleneck_place
from llmtrace.analysis.render.user_ttft import user_ttft_lines
from llmtrace.analysis.report_model import Report, StageSummary, TraceExemplar
from llmtrace.analysis.stats import Distribution
from llmtrace.analysis.units import (
    format_count,
    format_seconds,
    format_share,
    format_signed_seconds,
)

_VERDICT_STYLE = {FASTER: "green", SLOWER: "red", NOT_ENOUGH_DATA: "yellow"}
_VERDICT_MARK = {FASTER: "▼", SLOWER: "▲", NOT_ENOUGH_DATA: "?"}
_CELL_STYLE = {FASTER: "bold green", SLOWER: "bold red"}


def _distribution_cells(dist: Distribution | None) -> list[str]:
    if dist is None:
        return ["-"] * 5
    return [format_seconds(v) for v in (dist.mean, dist.p50, dist.p90, dist.p95, dist.p99)]


def _share_bar(share: float, width: int = 5) -> str:
    filled = round(share * width)
    return "█" * filled + "·" * (width - filled)


def _stage_table(
    stages: dict[str, StageSummary],
    end_to_end: Distribution | None,
    bottleneck: str | None,
    title: str = "Latency by stage (critical path)",
) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=title)
    table.add_column("stage", style="bold", no_wrap=True, min_width=11)
    for name in ("mean", "P50", "P90", "P95", "P99"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("share", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True, style="cyan")
    for stage, summary in stages.items():
        label = Text(stage, style="bold red" if stage == bottleneck else "bold")
        table.add_row(
            label,
            *_distribution_cells(summary.distribution),
            format_share(summary.share),
            _share_bar(summary.share),
        )
    table.add_section()
    table.add_row("end-to-end", *_distribution_cells(end_to_end), "100%", "")
    return table


def _print_groups(report: Report, console: Console) -> None:
    grouping = report.grouping
    if grouping is None:
        return
    for value, group in grouping.groups.items():
        title = f"{grouping.key} = {value}: {group.traces} {_traces(group.traces)}"
        console.print(_stage_table(group.stages, group.end_to_end, None, title))
    notes = []
    if grouping.groups_left_out:
        notes.append(
            f"{grouping.groups_left_out} smaller groups ({grouping.traces_left_out} "
            f"{_traces(grouping.traces_left_out)}) not shown"
        )
    if grouping.traces_without_value:
        notes.append(
            f"{grouping.traces_without_value} {_traces(grouping.traces_without_value)} "
            f"without {grouping.key}"
        )
    if notes:
        console.print("[dim]" + "; ".join(notes) + "[/]", highlight=False)


def _service_table(report: Report) -> Table | None:
    """Each service's time on the critical path, and under it its stages."""
    if not report.services:
        return None
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=SERVICES_TITLE, caption=SERVICES_NOTE)
    # the percentiles alone (the JSON has mean and P99 too): service names are long, and the
    # table stays readable at 80 columns
    table.add_column("service / stage", overflow="fold", min_width=15)
    for name in ("P50", "P90", "P95"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("share", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True, style="cyan")
    for service, summary in report.services.items():
        rows = [(Text(service, style="bold"), summary.distribution, summary.share, True)]
        rows += [
            (Text(f"  {stage}"), part.distribution, part.share, False)
            for stage, part in summary.stages.items()
        ]
        for label, dist, share, bar in rows:
            table.add_row(
                label,
                *(format_seconds(value) for value in (dist.p50, dist.p90, dist.p95)),
                format_share(share),
                _share_bar(share) if bar else "",
            )
    return table


def _traces(count: int) -> str:
    return "trace" if count == 1 else "traces"


def _model_table(report: Report) -> Table | None:
    if not report.models:
        return None
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="Model calls")
    table.add_column("model", overflow="fold", max_width=24)
    table.add_column("calls", justify="right")
    table.add_column("in tok", justify="right")
    table.add_column("out tok", justify="right")
    table.add_column("TTFT P50", justify="right")
    table.add_column("TTFT P95", justify="right")
    table.add_column("tok/s", justify="right")
    for model, usage in report.models.items():
        ttft = usage.time_to_first_token
        table.add_row(
            model,
            str(usage.calls),
            format_count(usage.input_tokens.mean) if usage.input_tokens else "-",
            format_count(usage.output_tokens.mean) if usage.output_tokens else "-",
            format_seconds(ttft.p50) if ttft else "-",
            format_seconds(ttft.p95) if ttft else "-",
            format_count(usage.output_tokens_per_second.mean)
            if usage.output_tokens_per_second
            else "-",
        )
    return table


def hyperlinks(console: Console) -> bool:
    """Whether trace links are written as OSC 8 hyperlinks (see the module's docstring)."""
    return (
        console.is_terminal
        and not console.is_dumb_terminal
        and console.color_system is not None
        and not console.no_color
    )


def print_traces(
    console: Console,
    heading: str,
    traces: list[TraceExemplar],
    indent: int = 2,
    *,
    section: bool = True,
) -> None:
    """``heading``, then per request its trace id and end-to-end time, under them its stage
    times, and its Jaeger link (see the module's docstring). A ``section`` starts with a blank
    line; nothing is printed without traces."""
    if not traces:
        return
    if section:
        console.print()
    console.print(heading + ":", style="bold", highlight=False)
    linked = hyperlinks(console)
    below = " " * (indent + 2)
    for trace in traces:
        url = link_target(trace.url)
        trace_id = Text(trace.trace_id, style=Style(bold=True, link=url if linked else None))
        console.print(
            Text(" " * indent) + trace_id + Text(f"  {format_seconds(trace.duration)}"),
            no_wrap=True,
            crop=False,
        )
        stages = Table.grid(pad_edge=False)
        stages.add_column(width=len(below), no_wrap=True)
        stages.add_column(overflow="fold")
        stages.add_row("", stage_times_text(trace))
        console.print(stages, highlight=False)
        if url and not linked:
            console.print(below + url, no_wrap=True, crop=False, highlight=False)


def _bullets(lines: list[str]) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=3, justify="right")
    grid.add_column(overflow="fold")
    for line in lines:
        grid.add_row("•", Text(line))
    return grid


def print_report(report: Report, console: Console | None = None) -> None:
    """Print the per-stage table, model calls, bottleneck with advice, tail and slowest traces."""
    console = console or Console()
    header = f"[bold]{report.traces}[/] traces from {report.source}"
    if report.service:
        header += f" (service {report.service})"
    if report.run and report.run.get("name"):
        header += f", run {report.run['name']}"
    if report.filters:
        header += ", " + ", ".join(f"{key}={value}" for key, value in report.filters.items())
    console.print(header)
    notes = []
    if report.excluded_open:
        notes.append(f"{report.excluded_open} still open (left out)")
    if report.excluded_warmup:
        notes.append(f"{report.excluded_warmup} warm-up (left out)")
    if report.orphans:
        notes.append(f"{report.orphans} orphan subtrees (parent span missing)")
    if notes:
        console.print("[dim]" + "; ".join(notes) + "[/]")
    recognised = recognised_line(report)
    if recognised:
        console.print(f"[dim]{recognised}[/]", highlight=False)
    for warning in report.warnings[:5]:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if len(report.warnings) > 5:
        console.print(f"[yellow]warning:[/] … and {len(report.warnings) - 5} more")
    if report.traces == 0 or report.end_to_end is None:
        console.print("No complete traces to analyse.")
        return
    bottleneck = report.bottleneck.stage if report.bottleneck else None
    console.print(_stage_table(report.stages, report.end_to_end, bottleneck))
    services = _service_table(report)
    if services is not None:
        console.print(services)
    _print_groups(report, console)
    lines = []
    if report.ttft:
        lines.append(
            f"Time to first token: P50 {format_seconds(report.ttft.p50)}, "
            f"P95 {format_seconds(report.ttft.p95)} over {report.ttft.count} model calls"
        )
    if report.user_ttft:
        lines.extend(user_ttft_lines(report.user_ttft))
    if report.generation:
        lines.append(
            f"Generation: P50 {format_seconds(report.generation.p50)}, "
            f"P95 {format_seconds(report.generation.p95)}"
        )
    if report.output_tokens_per_second:
        lines.append(
            f"Output speed: {format_count(report.output_tokens_per_second.p50)} tokens/s (P50)"
        )
    for line in lines:
        console.print(line, highlight=False)
    models = _model_table(report)
    if models is not None:
        console.print(models)
    if report.bottleneck:
        console.print(
            f"\n[bold]Bottleneck:[/] [bold red]{report.bottleneck.stage}[/] — "
            f"{format_share(report.bottleneck.share)} of the mean end-to-end time"
            f"{bottleneck_place(report.bottleneck)}"
        )
        console.print(_bullets(report.bottleneck.advice))
        print_traces(
            console,
            bottleneck_traces_heading(report.bottleneck.stage),
            report.bottleneck_exemplars,
        )
    if report.tail:
        tail = report.tail
        console.print(
            f"\n[bold]Tail:[/] {tail.traces} {'trace' if tail.traces == 1 else 'traces'} above P95 ({format_seconds(tail.threshold)}) "
            f"took {format_seconds(tail.tail_mean)} vs {format_seconds(tail.median_mean)} for "
            f"median traces; [bold]{tail.stage}[/] grew most "
            f"({format_signed_seconds(tail.growth)})",
            highlight=False,
        )
    if report.slowest_exemplars:
        print_traces(
            console, slowest_traces_heading(report.end_to_end.p95), report.slowest_exemplars
        )
    else:  # a report saved before the requests at or above P95 were recorded
        print_traces(console, slowest_traces_heading(None), report.slowest[:3])


def _cell(delta: Delta) -> Text:
    marker = _VERDICT_MARK.get(delta.verdict, "")
    text = format_signed_seconds(delta.change) + marker
    return Text(text, style=_CELL_STYLE.get(delta.verdict, "dim"))


def print_comparison(comparison: Comparison, console: Console | None = None) -> None:
    """Both runs by name and settings, then per row the change in mean/P50/P90/P95 with each
    statistic's verdict and the row's, and P50/P95 before → after with their intervals."""
    console = console or Console()
    for role, side in zip(("baseline", "candidate"), comparison.run_sides(), strict=True):
        console.print(
            f"{role:<9} [bold]{side.name}[/] ({settings_text(side)})"
            + (f" from {side.source}" if side.source != side.name else ""),
            highlight=False,
        )
    if comparison.changed_settings:
        console.print(f"changed:  {changes_text(comparison.changed_settings)}", highlight=False)
    for warning in comparison.warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="Change (candidate - baseline)")
    table.add_column("stage", style="bold")
    for statistic in COMPARED:
        label = statistic.name.upper() if statistic.quantile else statistic.name
        table.add_column(f"Δ {label}", justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    for item in comparison.series:
        table.add_row(
            row_name(item.name),
            *(_cell(delta) for delta in item.deltas),
            Text(item.verdict, style=_VERDICT_STYLE.get(item.verdict, "")),
        )
    console.print(table)
    console.print(
        "[dim]▼ faster, ▲ slower, plain: no significant change, ? not enough data. "
        + method_note(comparison)
        + "[/]",
        highlight=False,
    )
    note = not_enough_note(comparison)
    if note:
        console.print(f"[dim]? {note}[/]", highlight=False)
    detail = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="P50 and P95 with 95% intervals")
    detail.add_column("stage", style="bold", no_wrap=True)
    for name in ("P50 before→after", "Δ P50 [95% interval]", "P95 before→after"):
        detail.add_column(name, justify="right", no_wrap=True)
    for item in comparison.series:
        p50, p95 = item.delta("p50"), item.delta("p95")
        detail.add_row(
            row_name(item.name),
            f"{format_seconds(p50.baseline)}→{format_seconds(p50.candidate)}",
            f"{format_signed_seconds(p50.change)} [{format_signed_seconds(p50.interval.low)}, "
            f"{format_signed_seconds(p50.interval.high)}]",
            f"{format_seconds(p95.baseline)}→{format_seconds(p95.candidate)}",
        )
    console.print(detail)
    for item in comparison.series:
        if item.exemplars is None:
            continue
        console.print()
        console.print(changed_row_heading(item.name, item.verdict), style="bold", highlight=False)
        for role, traces in zip(("baseline", "candidate"), item.exemplars, strict=True):
            print_traces(console, f"  {role}", traces, indent=4, section=False)
