"""One command-line vocabulary: ``--otlp URL``, ``--jaeger URL`` and ``--html FILE`` mean the
same in every command, renamed flags still work, every ``--help`` shows an example, and
``llmtrace report`` with no argument reads the application's trace file and nothing else.

Most cases run the installed ``llmtrace`` command in a child process, as a user runs it."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import llmtrace
from llmtrace.cli import COMMANDS, build_parser
from tests.analysis.otlp_lines import otlp_span, request_line, simple_trace
from tests.http_server import QuietHandler, serving

REPO = Path(__file__).resolve().parents[2]
_SCRIPT = Path(sys.executable).with_name("llmtrace")
LLMTRACE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "llmtrace"]

# The shared flags each command takes, with the value they name.
SHARED_FLAGS: dict[str, tuple[tuple[str, str], ...]] = {
    "report": (("--jaeger", "URL"), ("--html", "FILE")),
    "compare": (("--jaeger", "URL"),),
    "bench": (("--otlp", "URL"), ("--jaeger", "URL"), ("--html", "FILE")),
    "demo": (("--otlp", "URL"), ("--jaeger", "URL")),
    "doctor": (("--otlp", "URL"), ("--jaeger", "URL")),
}

# What each command needs besides the flag under test.
REQUIRED_ARGUMENTS = {"compare": ["before.json", "after.json"], "bench": ["--questions", "q.txt"]}


def _environment() -> dict[str, str]:
    # Nothing of the developer's own configuration: each test says what it sets.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LLMTRACE_"))}
    return {**env, "PYTHONPATH": str(REPO), "COLUMNS": "100"}


def llmtrace_cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LLMTRACE, *args],
        capture_output=True,
        text=True,
        env={**_environment(), **(env or {})},
        cwd=cwd,
        timeout=120,
    )


def write_traces(path: Path, count: int, first: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(request_line(simple_trace(first + i)) + "\n" for i in range(count)))
    return path


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _one_line_error(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert expected in result.stderr


# --- --version and --help ------------------------------------------------------------------------


def test_version_prints_the_program_name_its_version_and_the_trace_reader() -> None:
    result = llmtrace_cli("--version")
    assert result.returncode == 0
    assert (
        result.stdout
        == f"llmtrace {llmtrace.__version__}\ntrace files are read by the native reader\n"
    )


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_every_help_shows_a_realistic_example(command: str) -> None:
    result = llmtrace_cli(*([command] if command else []), "--help")
    assert result.returncode == 0, result.stderr
    section = re.search(r"^examples?:\n((?:  .*\n)+)", result.stdout, re.MULTILINE)
    assert section is not None, result.stdout
    lines = section.group(1).splitlines()
    assert all(line.startswith(f"  llmtrace {command}".rstrip()) for line in lines), lines
    # Each example is a command line the parser accepts.
    for line in lines:
        arguments = line.split()[1:]
        build_parser().parse_args(arguments)


# --- the shared flags -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [(command, flag, value) for command, flags in SHARED_FLAGS.items() for flag, value in flags],
)
def test_every_command_spells_a_shared_flag_alike(command: str, flag: str, value: str) -> None:
    assert f"{flag} {value}" in llmtrace_cli(command, "--help").stdout
    given = "http://localhost:16686" if value == "URL" else "page.html"
    arguments = [command, *REQUIRED_ARGUMENTS.get(command, []), flag, given]
    assert str(getattr(build_parser().parse_args(arguments), flag[2:])) == given


@pytest.mark.parametrize(
    ("arguments", "dest"),
    [
        (["doctor", "--endpoint", "http://collector:4318"], "otlp"),
        (["demo", "--jaeger-url", "http://jaeger:16686"], "jaeger"),
        (["bench", "--questions", "q.txt", "--source", "traces.jsonl"], "source"),
    ],
)
def test_renamed_flags_still_work_and_are_not_listed(arguments: list[str], dest: str) -> None:
    old_flag, value = arguments[-2:]
    assert getattr(build_parser().parse_args(arguments), dest) == value
    assert old_flag not in llmtrace_cli(arguments[0], "--help").stdout


def test_report_format_html_still_works_and_is_not_listed(tmp_path: Path) -> None:
    trace_file = write_traces(tmp_path / "traces.jsonl", 3)
    page = tmp_path / "page.html"
    result = llmtrace_cli("report", str(trace_file), "--format", "html", "--output", str(page))
    assert result.returncode == 0, result.stderr
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert "--format {table,json}" in llmtrace_cli("report", "--help").stdout


def test_report_reads_jaeger_given_with_the_jaeger_flag() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    _one_line_error(llmtrace_cli("report", "--jaeger", url), f"cannot reach Jaeger at {url}")


def test_report_takes_a_jaeger_as_source_or_as_the_jaeger_flag_not_both() -> None:
    result = llmtrace_cli("report", "http://jaeger-a:16686", "--jaeger", "http://jaeger-b:16686")
    _one_line_error(result, "give the Jaeger URL as SOURCE or as --jaeger URL, not both")


def test_report_of_a_file_links_its_traces_to_the_jaeger_flag(tmp_path: Path) -> None:
    trace_file = write_traces(tmp_path / "traces.jsonl", 3)
    result = llmtrace_cli("report", str(trace_file), "--jaeger", "http://localhost:16686/")
    assert result.returncode == 0, result.stderr
    # the trace file holds no Jaeger of its own: the flag's (its trailing slash dropped)
    links = re.findall(r"^ +(http://\S+)$", result.stdout, re.M)
    traces = {f"http://localhost:16686/trace/{i + 1:032x}" for i in range(3)}
    assert links and set(links) <= traces, result.stdout


def test_a_jaeger_url_from_the_environment_that_is_not_a_url_is_one_line(tmp_path: Path) -> None:
    trace_file = write_traces(tmp_path / "traces.jsonl", 3)
    result = llmtrace_cli("report", str(trace_file), env={"LLMTRACE_JAEGER_URL": "jaeger:16686"})
    _one_line_error(result, "jaeger_url='jaeger:16686' is not a URL of the Jaeger UI")


def test_a_jaeger_flag_that_is_not_a_url_is_a_usage_error() -> None:
    _one_line_error(llmtrace_cli("doctor", "--jaeger", "localhost:16686"), "invalid Jaeger URL")


def test_report_writes_html_with_the_html_flag(tmp_path: Path) -> None:
    trace_file = write_traces(tmp_path / "traces.jsonl", 3)
    page = tmp_path / "report.html"
    result = llmtrace_cli("report", str(trace_file), "--html", str(page))
    assert result.returncode == 0, result.stderr
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert "Bottleneck" in result.stdout  # the table still goes to stdout


def test_compare_reads_both_runs_from_the_jaeger_flag() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    result = llmtrace_cli("compare", "--jaeger", url, "before", "after")
    _one_line_error(result, f"cannot reach Jaeger at {url}")


class _FakeJaeger(QuietHandler):
    """Jaeger's query API v3 with two llmtrace bench runs of one service, started minutes ago."""

    def do_GET(self) -> None:
        if self.path.startswith("/api/v3/services"):
            body: dict[str, Any] = {"services": ["svc"]}
        else:
            start = time.time_ns() - 600 * 10**9
            spans = [
                otlp_span(
                    f"{i + 1:032x}",
                    f"{i + 1:016x}",
                    None,
                    "bench",
                    start + i * 10**9,
                    start + i * 10**9 + (100 if i < 6 else 40) * 10**6,
                    llmtrace__bench__run="before" if i < 6 else "after",
                )
                for i in range(12)
            ]
            body = {"result": json.loads(request_line(spans))}
        payload = json.dumps(body).encode()
        self.send_body(200, payload, "application/json")


