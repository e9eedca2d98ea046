"""OTLP JSON lines as the Collector's file exporter and llmtrace's exporter write them."""

from __future__ import annotations

import json
from typing import Any


def attribute(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    if isinstance(value, list):
        return {
            "key": key,
            "value": {"arrayValue": {"values": [attribute("", v)["value"] for v in value]}},
        }
    return {"key": key, "value": {"stringValue": value}}


def otlp_span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    start_ns: int,
    end_ns: int,
    *,
    kind: int | str = 1,
    **attributes: Any,
) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": [attribute(k.replace("__", "."), v) for k, v in attributes.items()],
        "status": {},
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def request_line(spans: list[dict[str, Any]], service: str = "svc") -> str:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": [attribute("service.name", service)]},
                    "scopeSpans": [{"scope": {"name": "llmtrace"}, "spans": spans}],
                }
            ]
        },
        separators=(",", ":"),
    )


T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def simple_trace(
    index: int, *, retrieval_ms: int = 30, total_ms: int = 100, **attributes: Any
) -> list[dict[str, Any]]:
    """A root (other) with one retrieval child: ids derived from ``index``; ``attributes`` go on
    both spans (as request context attributes do)."""
    trace_id = f"{index + 1:032x}"
    root = f"{index + 1:016x}"
    child = f"{index + 1:08x}{0xABCDEF:08x}"
    start = T0 + index * 1000 * MS
    return [
        otlp_span(
            trace_id,
            child,
            root,
            "search",
            start + 10 * MS,
            start + (10 + retrieval_ms) * MS,
            llmtrace__stage="retrieval",
            llmtrace__retrieval__returned=40,
            **attributes,
        ),
        otlp_span(
            trace_id,
            root,
            None,
            "answer",
            start,
            start + total_ms * MS,
            kind=2,
            llmtrace__stage="other",
            **attributes,
        ),
    ]
