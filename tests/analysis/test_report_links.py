"""The requests a report names and their links to Jaeger: ``llmtrace report`` and ``compare`` on
files written by a real instrumented app, through both readers, as JSON, in a terminal and a
pipe, and as HTML; and, with a real Collector and Jaeger, that a link opens the request it
names."""

from __future__ import annotations

import json
import math
import os
import pty
import re
import subprocess
import sys
from html.parser import HTMLParser
from io import StringIO
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console

from llmtrace.analysis.render.html import render_html
from llmtrace.analysis.render.terminal import print_report
from llmtrace.analysis.report_model import Report
from llmtrace.analysis.units import format_seconds
from tests.analysis.conftest import REPO, run_delayed_app, run_delayed_app_into_jaeger, run_llmtrace

JAEGER = "http://jaeger.example:16686"
SLOWER_GENERATION = 0.140  # seconds: twice the delayed app's


@pytest.fixture(autouse=True)
def _no_jaeger_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMTRACE_JAEGER_URL", raising=False)


def _json(*args: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(run_llmtrace(*args, "--format", "json").stdout)
    return data


def _requests(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each request's end-to-end and stage times, by trace id, from the report's samples."""
    samples = report["samples"]
    assert len(samples["trace_ids"]) == report["traces"]  # every request is sampled
    return {
        trace_id: {
            "end_to_end": samples["end_to_end"][i],
            **{stage: values[i] for stage, values in samples["stages"].items()},
        }
        for i, trace_id in enumerate(samples["trace_ids"])
    }


def _ids(traces: list[dict[str, Any]]) -> list[str]:
    return [trace["trace_id"] for trace in traces]


def _links(report: dict[str, Any]) -> dict[str, str | None]:
    return {
        trace["trace_id"]: trace["url"]
        for traces in report["exemplars"].values()
        for trace in traces
    }


def test_the_report_names_where_the_bottleneck_took_longest_and_the_slowest_requests(
    reader: str, delayed_traces: Path
) -> None:
    data = _json("report", str(delayed_traces))
    requests = _requests(data)
    assert data["bottleneck"]["stage"] == "generation"
    named = data["exemplars"]["generation"]
    by_generation = sorted(requests, key=lambda t: requests[t]["generation"], reverse=True)
    assert _ids(named) == by_generation[:3]
    by_time = sorted(requests, key=lambda t: requests[t]["end_to_end"], reverse=True)
    p95 = data["end_to_end"]["p95"]
    slowest = data["exemplars"]["end_to_end"]
    # 50 requests: three at or above the P95 (between the 47th and 48th), all of them named
    assert _ids(slowest) == by_time[:3]
    assert all(trace["duration"] >= p95 for trace in slowest)
    assert requests[by_time[3]]["end_to_end"] < p95
    for trace in [*named, *slowest]:
        assert re.fullmatch(r"[0-9a-f]{32}", trace["trace_id"])
        assert trace["root"] == "answer" and trace["url"] is None  # a file names no Jaeger
        times = requests[trace["trace_id"]]
        assert trace["duration"] == pytest.approx(times["end_to_end"], abs=1e-6)
        for stage, seconds in trace["stages"].items():
            assert seconds == pytest.approx(times[stage], abs=1e-6), stage
        assert (
            list(trace["stages"]) == sorted(trace["stages"], key=trace["stages"].__getitem__)[::-1]
        )
        assert math.fsum(trace["stages"].values()) == pytest.approx(trace["duration"], abs=1e-6)
    # every stage names its requests, not only the bottleneck
    assert set(data["exemplars"]) == {"end_to_end", *data["stages"]}


@pytest.mark.parametrize("given", ["flag", "environment"])
def test_a_report_of_a_file_links_its_requests_to_the_jaeger_given(
    given: str, delayed_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if given == "flag":
        data = _json("report", str(delayed_traces), "--jaeger", JAEGER)
    else:
        monkeypatch.setenv("LLMTRACE_JAEGER_URL", JAEGER + "/")
        data = _json("report", str(delayed_traces))
    assert data["jaeger_url"] == JAEGER
    links = _links(data)
    assert len(links) >= 3
    assert links == {trace_id: f"{JAEGER}/trace/{trace_id}" for trace_id in links}
    # a saved report, read back with a Jaeger, keeps the links it has
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(data))
    again = _json("report", str(saved), "--jaeger", "http://elsewhere:16686")
    assert _links(again) == links


def test_off_a_terminal_each_request_is_followed_by_its_url_on_a_line_of_its_own(
    delayed_traces: Path,
) -> None:
    data = _json("report", str(delayed_traces), "--jaeger", JAEGER)
    text = run_llmtrace("report", str(delayed_traces), "--jaeger", JAEGER).stdout
    assert "\x1b" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    for heading, row in (
        ("Requests where generation took longest:", "generation"),
        (
            f"Slowest requests (at or above P95, {format_seconds(data['end_to_end']['p95'])}):",
            "end_to_end",
        ),
    ):
        section = text[text.index(heading) :]
        for trace in data["exemplars"][row]:
            request = re.search(
                rf"^  {trace['trace_id']}  {re.escape(format_seconds(trace['duration']))}\n"
                rf"(?P<stages>(?:    \S.*\n)+?)"
                rf"    {re.escape(trace['url'])}$",
                section,
                re.M,
            )
            assert request, (trace, section)
            stages = " ".join(request["stages"].split())
            first, seconds = next(iter(trace["stages"].items()))
            assert stages.startswith(f"{first} {format_seconds(seconds)}, ")


def _in_a_terminal(*args: str, **env: str) -> str:
    """``llmtrace ARGS`` with its output on a real pseudo-terminal: what a user at one sees."""
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
    }
    environment.update({"PYTHONPATH": str(REPO), "COLUMNS": "100", "TERM": "xterm-256color", **env})
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "llmtrace", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.PIPE,
        env=environment,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the program ended and closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=120) == 0, process.stderr.read() if process.stderr else ""
    return b"".join(chunks).decode()


@pytest.mark.parametrize(
    "environment",
    [{}, {"NO_COLOR": "1"}, {"TERM": "dumb"}],
    ids=["terminal", "NO_COLOR", "TERM=dumb"],
)
def test_a_terminal_gets_each_trace_id_as_a_hyperlink_unless_it_asks_for_plain_text(
    environment: dict[str, str], delayed_traces: Path
) -> None:
    data = _json("report", str(delayed_traces), "--jaeger", JAEGER)
    shown = _in_a_terminal("report", str(delayed_traces), "--jaeger", JAEGER, **environment)
    hyperlinks = not environment
    for trace in data["exemplars"]["generation"]:
        url, trace_id = trace["url"], trace["trace_id"]
        # OSC 8: ESC ] 8 ; params ; URL ST, the text, ESC ] 8 ; ; ST
        linked = re.search(
            rf"\x1b\]8;[^;]*;{re.escape(url)}\x1b\\(?:\x1b\[[0-9;]*m)*{trace_id}", shown
        )
        plain = re.search(rf"^ +{re.escape(url)}\r?$", shown, re.M)
        assert bool(linked) == hyperlinks and bool(plain) != hyperlinks, shown
    if not hyperlinks:
        assert "\x1b]8;" not in shown


class _Links(HTMLParser):
    """The links inside each table of a page, by the table's id or its data attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[str]] = {}
        self._table: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table":
            self._table = found.get("id") or f"{found.get('data-row')}/{found.get('data-run')}"
            self.tables[self._table] = []
        elif tag == "a" and self._table is not None:
            self.tables[self._table].append(str(found["href"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None


def _page_links(page: Path) -> dict[str, list[str]]:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.tables


def test_the_html_report_links_each_named_request_escaped(
    delayed_traces: Path, tmp_path: Path
) -> None:
    jaeger = "http://jaeger.example:16686/team&ops"
    page = tmp_path / "report.html"
    data = _json("report", str(delayed_traces), "--jaeger", jaeger)
    run_llmtrace("report", str(delayed_traces), "--jaeger", jaeger, "--html", str(page))
    tables = _page_links(page)
    assert tables["bottleneck-traces"] == [t["url"] for t in data["exemplars"]["generation"]]
    assert tables["p95-traces"] == [t["url"] for t in data["exemplars"]["end_to_end"]]
    assert tables["slowest"] == [t["url"] for t in data["slowest"]]
    assert f"{jaeger}/trace/" in tables["slowest"][0]
    assert 'href="http://jaeger.example:16686/team&amp;ops/trace/' in page.read_text()


def test_a_saved_report_s_links_that_are_not_web_urls_are_shown_as_text(
    delayed_traces: Path,
) -> None:
    data = _json("report", str(delayed_traces))
    named = data["exemplars"]["generation"]
    named[0]["url"] = "javascript:alert(1)"
    named[1]["url"] = "http://jaeger.example/\x1b]8;;http://evil.example\x1b\\"
    named[2]["trace_id"] = '"><script>alert(1)</script>'
    report = Report.from_json(data)
    page = render_html(report)
    assert "javascript:" not in page and "<script>" not in page
    assert "&quot;&gt;&lt;script&gt;" in page
    out = StringIO()
    print_report(report, Console(file=out, force_terminal=True, width=100))
    assert "javascript:" not in out.getvalue() and "evil.example" not in out.getvalue()


def test_a_report_saved_before_requests_were_named_shows_its_slowest_without_a_p95_claim(
    delayed_traces: Path,
) -> None:
    data = _json("report", str(delayed_traces))
    del data["exemplars"]
    out = StringIO()
    print_report(Report.from_json(data), Console(file=out, width=100))
    text = out.getvalue()
    assert "Slowest requests:" in text and "at or above P95" not in text
    shown = re.findall(r"^  ([0-9a-f]{32})  ", text, re.M)
    assert shown == _ids(data["slowest"][:3])


@pytest.fixture(scope="module")
def slower_generation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 requests of the delayed app whose generation takes twice as long."""
    trace_file = tmp_path_factory.mktemp("slower") / "traces.jsonl"
    run_delayed_app(trace_file, 20, DELAYED_APP_GENERATION=str(SLOWER_GENERATION))
    return trace_file


def test_compare_names_each_runs_requests_for_the_rows_that_changed(
    reader: str, delayed_traces: Path, slower_generation: Path
) -> None:
    baseline = _json("report", str(delayed_traces))
    candidate = _json("report", str(slower_generation))
    data = _json("compare", str(delayed_traces), str(slower_generation), "--jaeger", JAEGER)
    series = data["series"]
    assert series["generation"]["verdict"] == series["end_to_end"]["verdict"] == "slower"
    for name, row in series.items():
        assert (row["exemplars"] is not None) == (row["verdict"] in ("faster", "slower")), name
    named = series["generation"]["exemplars"]
    for role, report in (("baseline", baseline), ("candidate", candidate)):
        assert _ids(named[role]) == _ids(report["exemplars"]["generation"])
        for trace in named[role]:
            assert trace["url"] == f"{JAEGER}/trace/{trace['trace_id']}"
    slowest = series["end_to_end"]["exemplars"]["candidate"]
    assert _ids(slowest) == _ids(candidate["exemplars"]["end_to_end"])
    assert min(t["stages"]["generation"] for t in named["candidate"]) > SLOWER_GENERATION * 0.9


def test_compare_shows_them_in_the_table_and_links_them_in_html(
    delayed_traces: Path, slower_generation: Path, tmp_path: Path
) -> None:
    sides = (str(delayed_traces), str(slower_generation))
    data = _json("compare", *sides, "--jaeger", JAEGER)
    page = tmp_path / "compare.html"
    text = run_llmtrace("compare", *sides, "--jaeger", JAEGER, "--html", str(page)).stdout
    section = text[text.index("generation slower: where it took longest in each run") :]
    named = data["series"]["generation"]["exemplars"]
    candidate = section[section.index("  candidate:") :]
    for trace in named["candidate"]:
        assert f"    {trace['trace_id']}  {format_seconds(trace['duration'])}" in candidate
        assert f"      {trace['url']}\n" in candidate
    tables = _page_links(page)
    for role in ("baseline", "candidate"):
        assert tables[f"generation/{role}"] == [t["url"] for t in named[role]]


@pytest.fixture(scope="module")
def sent_to_jaeger(
    tracing_stack: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    """12 requests of the delayed app, in a trace file and through the Collector in Jaeger."""
    trace_file = tmp_path_factory.mktemp("links") / "traces.jsonl"
    service = run_delayed_app_into_jaeger(tracing_stack, trace_file, 12, "links")
    return service, trace_file


@pytest.mark.integration
def test_each_link_opens_the_request_it_names_in_jaeger(
    reader: str, tracing_stack: Any, sent_to_jaeger: tuple[str, Path]
) -> None:
    service, trace_file = sent_to_jaeger
    jaeger = tracing_stack.jaeger_url
    from_jaeger = _json("report", jaeger, "--service", service, "--lookback", "15m")
    from_file = _json("report", str(trace_file), "--jaeger", jaeger)
    links = _links(from_jaeger)
    assert links == _links(from_file)
    named = [
        *from_jaeger["exemplars"][from_jaeger["bottleneck"]["stage"]],
        *from_jaeger["exemplars"]["end_to_end"],
    ]
    assert named
    for trace in named:
        assert trace["url"] == f"{jaeger}/trace/{trace['trace_id']}"
        # the link is a page of Jaeger's UI (a route of its single-page app) ...
        page = httpx.get(trace["url"], timeout=10)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        # ... showing the trace its API answers with for that id
        answer = httpx.get(f"{jaeger}/api/traces/{trace['trace_id']}", timeout=10)
        assert answer.status_code == 200, answer.text
        (found,) = answer.json()["data"]
        assert found["traceID"] == trace["trace_id"]
        spans = {span["operationName"]: span for span in found["spans"]}
        # the request named: its root, its end-to-end time and its retrieval's (microseconds)
        root = spans[trace["root"]]
        assert not root["references"]
        assert root["duration"] == pytest.approx(trace["duration"] * 1e6, abs=1)
        assert spans["retrieval docs"]["duration"] == pytest.approx(
            trace["stages"]["retrieval"] * 1e6, abs=1
        )
