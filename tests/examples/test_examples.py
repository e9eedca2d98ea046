"""Every application in examples/ runs, as a user runs it: in its own process, configured only
by the usual variables (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``LLMTRACE_FILE_PATH``), against
the suite's simulated OpenAI-compatible model server, with an injected first-token delay. Each
test reads the trace file the example wrote and checks the trace the docs say it makes: the
spans, their stages, and the time to first token the server was told to take."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from llmtrace import semconv
from llmtrace.analysis.breakdown import breakdown
from llmtrace.analysis.model import Span, Trace
from llmtrace.analysis.sources import load_traces
from tests.servers.model_server import ModelServer
from tests.subprocesses import clean_environment

# The examples talk HTTP to the model server and, for the service, to each other.
pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
FIRST_TOKEN_SECONDS = 0.12
# The breakdown's ttft starts where the client read the response headers, which the server sends
# before its wait: read late on a busy machine, that moment takes a little of the wait, counted
# before it (measured once: 0.1191 s of a 0.12 s wait). The span's own time to first token,
# from the request, has no such allowance.
HEADERS_READ_LATE = 0.005
ANSWER = "Hello, world!"  # the simulated server's tokens, joined


def example_environment(model_server: ModelServer, traces: Path, **extra: str) -> dict[str, str]:
    """What a user sets: the server's URL and a key, and where the spans go."""
    return clean_environment(
        PYTHONPATH=str(REPO),
        OPENAI_BASE_URL=model_server.base_url,
        OPENAI_API_KEY="sk-example",
        LLMTRACE_EXPORTER="file",
        LLMTRACE_FILE_PATH=str(traces),
        OTEL_METRICS_EXPORTER="none",
        # LiteLLM fetches its cost map from the internet at import unless told to use its own copy.
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        **extra,
    )


