"""``llmtrace report --filter KEY=VALUE`` and ``--group-by KEY`` on the request context of roots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmtrace.analysis.report import MAX_GROUPS, build_report
from llmtrace.analysis.report_model import Report
from llmtrace.analysis.sources import load_traces
from llmtrace.errors import SourceError
from tests.analysis.conftest import run_llmtrace
from tests.analysis.otlp_lines import request_line, simple_trace


def request(
    index: int, *, retrieval_ms: int, session: str | None = None, user: str | None = None
) -> list[dict[str, Any]]:
    """One request whose spans all carry its session and user, as ``llmtrace.context()`` does."""
    attributes = {
        key: value for key, value in (("session.id", session), ("user.id", user)) if value
    }
    return simple_trace(index, retrieval_ms=retrieval_ms, **attributes)


def write(path: Path, requests: list[list[dict[str, Any]]]) -> Path:
    path.write_text("".join(request_line(spans) + "\n" for spans in requests))
    return path


@pytest.fixture
def two_users(tmp_path: Path) -> Path:
    """Six requests: u-1 in sessions s-a and s-b with fast retrieval, u-2 in s-c with slow."""
    return write(
        tmp_path / "traces.jsonl",
        [
            request(0, retrieval_ms=10, session="s-a", user="u-1"),
            request(1, retrieval_ms=10, session="s-a", user="u-1"),
            request(2, retrieval_ms=20, session="s-b", user="u-1"),
            request(3, retrieval_ms=60, session="s-c", user="u-2"),
            request(4, retrieval_ms=60, session="s-c", user="u-2"),
            request(5, retrieval_ms=60, user="u-2"),  # no session
        ],
    )


def report_of(path: Path, *, group_by: str | None = None, **filters: str) -> Report:
    traceset = load_traces(str(path), attributes=filters)
    return build_report(traceset, group_by=group_by)


def test_a_filter_keeps_only_the_traces_whose_root_matches(reader: str, two_users: Path) -> None:
    report = report_of(two_users, **{"user.id": "u-2"})
    assert report.traces == 3
    assert report.stages["retrieval"].distribution.mean == pytest.approx(0.060)
    assert report.to_json()["filters"] == {"user.id": "u-2"}


def test_every_filter_must_match(reader: str, two_users: Path) -> None:
    assert report_of(two_users, **{"user.id": "u-1", "session.id": "s-a"}).traces == 2
    assert report_of(two_users, **{"user.id": "u-2", "session.id": "s-a"}).traces == 0


def test_group_by_gives_each_value_its_own_stage_table(reader: str, two_users: Path) -> None:
    report = report_of(two_users, group_by="session.id")
    data = report.to_json()
    # largest first; the overall table stays
    assert list(data["groups"]) == ["s-a", "s-c", "s-b"]
    assert data["traces"] == 6
    assert data["group_by"] == {
        "key": "session.id",
        "groups_left_out": 0,
        "traces_left_out": 0,
        "traces_without_value": 1,
    }
    slow = data["groups"]["s-c"]
    assert slow["traces"] == 2
    assert slow["stages"]["retrieval"]["mean"] == pytest.approx(0.060)
    assert data["groups"]["s-a"]["stages"]["retrieval"]["mean"] == pytest.approx(0.010)
    # the same per-stage schema as the whole report's
    assert set(slow["stages"]["retrieval"]) == set(data["stages"]["retrieval"])


def test_group_by_and_filter_combine(reader: str, two_users: Path) -> None:
    data = report_of(two_users, group_by="session.id", **{"user.id": "u-1"}).to_json()
    assert data["traces"] == 3
    assert {value: group["traces"] for value, group in data["groups"].items()} == {
        "s-a": 2,
        "s-b": 1,
    }


def test_groups_beyond_the_largest_are_counted_not_shown(reader: str, tmp_path: Path) -> None:
    sessions = [f"s-{n:02d}" for n in range(MAX_GROUPS + 3)]
    requests = [request(i, retrieval_ms=10, session=s) for i, s in enumerate(sessions)]
    requests.append(request(len(sessions), retrieval_ms=10, session="s-22"))
    data = report_of(write(tmp_path / "t.jsonl", requests), group_by="session.id").to_json()
    assert len(data["groups"]) == MAX_GROUPS
    assert next(iter(data["groups"])) == "s-22"  # the one group of two comes first
    assert data["group_by"]["groups_left_out"] == 3
    assert data["group_by"]["traces_left_out"] == 3


def test_both_readers_group_and_filter_alike(
    two_users: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports = []
    for native in ("1", "0"):
        monkeypatch.setenv("LLMTRACE_NATIVE", native)
        data = report_of(two_users, group_by="session.id", **{"user.id": "u-1"}).to_json()
        data.pop("generated_at")
        reports.append(data)
    assert reports[0] == reports[1]


def test_a_key_the_readers_do_not_keep_is_refused(reader: str, two_users: Path) -> None:
    with pytest.raises(SourceError, match=r"session\.id"):
        report_of(two_users, **{"http.route": "/chat"})
    with pytest.raises(SourceError, match="cannot filter or group by"):
        report_of(two_users, group_by="http.route")


def test_a_saved_report_keeps_its_groups(two_users: Path) -> None:
    report = report_of(two_users, group_by="user.id", **{"session.id": "s-c"})
    again = Report.from_json(json.loads(json.dumps(report.to_json())))
    assert again.to_json() == report.to_json()


def test_filter_and_group_by_on_the_command_line(reader: str, two_users: Path) -> None:
    args = ["report", str(two_users), "--filter", "user.id=u-1", "--group-by", "session.id"]
    data = json.loads(run_llmtrace(*args, "--format", "json").stdout)
    assert data["traces"] == 3
    assert list(data["groups"]) == ["s-a", "s-b"]
    table = run_llmtrace(*args).stdout
    assert "user.id=u-1" in table
    assert "session.id = s-a: 2 traces" in table
    assert "session.id = s-b: 1 trace" in table


def test_the_html_report_shows_a_table_per_group(two_users: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    run_llmtrace("report", str(two_users), "--group-by", "session.id", "--html", str(page))
    html = page.read_text()
    assert html.count('class="group-stages"') == 3
    assert "session.id = s-c: 2 traces" in html
    assert "1 trace without session.id" in html


def test_a_malformed_filter_is_a_usage_error(two_users: Path) -> None:
    result = run_llmtrace("report", str(two_users), "--filter", "user.id", check=False)
    assert result.returncode == 2
    assert "KEY=VALUE" in result.stderr
    result = run_llmtrace("report", str(two_users), "--filter", "http.route=/", check=False)
    assert result.returncode == 2
    assert "cannot filter or group by 'http.route'" in result.stderr
