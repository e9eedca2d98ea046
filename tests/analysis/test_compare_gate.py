"""``llmtrace compare --fail-if-slower``: the exit status and its one-line reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmtrace.analysis.gate import SlowerLimit
from llmtrace.errors import CommandError
from tests.analysis.conftest import run_llmtrace
from tests.analysis.otlp_lines import request_line, simple_trace


def write_bench_run(
    path: Path, name: str, count: int, retrieval_ms: int, **attributes: object
) -> Path:
    """``count`` requests of the bench run ``name`` in a trace file: retrieval, then 70 ms more
    (``attributes`` on every span, e.g. ``gen_ai__retrieval__top_k=8``)."""
    lines = (
        request_line(
            simple_trace(
                i,
                retrieval_ms=retrieval_ms + i % 7,
                total_ms=retrieval_ms + i % 7 + 70,
                llmtrace__bench__run=name,
                **attributes,
            )
        )
        for i in range(count)
    )
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("gate")
    return {
        name: write_bench_run(directory / f"{name}.jsonl", name, count, retrieval_ms)
        for name, count, retrieval_ms in (
            ("before", 40, 30),
            ("slower", 40, 80),
            ("before-10", 10, 30),
            ("slower-10", 10, 130),
        )
    }


def _reasons(stderr: str) -> list[str]:
    """The command's own lines on stderr (one per failure; nothing else it prints starts so)."""
    return [line for line in stderr.splitlines() if line.startswith("llmtrace compare:")]


def _compare(runs: dict[str, Path], base: str, cand: str, *options: str) -> tuple[int, str, str]:
    done = run_llmtrace("compare", str(runs[base]), str(runs[cand]), *options, check=False)
    return done.returncode, done.stdout, done.stderr


def test_a_significant_regression_beyond_the_limit_fails_with_one_line(
    runs: dict[str, Path],
) -> None:
    code, stdout, stderr = _compare(
        runs, "before", "slower", "--fail-if-slower", "end_to_end:p50:10%"
    )
    assert code == 1
    assert "end-to-end" in stdout  # the table is still printed
    lines = _reasons(stderr)
    assert len(lines) == 1, stderr
    assert lines[0].startswith("llmtrace compare: regression: end_to_end p50 slower by +")
    assert "beyond the limit end_to_end:p50:10%" in lines[0]


def test_a_regression_within_its_allowance_passes(runs: dict[str, Path]) -> None:
    code, _, stderr = _compare(
        runs, "before", "slower", "--fail-if-slower", "end_to_end:p50:500%",
        "--fail-if-slower", "retrieval:mean:1s",
    )  # fmt: skip
    assert code == 0, stderr


def test_a_faster_run_never_fails(runs: dict[str, Path]) -> None:
    code, _, stderr = _compare(runs, "slower", "before", "--fail-if-slower", "retrieval:p50:1ms")
    assert code == 0, stderr


def test_not_enough_data_fails_only_when_data_is_required(runs: dict[str, Path]) -> None:
    limit = ("--fail-if-slower", "end_to_end:p95:10%")
    code, stdout, stderr = _compare(runs, "before-10", "slower-10", *limit)
    assert code == 0, stderr
    assert "not enough data" in stdout
    code, _, stderr = _compare(runs, "before-10", "slower-10", *limit, "--require-data")
    assert code == 1
    assert "end_to_end p95: not enough data (needs ≥ 72 requests per run)" in stderr
    assert len(_reasons(stderr)) == 1, stderr


def test_the_median_of_ten_requests_can_fail_the_gate(runs: dict[str, Path]) -> None:
    code, _, stderr = _compare(
        runs, "before-10", "slower-10", "--fail-if-slower", "retrieval:p50:50ms"
    )
    assert code == 1 and "retrieval p50 slower by +100 ms" in stderr


def test_a_malformed_limit_is_a_one_line_usage_error(runs: dict[str, Path]) -> None:
    code, _, stderr = _compare(runs, "before", "slower", "--fail-if-slower", "end_to_end:p99:10%")
    assert code == 2
    assert "unknown statistic 'p99'" in stderr and len(_reasons(stderr)) == 1, stderr
    code, _, stderr = _compare(runs, "before", "slower", "--require-data")
    assert code == 2 and "--require-data applies to --fail-if-slower" in stderr


def test_limits_parse_shares_and_times() -> None:
    assert SlowerLimit.parse("end_to_end:p95:10%").allowed(2.0) == pytest.approx(0.2)
    assert SlowerLimit.parse("ttft:P50:50ms").allowed(9.0) == pytest.approx(0.05)
    assert SlowerLimit.parse("generation:mean:1.5s").seconds == pytest.approx(1.5)
    for bad in ("end_to_end:p95", "warp:p50:1s", "ttft:p50:fast"):
        with pytest.raises(CommandError):
            SlowerLimit.parse(bad)


def test_both_sides_are_named_by_the_runs_their_traces_record(runs: dict[str, Path]) -> None:
    code, stdout, stderr = _compare(runs, "before", "slower", "--format", "json")
    assert code == 0, stderr
    data = json.loads(stdout)
    assert (data["baseline"]["name"], data["candidate"]["name"]) == ("before", "slower")
    assert data["series"]["end_to_end"]["p50"]["verdict"] == "slower"
    code, stdout, _ = _compare(runs, "before", "slower")
    assert "baseline  before (40 traces" in stdout and "candidate slower (40 traces" in stdout


def test_runs_read_from_jaeger_are_named_by_their_run_too() -> None:
    from tests.core.test_cli_vocabulary import _FakeJaeger
    from tests.http_server import serving

    with serving(_FakeJaeger) as url:
        done = run_llmtrace(
            "compare", "--jaeger", url, "--service", "svc", "before", "after", "--format", "json"
        )
    data = json.loads(done.stdout)
    assert (data["baseline"]["name"], data["candidate"]["name"]) == ("before", "after")
    assert data["baseline"]["source"] == data["candidate"]["source"] == url  # one source
    # 6 requests per run: the row and the mean are judged, the tail is not
    end_to_end = data["series"]["end_to_end"]
    assert end_to_end["verdict"] == end_to_end["mean"]["verdict"] == "faster"
    assert end_to_end["p95"]["verdict"] == "not enough data" and end_to_end["p95"]["needs"] == 72


def test_saved_reports_gate_like_the_traces_they_came_from(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    # the CI recipe compares saved runs (.llmtrace/runs/*.json), not trace files
    saved = {}
    for name in ("before", "slower"):
        saved[name] = tmp_path / f"{name}.json"
        run_llmtrace("report", str(runs[name]), "--format", "json", "--output", str(saved[name]))
    done = run_llmtrace(
        "compare", str(saved["before"]), str(saved["slower"]),
        "--fail-if-slower", "retrieval:p50:20%", check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "regression: retrieval p50 slower by +" in done.stderr
    assert "baseline  before (40 traces" in done.stdout
