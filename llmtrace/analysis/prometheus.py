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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from llmtrace import semconv as sc
from llmtrace.analysis.advice import Evidence, advise_stage
from llmtrace.analysis.report import _figures
from llmtrace.analysis.report_model import Bottleneck, Report, StageSummary
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
class Buckets:
    """A classic histogram summed over series: cumulative counts by upper bound (``+Inf`` last)."""

    bounds: list[float]
    cumulative: list[float]
    total_sum: float = 0.0

    @property
    def count(self) -> float:
        return self.cumulative[-1] if self.cumulative else 0.0

    def with_zeros(self, zeros: float) -> Buckets:
        """The histogram with ``zeros`` more observations of 0 (they fall in every bucket)."""
        return Buckets(self.bounds, [c + zeros for c in self.cumulative], self.total_sum)


def quantile(q: float, buckets: Buckets) -> tuple[float, tuple[float, float]]:
    """Prometheus's ``histogram_quantile`` over ``buckets``, and the bucket the rank fell in.

    As Prometheus does it: the rank ``q * count`` falls in the first bucket whose cumulative
    count reaches it; the value is interpolated linearly between that bucket's lower bound (0
    for the first bucket) and its upper bound; in the ``+Inf`` bucket it is the highest finite
    bound.
    """
    bounds, counts = buckets.bounds, _monotonic(buckets.cumulative)
    if not counts or counts[-1] <= 0:
        return math.nan, (math.nan, math.nan)
    rank = q * counts[-1]
    index = next(i for i, count in enumerate(counts) if count >= rank)
    if math.isinf(bounds[index]):
        finite = bounds[index - 1] if index > 0 else math.nan
        return finite, (finite, math.inf)
    start = 0.0 if index == 0 else bounds[index - 1]
    end = bounds[index]
    if index == 0 and end <= 0:
        return end, (end, end)
    before = 0.0 if index == 0 else counts[index - 1]
    in_bucket = counts[index] - before
    if in_bucket <= 0:
        return end, (start, end)
    return start + (end - start) * (rank - before) / in_bucket, (start, end)


def _monotonic(counts: list[float]) -> list[float]:
    # Prometheus evens out counts that decrease with the bound (series read at slightly
    # different moments); the same here.
    out: list[float] = []
    highest = 0.0
    for count in counts:
        highest = max(highest, count)
        out.append(highest)
    return out


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


def _buckets(
    client: PrometheusClient, metric: str, selector: str, window: Window, label: str | None
) -> dict[str, Buckets]:
    """``sum by (le[, label])`` of the bucket increases: one summed histogram per label value."""
    by = f"le,{label}" if label else "le"
    promql = f"sum by ({by}) ({grown(f'{metric}_bucket{{{selector}}}', window)})"
    rows: dict[str, dict[float, float]] = {}
    for sample in client.query(promql, window.until):
        key = sample["metric"].get(label, "") if label else ""
        rows.setdefault(key, {})[_bound(sample["metric"]["le"])] = _value(sample)
    out: dict[str, Buckets] = {}
    for key, counts in rows.items():
        bounds = sorted(counts)
        out[key] = Buckets(bounds, [counts[bound] for bound in bounds])
    return out


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
    quantile fell in)."""
    client = client or PrometheusClient(url)
    selector = filters.selector()
    requests = sum(
        _by_label(
            client, f"sum({grown(f'{DURATION}_count{{{selector}}}', window)})", window, None
        ).values()
    )
    total = round(requests)
    origin: dict[str, Any] = {
        "source": "prometheus",
        "url": url,
        "until": window.until.isoformat(timespec="seconds"),
        "window_seconds": window.length.total_seconds(),
        "selector": "{" + selector + "}",
        "metrics": [DURATION, STAGE, TTFT],
    }
    if total == 0:
        return _empty_report(url, filters), origin
    end_sum = sum(
        _by_label(
            client, f"sum({grown(f'{DURATION}_sum{{{selector}}}', window)})", window, None
        ).values()
    )
    end_buckets = _buckets(client, DURATION, selector, window, None).get("")
    if end_buckets is None:
        raise SourceError(f"Prometheus at {url} has counts but no buckets for {DURATION}")
    end_to_end, resolution = _distribution(end_buckets, end_sum / requests, total)
    origin["bucket_bounds"] = [b for b in end_buckets.bounds if math.isfinite(b)]
    origin["resolution"] = {"end_to_end": resolution}

    stage_counts = _by_label(
        client,
        f"sum by ({STAGE_LABEL}) ({grown(f'{STAGE}_count{{{selector}}}', window)})",
        window,
        STAGE_LABEL,
    )
    stage_sums = _by_label(
        client,
        f"sum by ({STAGE_LABEL}) ({grown(f'{STAGE}_sum{{{selector}}}', window)})",
        window,
        STAGE_LABEL,
    )
    stage_buckets = _buckets(client, STAGE, selector, window, STAGE_LABEL)
    stages: dict[str, StageSummary] = {}
    for stage in sc.STAGES:  # vocabulary order, as the report's columns
        buckets = stage_buckets.get(stage)
        with_time = stage_counts.get(stage, 0.0)
        if buckets is None or with_time <= 0 or stage_sums.get(stage, 0.0) <= 0:
            continue
        zeros = max(requests - buckets.count, 0.0)
        mean = stage_sums[stage] / requests
        distribution, stage_resolution = _distribution(buckets.with_zeros(zeros), mean, total)
        share = mean / end_to_end.mean if end_to_end.mean > 0 else 0.0
        stages[stage] = StageSummary(distribution, share, round(with_time))
        origin["resolution"][stage] = stage_resolution

    ttft = None
    ttft_buckets = _buckets(client, TTFT, selector, window, None).get("")
    if ttft_buckets is not None and ttft_buckets.count > 0:
        ttft_sum = sum(
            _by_label(
                client, f"sum({grown(f'{TTFT}_sum{{{selector}}}', window)})", window, None
            ).values()
        )
        ttft, origin["resolution"]["ttft"] = _distribution(
            ttft_buckets, ttft_sum / ttft_buckets.count, round(ttft_buckets.count)
        )

    bottleneck = None
    if stages:
        top = max(stages, key=lambda stage: stages[stage].share)
        # only what the metrics carry: no span-level evidence (prompt sizes, repeated prompts)
        bottleneck = Bottleneck(
            top, stages[top].share, advise_stage(_figures(top, stages[top]), Evidence())
        )
    report = Report(
        source=f"prometheus {url}",
        service=filters.service,
        traces=total,
        end_to_end=end_to_end,
        stages=stages,
        ttft=ttft,
        bottleneck=bottleneck,
        tail=None,
        slowest=[],
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        filters={
            key: value
            for key, value in ((ROUTE_LABEL, filters.route), (MODEL_LABEL, filters.model))
            if value
        },
        warnings=[],
    )
    return report, origin


def _empty_report(url: str, filters: Filters) -> Report:
    return Report(
        source=f"prometheus {url}",
        service=filters.service,
        traces=0,
        end_to_end=None,
        stages={},
        ttft=None,
        bottleneck=None,
        tail=None,
        slowest=[],
    )
