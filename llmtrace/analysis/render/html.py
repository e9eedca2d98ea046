"""The report as one self-contained HTML file: inline CSS and SVG charts, nothing fetched.

Charts: a stacked bar of stage shares, per-stage percentiles, the TTFT distribution and a
waterfall of the slowest trace. Every figure comes from the ``Report``; nothing is computed here.
The traces the report names link to their pages in Jaeger when it knows a Jaeger (only http(s)
URLs become links, escaped like every other value).
"""

from __future__ import annotations

import html
from pathlib import Path

from llmtrace import semconv as sc
from llmtrace.analysis.compare import COMPARED, Comparison, Delta
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

STAGE_COLORS = {
    "queue": "#e15759",
    "load": "#9c755f",
    "prompt": "#b07aa1",
    "embedding": "#76b7b2",
    "retrieval": "#4e79a7",
    "rerank": "#59a14f",
    "cache": "#bab0ac",
    "ttft": "#f28e2b",
    "generation": "#edc948",
    "tool": "#ff9da7",
    "network": "#86bcb6",
    "postprocess": "#8cd17d",
    "other": "#d4d4d4",
}
PERCENTILE_COLORS = {"p50": "#4e79a7", "p90": "#76b7b2", "p95": "#f28e2b", "p99": "#e15759"}

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.meta{color:#666}.warn{color:#a15c00}.dim{color:#888}.significant{font-weight:600}
.faster{color:#1a7f37;font-weight:600}.slower{color:#c62828;font-weight:600}.no-change{color:#555}
.not-enough{color:#8a6d00}.cell-verdict{font-size:12px}
table{border-collapse:collapse;margin:8px 0}th,td{padding:3px 10px;text-align:right;border-bottom:1px solid #eee}
th:first-child,td:first-child{text-align:left}th{background:#fafafa}
.bottleneck{background:#fff4f0;border-left:4px solid #e15759;padding:8px 14px}
.swatch{display:inline-block;width:10px;height:10px;margin-right:5px;border-radius:2px}
.legend span{margin-right:14px;white-space:nowrap}
svg text{font:12px system-ui,sans-serif;fill:#333}
code{font-size:12px}
"""


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _color(stage: str) -> str:
    return STAGE_COLORS.get(stage, "#999")


def _legend(stages: list[str]) -> str:
    items = "".join(
        f'<span><i class="swatch" style="background:{_color(s)}"></i>{_esc(s)}</span>'
        for s in stages
    )
    return f'<div class="legend">{items}</div>'


def stage_share_chart(report: Report, chart_id: str = "chart-stage-shares") -> str:
    width, height = 1000, 46
    x = 0.0
    parts = []
    for stage, summary in report.stages.items():
        w = summary.share * width
        if w <= 0:
            continue
        parts.append(
            f'<rect class="share" data-stage="{_esc(stage)}" x="{x:.2f}" y="0" width="{w:.2f}" '
            f'height="{height}" fill="{_color(stage)}"><title>{_esc(stage)}: '
            f"{format_share(summary.share)} ({format_seconds(summary.distribution.mean)} mean)"
            "</title></rect>"
        )
        if w > 8 * (len(stage) + 6):
            parts.append(
                f'<text x="{x + 4:.2f}" y="28">{_esc(stage)} {format_share(summary.share)}</text>'
            )
        x += w
    return (
        f'<svg id="{chart_id}" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-label="share of mean end-to-end time by stage">{"".join(parts)}</svg>'
        + _legend(list(report.stages))
    )


def percentile_chart(report: Report) -> str:
    rows = list(report.stages.items())
    if report.end_to_end:
        rows_labels = [("end-to-end", report.end_to_end)] + [(s, v.distribution) for s, v in rows]
    else:
        rows_labels = [(s, v.distribution) for s, v in rows]
    label_width, plot_width, row_height = 110, 800, 52
    top = max((d.p99 for _, d in rows_labels), default=0.0) or 1.0
    height = row_height * len(rows_labels) + 24
    parts = []
    for i, (label, dist) in enumerate(rows_labels):
        y = i * row_height + 6
        parts.append(f'<text x="0" y="{y + 24}">{_esc(label)}</text>')
        for j, name in enumerate(("p50", "p90", "p95", "p99")):
            value = dist.at(name)
            w = max(value / top * plot_width, 0.5)
            parts.append(
                f'<rect class="pct" data-stage="{_esc(label)}" data-percentile="{name}" '
                f'x="{label_width}" y="{y + j * 11}" width="{w:.2f}" height="10" '
                f'fill="{PERCENTILE_COLORS[name]}"><title>{_esc(label)} {name.upper()}: '
                f"{format_seconds(value)}</title></rect>"
            )
        parts.append(
            f'<text x="{label_width + max(dist.p99 / top * plot_width, 0.5) + 6:.2f}" '
            f'y="{y + 38}">P99 {format_seconds(dist.p99)}</text>'
        )
    legend = "".join(
        f'<span><i class="swatch" style="background:{c}"></i>{n.upper()}</span>'
        for n, c in PERCENTILE_COLORS.items()
    )
    return (
        f'<svg id="chart-percentiles" viewBox="0 0 1000 {height}" width="100%" role="img" '
        f'aria-label="per-stage percentiles">{"".join(parts)}</svg>'
        f'<div class="legend">{legend}</div>'
    )


def ttft_histogram_chart(report: Report) -> str:
    edges = report.ttft_histogram.get("edges") or []
    counts = report.ttft_histogram.get("counts") or []
    if not counts:
        return '<p class="meta">No model call recorded a time to first token.</p>'
    width, height, bottom = 1000, 220, 24
    peak = max(counts) or 1
    bar = width / len(counts)
    parts = []
    for i, count in enumerate(counts):
        h = count / peak * (height - bottom - 10)
        parts.append(
            f'<rect class="bin" x="{i * bar + 1:.2f}" y="{height - bottom - h:.2f}" '
            f'width="{bar - 2:.2f}" height="{h:.2f}" fill="{_color("ttft")}"><title>'
            f"{format_seconds(edges[i])} - {format_seconds(edges[i + 1])}: {count} calls"
            "</title></rect>"
        )
    for i in (0, len(counts) // 2, len(counts)):
        anchor = "start" if i == 0 else ("end" if i == len(counts) else "middle")
        parts.append(
            f'<text x="{i * bar:.2f}" y="{height - 6}" text-anchor="{anchor}">'
            f"{format_seconds(edges[i])}</text>"
        )
    return (
        f'<svg id="chart-ttft" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="time to first token distribution">{"".join(parts)}</svg>'
    )


def waterfall_chart(report: Report) -> str:
    waterfall = report.waterfall
    if waterfall is None or waterfall.duration <= 0:
        return '<p class="meta">No trace to show.</p>'
    label_width, plot_width, row = 300, 690, 18
    scale = plot_width / waterfall.duration
    rows = len(waterfall.spans) + 1
    height = rows * row + 30
    parts = ['<text x="0" y="13">critical path</text>']
    for stage, start, end in waterfall.critical_path:
        parts.append(
            f'<rect class="critical" x="{label_width + start * scale:.2f}" y="2" '
            f'width="{max((end - start) * scale, 0.5):.2f}" height="14" fill="{_color(stage)}">'
            f"<title>{_esc(stage)} {format_seconds(end - start)}</title></rect>"
        )
    for i, span in enumerate(waterfall.spans, start=1):
        y = i * row + 4
        name = span.name if len(span.name) <= 38 else span.name[:37] + "…"
        parts.append(f'<text x="{span.depth * 10}" y="{y + 11}">{_esc(name)}</text>')
        parts.append(
            f'<rect class="span" data-stage="{_esc(span.stage)}" '
            f'x="{label_width + span.start * scale:.2f}" y="{y}" '
            f'width="{max(span.duration * scale, 0.5):.2f}" height="13" fill="{_color(span.stage)}">'
            f"<title>{_esc(span.name)} ({_esc(span.stage)}): {format_seconds(span.duration)} "
            f"at +{format_seconds(span.start)}</title></rect>"
        )
    parts.append(
        f'<text x="{label_width}" y="{height - 6}">0</text>'
        f'<text x="{label_width + plot_width}" y="{height - 6}" text-anchor="end">'
        f"{format_seconds(waterfall.duration)}</text>"
    )
    note = " (first spans only)" if waterfall.truncated else ""
    return (
        f'<svg id="chart-waterfall" viewBox="0 0 1000 {height}" width="100%" role="img" '
        f'aria-label="waterfall of the slowest trace">{"".join(parts)}</svg>'
        f'<p class="meta">Trace <code>{_esc(waterfall.trace_id)}</code>, '
        f"{format_seconds(waterfall.duration)}{note}.</p>"
    )


def _stage_table(
    stages: dict[str, StageSummary],
    end_to_end: Distribution | None,
    attributes: str = 'id="stages"',
) -> str:
    head = "<tr><th>stage</th><th>mean</th><th>P50</th><th>P90</th><th>P95</th><th>P99</th><th>share</th></tr>"
    rows = []
    for stage, summary in stages.items():
        d = summary.distribution
        cells = "".join(
            f"<td>{format_seconds(v)}</td>" for v in (d.mean, d.p50, d.p90, d.p95, d.p99)
        )
        rows.append(
            f'<tr><td><i class="swatch" style="background:{_color(stage)}"></i>{_esc(stage)}</td>'
            f"{cells}<td>{format_share(summary.share)}</td></tr>"
        )
    if end_to_end:
        d = end_to_end
        cells = "".join(
            f"<td>{format_seconds(v)}</td>" for v in (d.mean, d.p50, d.p90, d.p95, d.p99)
        )
        rows.append(f"<tr><th>end-to-end</th>{cells}<td>100%</td></tr>")
    return f"<table {attributes}>{head}{''.join(rows)}</table>"


def _service_tables(report: Report) -> list[str]:
    """Each service's time on the critical path, and under it its stages."""
    if not report.services:
        return []
    head = "<tr><th>service / stage</th><th>mean</th><th>P50</th><th>P90</th><th>P95</th><th>P99</th><th>share</th></tr>"
    rows = []
    for service, summary in report.services.items():
        for label, part, tag in [(service, summary, "th")] + [
            (stage, stage_part, "td") for stage, stage_part in summary.stages.items()
        ]:
            d = part.distribution
            cells = "".join(
                f"<td>{format_seconds(v)}</td>" for v in (d.mean, d.p50, d.p90, d.p95, d.p99)
            )
            name = _esc(label) if tag == "th" else f"&nbsp;&nbsp;{_esc(label)}"
            rows.append(f"<tr><{tag}>{name}</{tag}>{cells}<td>{format_share(part.share)}</td></tr>")
    return [
        f"<h2>{_esc(SERVICES_TITLE)}</h2>",
        f'<table id="services">{head}{"".join(rows)}</table>',
        f'<p class="meta">{_esc(SERVICES_NOTE)}</p>',
    ]


def _group_tables(report: Report) -> list[str]:
    grouping = report.grouping
    if grouping is None:
        return []
    parts = [f"<h2>Latency by stage, by {_esc(grouping.key)}</h2>"]
    for value, group in grouping.groups.items():
        noun = "trace" if group.traces == 1 else "traces"
        parts.append(f"<h3>{_esc(grouping.key)} = {_esc(value)}: {group.traces} {noun}</h3>")
        parts.append(_stage_table(group.stages, group.end_to_end, 'class="group-stages"'))
    notes = []
    if grouping.groups_left_out:
        notes.append(
            f"{grouping.groups_left_out} smaller groups ({grouping.traces_left_out} traces) "
            "not shown"
        )
    if grouping.traces_without_value:
        count = grouping.traces_without_value
        noun = "trace" if count == 1 else "traces"
        notes.append(f"{count} {noun} without {_esc(grouping.key)}")
    if notes:
        parts.append(f'<p class="meta">{"; ".join(notes)}.</p>')
    return parts


def _models_table(report: Report) -> str:
    if not report.models:
        return ""
    rows = []
    for model, usage in report.models.items():
        ttft = usage.time_to_first_token
        rows.append(
            f"<tr><td>{_esc(model)}</td><td>{usage.calls}</td>"
            f"<td>{format_count(usage.input_tokens.mean) if usage.input_tokens else '-'}</td>"
            f"<td>{format_count(usage.output_tokens.mean) if usage.output_tokens else '-'}</td>"
            f"<td>{format_seconds(ttft.p50) if ttft else '-'}</td>"
            f"<td>{format_seconds(ttft.p95) if ttft else '-'}</td>"
            f"<td>{format_count(usage.output_tokens_per_second.mean) if usage.output_tokens_per_second else '-'}</td></tr>"
        )
    return (
        "<h2>Model calls</h2><table><tr><th>model</th><th>calls</th><th>input tokens</th>"
        "<th>output tokens</th><th>TTFT P50</th><th>TTFT P95</th><th>tokens/s</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _traces_table(traces: list[TraceExemplar], attributes: str) -> str:
    """The requests a report names: trace id (a link to Jaeger when known), end-to-end time,
    root span and stage times. ``attributes`` go on the ``<table>`` as they are."""
    rows = []
    for trace in traces:
        trace_id = f"<code>{_esc(trace.trace_id)}</code>"
        url = link_target(trace.url)
        link = f'<a href="{_esc(url)}">{trace_id}</a>' if url else trace_id
        rows.append(
            f'<tr data-trace-id="{_esc(trace.trace_id)}"><td>{link}</td>'
            f"<td>{format_seconds(trace.duration)}</td>"
            f'<td style="text-align:left">{_esc(trace.root)}</td>'
            f'<td style="text-align:left">{_esc(stage_times_text(trace))}</td></tr>'
        )
    return (
        f"<table {attributes}><tr><th>trace</th><th>time</th><th>root span</th>"
        '<th style="text-align:left">stages</th></tr>' + "".join(rows) + "</table>"
    )


def _exemplar_sections(report: Report) -> list[str]:
    parts = []
    if report.bottleneck and report.bottleneck_exemplars:
        parts += [
            f"<h2>{_esc(bottleneck_traces_heading(report.bottleneck.stage))}</h2>",
            _traces_table(report.bottleneck_exemplars, 'id="bottleneck-traces"'),
        ]
    if report.slowest_exemplars:
        p95 = report.end_to_end.p95 if report.end_to_end else None
        parts += [
            f"<h2>{_esc(slowest_traces_heading(p95))}</h2>",
            _traces_table(report.slowest_exemplars, 'id="p95-traces"'),
        ]
    return parts


def render_html(report: Report) -> str:
    title = f"llmtrace report — {report.source}"
    meta = f"{report.traces} traces from <code>{_esc(report.source)}</code>"
    if report.service:
        meta += f", service <code>{_esc(report.service)}</code>"
    if report.run and report.run.get("name"):
        meta += f", run <code>{_esc(report.run['name'])}</code>"
    if report.generated_at:
        meta += f"; generated {_esc(report.generated_at)}"
    recognised = recognised_line(report)
    if recognised:
        meta += f'<br><span id="recognised">{_esc(recognised)}</span>'
    notes = []
    if report.excluded_open:
        notes.append(f"{report.excluded_open} traces still open were left out")
    if report.orphans:
        notes.append(f"{report.orphans} orphan subtrees (parent span missing)")
    notes.extend(report.warnings[:10])
    body = [f"<h1>{_esc(title)}</h1>", f'<p class="meta">{meta}</p>']
    body.extend(f'<p class="warn">{_esc(n)}</p>' for n in notes)
    if report.bottleneck:
        advice = "".join(f"<li>{_esc(line)}</li>" for line in report.bottleneck.advice)
        body.append(
            f'<div class="bottleneck" id="bottleneck"><b>Bottleneck: {_esc(report.bottleneck.stage)}</b> — '
            f"{format_share(report.bottleneck.share)} of the mean end-to-end time"
            f"{_esc(bottleneck_place(report.bottleneck))}<ul>{advice}</ul></div>"
        )
    if report.tail:
        tail = report.tail
        body.append(
            f'<p id="tail"><b>Tail:</b> {tail.traces} {"trace" if tail.traces == 1 else "traces"} above P95 ({format_seconds(tail.threshold)}) took '
            f"{format_seconds(tail.tail_mean)} against {format_seconds(tail.median_mean)} for the median traces; "
            f"<b>{_esc(tail.stage)}</b> grew most (+{format_seconds(tail.growth)}).</p>"
        )
    body += _exemplar_sections(report)
    body += [
        "<h2>Share of end-to-end time by stage</h2>",
        stage_share_chart(report),
        "<h2>Latency by stage</h2>",
        _stage_table(report.stages, report.end_to_end),
        percentile_chart(report),
        *_service_tables(report),
        *_group_tables(report),
        "<h2>Time to first token</h2>",
        ttft_histogram_chart(report),
        *(
            f'<p class="user-ttft">{_esc(line)}</p>'
            for line in (user_ttft_lines(report.user_ttft) if report.user_ttft else [])
        ),
        _models_table(report),
        "<h2>Slowest trace</h2>",
        waterfall_chart(report),
        "<h2>Slowest traces</h2>",
        _traces_table(report.slowest, 'id="slowest"'),
        f'<p class="meta">Stage names follow llmtrace\'s vocabulary ({_esc(", ".join(sc.STAGES))}).</p>',
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )


def write_html(report: Report, path: str | Path) -> Path:
    """Write the report to ``path`` as one HTML file that needs no network to view (the report
    carries the slowest trace's waterfall, so a saved JSON report renders the same page)."""
    target = Path(path)
    target.write_text(render_html(report), encoding="utf-8")
    return target


def _page(title: str, body: list[str]) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )


def stage_bars_side_by_side(comparison: Comparison) -> str:
    """Each run's mean end-to-end time as one column stacked by stage, on one scale, so the
    shorter column is the faster run and each band's height is that stage's mean."""
    runs = list(
        zip(
            ("baseline", "candidate"),
            comparison.run_sides(),
            (comparison.baseline, comparison.candidate),
            strict=True,
        )
    )
    width, height, top, bottom, column = 1000, 340, 28, 46, 160
    tallest = max(
        (report.end_to_end.mean for _, _, report in runs if report.end_to_end), default=0.0
    )
    scale = (height - top - bottom) / tallest if tallest > 0 else 0.0
    parts = []
    stages: list[str] = []
    for index, (role, side, report) in enumerate(runs):
        x = 180 + index * 380
        y = float(height - bottom)
        for stage, summary in report.stages.items():
            h = summary.distribution.mean * scale
            if stage not in stages:
                stages.append(stage)
            if h <= 0:
                continue
            y -= h
            parts.append(
                f'<rect class="stage-bar" data-run="{role}" data-stage="{_esc(stage)}" '
                f'x="{x}" y="{y:.2f}" width="{column}" height="{h:.2f}" fill="{_color(stage)}">'
                f"<title>{_esc(side.name)}: {_esc(stage)} {format_seconds(summary.distribution.mean)} "
                f"mean ({format_share(summary.share)})</title></rect>"
            )
            if h >= 16:
                parts.append(
                    f'<text x="{x + column + 6}" y="{y + h / 2 + 4:.2f}">{_esc(stage)} '
                    f"{format_seconds(summary.distribution.mean)}</text>"
                )
        total = report.end_to_end.mean if report.end_to_end else 0.0
        parts.append(
            f'<text x="{x + column / 2}" y="{y - 8:.2f}" text-anchor="middle">'
            f"{format_seconds(total)} mean</text>"
            f'<text x="{x + column / 2}" y="{height - bottom + 18}" text-anchor="middle">'
            f'<tspan font-weight="600">{role}</tspan></text>'
            f'<text x="{x + column / 2}" y="{height - bottom + 36}" text-anchor="middle">'
            f"{_esc(side.name)}</text>"
        )
    return (
        f'<svg id="chart-stage-bars" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="mean end-to-end time of each run, stacked by stage">{"".join(parts)}</svg>'
        + _legend(stages)
    )


_CELL_CLASS = {"faster": "faster", "slower": "slower", "not enough data": "not-enough"}


def _comparison_cell(delta: Delta) -> str:
    return (
        f'<td class="cell {_CELL_CLASS.get(delta.verdict, "no-change")}" '
        f'data-statistic="{delta.statistic}">'
        f"{format_seconds(delta.baseline)} → {format_seconds(delta.candidate)}<br>"
        f"{format_signed_seconds(delta.change)} [{format_signed_seconds(delta.interval.low)}, "
        f"{format_signed_seconds(delta.interval.high)}]<br>"
        f'<span class="cell-verdict">{_esc(delta.verdict_text())}</span></td>'
    )


def _run_header(comparison: Comparison) -> list[str]:
    rows = "".join(
        f'<tr data-run="{role}"><th>{role}</th><td class="run-name"><b>{_esc(side.name)}</b></td>'
        f'<td style="text-align:left">{_esc(settings_text(side))}</td>'
        f'<td style="text-align:left"><code>{_esc(side.source)}</code></td></tr>'
        for role, side in zip(("baseline", "candidate"), comparison.run_sides(), strict=True)
    )
    parts = [
        '<table id="runs"><tr><th></th><th>run</th><th style="text-align:left">settings</th>'
        f'<th style="text-align:left">source</th></tr>{rows}</table>'
    ]
    if comparison.changed_settings:
        parts.append(
            f'<p id="changed"><b>Changed:</b> {_esc(changes_text(comparison.changed_settings))}</p>'
        )
    parts.extend(f'<p class="warn">{_esc(w)}</p>' for w in comparison.warnings)
    return parts


def render_comparison_html(comparison: Comparison) -> str:
    """Two runs side by side: who they are, their stacked stage bars, each stage's change in
    mean/P50/P90/P95 with its 95% interval and verdict, and the row's verdict (all computed by
    ``analysis.compare``)."""
    base, cand = comparison.run_sides()
    title = f"llmtrace comparison — {base.name} → {cand.name}"
    body = [f"<h1>{_esc(title)}</h1>", *_run_header(comparison)]
    body += [
        "<h2>Mean end-to-end time by stage</h2>",
        stage_bars_side_by_side(comparison),
        "<h2>Change (candidate - baseline)</h2>",
    ]
    head = "".join(
        f"<th>{statistic.name.upper() if statistic.quantile else statistic.name}<br>"
        "before → after<br>Δ [95% interval]</th>"
        for statistic in COMPARED
    )
    rows = [
        f'<tr data-stage="{_esc(item.name)}"><td>{_esc(row_name(item.name))}</td>'
        + "".join(_comparison_cell(delta) for delta in item.deltas)
        + f'<td class="verdict {_CELL_CLASS.get(item.verdict, "no-change")}">'
        f"{_esc(item.verdict_text())}</td></tr>"
        for item in comparison.series
    ]
    body.append(
        f'<table id="comparison"><tr><th>stage</th>{head}<th>verdict</th></tr>'
        + "".join(rows)
        + "</table>"
    )
    note = not_enough_note(comparison)
    if note:
        body.append(f'<p class="meta" id="not-enough">{_esc(note)}.</p>')
    body.append(f'<p class="meta">{_esc(method_note(comparison))}</p>')
    for item in comparison.series:
        if item.exemplars is None:
            continue
        body.append(f"<h2>{_esc(changed_row_heading(item.name, item.verdict))}</h2>")
        for role, traces in zip(("baseline", "candidate"), item.exemplars, strict=True):
            body += [
                f"<h3>{role}</h3>",
                _traces_table(
                    traces, f'class="traces" data-row="{_esc(item.name)}" data-run="{role}"'
                ),
            ]
    return _page(title, body)


def write_comparison_html(comparison: Comparison, path: str | Path) -> Path:
    """Write the comparison to ``path`` as one self-contained HTML file."""
    target = Path(path)
    target.write_text(render_comparison_html(comparison), encoding="utf-8")
    return target
