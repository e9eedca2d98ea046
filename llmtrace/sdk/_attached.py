"""llmtrace's span processors on a TracerProvider, removable again.

The SDK's ``TracerProvider`` can add a span processor but has no public way to remove one, and
``llmtrace.init()`` run again, ``shutdown()`` and a benchmark run's trace file must take theirs
off (else a later run's spans would land in an earlier run's exporter). So llmtrace adds one
processor of its own to a provider, once, and attaches and detaches its processors there: public
API only, whatever the SDK keeps inside its provider.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

_lock = threading.Lock()
_by_provider: weakref.WeakKeyDictionary[TracerProvider, _Attached] = weakref.WeakKeyDictionary()


class _Attached(SpanProcessor):
    """The processors attached to one provider, called in the order attached (a tuple replaced
    whole on a change: a span ending meanwhile sees the old or the new one, never half)."""

    def __init__(self) -> None:
        self.processors: tuple[SpanProcessor, ...] = ()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        for processor in self.processors:
            processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for processor in self.processors:
            processor.on_end(span)

    def shutdown(self) -> None:
        for processor in self.processors:
            processor.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        ok = True
        for processor in self.processors:
            ok = processor.force_flush(timeout_millis) and ok
        return ok


def attach(provider: Any, processor: SpanProcessor) -> None:
    """Add ``processor`` to ``provider`` (an SDK ``TracerProvider``), removable by :func:`detach`."""
    with _lock:
        attached = _by_provider.get(provider)
        if attached is None:
            attached = _by_provider[provider] = _Attached()
            provider.add_span_processor(attached)
        attached.processors = (*attached.processors, processor)


def detach(provider: Any, processor: SpanProcessor) -> None:
    """Take ``processor`` off ``provider``: it sees no span started or ended afterwards."""
    with _lock:
        attached = _by_provider.get(provider)
        if attached is not None:
            attached.processors = tuple(p for p in attached.processors if p is not processor)


def attached(provider: Any) -> tuple[SpanProcessor, ...]:
    """The processors llmtrace has attached to ``provider`` and not detached, in order."""
    found = _by_provider.get(provider)
    return found.processors if found is not None else ()
