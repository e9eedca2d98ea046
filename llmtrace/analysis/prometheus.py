"""The stage table from Prometheus: the request metrics every replica exported, summed.

``llmtrace.sdk.request_metrics`` records, per request, its duration and each stage's time on the
critical path as histograms. Prometheus (through its OTLP receiver, or scraping a Collector)
stores them as ``llmtrace_request_duration_seconds_*`` and
``llmtrace_request_stage_duration_seconds_*`` with the labels ``job`` (the service),
``llmtrace_request_name``, ``gen_ai_request_model``, ``error_type`` and ``llmtrace_stage``.
Over a window ``W`` ending at ``T`` and a label filter ``F``, with ``grown(x)`` how much the
cumulative series ``x`` grew in the window (``increase()`` without its extrapolation to the
window's edges, which would make counts inexact; see ``grown``):

* requests: ``N = sum(grown(llmtrace_request_duration_seconds_count{F}))``;
* end-to-end: ``histogram_quantile(q, sum by (le) (grown(
  llmtrace_request_duration_seconds_bucket{F})))``; mean ``sum(grown(..._sum{F})) / N``;
* a stage ``s``: a request without time in ``s`` records no point for it, and the report counts
  it as a zero, so its ``N - n_s`` zeros join every bucket:
  ``histogram_quantile(q, sum by (le) (grown(llmtrace_request_stage_duration_seconds_bucket
  {F, llmtrace_stage="s"})) + scalar(N - n_s))`` where ``n_s`` is the stage's grown ``_count``;
  mean ``sum(grown(..._sum{F, llmtrace_stage="s"})) / N``; share: that sum over the end-to-end
  sum.

On a dashboard, ``increase(x[W])`` in place of ``grown(x)`` gives the same figures but for the
extrapolation. The buckets are read once per metric and the quantiles computed here with
Prometheus's own interpolation (``histogram_quantile``: linear within the bucket the rank falls
in), so a figure is exact to within its bucket; the report says which bucket each one fell in.

Exponential histograms (``LLMTRACE_REQUEST_METRICS_HISTOGRAM=exponential``) reach Prometheus as
native histograms, which it stores only with ``--enable-feature=native-histograms`` (before 3.8;
without it the OTLP receiver refuses the whole export). A native histogram is one series per
label set (``llmtrace_request_duration_seconds``, no ``_bucket``/``_count``/``_sum``) whose
value holds every bucket, its count and its sum; the same sums are read from it
(:func:`grown_native`), and its buckets are put in the classic shape
(:func:`~llmtrace.analysis.histograms.from_native`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from llmtrace import semconv as sc
from llmtrace.analysis.advice import Evidence, advise_stage
from llmtrace.analysis.histograms import Buckets, from_native, quantile
from llmtrace.analysis.report import _figures
from llmtrace.analysis.report_model import END_TO_END, Bottleneck, Report, StageSummary
from llmtrace.analysis.stats import Distribution
from llmtrace.errors import SourceError

DURATION = "llmtrace_request_duration_seconds"
STAGE = "llmtrace_request_stage_duration_seconds"
TTFT = "llmtrace_request_time_to_first_token_seconds"
STAGE_LABEL = "llmtrace_stage"
SERVICE_LABEL = "job"
ROUTE_LABEL = "llmtrace_request_name"
MODEL_LABEL = "gen_ai_request_model"
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))
TIMEOUT_SECONDS = 30.0


@dataclass(slots=True)
class Window:
    until: datetime
    length: timedelta

    @property
    def range(self) -> str:
        return f"{max(int(self.length.total_seconds()), 1)}s"


@dataclass(slots=True)
class Filters:
    service: str | None = None
    route: str | None = None
    model: str | None = None

    def selector(self, extra: dict[str, str] | None = None) -> str:
        labels = {
            SERVICE_LABEL: self.service,
            ROUTE_LABEL: self.route,
            MODEL_LABEL: self.model,
            **(extra or {}),
        }
        return ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items() if value)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


@dataclass
class PrometheusClient:
    """Instant queries against Prometheus's HTTP API (``/api/v1/query``)."""

    url: str
    client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=TIMEOUT_SECONDS))

    def query(self, promql: str, at: datetime) -> list[dict[str, Any]]:
        endpoint = self.url.rstrip("/") + "/api/v1/query"
        try:
            response = self.client.get(endpoint, params={"query": promql, "time": at.timestamp()})
        except httpx.HTTPError as exc:
            raise SourceError(f"cannot reach Prometheus at {self.url}: {exc}") from None
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code != 200 or body.get("status") != "success":
            error = body.get("error") or f"HTTP {response.status_code}"
            raise SourceError(f"Prometheus at {self.url} refused the query {promql!r}: {error}")
        result = body.get("data", {}).get("result", [])
        return result if isinstance(result, list) else []


