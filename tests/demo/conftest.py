"""The demo's real parts, started once per test session: the embedding model and SmolLM2."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llmtrace.demo.embedder import load_embedding_model
from llmtrace.demo.minilm import MiniLMEmbedder
from llmtrace.demo.model_server import LlamaServer


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedder:
    return load_embedding_model()


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = Path(tmp_path_factory.mktemp("llama")) / "server.log"
    with LlamaServer(log_path=log) as server:
        yield server
