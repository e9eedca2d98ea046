"""One row per model provider ``benchmarks/overhead_clients.py`` compares besides OpenAI.

A row says how to serve the provider's wire format on the simulated model server, build its real
client, make one plain call and one streamed call, and which attributes llmtrace records for the
plain call (what the hand-written span sets). What each provider knows is here; the harness in
``benchmarks/providers/__init__.py`` runs every row the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.servers import bedrock as bedrock_wire
from tests.servers import cohere as cohere_wire
from tests.servers import gemini as gemini_wire
from tests.servers import groq as groq_wire
from tests.servers import mistral as mistral_wire
from tests.servers import ollama as ollama_wire
from tests.servers.model_server import ModelServer

MESSAGES = [{"role": "user", "content": "Say hello"}]
BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
BEDROCK_MESSAGES = [{"role": "user", "content": [{"text": "Say hello"}]}]
_NANOS = 1e9


def _server_url(server: ModelServer) -> str:
    return server.url


@dataclass(frozen=True)
class Provider:
    key: str  # the name a provider left out (its client not installed) is reported by
    name: str  # as the README's table names the client: "google-genai", "boto3 bedrock", ...
    instrument: list[str]  # registry names to instrument for the llmtrace variant
    register: Callable[[ModelServer], None]  # the wire format's routes on the simulated server
    client: Callable[[str], Any]  # the real client for this URL (imports the library)
    call: Callable[[Any], Any]  # one non-streamed call with that client
    response_attributes: Callable[[Any], dict[str, Any]]  # what llmtrace reads from its answer
    provider_name: str  # gen_ai.provider.name
    stream: Callable[[Any], Iterable[Any]] | None = None  # one streamed call, not yet read
    url: Callable[[ModelServer], str] = _server_url  # where the client is pointed
    operation: str = "chat"
    model: str = "m"
    request_attributes: dict[str, Any] = field(default_factory=dict)  # beside the common ones
    notes: list[str] = field(default_factory=list)


# --- boto3 bedrock-runtime: Converse and ConverseStream -----------------------------------------


def _bedrock_client(url: str) -> Any:
    import boto3
    import botocore.config

    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=botocore.config.Config(retries={"max_attempts": 1}),
    )


def _bedrock_attributes(response: Any) -> dict[str, Any]:
    usage = response["usage"]
    return {
        "aws.request_id": response["ResponseMetadata"]["RequestId"],
        "gen_ai.response.finish_reasons": [response["stopReason"]],
        "gen_ai.usage.input_tokens": usage["inputTokens"],
        "gen_ai.usage.output_tokens": usage["outputTokens"],
        "llmtrace.server.processing_time": response["metrics"]["latencyMs"] / 1000,
    }


# --- cohere ClientV2: /v2/chat, SSE streams -----------------------------------------------------


def _cohere_client(url: str) -> Any:
    import cohere

    return cohere.ClientV2(api_key="k", base_url=url)


def _cohere_attributes(response: Any) -> dict[str, Any]:
    usage = response.usage
    return {
        "gen_ai.response.id": response.id,
        "gen_ai.response.finish_reasons": [response.finish_reason],
        "gen_ai.usage.input_tokens": int(usage.tokens.input_tokens),
        "gen_ai.usage.output_tokens": int(usage.tokens.output_tokens),
        "llmtrace.usage.billed_input_tokens": int(usage.billed_units.input_tokens),
        "llmtrace.usage.billed_output_tokens": int(usage.billed_units.output_tokens),
    }


# --- google-genai: the Gemini Developer API -----------------------------------------------------


def _google_genai_client(url: str) -> Any:
    from google import genai
    from google.genai import types

    return genai.Client(api_key="k", http_options=types.HttpOptions(base_url=url))


def _google_genai_attributes(response: Any) -> dict[str, Any]:
    usage = response.usage_metadata
    return {
        "gen_ai.response.id": response.response_id,
        "gen_ai.response.model": response.model_version,
        "gen_ai.response.finish_reasons": [
            c.finish_reason.value.lower() for c in response.candidates
        ],
        "gen_ai.usage.input_tokens": usage.prompt_token_count,
        "gen_ai.usage.output_tokens": usage.candidates_token_count,
    }


# --- groq: /openai/v1, x_groq usage in streams --------------------------------------------------


def _groq_client(url: str) -> Any:
    import groq

    return groq.Groq(base_url=url, api_key="gsk-bench", max_retries=0)


def _groq_attributes(completion: Any) -> dict[str, Any]:
    usage = completion.usage
    return {
        "gen_ai.response.id": completion.id,
        "gen_ai.response.model": completion.model,
        "gen_ai.response.finish_reasons": [choice.finish_reason for choice in completion.choices],
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "llmtrace.server.queue_time": usage.queue_time,
        "llmtrace.server.prompt_time": usage.prompt_time,
        "llmtrace.server.generation_time": usage.completion_time,
    }


# --- mistralai: under /mistral, SSE streams -----------------------------------------------------


def _mistralai_client(url: str) -> Any:
    from mistralai.client import Mistral

    return Mistral(api_key="k", server_url=url)


def _mistralai_attributes(response: Any) -> dict[str, Any]:
    return {
        "gen_ai.response.id": response.id,
        "gen_ai.response.model": response.model,
        "gen_ai.response.finish_reasons": [response.choices[0].finish_reason],
        "gen_ai.usage.input_tokens": response.usage.prompt_tokens,
        "gen_ai.usage.output_tokens": response.usage.completion_tokens,
    }


# --- ollama-python: /api/chat, NDJSON streams ---------------------------------------------------


def _ollama_client(url: str) -> Any:
    import ollama

    return ollama.Client(host=url)


def _ollama_attributes(response: Any) -> dict[str, Any]:
    return {
        "gen_ai.response.model": response.model,
        "gen_ai.response.finish_reasons": [response.done_reason],
        "gen_ai.usage.input_tokens": response.prompt_eval_count,
        "gen_ai.usage.output_tokens": response.eval_count,
        "llmtrace.server.load_time": response.load_duration / _NANOS,
        "llmtrace.server.prompt_time": response.prompt_eval_duration / _NANOS,
        "llmtrace.server.generation_time": response.eval_duration / _NANOS,
        "llmtrace.server.processing_time": response.total_duration / _NANOS,
    }


PROVIDERS = [
    Provider(
        key="bedrock",
        name="boto3 bedrock",
        instrument=["bedrock"],
        register=bedrock_wire.register,
        client=_bedrock_client,
        call=lambda client: client.converse(
            modelId=BEDROCK_MODEL, messages=BEDROCK_MESSAGES, inferenceConfig={"maxTokens": 50}
        ),
        stream=lambda client: client.converse_stream(
            modelId=BEDROCK_MODEL, messages=BEDROCK_MESSAGES
        )["stream"],
        response_attributes=_bedrock_attributes,
        provider_name="aws.bedrock",
        model=BEDROCK_MODEL,
        request_attributes={"gen_ai.request.max_tokens": 50},
        notes=[
            "Converse and ConverseStream; botocore signs each request (SigV4) and parses the "
            "AWS event stream itself, so its own per-call and per-event cost is large"
        ],
    ),
    Provider(
        key="cohere",
        name="cohere",
        instrument=["cohere", "httpx"],
        register=cohere_wire.register,
        client=_cohere_client,
        call=lambda client: client.chat(model="m", messages=MESSAGES),
        stream=lambda client: client.chat_stream(model="m", messages=MESSAGES),
        response_attributes=_cohere_attributes,
        provider_name="cohere",
        notes=["ClientV2 over httpx; a stream's span starts at its first step"],
    ),
    Provider(
        key="google_genai",
        name="google-genai",
        instrument=["google_genai", "httpx", "httpx2"],
        register=gemini_wire.register,
        client=_google_genai_client,
        call=lambda client: client.models.generate_content(model="m", contents="Say hello"),
        stream=lambda client: client.models.generate_content_stream(
            model="m", contents="Say hello"
        ),
        response_attributes=_google_genai_attributes,
        provider_name="gcp.gemini",
        operation="generate_content",
        notes=["sync client over httpx2 (the SDK's default when installed)"],
    ),
    Provider(
        key="groq",
        name="groq",
        instrument=["groq", "httpx"],
        register=groq_wire.register,
        client=_groq_client,
        call=lambda client: client.chat.completions.create(model="m", messages=MESSAGES),
        stream=lambda client: client.chat.completions.create(
            model="m", messages=MESSAGES, stream=True
        ),
        response_attributes=_groq_attributes,
        provider_name="groq",
        notes=["sync client over httpx; usage and Groq's server timings read per call"],
    ),
    Provider(
        key="mistralai",
        name="mistralai",
        instrument=["mistralai", "httpx2"],
        register=mistral_wire.register,
        url=mistral_wire.url,
        client=_mistralai_client,
        call=lambda client: client.chat.complete(model="m", messages=MESSAGES),
        stream=lambda client: client.chat.stream(model="m", messages=MESSAGES),
        response_attributes=_mistralai_attributes,
        provider_name="mistral_ai",
        notes=["sync client over httpx2; span made at the SDK's public method"],
    ),
    Provider(
        key="ollama",
        name="ollama",
        instrument=["ollama", "httpx"],
        register=ollama_wire.register,
        client=_ollama_client,
        call=lambda client: client.chat(model="m", messages=MESSAGES),
        stream=lambda client: client.chat(model="m", messages=MESSAGES, stream=True),
        response_attributes=_ollama_attributes,
        provider_name="ollama",
        notes=["sync client over httpx; the server's four durations recorded per call"],
    ),
]
