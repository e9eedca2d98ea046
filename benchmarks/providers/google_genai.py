"""google-genai (Gemini Developer API) against the simulated server's Gemini routes."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from benchmarks.providers import ProviderCase
from tests.servers import gemini
from tests.servers.model_server import ModelServer


def case(server: ModelServer, tracer: trace.Tracer) -> ProviderCase:
    from google import genai
    from google.genai import types

    gemini.register(server)
    client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=server.url))

    def call() -> Any:
        # Through the client each time: a Client no longer referenced closes its HTTP client.
        return client.models.generate_content(model="m", contents="Say hello")

    def hand_written() -> Any:
        """The attributes llmtrace records for the call, set by hand."""
        with tracer.start_as_current_span(
            "generate_content m",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "generate_content",
                "gen_ai.provider.name": "gcp.gemini",
                "gen_ai.request.model": "m",
                "gen_ai.request.stream": False,
                "server.address": "127.0.0.1",
                "server.port": server.port,
                "llmtrace.stage": "ttft",
            },
        ) as span:
            response = call()
            usage = response.usage_metadata
            span.set_attributes(
                {
                    "gen_ai.response.id": response.response_id,
                    "gen_ai.response.model": response.model_version,
                    "gen_ai.response.finish_reasons": [
                        c.finish_reason.value.lower() for c in response.candidates
                    ],
                    "gen_ai.usage.input_tokens": usage.prompt_token_count,
                    "gen_ai.usage.output_tokens": usage.candidates_token_count,
                }
            )
            return response

    def stream() -> int:
        chunks = client.models.generate_content_stream(model="m", contents="Say hello")
        return sum(1 for _ in chunks)

    return ProviderCase(
        name="google-genai",
        instrument=["google_genai", "httpx", "httpx2"],
        call=call,
        hand_written=hand_written,
        stream=stream,
        notes=["sync client over httpx2 (the SDK's default when installed)"],
    )