def run_example(
    script: str, *args: str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """Run an example as its docstring says: a Python file with this interpreter, a shell script
    with bash."""
    interpreter = "bash" if script.endswith(".sh") else sys.executable
    done = subprocess.run(
        [interpreter, str(EXAMPLES / script), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done


def traces_in(path: Path) -> list[Trace]:
    return sorted(load_traces(str(path)).traces, key=lambda trace: trace.root.start)


def named(trace: Trace, prefix: str) -> list[Span]:
    """The trace's spans whose name starts with ``prefix``."""
    return [span for span in trace.root.walk() if span.name.startswith(prefix)]


@pytest.fixture
def slow_first_token(model_server: ModelServer) -> ModelServer:
    return model_server.configure(first_token_delay=FIRST_TOKEN_SECONDS, token_delay=0.002)


def test_the_readme_example_is_the_openai_example() -> None:
    readme = (REPO / "README.md").read_text()
    start = readme.index("```python\nimport os\n") + len("```python\n")
    block = readme[start : readme.index("```", start)]
    assert block in (EXAMPLES / "openai_chat.py").read_text()


def ask(
    script: str, model_server: ModelServer, tmp_path: Path, *questions: str
) -> tuple[str, list[Trace]]:
    """Run ``script`` with ``questions``; its output and the traces it wrote, oldest first."""
    traces_file = tmp_path / "traces.jsonl"
    env = example_environment(model_server, traces_file, OPENAI_MODEL="sim-model-1")
    done = run_example(script, *questions, env=env, cwd=tmp_path)
    return done.stdout, traces_in(traces_file)


def the_model_call(trace: Trace) -> Span:
    """The span that owns the model call's timing (a framework's own span sits above it)."""
    (model_call,) = [
        span
        for span in named(trace, "chat ")
        if span.attributes.get(semconv.STAGE) == semconv.LLM_STAGE
    ]
    return model_call


def assert_timed_like_the_server(trace: Trace, retrieval: str, returned: int) -> None:
    (retrieval_span,) = named(trace, retrieval)
    assert retrieval_span.attributes[semconv.RETRIEVAL_RETURNED] == returned
    model_call = the_model_call(trace)
    assert model_call.attributes[semconv.TIME_TO_FIRST_TOKEN] >= FIRST_TOKEN_SECONDS
    stages = breakdown(trace).stages
    assert {"retrieval", "ttft", "generation"} <= set(stages)
    assert stages["ttft"] >= FIRST_TOKEN_SECONDS - HEADERS_READ_LATE


def test_openai_chat_makes_one_trace_per_question_with_retrieval_and_the_model_call(
    slow_first_token: ModelServer, tmp_path: Path
) -> None:
    stdout, traces = ask(
        "openai_chat.py", slow_first_token, tmp_path, "How much does the hub cost?", "Battery?"
    )

    assert stdout.count(ANSWER) == 2
    assert [trace.root.name for trace in traces] == ["answer", "answer"]
    for trace in traces:
        assert_timed_like_the_server(trace, "retrieval handbook", returned=1)


@pytest.mark.parametrize(
    ("script", "root", "retrieval"),
    [
        ("langchain_rag.py", "RunnableSequence", "retrieval InMemoryVectorStore"),
        ("llama_index_query.py", "RetrieverQueryEngine", "retrieval SimpleVectorStore"),
    ],
)
def test_a_framework_rag_example_is_one_trace_per_question_over_retrieval_and_the_model(
    slow_first_token: ModelServer, tmp_path: Path, script: str, root: str, retrieval: str
) -> None:
    stdout, traces = ask(script, slow_first_token, tmp_path, "How much does the hub cost?")

    assert ANSWER in stdout
    *indexing, question = traces
    # The handbook is embedded at start-up, in traces of its own.
    assert indexing and all(trace.root.name.startswith("embeddings ") for trace in indexing)
    assert question.root.name == root
    assert named(question, "embeddings ")  # the query's embedding
    assert_timed_like_the_server(question, retrieval, returned=2)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stop(process: subprocess.Popen[str]) -> None:
    """Ctrl-C, as a user stops the service: uvicorn shuts down, then llmtrace flushes at exit."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def fastapi_service(
    slow_first_token: ModelServer, tmp_path: Path
) -> Iterator[tuple[str, Path, subprocess.Popen[str]]]:
    """examples/fastapi_service.py in its own process, serving once its health check answers."""
    traces_file = tmp_path / "traces.jsonl"
    port = _free_port()
    env = example_environment(
        slow_first_token, traces_file, OPENAI_MODEL="sim-model-1", PORT=str(port)
    )
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "fastapi_service.py")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the service did not start within 60 s"
            time.sleep(0.2)
        yield url, traces_file, process
    finally:
        stop(process)


def test_fastapi_service_continues_the_callers_trace_with_its_server_span(
    fastapi_service: tuple[str, Path, subprocess.Popen[str]],
) -> None:
    url, traces_file, process = fastapi_service
    caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    answers = [
        httpx.post(
            f"{url}/ask",
            json={"question": question},
            headers={"traceparent": f"00-{caller_trace[:-1]}{n}-00f067aa0ba902b7-01"},
            timeout=30,
        ).json()
        for n, question in enumerate(["How much does the hub cost?", "Battery?"])
    ]
    httpx.get(f"{url}/health", timeout=5)  # excluded: no span
    assert [answer["answer"] for answer in answers] == [ANSWER, ANSWER]
    assert [answer["trace_id"] for answer in answers] == [
        caller_trace[:-1] + "0",
        caller_trace[:-1] + "1",
    ]

    stop(process)  # the spans are written by the batch processor, at the latest at exit
    assert process.returncode == 0
    # FastAPI's own tracing (0.165+) still makes a span for the excluded health checks: only the
    # requests that asked something are looked at.
    traces = {
        trace.trace_id: trace
        for trace in traces_in(traces_file)
        if trace.root.name != "GET /health"
    }
    assert set(traces) == {answer["trace_id"] for answer in answers}
    for trace in traces.values():
        assert trace.orphan  # its parent is the caller's span, which is not in this file
        assert trace.root.name == "POST /ask"
        assert trace.root.kind == 2  # SERVER
        assert named(trace, "build_prompt")[0].attributes["llmtrace.stage"] == "prompt"
        assert the_model_call(trace).name == "chat sim-model-1"
        assert the_model_call(trace).attributes[semconv.TIME_TO_FIRST_TOKEN] >= FIRST_TOKEN_SECONDS
        assert breakdown(trace).stages["ttft"] >= FIRST_TOKEN_SECONDS - HEADERS_READ_LATE


def test_bench_before_after_finds_the_rerank_faster_and_passes_the_gate(
    slow_first_token: ModelServer, tmp_path: Path
) -> None:
    env = example_environment(
        slow_first_token,
        tmp_path / ".llmtrace" / "traces.jsonl",
        OPENAI_MODEL="sim-model-1",
        LLMTRACE=f"{sys.executable} -m llmtrace",
    )
    run_example("bench_before_after.sh", env=env, cwd=tmp_path)

    runs = tmp_path / ".llmtrace" / "runs"
    assert {"before.json", "after.json"} <= {path.name for path in runs.iterdir()}
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    assert comparison["changed_settings"] == [{"setting": "top_k", "baseline": 8, "candidate": 2}]
    assert comparison["series"]["rerank"]["verdict"] == "faster"
    assert comparison["series"]["end_to_end"]["verdict"] == "faster"
    returned = sorted(
        {
            span.attributes[semconv.RETRIEVAL_RETURNED]
            for trace in traces_in(tmp_path / ".llmtrace" / "traces.jsonl")
            for span in named(trace, "retrieval handbook")
        }
    )
    assert returned == [2, 8]


def test_queue_semaphore_counts_the_wait_for_a_model_slot_as_queue(tmp_path: Path) -> None:
    traces_file = tmp_path / "traces.jsonl"
    env = clean_environment(
        PYTHONPATH=str(REPO), LLMTRACE_EXPORTER="file", LLMTRACE_FILE_PATH=str(traces_file)
    )
    run_example("queue_semaphore.py", env=env, cwd=tmp_path)

    traces = traces_in(traces_file)
    assert len(traces) == 6  # six requests, two model slots
    queued = [breakdown(trace).stages.get("queue", 0.0) for trace in traces]
    # The last two requests wait for two model calls of 0.3 s each before theirs.
    assert sorted(queued)[-2:] >= [0.5, 0.5]
    assert all(named(trace, "queue model") for trace in traces)
