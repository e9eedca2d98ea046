"""Fixtures of the provider tests, run on the provider's row of ``table.py``: the simulated
server speaking its wire format, its instrumentation and its clients; and, for every test, no
span ended twice.

A ``test_<provider>.py`` names its row ``PROVIDER``; ``test_every_provider.py`` parametrises
``provider`` over the rows instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from llmtrace.instrumentation import registry
from tests.providers.table import Provider
from tests.servers.model_server import ModelServer


@pytest.fixture(autouse=True)
def _spans_end_once(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Every test: no span is ended twice or written after its end (the SDK warns of both)."""
    yield
    assert "ended span" not in caplog.text


@pytest.fixture
def provider(request: pytest.FixtureRequest) -> Provider:
    """The row of the provider the test module is about."""
    return request.module.PROVIDER


@pytest.fixture
def server(model_server: ModelServer, provider: Provider) -> Iterator[ModelServer]:
    """The simulated model server speaking the provider's wire format."""
    provider.serve(model_server)
    yield model_server
    provider.reset(model_server)


@pytest.fixture
def instrumented(provider: Provider) -> Iterator[list[str]]:
    """The provider and the HTTP libraries under it instrumented by llmtrace, for the test."""
    names = registry.instrument(list(provider.libraries))
    assert names == list(provider.libraries)
    yield names
    registry.uninstrument()


@pytest.fixture
def client(provider: Provider, server: ModelServer, instrumented: list[str]) -> Any:
    """The provider's client for the simulated server, made once it is instrumented (cohere binds
    its methods on each client as it is made). Held for the test: a google-genai Client no longer
    referenced closes its HTTP client."""
    return provider.client(server)


@pytest.fixture
def async_client(provider: Provider, server: ModelServer, instrumented: list[str]) -> Any:
    """The provider's async client, made like ``client``."""
    assert provider.async_client is not None, f"{provider.name} has no async client"
    return provider.async_client(server)
