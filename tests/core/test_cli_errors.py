"""The command line's expected failures: one line on stderr, a documented exit status, never a
traceback. Each case runs the real ``llmtrace`` command in a child process."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from llmtrace.commands.report import duration_argument, time_argument
from tests.http_server import serving

REPO = Path(__file__).resolve().parents[2]


def _environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80", **extra}


def llmtrace(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmtrace", *args],
        capture_output=True,
        text=True,
        env=_environment(**env),
        cwd=cwd,
        timeout=120,
    )


def assert_one_line_error(
    result: subprocess.CompletedProcess[str], *expected: str, status: int = 2
) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), result.stderr
    assert result.returncode == status, result.stderr
    for text in expected:
        assert text in result.stderr


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    from tests.analysis.otlp_lines import request_line, simple_trace

    path = tmp_path / "traces.jsonl"
    path.write_text("".join(request_line(simple_trace(i)) + "\n" for i in range(3)))
    return path


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- one line, exit status 2 ---------------------------------------------------------------------


def test_missing_source(tmp_path: Path) -> None:
    result = llmtrace("report", str(tmp_path / "nothing"))
    assert_one_line_error(result, "llmtrace report: error: no traces at")


def test_unreachable_jaeger() -> None:
    result = llmtrace("report", f"http://127.0.0.1:{_closed_port()}", "--service", "svc")
    assert_one_line_error(result, "cannot reach Jaeger at")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["report", "http://"], "cannot reach Jaeger at"),
        (["report", "https://[::1"], "is not a valid Jaeger URL"),
        (["doctor", "--otlp", "http://[::1"], "is not a URL like http://localhost:4317"),
    ],
)
def test_a_url_that_is_not_a_url(arguments: list[str], expected: str) -> None:
    assert_one_line_error(llmtrace(*arguments), expected)


@pytest.mark.parametrize("bad", ["yesterday", "2 fortnights", "2h before", "ago", "2025-13-01"])
def test_a_since_it_cannot_read(trace_file: Path, bad: str) -> None:
    result = llmtrace("report", str(trace_file), "--since", bad)
    assert_one_line_error(result, f"argument --since: invalid time {bad!r}", "ISO 8601")


def test_a_lookback_it_cannot_read(trace_file: Path) -> None:
    result = llmtrace("report", str(trace_file), "--lookback", "15 minutes")
    assert_one_line_error(result, "argument --lookback: invalid duration '15 minutes'")


@pytest.mark.parametrize(
    "arguments",
    [
        ["report", "--format", "xml"],
        ["report", "--limit", "0"],
        ["report", "--limit", "many"],
        ["report", "--since", "1h", "--lookback", "1h"],
        ["compare", "only-one.json"],
        ["bench", "--questions", "q.txt", "--concurrency", "two"],
        ["no-such-command"],
    ],
)
def test_bad_arguments(arguments: list[str]) -> None:
    result = llmtrace(*arguments)
    assert_one_line_error(result, "error:", "--help")


def test_an_unwritable_output(trace_file: Path, tmp_path: Path) -> None:
    output = tmp_path / "no-such-directory" / "report.txt"
    result = llmtrace("report", str(trace_file), "--output", str(output))
    assert_one_line_error(result, f"{output}: No such file or directory")


def test_compare_with_a_missing_side(trace_file: Path, tmp_path: Path) -> None:
    result = llmtrace("compare", str(trace_file), str(tmp_path / "missing.json"))
    assert_one_line_error(result, "llmtrace compare: error: no traces at")


def test_compare_with_a_broken_saved_report(trace_file: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "llmtrace.report/1", "traces": "many"}')
    result = llmtrace("compare", str(broken), str(trace_file))
    assert_one_line_error(result, "not a readable llmtrace report")


def test_an_invalid_configuration_value(tmp_path: Path) -> None:
    (tmp_path / "target_app.py").write_text("def answer(question):\n    return question\n")
    (tmp_path / "questions.txt").write_text("What is it?\n")
    result = llmtrace(
        "bench",
        "target_app:answer",
        "--questions",
        "questions.txt",
        "--no-progress",
        cwd=tmp_path,
        OTEL_TRACES_SAMPLER="sometimes",
    )
    assert_one_line_error(result, "OTEL_TRACES_SAMPLER='sometimes' is not supported")


def test_a_target_that_fails_to_import(tmp_path: Path) -> None:
    (tmp_path / "broken_app.py").write_text("import os\nraise RuntimeError('no model here')\n")
    (tmp_path / "questions.txt").write_text("What is it?\n")
    result = llmtrace(
        "bench", "broken_app:answer", "--questions", "questions.txt", "--no-progress", cwd=tmp_path
    )
    assert_one_line_error(result, "broken_app.py:2: RuntimeError: no model here")


def test_a_question_file_that_is_a_directory(tmp_path: Path) -> None:
    result = llmtrace("bench", "app:answer", "--questions", str(tmp_path))
    assert_one_line_error(result, "cannot read question file")


# --- Ctrl-C and the documented statuses ----------------------------------------------------------


class _Silent(BaseHTTPRequestHandler):
    """Accepts a request and never answers, like a Jaeger that hangs."""

    arrived = threading.Event()
    release = threading.Event()

    def do_GET(self) -> None:
        type(self).arrived.set()
        type(self).release.wait(30)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def silent_server() -> Iterator[type[_Silent]]:
    handler = type(
        "Silent", (_Silent,), {"arrived": threading.Event(), "release": threading.Event()}
    )
    with serving(handler) as url:
        handler.url = url  # type: ignore[attr-defined]
        try:
            yield handler
        finally:
            handler.release.set()


def _interruptible() -> None:
    # As in a terminal: a suite started in the background by a shell without job control
    # (`make test &` in a script) hands its children SIGINT ignored, and Python then installs
    # no KeyboardInterrupt handler, so the child would wait for the server however it is stopped.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_exits_130_quietly(silent_server: type[_Silent]) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "llmtrace", "report", silent_server.url],  # type: ignore[attr-defined]
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_environment(),
        preexec_fn=_interruptible,
    )
    try:
        assert silent_server.arrived.wait(60), "llmtrace never asked the server"
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    assert stderr == "" and stdout == ""


@pytest.mark.parametrize("output", ["json", "table"])
def test_a_reader_that_quits_early_is_not_an_error(trace_file: Path, output: str) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `llmtrace report | head` once head has gone
    try:
        result = subprocess.run(
            [sys.executable, "-m", "llmtrace", "report", str(trace_file), "--format", output],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(),
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 1
    assert result.stderr == ""


def test_help_documents_the_exit_statuses() -> None:
    for arguments in (["--help"], ["report", "--help"]):
        result = llmtrace(*arguments)
        assert result.returncode == 0
        assert "exit status:" in result.stdout
        for line in ("0    done", "2    an error", "130  interrupted"):
            assert line in result.stdout


# --- the time forms --since, --until and --lookback promise --------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-01-31T12:00:00Z", datetime(2025, 1, 31, 12, tzinfo=UTC)),
        ("2025-01-31T12:00:00z", datetime(2025, 1, 31, 12, tzinfo=UTC)),
        ("2025-01-31T12:00Z", datetime(2025, 1, 31, 12, tzinfo=UTC)),
        ("2025-01-31T12:00:00.250Z", datetime(2025, 1, 31, 12, 0, 0, 250000, tzinfo=UTC)),
        ("2025-01-31T13:00:00+01:00", datetime(2025, 1, 31, 12, tzinfo=UTC)),
        ("2025-01-31 12:00", datetime(2025, 1, 31, 12, tzinfo=UTC)),
        ("2025-01-31", datetime(2025, 1, 31, tzinfo=UTC)),
    ],
)
def test_since_reads_iso_8601_times(text: str, expected: datetime) -> None:
    assert time_argument(text) == expected


@pytest.mark.parametrize(
    ("text", "ago"),
    [
        ("2h", timedelta(hours=2)),
        ("2h ago", timedelta(hours=2)),
        ("30m ago", timedelta(minutes=30)),
        ("15m", timedelta(minutes=15)),
        ("1d ago", timedelta(days=1)),
        ("90s", timedelta(seconds=90)),
        (" 2 h  AGO ", timedelta(hours=2)),
        ("now", timedelta(0)),
    ],
)
def test_since_reads_a_time_ago(text: str, ago: timedelta) -> None:
    moment = time_argument(text)
    assert abs((datetime.now(UTC) - ago) - moment) < timedelta(seconds=5)


@pytest.mark.parametrize("text", ["yesterday", "2h before", "ago", "2025-13-01", "-2h", ""])
def test_since_rejects_other_forms(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="invalid time"):
        time_argument(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("15m", timedelta(minutes=15)), ("2h", timedelta(hours=2)), ("1d", timedelta(days=1))],
)
def test_lookback_reads_durations(text: str, expected: timedelta) -> None:
    assert duration_argument(text) == expected


def test_a_since_given_as_time_ago_filters_the_traces(trace_file: Path) -> None:
    # The traces of the file started in November 2023.
    assert llmtrace("report", str(trace_file), "--since", "10000d ago").returncode == 0
    assert_one_line_error(
        llmtrace("report", str(trace_file), "--since", "2h ago"), "no complete traces matching"
    )
