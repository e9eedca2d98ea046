"""cohere (ClientV2) against the simulated server's Cohere routes (/v2/chat; SSE streams)."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from benchmarks.providers import ProviderCase
from tests.servers import cohere as wire
from tests.servers.model_server import ModelServer

MESSAGES = [{"role": "user", "content": "Say hello"}]


def case(server: ModelServer, tracer: trace.Tracer) -> ProviderCase:
    import cohere

    wire.register(server)
    client = cohere.ClientV2(api_key="k", base_url=server.url)

    def call() -> Any:
        return client.chat(model="m", messages=MESSAGES)

    def hand_written() -> Any:
        """The attributes llmtrace records for the call, set by hand."""
        with tracer.start_as_current_span(
            "chat m",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "cohere",
                "gen_ai.request.model": "m",
                "gen_ai.request.stream": False,
                "server.address": "127.0.0.1",
                "server.port": server.port,
                "llmtrace.stage": "ttft",
            },
        ) as span:
            response = call()
            usage = response.usage
            span.set_attributes(
                {
                    "gen_ai.response.id": response.id,
                    "gen_ai.response.finish_reasons": [response.finish_reason],
                    "gen_ai.usage.input_tokens": int(usage.tokens.input_tokens),
                    "gen_ai.usage.output_tokens": int(usage.tokens.output_tokens),
                    "llmtrace.usage.billed_input_tokens": int(usage.billed_units.input_tokens),
                    "llmtrace.usage.billed_output_tokens": int(usage.billed_units.output_tokens),
                }
            )
            return response

    def stream() -> int:
        return sum(1 for _ in client.chat_stream(model="m", messages=MESSAGES))

    return ProviderCase(
        name="cohere",
        instrument=["cohere", "httpx"],
        call=call,
        hand_written=hand_written,
        stream=stream,
        notes=["ClientV2 over httpx; a stream's span starts at its first step"],
    )
