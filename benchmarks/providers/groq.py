"""groq's client against the simulated server's Groq routes (/openai/v1, x_groq usage in streams)."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from benchmarks.providers import ProviderCase
from tests.servers import groq as wire
from tests.servers.model_server import ModelServer

MESSAGES = [{"role": "user", "content": "Say hello"}]


def case(server: ModelServer, tracer: trace.Tracer) -> ProviderCase:
    import groq

    wire.register(server)
    client = groq.Groq(base_url=server.url, api_key="gsk-bench", max_retries=0)

    def call() -> Any:
        return client.chat.completions.create(model="m", messages=MESSAGES)

    def hand_written() -> Any:
        """The attributes llmtrace records for the call, set by hand."""
        with tracer.start_as_current_span(
            "chat m",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "groq",
                "gen_ai.request.model": "m",
                "gen_ai.request.stream": False,
                "server.address": "127.0.0.1",
                "server.port": server.port,
                "llmtrace.stage": "ttft",
            },
        ) as span:
            completion = call()
            usage = completion.usage
            span.set_attributes(
                {
                    "gen_ai.response.id": completion.id,
                    "gen_ai.response.model": completion.model,
                    "gen_ai.response.finish_reasons": [
                        choice.finish_reason for choice in completion.choices
                    ],
                    "gen_ai.usage.input_tokens": usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": usage.completion_tokens,
                    "llmtrace.server.queue_time": usage.queue_time,
                    "llmtrace.server.prompt_time": usage.prompt_time,
                    "llmtrace.server.generation_time": usage.completion_time,
                }
            )
            return completion

    def stream() -> int:
        return sum(
            1 for _ in client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        )

    return ProviderCase(
        name="groq",
        instrument=["groq", "httpx"],
        call=call,
        hand_written=hand_written,
        stream=stream,
        notes=["sync client over httpx; usage and Groq's server timings read per call"],
    )
