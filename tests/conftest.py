"""Shared test fixtures.

The whole suite shares one SDK TracerProvider with an in-memory exporter: OpenTelemetry lets a
process set the global provider once, so tests clear the exporter instead of replacing it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

# Fixture plugins of the parts of the suite (each loaded only when its module exists).
pytest_plugins = [
    name
    for name, path in (
        ("tests.servers.fixtures", REPO / "tests" / "servers" / "fixtures.py"),
        ("tests.backends.fixtures", REPO / "tests" / "backends" / "fixtures.py"),
    )
    if path.exists()
]

_exporter = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(_exporter))
trace.set_tracer_provider(_provider)
_metric_reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[_metric_reader]))
# Tests must not write to the user's working directory.
os.environ.setdefault("LLMTRACE_FILE_PATH", str(REPO / ".llmtrace" / "test-traces.jsonl"))


# Fixtures that start a server or another program: a test that uses one is an integration test,
# so `pytest -m "not integration"` is the fast unit run. (Tests that start one themselves carry
# the marker in their module.)
_SERVER_FIXTURES = frozenset(
    {
        "model_server",
        "_model_server_process",
        "tracing_stack",
        "monitored_stack",
        "backends",
        "llama_server",
        "answer_service",
        "delayed_traces",
        "chroma_server",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


# Test files that mostly compute (the comparison's statistical simulations, property-based
# reading, pip installs, the demo's real model) are marked ``computes``: while one runs, its
# process's test thread, and every thread and process it starts, runs at this lower priority.
# The suite runs one more process than there are cores (scripts/test.sh), so a computing file
# shares a core with the timing checks of another process; at the same priority a check's
# client woke late now and then and read a response a millisecond after it came (a stage 0.9 ms
# under its injected delay). Lower, it yields its core to them as they wake, and still takes
# every moment they leave idle. Raising a priority back needs CAP_SYS_NICE (root, as on CI and
# these machines); without it the process stays lower for its remaining files, and says so.
COMPUTING_PRIORITY = 10


@pytest.fixture(scope="module", autouse=True)
def _computing_files_yield_to_the_timing_checks(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("computes") is None:
        yield
        return
    # PRIO_PROCESS with 0 is the calling thread on Linux: the worker's other threads (servers
    # started by session fixtures) keep theirs
    before = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, max(before, COMPUTING_PRIORITY))
    try:
        yield
    finally:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, before)
        except PermissionError:
            warnings.warn(
                f"the test process stays at nice {COMPUTING_PRIORITY}: raising its priority "
                "back needs CAP_SYS_NICE",
                stacklevel=1,
            )


@pytest.fixture(autouse=True)
def _fresh_environment_settings() -> Iterator[None]:
    """Settings read from the environment are cached; a test that changes it calls
    ``options.reload()``, and no test sees another test's environment."""
    from llmtrace import options

    options.reload()
    yield
    options.reload()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The finished spans of this test (the session's in-memory exporter, cleared per test)."""
    _exporter.clear()
    yield _exporter
    _exporter.clear()


@pytest.fixture
def metric_reader() -> InMemoryMetricReader:
    """The session's in-memory metric reader (cumulative: compare before and after)."""
    return _metric_reader


@pytest.fixture
def provider() -> TracerProvider:
    return _provider


@pytest.fixture
def shared_dir() -> Path:
    """``../shared`` next to the repository: recorded fixtures are read from there."""
    return SHARED
