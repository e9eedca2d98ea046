"""boto3 ``bedrock-runtime`` (Converse, ConverseStream) against the simulated server's Bedrock
routes."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from benchmarks.providers import ProviderCase
from tests.servers import bedrock
from tests.servers.model_server import ModelServer

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
MESSAGES = [{"role": "user", "content": [{"text": "Say hello"}]}]


def case(server: ModelServer, tracer: trace.Tracer) -> ProviderCase:
    import boto3
    import botocore.config

    bedrock.register(server)
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=server.url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=botocore.config.Config(retries={"max_attempts": 1}),
    )

    def call() -> Any:
        return client.converse(modelId=MODEL, messages=MESSAGES, inferenceConfig={"maxTokens": 50})

    def hand_written() -> Any:
        """The attributes llmtrace records for the call, set by hand."""
        with tracer.start_as_current_span(
            f"chat {MODEL}",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "aws.bedrock",
                "gen_ai.request.model": MODEL,
                "gen_ai.request.max_tokens": 50,
                "gen_ai.request.stream": False,
                "server.address": "127.0.0.1",
                "server.port": server.port,
                "llmtrace.stage": "ttft",
            },
        ) as span:
            response = call()
            usage = response["usage"]
            span.set_attributes(
                {
                    "aws.request_id": response["ResponseMetadata"]["RequestId"],
                    "gen_ai.response.finish_reasons": [response["stopReason"]],
                    "gen_ai.usage.input_tokens": usage["inputTokens"],
                    "gen_ai.usage.output_tokens": usage["outputTokens"],
                    "llmtrace.server.processing_time": response["metrics"]["latencyMs"] / 1000,
                }
            )
            return response

    def stream() -> int:
        response = client.converse_stream(modelId=MODEL, messages=MESSAGES)
        return sum(1 for _ in response["stream"])

    return ProviderCase(
        name="boto3 bedrock",
        instrument=["bedrock"],
        call=call,
        hand_written=hand_written,
        stream=stream,
        notes=[
            "Converse and ConverseStream; botocore signs each request (SigV4) and parses the "
            "AWS event stream itself, so its own per-call and per-event cost is large"
        ],
    )
