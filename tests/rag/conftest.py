"""Fixtures of the RAG and server-side tests: instrumented stores, content capture switch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llmtrace import options
from llmtrace.sdk._safety import reset_logged


@pytest.fixture
def capture_content(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Content capture on, through the standard environment variable."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    options.reload()
    yield


@pytest.fixture(autouse=True)
def _content_capture_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    options.reload()
    reset_logged()
