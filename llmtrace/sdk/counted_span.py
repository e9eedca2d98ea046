"""The span of a model call that the GenAI client metrics count but no trace records.

Metrics count every call, whatever the trace sampler decides: a model call whose trace is not
sampled (the sampler dropped its span, or the gate kept it from being traced under an unsampled
parent or while llmtrace's sampler drops everything) still records ``gen_ai.client.*`` with the
attributes and values a sampled call has. Such a call runs the same code as a sampled one, on a
:class:`CountedSpan` instead of the SDK's span: it keeps what is set on it in a plain dict for
:func:`llmtrace.sdk.streaming.end_model_span` to read and is otherwise inert. No span processor
and no exporter ever sees it (exported spans stay exactly what the sampler chose), and it carries
the unsampled span context it stands for, so what the call propagates (``traceparent`` with the
sampled flag off) is what an unsampled call always propagated.

``is_recording()`` answers True: in OpenTelemetry's sense the span records attributes (it keeps
them, as a record-only span would), so every provider's end path gathers the response's model
and usage into it unchanged, from one code path for sampled and unsampled calls. What only a
trace reads (the HTTP phases of ``hops/``, events, status, the name) is left out:
:func:`traced` tells a span that is recorded for a trace.

Why not the SDK's own record-only span (what ``request_metrics_unsampled`` uses): it goes through
every span processor and costs as much as a sampled span; this one costs a small object and a
dict (measured in benchmarks/README.md, overhead_clients.py).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import NonRecordingSpan, Span, SpanContext


class CountedSpan(NonRecordingSpan):
    """A model call's span that only the metrics read: its attributes in ``attributes``."""

    __slots__ = ("attributes",)

    def __init__(self, context: SpanContext, attributes: dict[str, Any]) -> None:
        super().__init__(context)
        # (Owned: the caller hands over a dict of its own.)
        self.attributes = attributes

    def is_recording(self) -> bool:
        return True

    def set_attributes(self, attributes: Any) -> None:
        self.attributes.update(attributes)

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def __repr__(self) -> str:
        return f"CountedSpan({self.get_span_context()!r})"


def traced(span: Span) -> bool:
    """Whether ``span`` is recorded for a trace: recording, and not only counted."""
    return span.__class__ is not CountedSpan and span.is_recording()
