"""llama-cpp-python's OpenAI-compatible server, with usage and timings on streamed answers.

Run as ``python -m llmtrace.demo.llama_usage_server`` with ``llama_cpp.server``'s arguments.

Why: llama-cpp-python's server (0.3.x) sends no usage in streamed chat completions and has no
request option to ask for it (``stream_options.include_usage`` is not read), so a streamed call's
token counts were unknown and the demo's report could not say how long its prompts were.
llama.cpp's own ``llama-server`` reports usage and ``timings`` in streams, but it is not part of
the Python wheel the project builds (its tools are off to keep the build short). So the demo's
server adds them itself, counted by the server from the tokens it actually evaluated: the prompt
handed to the model and every token generated up to (not including) the end-of-sequence token,
which are the figures llama-cpp-python reports for a non-streamed answer. They are therefore
reported by the provider and belong under ``gen_ai.usage.*`` (estimates from a client-side
tokenizer would have to go to ``llmtrace.usage.*_estimated``). The last chunk also carries
llama.cpp's ``timings`` (``prompt_n``/``prompt_ms``/``predicted_n``/``predicted_ms``), which
llmtrace's OpenAI instrumentation records as ``llmtrace.server.prompt_time`` and
``llmtrace.server.generation_time``: the server's own split of time to first token.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass
class _Request:
    """One streamed chat completion as the server sees it (the server runs one at a time)."""

    started_at: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    first_token_at: float | None = None

    def usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }

    def timings(self, now: float) -> dict[str, float]:
        first = self.first_token_at if self.first_token_at is not None else now
        return {
            "prompt_n": self.prompt_tokens,
            "prompt_ms": (first - self.started_at) * 1000.0,
            "predicted_n": self.completion_tokens,
            "predicted_ms": (now - first) * 1000.0,
        }


def _counting_generate(
    generate: Callable[..., Generator[int, Any, None]],
) -> Callable[..., Iterator[int]]:
    """``Llama.generate`` that counts the prompt and the tokens it yields for the request."""

    @functools.wraps(generate)
    def counted(self: Any, tokens: Any, *args: Any, **kwargs: Any) -> Iterator[int]:
        import llama_cpp

        request: _Request | None = getattr(self, "_llmtrace_request", None)
        inner = generate(self, tokens, *args, **kwargs)
        if request is None:
            return inner
        request.prompt_tokens = len(tokens)
        vocab = self._model.vocab

        def tokens_with_counts() -> Iterator[int]:
            try:
                for token in inner:
                    if request.first_token_at is None:
                        request.first_token_at = time.monotonic()
                    # The end-of-sequence token ends the answer; it is not part of it.
                    if not llama_cpp.llama_token_is_eog(vocab, token):
                        request.completion_tokens += 1
                    yield token
            finally:
                inner.close()

        return tokens_with_counts()

    return counted


def _streaming_usage(
    create: Callable[..., Any],
) -> Callable[..., Any]:
    """``Llama.create_chat_completion`` whose streamed answer ends with usage and timings."""

    @functools.wraps(create)
    def create_chat_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("stream"):
            return create(self, *args, **kwargs)
        request = _Request(started_at=time.monotonic())
        self._llmtrace_request = request
        chunks = create(self, *args, **kwargs)
        return _chunks_with_usage(self, chunks, request)

    return create_chat_completion


def _chunks_with_usage(llama: Any, chunks: Iterator[Any], request: _Request) -> Iterator[Any]:
    finished = False
    try:
        for chunk in chunks:
            if any(choice.get("finish_reason") for choice in chunk.get("choices") or ()):
                # The finishing chunk comes after the last token, so the counts are complete.
                chunk = {
                    **chunk,
                    "usage": request.usage(),
                    "timings": request.timings(time.monotonic()),
                }
                finished = True
            yield chunk
        if not finished:
            yield {
                "id": "usage",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": "",
                "choices": [],
                "usage": request.usage(),
                "timings": request.timings(time.monotonic()),
            }
    finally:
        if getattr(llama, "_llmtrace_request", None) is request:
            llama._llmtrace_request = None


def install() -> None:
    """Patch llama-cpp-python in this process (the server looks the methods up per request)."""
    from llama_cpp import Llama

    llama: Any = Llama
    llama.generate = _counting_generate(Llama.generate)
    llama.create_chat_completion = _streaming_usage(Llama.create_chat_completion)


def main() -> None:
    from llama_cpp.server import __main__ as server

    install()
    serve: Callable[[], None] = server.main
    serve()


if __name__ == "__main__":
    main()
