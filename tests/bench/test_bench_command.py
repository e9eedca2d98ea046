"""``llmtrace bench`` end to end, as a user runs it: a real process, real files, a real service."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from llmtrace import __version__
from llmtrace.bench.questions import load_questions

from .conftest import AnswerService

APP = """
import asyncio
import llmtrace

@llmtrace.retrieval(data_source="docs", top_k=3)
async def search(question):
    await asyncio.sleep(0.01)
    return [1, 2, 3]

@llmtrace.llm(model="tiny", provider="test")
async def generate(question):
    await asyncio.sleep(0.005)
    llmtrace.mark_first_token()
    await asyncio.sleep({generation_delay})
    return "answer"

async def answer(question):
    open("answered.flag", "a").close()
    if "broken" in question:
        raise RuntimeError("cannot answer that")
    await search(question)
    return await generate(question)
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "rag_app.py").write_text(APP.format(generation_delay=0.02), encoding="utf-8")
    (tmp_path / "slow_app.py").write_text(APP.format(generation_delay=0.3), encoding="utf-8")
    (tmp_path / "questions.jsonl").write_text(
        "".join(f'{{"id": "q{i}", "question": "question {i}?"}}\n' for i in range(1, 5)),
        encoding="utf-8",
    )
    (tmp_path / "other.txt").write_text("something else?\nbroken question?\n", encoding="utf-8")
    return tmp_path


def bench_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LLMTRACE_"))}
    env["COLUMNS"] = "120"
    return env


def llmtrace_cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmtrace", *args],
        cwd=cwd,
        env=bench_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def saved_run(workdir: Path, name: str) -> dict[str, Any]:
    return json.loads((workdir / ".llmtrace" / "runs" / f"{name}.json").read_text())


