"""Instrumentation tests: every llmtrace client instrumentation is active for the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llmtrace.instrumentation import registry

CLIENT_LIBRARIES = ["openai", "anthropic", "httpx", "httpx2", "requests"]


@pytest.fixture
def instrumented() -> Iterator[list[str]]:
    names = registry.instrument(CLIENT_LIBRARIES)
    yield names
    registry.uninstrument()


def model_spans(exporter: object) -> list[object]:
    """Finished spans that are model calls (they carry gen_ai.operation.name)."""
    finished = exporter.get_finished_spans()  # type: ignore[attr-defined]
    return [s for s in finished if "gen_ai.operation.name" in (s.attributes or {})]
