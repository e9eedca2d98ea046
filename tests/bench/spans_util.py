"""Reading bench request spans back from the in-memory exporter."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan

from llmtrace import semconv


def request_spans(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if (s.attributes or {}).get(semconv.BENCH_RUN) is not None]


def max_overlap(spans: Sequence[ReadableSpan]) -> int:
    """The largest number of spans open at the same instant (ends sort before starts)."""
    events: list[tuple[int, int]] = []
    for span in spans:
        assert span.start_time is not None and span.end_time is not None
        events.append((span.start_time, 1))
        events.append((span.end_time, -1))
    open_now = peak = 0
    for _, delta in sorted(events):
        open_now += delta
        peak = max(peak, open_now)
    return peak
