"""Fixtures for the bench tests: question files and a real HTTP service on a free port."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


@pytest.fixture
def question_file(tmp_path: Path) -> Path:
    path = tmp_path / "questions.jsonl"
    path.write_text(
        "\n".join(
            f'{{"id": "q{i}", "question": "What is feature {i}?", "topic": "t{i % 2}"}}'
            for i in range(1, 5)
        )
        + "\n",
        encoding="utf-8",
    )
    return path


@dataclass
class AnswerService:
    """A tiny real HTTP service: POST /answer sleeps ``delay`` and echoes the question."""

    base_url: str
    delay: float = 0.05
    fail_on: set[str] = field(default_factory=set)
    bodies: list[object] = field(default_factory=list)
    traceparents: list[str] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0


def _serve(app: Starlette) -> tuple[uvicorn.Server, threading.Thread, int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the test service did not start")
        time.sleep(0.01)
    return server, thread, port


@pytest.fixture
def answer_service() -> Iterator[AnswerService]:
    state = AnswerService(base_url="")

    async def answer(request: Request) -> JSONResponse:
        body = await request.json()
        state.bodies.append(body)
        state.traceparents.append(request.headers.get("traceparent", ""))
        state.in_flight += 1
        state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            await asyncio.sleep(state.delay)
        finally:
            state.in_flight -= 1
        if body.get("question") in state.fail_on:
            return JSONResponse({"error": "no answer"}, status_code=500)
        return JSONResponse({"answer": f"echo: {body.get('question')}"})

    with serving(Starlette(routes=[Route("/answer", answer, methods=["POST"])])) as base_url:
        state.base_url = base_url
        yield state


@contextmanager
def serving(app: Starlette) -> Iterator[str]:
    """``app`` served by uvicorn in a thread on a free loopback port: its base URL."""
    server, thread, port = _serve(app)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