def _value(sample: dict[str, Any]) -> float:
    return float(sample["value"][1])


def _bound(text: str) -> float:
    return math.inf if text in ("+Inf", "Inf") else float(text)


def grown(series: str, window: Window) -> str:
    """PromQL for how much the cumulative ``series`` grew in the window, per series: its last
    value in the window minus its last value before it (the whole last value for a series that
    began in the window, as every process started in it does). Unlike ``increase()`` it does
    not extrapolate to the window's edges, so counts are exact; a process restarted in the
    window counts from its restart."""
    w = window.range
    now = f"(last_over_time({series}[{w}]) - 0)"
    before = f"last_over_time({series}[{w}] offset {w})"
    return f"(({now} - {before} >= 0) or {now})"


def _by_label(
    client: PrometheusClient, promql: str, window: Window, label: str | None
) -> dict[str, float]:
    return {
        (sample["metric"].get(label, "") if label else ""): _value(sample)
        for sample in client.query(promql, window.until)
    }


def grown_native(series: str, window: Window) -> str:
    """:func:`grown` for a native histogram (an OpenTelemetry exponential histogram in
    Prometheus): PromQL has no comparison of a histogram with a number, so a restart (counts
    that fell) is found by ``histogram_count``; ``* 1`` drops the metric name, as ``- 0`` does for
    numbers, so that ``or`` matches series by their labels alone."""
    w = window.range
    now = f"(last_over_time({series}[{w}]) * 1)"
    growth = f"({now} - last_over_time({series}[{w}] offset {w}))"
    return f"(({growth} and (histogram_count({growth}) >= 0)) or {now})"


@dataclass(slots=True)
class Histograms:
    """The request metrics of a window, each summed over series: end-to-end, per stage (only
    the requests with time in it), and the request-level time to first token."""

    end_to_end: Buckets | None
    stages: dict[str, Buckets]
    ttft: Buckets | None


def _explicit_buckets(
    client: PrometheusClient, metric: str, selector: str, window: Window, label: str | None
) -> dict[str, Buckets]:
    """``sum by (le[, label])`` of the bucket increases, and of the sums: one summed histogram
    per label value."""
    by = f"le,{label}" if label else "le"
    promql = f"sum by ({by}) ({grown(f'{metric}_bucket{{{selector}}}', window)})"
    rows: dict[str, dict[float, float]] = {}
    for sample in client.query(promql, window.until):
        key = sample["metric"].get(label, "") if label else ""
        rows.setdefault(key, {})[_bound(sample["metric"]["le"])] = _value(sample)
    sums_by = f" by ({label})" if label else ""
    sums = _by_label(
        client, f"sum{sums_by} ({grown(f'{metric}_sum{{{selector}}}', window)})", window, label
    )
    out: dict[str, Buckets] = {}
    for key, counts in rows.items():
        bounds = sorted(counts)
        out[key] = Buckets(bounds, [counts[bound] for bound in bounds], sums.get(key, 0.0))
    return out


def _native_buckets(
    client: PrometheusClient, metric: str, selector: str, window: Window, label: str | None
) -> dict[str, Buckets]:
    """The same from native histograms: one query returns each sum's buckets, count and sum."""
    by = f" by ({label})" if label else ""
    promql = f"sum{by} ({grown_native(f'{metric}{{{selector}}}', window)})"
    out: dict[str, Buckets] = {}
    for sample in client.query(promql, window.until):
        if "histogram" not in sample:
            continue
        key = sample["metric"].get(label, "") if label else ""
        histogram = sample["histogram"][1]
        out[key] = from_native(histogram.get("buckets") or [], float(histogram.get("sum", 0.0)))
    return out


def read_histograms(
    client: PrometheusClient, selector: str, window: Window
) -> tuple[Histograms, list[str]]:
    """The window's histograms, explicit or native, and warnings. When requests of both kinds
    match (services exporting different layouts), the kind with more requests is read and the
    other left out and counted: buckets of two layouts cannot be summed into one."""
    read = []
    for buckets_of in (_explicit_buckets, _native_buckets):
        end_to_end = buckets_of(client, DURATION, selector, window, None).get("")
        if end_to_end is not None and end_to_end.count > 0:
            read.append((buckets_of, end_to_end))
    if not read:
        return Histograms(None, {}, None), []
    read.sort(key=lambda found: found[1].count, reverse=True)
    warnings = [
        f"{round(end_to_end.count)} requests exported {end_to_end.layout} histograms and are "
        f"left out: this report reads the {read[0][1].layout} ones"
        for _, end_to_end in read[1:]
    ]
    buckets_of, end_to_end = read[0]
    stages = buckets_of(client, STAGE, selector, window, STAGE_LABEL)
    ttft = buckets_of(client, TTFT, selector, window, None).get("")
    return Histograms(end_to_end, stages, ttft), warnings


