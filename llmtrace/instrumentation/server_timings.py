"""Server-reported timings (response headers or body) as ``llmtrace.server.*`` attributes.

Pure functions: a model-client instrumentation hands in what it already has (the response's
headers, the decoded JSON body or the last stream chunk) and writes the result on the model span.
Every value comes out in seconds, whatever unit the server used.

Sources understood:

- llama.cpp server: body ``timings.prompt_ms`` / ``timings.predicted_ms`` (also on the last
  streamed chunk).
- Hugging Face TGI: headers ``x-queue-time``, ``x-inference-time``, ``x-total-time`` (ms).
- OpenAI: header ``openai-processing-ms``.
- Ollama: body ``load_duration`` / ``prompt_eval_duration`` / ``eval_duration`` /
  ``total_duration`` (nanoseconds; on the final response, or the last line of a stream).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from llmtrace import semconv

# header (lower case) -> attribute; all of these are integer or decimal milliseconds.
_MILLISECOND_HEADERS: Mapping[str, str] = {
    "x-queue-time": semconv.SERVER_QUEUE_TIME,
    "x-inference-time": semconv.SERVER_INFERENCE_TIME,
    "x-total-time": semconv.SERVER_PROCESSING_TIME,
    "openai-processing-ms": semconv.SERVER_PROCESSING_TIME,
}

_MILLISECOND_HEADER_BYTES: Mapping[bytes, str] = {
    name.encode("ascii"): attribute for name, attribute in _MILLISECOND_HEADERS.items()
}

# llama.cpp body "timings" key -> attribute, milliseconds.
_LLAMA_CPP_TIMINGS: Mapping[str, str] = {
    "prompt_ms": semconv.SERVER_PROMPT_TIME,
    "predicted_ms": semconv.SERVER_GENERATION_TIME,
}


# Ollama body key -> attribute, nanoseconds. The load is the model's loading before the prompt
# could be evaluated: part of the server's time to first token, which the report shows as load.
_OLLAMA_DURATIONS: Mapping[str, str] = {
    "load_duration": semconv.SERVER_LOAD_TIME,
    "prompt_eval_duration": semconv.SERVER_PROMPT_TIME,
    "eval_duration": semconv.SERVER_GENERATION_TIME,
    "total_duration": semconv.SERVER_PROCESSING_TIME,
}


def _milliseconds_to_seconds(value: object) -> float | None:
    """A finite, non-negative millisecond value as seconds; anything else is ignored."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str | bytes):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, int | float):
        return None
    number = float(value)
    if not math.isfinite(number) or number < 0:
        return None
    return number / 1000.0


def server_timings_from_headers(headers: Mapping[str, str]) -> dict[str, float]:
    """Attributes from response headers (TGI, OpenAI); header names are case-insensitive.

    Accepts any mapping, including ``httpx.Headers``.
    """
    return _from_header_items(headers.items(), _MILLISECOND_HEADERS)


# The lengths of the names looked for: a header of another length is passed over without making
# a lower-case copy of its name.
_MILLISECOND_HEADER_LENGTHS = frozenset(map(len, _MILLISECOND_HEADER_BYTES))


def server_timings_from_raw_headers(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, float]:
    """The same from raw ``(name, value)`` byte pairs (``httpx.Headers.raw``): read on every model
    call, and only the headers looked for are ever decoded (most responses have none)."""
    return _from_header_items(headers, _MILLISECOND_HEADER_BYTES, _MILLISECOND_HEADER_LENGTHS)


def _from_header_items(
    items: Iterable[tuple[Any, Any]],
    attributes_by_name: Mapping[Any, str],
    lengths: frozenset[int] | None = None,
) -> dict[str, float]:
    # Names and values both str, or both bytes. ``lengths``: those of the names looked for, when
    # a name of another length is to be passed over without a lower-case copy made of it.
    attributes: dict[str, float] = {}
    for name, value in items:
        if lengths is not None and len(name) not in lengths:
            continue
        attribute = attributes_by_name.get(name.lower())
        if attribute is None:
            continue
        seconds = _milliseconds_to_seconds(value)
        if seconds is not None:
            attributes[attribute] = seconds
    return attributes


def server_timings_from_body(body: Mapping[str, Any]) -> dict[str, float]:
    """Attributes from a decoded JSON response body or stream chunk (llama.cpp ``timings``)."""
    timings = body.get("timings")
    if not isinstance(timings, Mapping):
        return {}
    attributes: dict[str, float] = {}
    for key, attribute in _LLAMA_CPP_TIMINGS.items():
        seconds = _milliseconds_to_seconds(timings.get(key))
        if seconds is not None:
            attributes[attribute] = seconds
    return attributes


def server_timings_from_ollama(body: Mapping[str, Any]) -> dict[str, float]:
    """Attributes from Ollama's final response or last stream line (integer nanoseconds)."""
    attributes: dict[str, float] = {}
    for key, attribute in _OLLAMA_DURATIONS.items():
        nanoseconds = body.get(key)
        if nanoseconds.__class__ is int and nanoseconds >= 0:
            attributes[attribute] = nanoseconds / 1e9
    return attributes


def server_timings(
    headers: Mapping[str, str] | None = None, body: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """Both sources merged; the body wins where both report the same attribute."""
    attributes: dict[str, float] = {}
    if headers is not None:
        attributes.update(server_timings_from_headers(headers))
    if body is not None:
        attributes.update(server_timings_from_body(body))
    return attributes
