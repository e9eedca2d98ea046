"""mistralai against the simulated server's Mistral routes (under /mistral; SSE streams)."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from benchmarks.providers import ProviderCase
from tests.servers import mistral as wire
from tests.servers.model_server import ModelServer

MESSAGES = [{"role": "user", "content": "Say hello"}]


def case(server: ModelServer, tracer: trace.Tracer) -> ProviderCase:
    from mistralai.client import Mistral

    wire.register(server)
    client = Mistral(api_key="k", server_url=wire.url(server))

    def call() -> Any:
        return client.chat.complete(model="m", messages=MESSAGES)

    def hand_written() -> Any:
        """The attributes llmtrace records for the call, set by hand."""
        with tracer.start_as_current_span(
            "chat m",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "mistral_ai",
                "gen_ai.request.model": "m",
                "gen_ai.request.stream": False,
                "server.address": "127.0.0.1",
                "server.port": server.port,
                "llmtrace.stage": "ttft",
            },
        ) as span:
            response = call()
            span.set_attributes(
                {
                    "gen_ai.response.id": response.id,
                    "gen_ai.response.model": response.model,
                    "gen_ai.response.finish_reasons": [response.choices[0].finish_reason],
                    "gen_ai.usage.input_tokens": response.usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": response.usage.completion_tokens,
                }
            )
            return response

    def stream() -> int:
        return sum(1 for _ in client.chat.stream(model="m", messages=MESSAGES))

    return ProviderCase(
        name="mistralai",
        instrument=["mistralai", "httpx2"],
        call=call,
        hand_written=hand_written,
        stream=stream,
        notes=["sync client over httpx2; span made at the SDK's public method"],
    )
