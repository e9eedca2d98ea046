"""The GenAI client metrics of the semantic conventions, recorded once per model call.

Bucket boundaries: the conventions' advisory boundaries for duration and token usage, and finer
ones for time to first chunk and time per output chunk, so that P95 of sub-second TTFTs and of
per-token latencies falls between buckets a few milliseconds apart rather than in one wide one.
Nothing is recorded per chunk; a call records at most five histogram points when it ends.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry import metrics

from llmtrace import semconv
from llmtrace.sdk import _compat
from llmtrace.sdk._safety import log_once

logger = logging.getLogger(__name__)

# fmt: off
DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)
TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)
TIME_TO_FIRST_CHUNK_BUCKETS = (
    0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5,
    0.6, 0.8, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 20.0, 40.0,
)
TIME_PER_OUTPUT_CHUNK_BUCKETS = (
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.15,
    0.2, 0.3, 0.5, 0.75, 1.0, 2.5,
)
# fmt: on

# Span attributes that become metric attributes (low cardinality only).
_METRIC_ATTRIBUTES = (
    semconv.GEN_AI_OPERATION_NAME,
    semconv.GEN_AI_PROVIDER_NAME,
    semconv.GEN_AI_REQUEST_MODEL,
    semconv.GEN_AI_RESPONSE_MODEL,
    semconv.SERVER_ADDRESS,
    semconv.SERVER_PORT,
    semconv.ERROR_TYPE,
)


# The meter provider given to instrument() (the OpenTelemetry instrumentor contract); None: the
# global one.
_given_meter_provider: Any = None


def use_meter_provider(provider: Any) -> None:
    """Record the GenAI client metrics through ``provider`` (None: the global meter provider)."""
    global _given_meter_provider, _instruments
    _given_meter_provider = provider
    _instruments = None


class _Instruments:
    def __init__(self) -> None:
        given = _given_meter_provider
        meter = (
            given.get_meter(semconv.SCOPE_NAME)
            if given is not None
            else metrics.get_meter(semconv.SCOPE_NAME)
        )

        def histogram(name: str, unit: str, description: str, buckets: Any) -> Any:
            return meter.create_histogram(
                name,
                unit=unit,
                description=description,
                explicit_bucket_boundaries_advisory=list(buckets),
            )

        self.duration = histogram(
            "gen_ai.client.operation.duration", "s", "GenAI operation duration", DURATION_BUCKETS
        )
        self.token_usage = histogram(
            "gen_ai.client.token.usage",
            "{token}",
            "Number of input and output tokens used",
            TOKEN_BUCKETS,
        )
        self.time_to_first_chunk = histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            "s",
            "Time from the request until the first response chunk",
            TIME_TO_FIRST_CHUNK_BUCKETS,
        )
        self.time_per_output_chunk = histogram(
            "gen_ai.client.operation.time_per_output_chunk",
            "s",
            "Time between consecutive output chunks after the first",
            TIME_PER_OUTPUT_CHUNK_BUCKETS,
        )


_instruments: _Instruments | None = None


def _get() -> _Instruments:
    # Created on first use, after the application (or init()) had a chance to set the provider;
    # the API's proxy meter would forward anyway, this just avoids the indirection.
    global _instruments
    if _instruments is None:
        _instruments = _Instruments()
    return _instruments


# Set once an application (or init()) has set a MeterProvider: the API allows it once, so the
# answer never goes back to False.
_provider_seen = False
# The provider the API answered with while none was set (its placeholder), once found to be one.
_placeholder: object = None
# Whether the API has no global provider yet, read where it keeps it (the ``meter-global`` fast
# path, see llmtrace.sdk._compat.no_global_meter_provider); None: ask its getter.
_no_global_provider = _compat.no_global_meter_provider()


def meter_provider_set() -> bool:
    """False until an application (or init()) sets a MeterProvider: recording would go to the
    API's no-op proxy, so model calls skip the work of building the points at all."""
    global _provider_seen, _placeholder
    if _provider_seen or _given_meter_provider is not None:
        return True
    if _no_global_provider is not None and _no_global_provider():
        return False
    provider = metrics.get_meter_provider()
    if provider is _placeholder:
        return False
    if _compat.meter_provider_is_set(provider):
        _provider_seen = True
        return True
    _placeholder = provider
    return False


def record_model_call(
    attributes: Mapping[str, Any], duration: float, output_chunks: int = 0
) -> None:
    """Record one finished model call from its span's attributes (a sampled call's, or those a
    :class:`~llmtrace.sdk.counted_span.CountedSpan` kept for an unsampled one). Never raises.

    ``output_chunks``: for a stream, the chunks after the one that brought the first token; the
    generation time spans exactly those, so their mean spacing is time per output chunk.
    """
    try:
        if not meter_provider_set():
            return
        instruments = _get()
        get = attributes.get
        # (None is no value: an unsampled call's attributes are a plain dict, which keeps one,
        # where a span would have dropped it.)
        labels = {k: value for k in _METRIC_ATTRIBUTES if (value := get(k)) is not None}
        instruments.duration.record(duration, labels)
        input_tokens = attributes.get(semconv.GEN_AI_USAGE_INPUT_TOKENS)
        if input_tokens is not None:
            instruments.token_usage.record(input_tokens, {**labels, "gen_ai.token.type": "input"})
        output_tokens = attributes.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS)
        if output_tokens is not None:
            instruments.token_usage.record(output_tokens, {**labels, "gen_ai.token.type": "output"})
        first_chunk = attributes.get(semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
        if first_chunk is not None:
            instruments.time_to_first_chunk.record(first_chunk, labels)
        generation = attributes.get(semconv.GENERATION_TIME)
        if generation is not None and output_chunks > 0:
            instruments.time_per_output_chunk.record(generation / output_chunks, labels)
    except Exception:
        log_once(logger, "metric recording failed")
