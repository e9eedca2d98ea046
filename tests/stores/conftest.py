"""A real PostgreSQL with pgvector for the store tests, started once per test session.

The server comes from the PyPI wheel ``pgserver``, which ships PostgreSQL 16 with pgvector
compiled in (Debian's postgresql has no pgvector package on these machines). Only its binaries
are used: the fixture runs ``initdb`` into a temporary data directory and ``postgres`` itself on
a free loopback port (no Unix socket), so it owns the process and stops it at the end of the
session. PostgreSQL refuses to run as root; under root the server runs as ``nobody``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from llmtrace import semconv
from llmtrace.analysis.breakdown import breakdown
from llmtrace.analysis.sources import load_traces
from llmtrace.sdk.exporters.otlp_json import encode_request
from tests.subprocesses import clean_environment, run

START_TIMEOUT = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _binaries() -> Path:
    """pgserver's PostgreSQL binaries, found without importing pgserver (its import takes an
    inter-process lock file and warns about XDG_RUNTIME_DIR), or those in the directory
    ``LLMTRACE_TEST_POSTGRES_BIN`` names (another PostgreSQL with pgvector installed)."""
    chosen = os.environ.get("LLMTRACE_TEST_POSTGRES_BIN")
    if chosen:
        binaries, origin = Path(chosen), f"LLMTRACE_TEST_POSTGRES_BIN={chosen}"
    else:
        spec = importlib.util.find_spec("pgserver")
        locations = spec.submodule_search_locations if spec is not None else None
        binaries = Path(locations[0]) / "pginstall" / "bin" if locations else Path("/nonexistent")
        origin = "the PyPI wheel pgserver (install the development dependencies: pip install -e '.[dev]')"
    if not all((binaries / name).exists() for name in ("initdb", "postgres")):
        pytest.fail(
            f"the pgvector tests need PostgreSQL's initdb and postgres, from {origin}; "
            f"not found in {binaries}",
            pytrace=False,
        )
    return binaries


def _as_unprivileged(directory: Path) -> dict[str, Any]:
    """subprocess arguments that run PostgreSQL as ``nobody`` under root, as is otherwise."""
    if os.geteuid() != 0:
        return {}
    nobody = pwd.getpwnam("nobody")
    os.chown(directory, nobody.pw_uid, nobody.pw_gid)
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


def _failure(message: str, log: Path) -> None:
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
    pytest.fail(f"PostgreSQL (pgserver) did not start: {message}\n{tail}", pytrace=False)


def _wait_until_ready(process: subprocess.Popen[bytes], conninfo: str, log: Path) -> None:
    import psycopg

    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            with psycopg.connect(conninfo, autocommit=True, connect_timeout=2) as connection:
                connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
            return
        except psycopg.OperationalError as exc:
            if process.poll() is not None:
                _failure(f"postgres exited with status {process.returncode}", log)
            if time.monotonic() > deadline:
                _failure(f"not ready after {START_TIMEOUT:.0f} s ({exc})", log)
            time.sleep(0.05)


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """The connection string of a PostgreSQL with the ``vector`` extension created."""
    binaries = _binaries()
    # Not pytest's tmp_path: its parents are private to the current user, and under root the
    # server runs as another one.
    directory = Path(tempfile.mkdtemp(prefix="llmtrace-postgres-"))
    directory.chmod(0o755)
    data, log = directory / "data", directory / "postgres.log"
    run_as = _as_unprivileged(directory)
    process: subprocess.Popen[bytes] | None = None
    try:
        with log.open("wb") as output:
            initdb = [str(binaries / "initdb"), "-D", str(data), "-U", "postgres"]
            initdb += ["--auth=trust", "--encoding=UTF8", "--no-sync"]
            status = subprocess.run(initdb, stdout=output, stderr=output, check=False, **run_as)
            if status.returncode != 0:
                _failure(f"initdb exited with status {status.returncode}", log)
            port = _free_port()
            # A test database: no durability wanted, so no fsync.
            command = [str(binaries / "postgres"), "-D", str(data), "-p", str(port)]
            command += ["-h", "127.0.0.1", "-k", "", "-c", "fsync=off"]
            command += ["-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
            process = subprocess.Popen(command, stdout=output, stderr=output, **run_as)
        conninfo = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        _wait_until_ready(process, conninfo, log)
        yield conninfo
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def report_stages(tmp_path: Path) -> Callable[[Sequence[ReadableSpan]], dict[str, float]]:
    """The report's per-stage breakdown (stage: seconds, summed over traces) of finished spans,
    read back from an OTLP JSON file the way ``llmtrace report`` reads one."""

    def stages(finished: Sequence[ReadableSpan]) -> dict[str, float]:
        traces_file = tmp_path / "report-traces.jsonl"
        traces_file.write_text(json.dumps(encode_request(finished)) + "\n")
        totals: dict[str, float] = {}
        for trace in load_traces(str(traces_file)).traces:
            for stage, seconds in breakdown(trace).stages.items():
                totals[stage] = totals.get(stage, 0.0) + seconds
        return totals

    return stages


AUTO_INSTRUMENTED_APP = """
import sys
import llmtrace
from llmtrace.instrumentation import registry

llmtrace.init(service_name="stores", exporter="file", file_path=sys.argv[1])
assert {library!r} not in sys.modules, "imported before the application imported it"
assert {name!r} not in registry.instrumented()
{body}
assert {name!r} in registry.instrumented(), registry.instrumented()
llmtrace.shutdown()
print("ok")
"""


@pytest.fixture
def run_auto_instrumented(tmp_path: Path) -> Callable[..., list[Any]]:
    """Run ``body`` in a fresh interpreter after ``llmtrace.init()`` (whose registry instruments
    each installed library when the application imports it) and return the traces it wrote."""

    def run_app(name: str, library: str, body: str, *args: str) -> list[Any]:
        traces_file = tmp_path / "auto-traces.jsonl"
        code = AUTO_INSTRUMENTED_APP.format(name=name, library=library, body=body)
        argv = [sys.executable, "-c", code, str(traces_file), *args]
        result = run(argv, tmp_path, clean_environment())
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.strip().endswith("ok")
        return list(load_traces(str(traces_file)).traces)

    return run_app


def instrumented_by(instrumentor_class: type[Any]) -> Any:
    """A module's autouse fixture: ``instrumentor_class`` instrumented for the module's tests."""

    @pytest.fixture(scope="module", autouse=True)
    def instrumented() -> Iterator[None]:
        instrumentor = instrumentor_class()
        instrumentor.instrument()
        yield
        instrumentor.uninstrument()

    return instrumented


def assert_retrieval_span(span: ReadableSpan, *, system: str, source: str, operation: str) -> None:
    """``span`` is a store query as the span conventions of docs/architecture.md name it:
    ``retrieval {source}``, kind CLIENT, stage and operation ``retrieval``, and the database
    attributes of ``system``."""
    assert span.name == f"retrieval {source}"
    assert span.kind == SpanKind.CLIENT
    assert span.attributes is not None
    assert span.attributes[semconv.STAGE] == "retrieval"
    assert span.attributes[semconv.GEN_AI_OPERATION_NAME] == "retrieval"
    assert span.attributes[semconv.GEN_AI_DATA_SOURCE_ID] == source
    assert span.attributes[semconv.DB_SYSTEM_NAME] == system
    assert span.attributes[semconv.DB_COLLECTION_NAME] == source
    assert span.attributes[semconv.DB_OPERATION_NAME] == operation
