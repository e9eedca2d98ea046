"""Encode SDK spans as one OTLP ``ExportTraceServiceRequest`` in the protobuf JSON mapping.

This is the format the OpenTelemetry Collector's file exporter writes and the one
``llmtrace.analysis`` reads: trace and span ids in lowercase hex (the OTLP/JSON exception to the
proto3 mapping), 64-bit integers and nanosecond timestamps as strings, enums as integers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

# OTLP's Span.SpanKind numbers: the SDK's SpanKind enum starts at INTERNAL=0, OTLP's at UNSPECIFIED=0.
_KIND = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}


def any_value(value: Any) -> dict[str, Any]:
    # bool before int: bool is a subclass of int.
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bytes):
        return {"stringValue": value.decode("utf-8", "replace")}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def key_values(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not attributes:
        return []
    return [{"key": k, "value": any_value(v)} for k, v in attributes.items()]


def encode_span(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    out: dict[str, Any] = {
        "traceId": format(context.trace_id, "032x"),
        "spanId": format(context.span_id, "016x"),
        "name": span.name,
        "kind": _KIND.get(span.kind, 0),
        "startTimeUnixNano": str(span.start_time or 0),
        "endTimeUnixNano": str(span.end_time or 0),
    }
    if span.parent is not None:
        out["parentSpanId"] = format(span.parent.span_id, "016x")
    trace_state = context.trace_state.to_header() if context.trace_state else ""
    if trace_state:
        out["traceState"] = trace_state
    attributes = key_values(span.attributes)
    if attributes:
        out["attributes"] = attributes
    if span.events:
        out["events"] = [
            {
                "timeUnixNano": str(event.timestamp),
                "name": event.name,
                "attributes": key_values(event.attributes),
            }
            for event in span.events
        ]
    if span.links:
        out["links"] = [
            {
                "traceId": format(link.context.trace_id, "032x"),
                "spanId": format(link.context.span_id, "016x"),
                "attributes": key_values(link.attributes),
            }
            for link in span.links
        ]
    status: dict[str, Any] = {}
    code = _STATUS.get(span.status.status_code, 0)
    if code:
        status["code"] = code
    if span.status.description:
        status["message"] = span.status.description
    out["status"] = status
    return out


def encode_request(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Group spans by resource, then by instrumentation scope, as OTLP does."""
    by_resource: dict[int, tuple[Any, dict[tuple[str, str], list[dict[str, Any]]]]] = {}
    for span in spans:
        resource = span.resource
        entry = by_resource.get(id(resource))
        if entry is None:
            entry = by_resource[id(resource)] = (resource, {})
        scope = span.instrumentation_scope
        scope_key = (scope.name, scope.version or "") if scope else ("", "")
        entry[1].setdefault(scope_key, []).append(encode_span(span))
    resource_spans = []
    for resource, scopes in by_resource.values():
        resource_spans.append(
            {
                "resource": {"attributes": key_values(resource.attributes if resource else None)},
                "scopeSpans": [
                    {"scope": {"name": name, "version": version}, "spans": encoded}
                    for (name, version), encoded in scopes.items()
                ],
            }
        )
    return {"resourceSpans": resource_spans}
