"""``gen_ai.provider.name`` of an OpenAI-compatible endpoint, from its base URL.

Known hosted APIs are named by host (``api.openai.com`` is ``openai``, ``*.openai.azure.com`` is
``azure.ai.openai``, ``api.deepseek.com`` is ``deepseek``, ...).

The rule for self-hosted and unknown servers, in order:

1. ``LLMTRACE_PROVIDER_NAME``, when set, names every endpoint that is not a known hosted API
   (set it to ``vllm``, ``llama_cpp`` or your gateway's name: only you know what serves a port).
2. A guess from the well-known defaults: port 11434 or a path under ``/api`` is ``ollama``;
   port 8080 (llama.cpp's ``llama-server`` default) is ``llama_cpp``; port 8000 with ``/v1``
   (vLLM's and llama-cpp-python's default) is ``vllm``.
3. Otherwise ``openai``: the server speaks the OpenAI API, and the span says so.

The result is cached per (host, port, path): it is looked up on every call.
"""

from __future__ import annotations

import functools

from llmtrace.options import settings

_EXACT_HOSTS: dict[str, str] = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "api.deepseek.com": "deepseek",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.x.ai": "x_ai",
    "api.together.xyz": "together_ai",
    "api.fireworks.ai": "fireworks_ai",
    "openrouter.ai": "openrouter",
    "api.perplexity.ai": "perplexity",
    "generativelanguage.googleapis.com": "gcp.gemini",
    "api.cohere.com": "cohere",
}

_HOST_SUFFIXES: tuple[tuple[str, str], ...] = (
    (".openai.azure.com", "azure.ai.openai"),
    (".services.ai.azure.com", "azure.ai.inference"),
    (".cognitiveservices.azure.com", "azure.ai.openai"),
    (".amazonaws.com", "aws.bedrock"),
    (".aiplatform.googleapis.com", "gcp.vertex_ai"),
)


def configured_provider_name() -> str:
    """``LLMTRACE_PROVIDER_NAME`` ("" when unset), from the settings in force."""
    return settings().provider_name


def provider_name(host: str, port: int | None = None, path: str = "") -> str:
    """The provider name for a request to ``host:port/path`` (see the module docstring)."""
    return _cached(host.lower().rstrip("."), port, path, configured_provider_name())


@functools.lru_cache(maxsize=256)
def _cached(host: str, port: int | None, path: str, configured: str) -> str:
    known = _EXACT_HOSTS.get(host)
    if known is not None:
        return known
    for suffix, name in _HOST_SUFFIXES:
        if host.endswith(suffix):
            return name
    if configured.strip():
        return configured.strip()
    if port == 11434 or path.startswith("/api"):
        return "ollama"
    if port == 8080:
        return "llama_cpp"
    if port == 8000 and path.startswith("/v1"):
        return "vllm"
    return "openai"