def test_bench_a_python_callable_reports_and_saves_the_run(workdir: Path) -> None:
    done = llmtrace_cli(
        "bench", "rag_app:answer", "--questions", "questions.jsonl",
        "--concurrency", "2", "--repeat", "2", "--warmup", "3", "--name", "base",
        "--model", "tiny", "--no-progress", cwd=workdir,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "P95" in done.stdout and "retrieval" in done.stdout
    saved = saved_run(workdir, "base")
    run = saved["run"]
    assert run["name"] == "base"
    assert run["question_set_hash"] == load_questions(workdir / "questions.jsonl").hash
    assert (run["concurrency"], run["repeat"], run["warmup"]) == (2, 2, 3)
    assert (run["requests"], run["errors"], run["timeouts"]) == (8, 0, 0)
    assert run["model"] == "tiny"
    assert run["llmtrace_version"] == __version__
    assert run["python_version"] == platform.python_version()
    assert run["started_at"] < run["ended_at"]
    # The report covers exactly the measured requests: warmups are left out.
    assert saved["traces"] == 8
    assert saved["excluded_warmup"] == 3
    assert {"retrieval", "ttft", "generation"} <= set(saved["stages"])


def test_an_app_that_sets_jaeger_url_gets_a_run_report_linked_to_it(workdir: Path) -> None:
    # init(jaeger_url=) in the process the run is measured in: the report built there links
    # the requests it names to that Jaeger
    jaeger = "http://jaeger.example:16686"
    setup = f"import llmtrace\nllmtrace.init(exporter='none', jaeger_url={jaeger!r})\n"
    (workdir / "linked_app.py").write_text(setup + APP.format(generation_delay=0.02))
    done = llmtrace_cli(
        "bench", "linked_app:answer", "--questions", "questions.jsonl", "--name", "linked",
        "--no-progress", cwd=workdir,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    saved = saved_run(workdir, "linked")
    named = [trace for traces in saved["exemplars"].values() for trace in traces]
    assert named and saved["jaeger_url"] == jaeger
    for trace in named:
        assert trace["url"] == f"{jaeger}/trace/{trace['trace_id']}"
    # the terminal shows the bottleneck's and the slowest requests
    for row in (saved["bottleneck"]["stage"], "end_to_end"):
        for trace in saved["exemplars"][row]:
            assert f"\n    {trace['url']}\n" in done.stdout


def test_errors_are_counted_and_the_run_still_reports(workdir: Path) -> None:
    done = llmtrace_cli(
        "bench", "rag_app:answer", "--questions", "other.txt", "--repeat", "3",
        "--name", "flaky", "--no-progress", cwd=workdir,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "6 requests, 3 errors, 0 timeouts" in done.stdout
    saved = saved_run(workdir, "flaky")
    assert (saved["run"]["requests"], saved["run"]["errors"]) == (6, 3)
    assert saved["traces"] == 6


def test_bench_a_real_http_service(workdir: Path, answer_service: AnswerService) -> None:
    done = llmtrace_cli(
        "bench", "--url", f"{answer_service.base_url}/answer",
        "--body", '{"question": "{question}", "ref": "{id}"}',
        "--questions", "questions.jsonl", "--concurrency", "3", "--repeat", "3",
        "--name", "http", "--no-progress", cwd=workdir,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert answer_service.max_in_flight == 3
    assert len(answer_service.bodies) == 12
    assert {"question": "question 1?", "ref": "q1"} in answer_service.bodies
    saved = saved_run(workdir, "http")
    assert saved["run"]["requests"] == 12 and saved["traces"] == 12


def test_compare_warns_when_concurrency_or_question_set_differ(workdir: Path) -> None:
    common = ("--no-progress", "--repeat", "2")
    first = llmtrace_cli(
        "bench", "rag_app:answer", "--questions", "questions.jsonl", "--concurrency", "1",
        "--name", "c1", *common, cwd=workdir,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    second = llmtrace_cli(
        "bench", "rag_app:answer", "--questions", "questions.jsonl", "--concurrency", "4",
        "--name", "c4", "--baseline", "c1", *common, cwd=workdir,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert "differ in concurrency: 1 vs 4" in second.stdout

    same = llmtrace_cli(
        "bench", "rag_app:answer", "--questions", "questions.jsonl", "--concurrency", "1",
        "--name", "c1-again", "--baseline", "c1", *common, cwd=workdir,
    )  # fmt: skip
    assert same.returncode == 0, same.stderr
    assert "differ in" not in same.stdout

    other_set = llmtrace_cli(
        "bench", "rag_app:answer", "--questions", "other.txt", "--concurrency", "1",
        "--name", "other", *common, cwd=workdir,
    )  # fmt: skip
    assert other_set.returncode == 0, other_set.stderr
    runs = workdir / ".llmtrace" / "runs"
    compared = llmtrace_cli("compare", str(runs / "c1.json"), str(runs / "other.json"), cwd=workdir)
    assert compared.returncode == 0, compared.stderr
    assert "differ in question set" in compared.stdout


def test_unknown_baseline_is_a_one_line_error(workdir: Path) -> None:
    done = llmtrace_cli(
        "bench", "rag_app:answer", "--questions", "questions.jsonl", "--baseline", "nope",
        cwd=workdir,
    )  # fmt: skip
    assert done.returncode == 2
    assert "no saved run 'nope'" in done.stderr
    assert "Traceback" not in done.stderr


def test_ctrl_c_stops_cleanly_and_reports_what_completed(workdir: Path) -> None:
    (workdir / "many.txt").write_text(
        "".join(f"question {i}?\n" for i in range(100)), encoding="utf-8"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "llmtrace", "bench", "slow_app:answer", "--questions", "many.txt",
         "--concurrency", "2", "--name", "stopped", "--no-progress"],
        cwd=workdir, env=bench_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (workdir / "answered.flag").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # a few requests (0.3 s each) complete
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert "(interrupted)" in stdout
    assert "Traceback" not in stderr
    run = saved_run(workdir, "stopped")["run"]
    assert run["interrupted"] is True
    assert 0 < run["requests"] < 100
    assert run["errors"] == 0
