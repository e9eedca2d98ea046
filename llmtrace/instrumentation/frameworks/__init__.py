"""Frameworks that compose model calls and retrieval (LangChain, LlamaIndex, LiteLLM): their
steps become stage spans, and their model calls are either traced here or left to the provider
instrumentation underneath."""
