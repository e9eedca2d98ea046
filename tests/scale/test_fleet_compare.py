"""Before/after from Prometheus, as a user runs it: one service exports its request metrics straight
to a real Prometheus (the project's build, OTLP receiver and native histograms on), one process per
window; ``llmtrace compare --prometheus`` then judges two windows from their histograms alone.

A first token cut from 300 ms to 100 ms is "faster" for ``ttft`` and end to end, in the default
explicit buckets and in exponential ones; two windows of the same service are "no significant
change"; ``--fail-if-slower`` gates on the histograms as it does on files; ``figures_from`` names
each figure's own bucket, and a saved report keeps it and compares as the live one.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmtrace.analysis.histograms import Buckets, quantile
from llmtrace.analysis.report_model import Report
from tests.backends.fixtures import new_prometheus, stopped_at_exit
from tests.scale import stack
from tests.scale.test_fleet import APP, PROMETHEUS_CONFIG, _within_one_bucket
from tests.subprocesses import clean_environment

pytestmark = pytest.mark.integration

REQUESTS = 40
STATISTICS = ("p50", "p90", "p95", "p99")


@dataclass(frozen=True)
class Window:
    """One process's run: its window as ``compare --baseline-window/--window`` takes it."""

    service: str
    start: datetime
    end: datetime
    trace_file: Path

    @property
    def argument(self) -> str:
        # whole seconds, as the window's range is; the window ends a moment after the run
        until = self.end + timedelta(seconds=1)
        length = math.ceil((until - self.start).total_seconds())
        return f"{length}s@{until.isoformat()}"


@dataclass(frozen=True)
class Runs:
    prometheus_url: str
    slow: Window  # explicit buckets, first token 300 ms
    fast: Window  # the same, first token 100 ms
    fast_again: Window  # the same as fast: nothing changed
    slow_exponential: Window
    fast_exponential: Window


def _count(url: str, service: str) -> float:
    promql = (
        f'sum(llmtrace_request_duration_seconds_count{{job="{service}"}}) or '
        f'sum(histogram_count(llmtrace_request_duration_seconds{{job="{service}"}}))'
    )
    body = httpx.get(f"{url}/api/v1/query", params={"query": promql}).json()
    return sum(float(sample["value"][1]) for sample in body["data"]["result"])