@pytest.fixture
def fake_jaeger() -> Iterator[str]:
    with serving(_FakeJaeger) as url:
        yield url


def test_compare_names_two_bench_runs_read_from_the_jaeger_flag(fake_jaeger: str) -> None:
    result = llmtrace_cli(
        "compare",
        "--jaeger",
        fake_jaeger,
        "--service",
        "svc",
        "before",
        "after",
        "--format",
        "json",
    )
    assert result.returncode == 0, result.stderr
    comparison = json.loads(result.stdout)
    assert (comparison["baseline"]["traces"], comparison["candidate"]["traces"]) == (6, 6)
    end_to_end = comparison["series"]["end_to_end"]["p50"]
    assert (end_to_end["baseline"], end_to_end["candidate"]) == pytest.approx((0.1, 0.04))


@pytest.mark.parametrize("flag", ["--otlp", "--endpoint"])
def test_doctor_checks_the_endpoint_given_with_otlp_or_its_old_name(flag: str) -> None:
    port = _closed_port()
    result = llmtrace_cli("doctor", flag, f"http://127.0.0.1:{port}")
    assert result.returncode == 1, result.stderr
    assert f"OTLP endpoint http://127.0.0.1:{port} over grpc (from --otlp)" in result.stdout
    assert f"Nothing answers at 127.0.0.1:{port}" in result.stdout


