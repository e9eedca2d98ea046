"""Pytest plugin (loaded by the root conftest): the simulated model server and recorded cassettes.

``model_server`` is one server per session (a thread, a free loopback port) reset before each
test; ``recorded_dir`` is ``<repo>/../shared/fixtures/recorded`` (read there, never copied).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers.model_server import ModelServer

RECORDED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "recorded"


@pytest.fixture(scope="session")
def _model_server_process() -> Iterator[ModelServer]:
    server = ModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def model_server(_model_server_process: ModelServer) -> Iterator[ModelServer]:
    """The simulated OpenAI/Anthropic server, with default behaviour and no recorded requests."""
    _model_server_process.reset()
    yield _model_server_process
    _model_server_process.reset()


@pytest.fixture(scope="session")
def recorded_dir() -> Path:
    if not RECORDED.is_dir():
        pytest.fail(f"recorded fixtures not found at {RECORDED}")
    return RECORDED
