"""The one OTLP JSON parser: llmtrace's file exporter, the Collector's file exporter and Jaeger.

All three speak the OTLP/JSON encoding of ``TracesData`` / ``ExportTraceServiceRequest``
(``resourceSpans`` → ``scopeSpans`` → ``spans``), with two variations handled here: trace and
span ids are hex (the OTLP/JSON rule) or base64 (the plain protobuf JSON mapping some Jaeger
versions use), and ``kind`` is an int or its enum name. Integers may arrive as strings.

Speed matters (a day of traces is millions of spans), so spans keep only the attributes the
analysis reads, and large content attributes are reduced to a hash on the way in.
"""

from __future__ import annotations

import base64
import binascii
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from llmtrace import semconv as sc
from llmtrace.analysis.model import Span, Trace

_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}

# Attributes the analysis reads; anything else (HTTP details, arbitrary application attributes)
# is dropped on the way in: a day of traces must fit in memory.
KEPT_ATTRIBUTES: frozenset[str] = frozenset(
    {
        sc.GEN_AI_OPERATION_NAME,
        sc.GEN_AI_REQUEST_MODEL,
        sc.GEN_AI_RESPONSE_MODEL,
        sc.GEN_AI_REQUEST_MAX_TOKENS,
        sc.GEN_AI_REQUEST_STREAM,
        sc.GEN_AI_RESPONSE_FINISH_REASONS,
        sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
        sc.GEN_AI_USAGE_INPUT_TOKENS,
        sc.GEN_AI_USAGE_OUTPUT_TOKENS,
        sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        sc.GEN_AI_RETRIEVAL_TOP_K,
        sc.GEN_AI_TOOL_NAME,
        sc.GEN_AI_LATENCY_TIME_IN_QUEUE,
        sc.GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN,
        sc.GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL,
        sc.GEN_AI_LATENCY_TIME_IN_MODEL_DECODE,
        sc.GEN_AI_LATENCY_E2E,
        sc.STAGE,
        sc.TIME_TO_FIRST_TOKEN,
        sc.GENERATION_TIME,
        sc.OUTPUT_TOKENS_PER_SECOND,
        sc.RETRIEVAL_RETURNED,
        sc.RERANK_INPUT_COUNT,
        sc.EMBEDDING_INPUT_COUNT,
        sc.PROMPT_CHARS,
        sc.HTTP_CONNECT,
        sc.HTTP_TLS,
        sc.HTTP_REQUEST_SENT,
        sc.SERVER_QUEUE_TIME,
        sc.SERVER_PROMPT_TIME,
        sc.SERVER_GENERATION_TIME,
        sc.SERVER_PROCESSING_TIME,
        sc.SERVER_TIME_TO_FIRST_TOKEN,
        sc.SERVER_INFERENCE_TIME,
        sc.SERVER_PROXY_QUEUE_TIME,
        sc.QUEUE_NAME,
        sc.BENCH_RUN,
        sc.BENCH_CONCURRENCY,
        sc.BENCH_QUESTION_SET_HASH,
        sc.BENCH_WARMUP,
    }
)
# Content attributes: only whether two requests were identical matters (cache advice), so the
# parser stores a hash of the value instead of the text.
HASHED_ATTRIBUTES: frozenset[str] = frozenset(
    {sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_RETRIEVAL_QUERY_TEXT}
)
_intern = sys.intern


class OTLPFormatError(ValueError):
    """A JSON document that is not OTLP trace data."""


def normalize_id(raw: str, hex_length: int) -> str:
    """Lower-case hex id from either hex (OTLP/JSON) or base64 (protobuf JSON mapping)."""
    if len(raw) == hex_length:
        return raw.lower()
    try:
        return base64.b64decode(raw, validate=True).hex()
    except (binascii.Error, ValueError):
        return raw.lower()


def attribute_value(value: Mapping[str, Any]) -> Any:
    """Decode an OTLP ``AnyValue`` object to a Python value."""
    if "stringValue" in value:
        return value["stringValue"]
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "boolValue" in value:
        flag = value["boolValue"]
        return flag if isinstance(flag, bool) else str(flag).lower() == "true"
    if "arrayValue" in value:
        return [attribute_value(item) for item in value["arrayValue"].get("values", ())]
    if "kvlistValue" in value:
        return {
            kv["key"]: attribute_value(kv.get("value", {}))
            for kv in value["kvlistValue"].get("values", ())
        }
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _service_name(resource: Mapping[str, Any] | None) -> str | None:
    if not resource:
        return None
    for attr in resource.get("attributes", ()):
        if attr.get("key") == "service.name":
            name = attribute_value(attr.get("value", {}))
            return _intern(name) if isinstance(name, str) else None
    return None