def test_bench_writes_html_and_reads_back_from_the_jaeger_flag(tmp_path: Path) -> None:
    (tmp_path / "echo_app.py").write_text("def answer(question):\n    return question\n")
    (tmp_path / "questions.txt").write_text("What is it?\nWhere is it?\n")
    common = ["echo_app:answer", "--questions", "questions.txt", "--no-progress"]
    result = llmtrace_cli("bench", *common, "--name", "one", "--html", "bench.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "bench.html").read_text().startswith("<!DOCTYPE html>")

    url = f"http://127.0.0.1:{_closed_port()}"
    result = llmtrace_cli("bench", *common, "--name", "two", "--jaeger", url, cwd=tmp_path)
    _one_line_error(result, f"cannot reach Jaeger at {url}")


# --- what `llmtrace report` reads by default ------------------------------------------------------


def _traces_reported(result: subprocess.CompletedProcess[str]) -> int:
    assert result.returncode == 0, result.stderr
    return int(json.loads(result.stdout)["traces"])


def test_report_without_a_source_reads_the_application_file_only(tmp_path: Path) -> None:
    write_traces(tmp_path / ".llmtrace" / "traces.jsonl", 3)
    # The demo's traces (and any other tool's) live next to the application's.
    write_traces(tmp_path / ".llmtrace" / "demo-traces.jsonl", 5, first=100)
    result = llmtrace_cli("report", "--format", "json", cwd=tmp_path)
    assert _traces_reported(result) == 3


def test_report_without_a_source_reads_llmtrace_file_path(tmp_path: Path) -> None:
    write_traces(tmp_path / "app" / "spans.jsonl", 2)
    write_traces(tmp_path / ".llmtrace" / "traces.jsonl", 4, first=100)
    result = llmtrace_cli(
        "report",
        "--format",
        "json",
        cwd=tmp_path,
        env={"LLMTRACE_FILE_PATH": str(tmp_path / "app" / "spans.jsonl")},
    )
    assert _traces_reported(result) == 2


def test_report_without_a_source_names_the_file_it_looked_for(tmp_path: Path) -> None:
    write_traces(tmp_path / ".llmtrace" / "demo-traces.jsonl", 5)
    result = llmtrace_cli("report", cwd=tmp_path)
    _one_line_error(result, "no traces at .llmtrace/traces.jsonl")


# --- defaults written out in the light command modules ---------------------------------------------


def test_bench_parser_defaults_are_the_benchmark_defaults() -> None:
    from llmtrace.bench.runs import DEFAULT_RUNS_DIR
    from llmtrace.bench.targets import DEFAULT_BODY
    from llmtrace.commands import bench

    assert bench.DEFAULT_BODY == DEFAULT_BODY
    assert bench.DEFAULT_RUNS_DIR == DEFAULT_RUNS_DIR


def test_demo_parser_defaults_are_the_demo_defaults() -> None:
    pytest.importorskip("numpy")
    from llmtrace.commands import demo
    from llmtrace.demo.walkthrough import DEFAULT_JAEGER_URL, DemoOptions

    defaults = DemoOptions()
    library = {
        "questions": defaults.questions,
        "concurrency": defaults.concurrency,
        "top_k": defaults.baseline.top_k,
        "max_tokens": defaults.baseline.max_tokens,
        "output_dir": defaults.output_dir,
        "jaeger": DEFAULT_JAEGER_URL,
    }
    command_line = {
        "questions": demo.DEFAULT_QUESTIONS,
        "concurrency": demo.DEFAULT_CONCURRENCY,
        "top_k": demo.DEFAULT_TOP_K,
        "max_tokens": demo.DEFAULT_MAX_TOKENS,
        "output_dir": demo.DEFAULT_OUTPUT_DIR,
        "jaeger": demo.DEFAULT_JAEGER_URL,
    }
    assert command_line == library
