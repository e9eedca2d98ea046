"""Pytest plugin (loaded by the root conftest): the simulated model server and recorded cassettes.

``model_server`` is one server per session (a thread, a free loopback port) reset before each
test; ``recorded_dir`` is ``<repo>/../shared/fixtures/recorded`` (read there, never copied).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def cassettes(folder: str) -> list[Path]:
    """The recorded cassettes of one provider or framework folder."""
    return sorted((RECORDED / folder).glob("*.yaml"))


def sse_events(body: str) -> list[Any]:
    """The JSON payloads of a recorded server-sent-event stream (``[DONE]`` left out)."""
    events = []
    for line in body.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                events.append(json.loads(data))
    return events