class SpanCollector:
    """Accumulates spans from any number of OTLP JSON documents, then assembles trace trees.

    Spans of one trace may arrive in any order and in different documents or files (a batch
    exporter writes children before their parent), so assembly waits until everything is read.
    """

    def __init__(self) -> None:
        self.by_trace: dict[str, dict[str, Span]] = {}
        self.span_count = 0

    def add_document(self, document: Any) -> int:
        """Add every span of one ``TracesData``-shaped document; return how many were added."""
        if not isinstance(document, dict):
            raise OTLPFormatError("expected a JSON object with resourceSpans")
        if "result" in document and isinstance(document["result"], dict):
            document = document["result"]  # Jaeger /api/v3 wraps TracesData in "result"
        resource_spans = document.get("resourceSpans")
        if resource_spans is None:
            resource_spans = document.get("resource_spans")
        if resource_spans is None:
            raise OTLPFormatError("no resourceSpans in this JSON object")
        added = 0
        for resource_span in resource_spans:
            service = _service_name(resource_span.get("resource"))
            for scope_span in resource_span.get("scopeSpans", ()):
                added += self._add_spans(scope_span.get("spans", ()), service)
        self.span_count += added
        return added

    def _add_spans(self, raw_spans: Iterable[Any], service: str | None) -> int:
        # The hot loop of ``llmtrace report``: locals instead of globals and attribute lookups,
        # and the common attribute value types decoded inline.
        by_trace = self.by_trace
        kept = KEPT_ATTRIBUTES
        hashed = HASHED_ATTRIBUTES
        intern = _intern
        decode = attribute_value
        added = 0
        for raw in raw_spans:
            trace_id = raw["traceId"]
            trace_id = trace_id.lower() if len(trace_id) == 32 else normalize_id(trace_id, 32)
            span_id = raw["spanId"]
            span_id = span_id.lower() if len(span_id) == 16 else normalize_id(span_id, 16)
            parent_id = raw.get("parentSpanId") or None
            if parent_id is not None:
                parent_id = (
                    parent_id.lower() if len(parent_id) == 16 else normalize_id(parent_id, 16)
                )
            kind = raw.get("kind", 0)
            if kind.__class__ is not int:
                kind = _KIND_NAMES.get(kind, 0) if isinstance(kind, str) else 0
            attributes: dict[str, Any] = {}
            for attr in raw.get("attributes", ()):
                key = attr["key"]
                if key in kept:
                    value = attr["value"]
                    if "stringValue" in value:
                        attributes[intern(key)] = intern(value["stringValue"])
                    elif "intValue" in value:
                        attributes[intern(key)] = int(value["intValue"])
                    elif "doubleValue" in value:
                        attributes[intern(key)] = float(value["doubleValue"])
                    else:
                        attributes[intern(key)] = decode(value)
                elif key in hashed:
                    attributes[intern(key)] = hash(str(decode(attr["value"])))
            spans = by_trace.get(trace_id)
            if spans is None:
                spans = by_trace[trace_id] = {}
            elif span_id in spans:
                continue  # the same span read twice (overlapping files or query pages)
            spans[span_id] = Span(
                span_id,
                parent_id,
                intern(raw.get("name", "")),
                kind,
                int(raw.get("startTimeUnixNano") or 0),
                int(raw.get("endTimeUnixNano") or 0),
                attributes,
                service,
            )
            added += 1
        return added

    def assemble(self) -> tuple[list[Trace], int]:
        """Link spans into trees; return (traces, number of traces excluded for an open root)."""
        traces: list[Trace] = []
        excluded_open = 0
        by_trace = self.by_trace
        self.by_trace = {}
        for trace_id, spans in by_trace.items():
            roots = link_children(spans)
            for root in roots:
                if root.end <= 0 or root.end < root.start:
                    excluded_open += 1
                    continue
                traces.append(Trace(trace_id, root, orphan=root.parent_id is not None))
        return traces, excluded_open


def link_children(spans: Mapping[str, Span]) -> list[Span]:
    """Attach each span to its parent; return the roots (true roots and orphan subtrees)."""
    roots: list[Span] = []
    for span in spans.values():
        parent_id = span.parent_id
        parent = spans.get(parent_id) if parent_id is not None else None
        if parent is None or parent is span:
            roots.append(span)
            continue
        if span.end <= 0 or span.end < span.start:
            # A child still open when its trace was exported claims no time of its own.
            span.end = span.start
        span.parent_id = parent.span_id  # share the parent's string: one copy per id
        children = parent.children
        if children:
            children.append(span)  # type: ignore[attr-defined]
        else:
            parent.children = [span]
    return roots


def documents_from_stream(text: str) -> Iterable[Any]:
    """Decode one or more JSON documents written back to back (Jaeger streams chunks this way)."""
    import json

    decoder = json.JSONDecoder()
    index = 0
    length = len(text)
    while True:
        while index < length and text[index] in " \t\r\n":
            index += 1
        if index >= length:
            return
        document, index = decoder.raw_decode(text, index)
        yield document
