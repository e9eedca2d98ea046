"""Small readers over finished in-memory spans."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan


def only(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    """The one finished span called ``name`` (fails listing what there is otherwise)."""
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, f"expected one {name!r} span, got {[s.name for s in spans]}"
    return found[0]


def duration(span: ReadableSpan) -> float:
    assert span.start_time is not None and span.end_time is not None
    return (span.end_time - span.start_time) / 1e9
