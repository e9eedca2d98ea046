"""ollama-python against the simulated server's Ollama routes (/api/chat, NDJSON streams)."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from benchmarks.providers import ProviderCase
from tests.servers import ollama as wire
from tests.servers.model_server import ModelServer

MESSAGES = [{"role": "user", "content": "Say hello"}]
_NANOS = 1e9


def case(server: ModelServer, tracer: trace.Tracer) -> ProviderCase:
    import ollama

    wire.register(server)
    client = ollama.Client(host=server.url)

    def call() -> Any:
        return client.chat(model="m", messages=MESSAGES)

    def hand_written() -> Any:
        """The attributes llmtrace records for the call, set by hand."""
        with tracer.start_as_current_span(
            "chat m",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "ollama",
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
                    "gen_ai.response.model": response.model,
                    "gen_ai.response.finish_reasons": [response.done_reason],
                    "gen_ai.usage.input_tokens": response.prompt_eval_count,
                    "gen_ai.usage.output_tokens": response.eval_count,
                    "llmtrace.server.load_time": response.load_duration / _NANOS,
                    "llmtrace.server.prompt_time": response.prompt_eval_duration / _NANOS,
                    "llmtrace.server.generation_time": response.eval_duration / _NANOS,
                    "llmtrace.server.processing_time": response.total_duration / _NANOS,
                }
            )
            return response

    def stream() -> int:
        return sum(1 for _ in client.chat(model="m", messages=MESSAGES, stream=True))

    return ProviderCase(
        name="ollama",
        instrument=["ollama", "httpx"],
        call=call,
        hand_written=hand_written,
        stream=stream,
        notes=["sync client over httpx; the server's four durations recorded per call"],
    )
