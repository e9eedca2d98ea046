"""Replay a question set against an application at fixed concurrency (``llmtrace bench``)."""