def _distribution(buckets: Buckets, mean: float, count: int) -> tuple[Distribution, dict[str, Any]]:
    values: dict[str, float] = {}
    resolution: dict[str, Any] = {}
    for name, q in QUANTILES:
        values[name], (low, high) = quantile(q, buckets)
        resolution[name] = [low, high]
    return Distribution(mean=mean, count=count, **values), resolution


def report_from_prometheus(
    url: str,
    *,
    filters: Filters,
    window: Window,
    client: PrometheusClient | None = None,
) -> tuple[Report, dict[str, Any]]:
    """The stage table of every request the filters select in the window, and where its figures
    came from (``figures_from``: source, window, PromQL filter, bucket bounds, and the bucket each
    figure fell in, under the same keys as the figure in the report: ``end_to_end``,
    ``stages.<stage>`` and ``ttft``, the request-level time to first token). The report keeps
    the summed histograms (``histograms``), which ``llmtrace compare`` tests."""
    client = client or PrometheusClient(url)
    selector = filters.selector()
    histograms, warnings = read_histograms(client, selector, window)
    origin: dict[str, Any] = {
        "source": "prometheus",
        "url": url,
        "until": window.until.isoformat(timespec="seconds"),
        "window_seconds": window.length.total_seconds(),
        "selector": "{" + selector + "}",
        "metrics": [DURATION, STAGE, TTFT],
    }
    report = report_from_histograms(
        histograms,
        source=f"prometheus {url}",
        service=filters.service,
        filters={
            key: value
            for key, value in ((ROUTE_LABEL, filters.route), (MODEL_LABEL, filters.model))
            if value
        },
        origin=origin,
    )
    report.warnings.extend(warnings)
    return report, origin


def report_from_histograms(
    histograms: Histograms,
    *,
    source: str,
    service: str | None = None,
    filters: dict[str, str] | None = None,
    origin: dict[str, Any] | None = None,
) -> Report:
    """The stage table of summed histograms: means from the sums, percentiles as
    ``histogram_quantile`` reads the buckets, a stage's requests without it as zeros.
    ``origin`` (kept as the report's ``figures_from``) gains the bucket layout and bounds, and
    the bucket each figure fell in."""
    origin = {} if origin is None else origin
    end_buckets = histograms.end_to_end
    if end_buckets is None or end_buckets.count <= 0:
        return _empty_report(source, service)
    requests = end_buckets.count
    total = round(requests)
    end_to_end, resolution = _distribution(end_buckets, end_buckets.total_sum / requests, total)
    origin["layout"] = end_buckets.layout
    origin["bucket_bounds"] = [b for b in end_buckets.bounds if math.isfinite(b)]
    origin["resolution"] = {"end_to_end": resolution, "stages": {}}
    kept: dict[str, Buckets] = {END_TO_END: end_buckets}

    stages: dict[str, StageSummary] = {}
    for stage in sc.STAGES:  # vocabulary order, as the report's columns
        buckets = histograms.stages.get(stage)
        if buckets is None or buckets.count <= 0 or buckets.total_sum <= 0:
            continue
        with_zeros = buckets.with_zeros(max(requests - buckets.count, 0.0))
        mean = buckets.total_sum / requests
        distribution, stage_resolution = _distribution(with_zeros, mean, total)
        share = mean / end_to_end.mean if end_to_end.mean > 0 else 0.0
        stages[stage] = StageSummary(distribution, share, round(buckets.count))
        origin["resolution"]["stages"][stage] = stage_resolution
        kept[stage] = with_zeros

    ttft = None
    ttft_buckets = histograms.ttft
    if ttft_buckets is not None and ttft_buckets.count > 0:
        ttft, origin["resolution"]["ttft"] = _distribution(
            ttft_buckets,
            ttft_buckets.total_sum / ttft_buckets.count,
            round(ttft_buckets.count),
        )

    bottleneck = None
    if stages:
        top = max(stages, key=lambda stage: stages[stage].share)
        # only what the metrics carry: no span-level evidence (prompt sizes, repeated prompts)
        bottleneck = Bottleneck(
            top, stages[top].share, advise_stage(_figures(top, stages[top]), Evidence())
        )
    return Report(
        source=source,
        service=service,
        traces=total,
        end_to_end=end_to_end,
        stages=stages,
        ttft=ttft,
        bottleneck=bottleneck,
        tail=None,
        slowest=[],
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        filters=dict(filters or {}),
        warnings=[],
        histograms=kept,
        figures_from=origin,
    )


def _empty_report(source: str, service: str | None) -> Report:
    return Report(
        source=source,
        service=service,
        traces=0,
        end_to_end=None,
        stages={},
        ttft=None,
        bottleneck=None,
        tail=None,
        slowest=[],
    )