def _run(url: str, service: str, first_token_ms: int, layout: str, files: Path) -> Window:
    """One process of the service, its window, and the moment its metrics are all in."""
    before = _count(url, service)
    trace_file = files / f"{service}-{sum(1 for _ in files.glob(f'{service}-*'))}.jsonl"
    env = clean_environment(
        OTEL_SERVICE_NAME=service,
        # metrics straight to Prometheus's OTLP receiver (which takes no spans: their exports
        # fail, and are counted); every span to a file too, the exact figures the histograms
        # are checked against
        OTEL_EXPORTER_OTLP_ENDPOINT=f"{url}/api/v1/otlp",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_METRIC_EXPORT_INTERVAL="1000",
        APP_TRACE_FILE=str(trace_file),
        LLMTRACE_REQUEST_METRICS_HISTOGRAM=layout,
        APP_FIRST_TOKEN_MS=str(first_token_ms),
    )
    start = datetime.now(UTC)
    done = subprocess.run(
        [sys.executable, str(APP), str(REQUESTS), "30"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 30
    while _count(url, service) < before + REQUESTS:
        assert time.monotonic() < deadline, "the request metrics did not all arrive"
        time.sleep(0.5)
    window = Window(service, start, datetime.now(UTC), trace_file)
    time.sleep(2.5)  # the next window starts after this one's last point
    return window


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    backends = stack.binaries()
    log_dir = tmp_path_factory.mktemp("fleet-compare")
    files = tmp_path_factory.mktemp("fleet-compare-files")
    prometheus, url = new_prometheus(
        stack.prometheus_binary(backends), PROMETHEUS_CONFIG, [], log_dir
    )
    with stopped_at_exit(prometheus):
        prometheus.start()

        def windows(service: str, layout: str, first_token_ms: list[int]) -> list[Window]:
            return [_run(url, service, ms, layout, files) for ms in first_token_ms]

        # The two services' windows are apart in their series, so one's runs go on while the
        # other's do (each service's own windows follow one another, as the comparison needs).
        with ThreadPoolExecutor(max_workers=2) as pool:
            explicit = pool.submit(windows, "ask", "explicit", [300, 100, 100])
            exponential = pool.submit(windows, "ask-exp", "exponential", [300, 100])
            slow, fast, fast_again = explicit.result()
            slow_exponential, fast_exponential = exponential.result()
        yield Runs(url, slow, fast, fast_again, slow_exponential, fast_exponential)


def _compare(runs: Runs, baseline: Window, candidate: Window, *extra: str) -> Any:
    done = stack.llmtrace_cli(
        *("compare", "--format", "json", "--prometheus", runs.prometheus_url),
        *("--service", baseline.service),
        *("--baseline-window", baseline.argument, "--window", candidate.argument),
        *extra,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _report(runs: Runs, window: Window) -> dict[str, Any]:
    length, _, until = window.argument.partition("@")
    done = stack.llmtrace_cli(
        *("report", "--format", "json", "--prometheus", runs.prometheus_url),
        *("--service", window.service, "--lookback", length, "--until", until),
    )
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


@pytest.mark.parametrize("layout", ["explicit", "exponential"])
def test_a_shorter_first_token_is_faster_from_histograms(runs: Runs, layout: str) -> None:
    slow, fast = (
        (runs.slow, runs.fast)
        if layout == "explicit"
        else (runs.slow_exponential, runs.fast_exponential)
    )
    comparison = _compare(runs, slow, fast)
    assert comparison["baseline"]["traces"] == comparison["candidate"]["traces"] == REQUESTS
    assert comparison["method"]["figures"] == "histograms"
    assert comparison["method"]["histograms"]["baseline"]["layout"] == layout
    ttft, end_to_end = comparison["series"]["ttft"], comparison["series"]["end_to_end"]
    assert ttft["verdict"] == end_to_end["verdict"] == "faster"
    assert ttft["p50"]["verdict"] == ttft["mean"]["verdict"] == "faster"
    assert ttft["p50"]["baseline"] == pytest.approx(0.3, rel=0.3)
    assert ttft["p50"]["candidate"] == pytest.approx(0.1, rel=0.3)
    # the interval holds the change whatever the buckets allow, and the test's margin
    low, high = ttft["p50"]["buckets"]["baseline"]
    assert low <= ttft["p50"]["baseline"] <= high
    assert ttft["p50"]["ci_low"] <= ttft["p50"]["candidate"] - high
    assert ttft["p50"]["ci_high"] < 0
    # 40 requests per run are too few for a P90 or P95 from histograms
    assert ttft["p90"]["verdict"] == ttft["p95"]["verdict"] == "not enough data"

    # the table and the page say the figures are histograms, and how wide their buckets were
    done = stack.llmtrace_cli(
        *("compare", "--prometheus", runs.prometheus_url, "--service", slow.service),
        *("--baseline-window", slow.argument, "--window", fast.argument),
    )
    assert done.returncode == 0, done.stderr
    table = " ".join(done.stdout.split())
    assert f"Figures from histograms ({layout} buckets about" in table
    assert "over the requests' buckets" in table


def test_an_unchanged_service_is_no_significant_change(runs: Runs, tmp_path: Path) -> None:
    comparison = _compare(runs, runs.fast, runs.fast_again, "--html", str(tmp_path / "c.html"))
    # (the rows of 100 ms and more: a 30 ms sleep's 5% is within a loaded machine's jitter)
    for row in ("end_to_end", "ttft"):
        assert comparison["series"][row]["verdict"] == "no significant change", row
        for statistic in ("mean", "p50"):
            assert comparison["series"][row][statistic]["verdict"] == "no significant change"
        # a P90's interval from 40 requests is open above: not judged, rather than "no change"
        assert comparison["series"][row]["p90"]["verdict"] == "not enough data"
    page = (tmp_path / "c.html").read_text()
    assert "Figures from histograms" in page


def test_fail_if_slower_gates_on_prometheus_as_on_files(runs: Runs) -> None:
    windows = ("--baseline-window", runs.fast.argument, "--window", runs.slow.argument)
    common = ("compare", "--prometheus", runs.prometheus_url, "--service", "ask", *windows)
    slower = stack.llmtrace_cli(*common, "--fail-if-slower", "ttft:p50:50ms")
    assert slower.returncode == 1, slower.stderr
    assert "regression: ttft p50 slower by" in slower.stderr
    assert "beyond the limit ttft:p50:50ms" in slower.stderr
    within = stack.llmtrace_cli(*common, "--fail-if-slower", "retrieval:p50:10%")
    assert within.returncode == 0, within.stderr
    # a P95 of 40 requests is not judged: it fails only when data is required
    tail = ("--fail-if-slower", "end_to_end:p95:10%")
    assert stack.llmtrace_cli(*common, *tail).returncode == 0
    required = stack.llmtrace_cli(*common, *tail, "--require-data")
    assert required.returncode == 1
    assert "not enough data (needs ≥ 86 requests per run), the runs have 40 and 40" in (
        required.stderr
    )


@pytest.mark.parametrize("layout", ["explicit", "exponential"])
def test_figures_from_names_each_figures_own_bucket(runs: Runs, layout: str) -> None:
    window = runs.fast if layout == "explicit" else runs.fast_exponential
    report = _report(runs, window)
    resolution = report["figures_from"]["resolution"]
    assert report["figures_from"]["layout"] == layout
    histograms = {row: Buckets.from_json(data) for row, data in report["histograms"].items()}
    figures = [(report["end_to_end"], resolution["end_to_end"], histograms["end_to_end"])]
    assert set(resolution["stages"]) == set(report["stages"]) >= {"ttft", "retrieval"}
    for stage, summary in report["stages"].items():
        figures.append((summary, resolution["stages"][stage], histograms[stage]))
    for summary, buckets_of, histogram in figures:
        for statistic, q in zip(STATISTICS, (0.5, 0.9, 0.95, 0.99), strict=True):
            low, high = buckets_of[statistic]
            assert (low, high) == quantile(q, histogram)[1]
            assert low <= summary[statistic] <= high
    # the request-level time to first token (from the request's start) keeps its own buckets:
    # the stage's first token took 100 ms, the request's came after 5 ms + 30 ms more
    stage_ttft, request_ttft = resolution["stages"]["ttft"], resolution["ttft"]
    for statistic in STATISTICS:
        low, high = request_ttft[statistic]
        assert low <= report["ttft"][statistic] <= high
    assert stage_ttft["p50"][1] <= request_ttft["p50"][1]
    assert report["stages"]["ttft"]["p50"] < report["ttft"]["p50"]
    # within one bucket of the exact figures from the same requests' spans
    exact = json.loads(
        stack.llmtrace_cli("report", "--format", "json", str(window.trace_file)).stdout
    )
    assert report["traces"] == exact["traces"] == REQUESTS
    for stage in ("ttft", "retrieval"):
        low, high = resolution["stages"][stage]["p50"]
        figure = exact["stages"][stage]["p50"]
        assert low - (high - low) <= figure <= high + (high - low)
    if layout == "explicit":
        assert _within_one_bucket(report["end_to_end"]["p50"], exact["end_to_end"]["p50"])


def test_a_saved_fleet_report_keeps_its_buckets_and_compares_the_same(
    runs: Runs, tmp_path: Path
) -> None:
    saved = []
    for name, window in (("before", runs.slow), ("after", runs.fast)):
        report = _report(runs, window)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(report))
        loaded = Report.from_json(json.loads(path.read_text()))
        assert loaded.figures_from is not None
        assert loaded.figures_from["resolution"] == report["figures_from"]["resolution"]
        assert set(loaded.histograms) == set(report["histograms"])
        saved.append(path)
    done = stack.llmtrace_cli("compare", "--format", "json", *map(str, saved))
    assert done.returncode == 0, done.stderr
    from_files = json.loads(done.stdout)
    live = _compare(runs, runs.slow, runs.fast)
    assert from_files["method"]["figures"] == "histograms"
    for row, judged in live["series"].items():
        assert from_files["series"][row]["verdict"] == judged["verdict"], row
        for statistic in ("mean", "p50", "p90", "p95"):
            assert from_files["series"][row][statistic] == judged[statistic], (row, statistic)
