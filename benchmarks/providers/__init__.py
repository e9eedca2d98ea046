"""The other model providers of ``benchmarks/overhead_clients.py``: one table, one harness.

Each row of ``table.PROVIDERS`` names a provider's real client, the wire format it is served on
the simulated model server, one plain call, one streamed call, and the attributes llmtrace
records for the plain call. ``case`` makes of a row the same three things for every provider:
the plain call, the same call inside a hand-written OpenTelemetry span recording those
attributes, and the streamed call reading the whole stream. ``overhead_clients.py`` times each
alike: no instrumentation, the hand-written span, llmtrace; and per streamed chunk, llmtrace
against none.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from benchmarks.providers.table import PROVIDERS, Provider
from tests.servers.model_server import ModelServer


@dataclass
class ProviderCase:
    name: str  # as the README's table names the client: "google-genai", "boto3 bedrock", ...
    instrument: list[str]  # registry names to instrument for the llmtrace variant
    call: Callable[[], Any]  # one non-streamed model call
    hand_written: Callable[[], Any]  # the same call inside a hand-written span
    stream: Callable[[], int] | None = None  # one streamed call, read to the end; chunks read
    notes: list[str] = field(default_factory=list)


CaseFactory = Callable[[ModelServer, trace.Tracer], ProviderCase]


def case(provider: Provider, server: ModelServer, tracer: trace.Tracer) -> ProviderCase:
    """The provider's client pointed at ``server`` (its wire format registered there), and its
    calls; ImportError when the client library is not installed."""
    # The calls hold the client: a google-genai Client no longer referenced closes its HTTP client.
    client = provider.client(provider.url(server))
    provider.register(server)
    call = functools.partial(provider.call, client)
    request_attributes = {
        "gen_ai.operation.name": provider.operation,
        "gen_ai.provider.name": provider.provider_name,
        "gen_ai.request.model": provider.model,
        **provider.request_attributes,
        "gen_ai.request.stream": False,
        "server.address": "127.0.0.1",
        "server.port": server.port,
        "llmtrace.stage": "ttft",
    }

    def hand_written() -> Any:
        """The attributes llmtrace records for the call, set by hand."""
        with tracer.start_as_current_span(
            f"{provider.operation} {provider.model}",
            kind=trace.SpanKind.CLIENT,
            attributes=request_attributes,
        ) as span:
            response = call()
            span.set_attributes(provider.response_attributes(response))
            return response

    stream = None
    if provider.stream is not None:
        stream = functools.partial(_chunks_read, provider.stream, client)
    return ProviderCase(
        name=provider.name,
        instrument=provider.instrument,
        call=call,
        hand_written=hand_written,
        stream=stream,
        notes=provider.notes,
    )


def _chunks_read(streamed_call: Callable[[Any], Iterable[Any]], client: Any) -> int:
    """One streamed call read to the end: how many chunks it gave."""
    return sum(1 for _ in streamed_call(client))


def factories() -> list[tuple[str, CaseFactory]]:
    """Every provider's ``case``, by its key (one whose client is not installed raises
    ImportError, and is left out and said so by the caller)."""
    return [(provider.key, functools.partial(case, provider)) for provider in PROVIDERS]
