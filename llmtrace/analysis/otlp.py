"""The one OTLP JSON parser: llmtrace's file exporter, the Collector's file exporter and Jaeger.

All three speak the OTLP/JSON encoding of ``TracesData`` / ``ExportTraceServiceRequest``
(``resourceSpans`` → ``scopeSpans`` → ``spans``), with two variations handled here: trace and
span ids are hex (the OTLP/JSON rule) or base64 (the plain protobuf JSON mapping some Jaeger
versions use), and ``kind`` is an int or its enum name. Integers may arrive as strings.

Speed matters (a day of traces is millions of spans), so spans keep only the attributes the
analysis reads, and large content attributes are reduced to a hash on the way in. A span without
``llmtrace.stage`` (another instrumentation's) is read through the conventions table
(``conventions.py``): its stage, first-token time and usage in the analysis's own terms.
"""

from __future__ import annotations

import base64
import binascii
import sys
from collections.abc import Iterable, Iterator, Mapping
from math import isfinite
from typing import Any

import orjson

from llmtrace import semconv as sc
from llmtrace.analysis import conventions
from llmtrace.analysis.model import Span, Trace, attach

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
        sc.SERVER_LOAD_TIME,
        sc.QUEUE_NAME,
        sc.BENCH_RUN,
        sc.BENCH_CONCURRENCY,
        sc.BENCH_QUESTION_SET_HASH,
        sc.BENCH_WARMUP,
        # when a bench client first saw a streamed answer (the user-perceived TTFT)
        sc.CLIENT_TIME_TO_FIRST_BYTE,
        sc.CLIENT_TIME_TO_FIRST_EVENT,
        # request context (llmtrace.context()): what `report --filter` and `--group-by` read
        sc.SESSION_ID,
        sc.USER_ID,
        sc.GEN_AI_CONVERSATION_ID,
        # a model call the client retried: the report's retry stage and advice
        sc.RETRY_TIME,
        sc.RETRY_ERROR_TYPES,
        # a model call that failed: one a request went past is a framework's retry or fallback
        sc.ERROR_TYPE,
    }
)
# Content attributes: only whether two requests were identical matters (cache advice), so the
# parser stores a hash of the value instead of the text.
HASHED_ATTRIBUTES: frozenset[str] = frozenset(
    {sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_RETRIEVAL_QUERY_TEXT}
)
# Attributes only the conventions table reads (``conventions.py``): kept while a span is read,
# then replaced by what they mean in the analysis's own terms.
TABLE_ATTRIBUTES: frozenset[str] = conventions.CONVENTION_KEYS - KEPT_ATTRIBUTES - HASHED_ATTRIBUTES
_FIRST_TOKEN_EVENTS = frozenset(conventions.FIRST_TOKEN_EVENTS)
_MODEL_CALL = conventions.MODEL_CALL
_MODEL_CALL_STAGES = sc.MODEL_CALL_STAGES
_CONVENTION_KEYS = conventions.CONVENTION_KEYS
# a rule without conditions would give a stage to any span: then the table is always applied
_CATCH_ALL = any(not rule.when for rule in conventions.STAGE_RULES)
_intern = sys.intern
_STAGE = sc.STAGE
_MIN_INT64 = -(2**63)
_MAX_INT64 = 2**63 - 1


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


def integer(value: Any) -> int:
    """An OTLP/JSON 64-bit integer: a JSON number, or a string ``int()`` reads (OTLP/JSON writes
    64-bit integers as strings). Raises ``ValueError`` or ``TypeError`` for anything else."""
    if value.__class__ is str:
        if not value.isascii():  # int() would read other scripts' digits too
            raise ValueError(f"invalid integer {value!r}")
        number = int(value)
    elif value.__class__ is int:
        number = value
    elif value.__class__ is float:
        number = int(value)
    else:
        raise TypeError(f"expected an integer, not {type(value).__name__}")
    if not _MIN_INT64 <= number <= _MAX_INT64:
        raise ValueError(f"integer out of range: {value!r}")
    return number


def double(value: Any) -> float | None:
    """An OTLP/JSON double: a JSON number, or a string ``float()`` reads. "NaN" and "Infinity"
    are no value (None): every number the analysis reads is a duration or a count, which they
    cannot be. Raises ``ValueError`` or ``TypeError`` for anything else."""
    if value.__class__ is float:
        number = value
    elif value.__class__ is int or (value.__class__ is str and value.isascii()):
        number = float(value)
    else:
        raise TypeError(f"expected a number, not {value!r}")
    return number if isfinite(number) else None


def _items(value: Any, what: str) -> list[Any]:
    """A JSON array of OTLP data; missing or null is empty, anything else is not OTLP."""
    if value is None:
        return []
    if value.__class__ is not list:
        raise TypeError(f"{what} is not an array")
    return value


def attribute_value(value: Any) -> Any:
    """Decode an OTLP ``AnyValue`` object to a Python value.

    The first of its fields present decides, in the order tested here; a field that does not hold
    what its name says (a ``stringValue`` that is not a string) makes it unreadable:
    ``TypeError`` or ``ValueError``, as for any span that is not OTLP.
    """
    if value.__class__ is not dict:
        raise TypeError("an attribute value is not a JSON object")
    if "stringValue" in value:
        return _text(value["stringValue"], "stringValue")
    if "doubleValue" in value:
        return double(value["doubleValue"])
    if "intValue" in value:
        return integer(value["intValue"])
    if "boolValue" in value:
        flag = value["boolValue"]
        return flag if isinstance(flag, bool) else str(flag).lower() == "true"
    if "arrayValue" in value:
        return [attribute_value(item) for item in _values(value["arrayValue"])]
    if "kvlistValue" in value:
        return dict(_entry(kv) for kv in _values(value["kvlistValue"]))
    if "bytesValue" in value:
        return _text(value["bytesValue"], "bytesValue")
    return None


def _text(value: Any, what: str) -> str:
    if value.__class__ is not str:
        raise TypeError(f"{what} is not a string")
    return value


def _values(container: Any) -> list[Any]:
    if container.__class__ is not dict:
        raise TypeError("an arrayValue or kvlistValue is not a JSON object")
    return _items(container.get("values"), "values")


def _entry(kv: Any) -> tuple[str, Any]:
    if kv.__class__ is not dict:
        raise TypeError("a kvlistValue entry is not a JSON object")
    value = kv.get("value")
    return _text(kv["key"], "key"), None if value is None else attribute_value(value)


def stage_name(value: Any) -> Any:
    """A ``llmtrace.stage`` value the analysis can look up in its sets and dicts: an array or a
    map names no stage, and reads as an unknown name does, ``other``."""
    return "other" if value.__class__ is list or value.__class__ is dict else value


def _service_name(resource: Any) -> str | None:
    if not resource:
        return None
    for attr in _items(resource.get("attributes"), "attributes"):
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
        # spans per recognised instrumentation family, and spans no stage was found for
        self.families: dict[str, int] = {}
        self.unassigned = 0
        # spans the table made model calls: a framework's may wrap its provider's (yield_to_wire)
        self.inferred_calls: list[Span] = []

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
        for resource_span in _items(resource_spans, "resourceSpans"):
            service = _service_name(resource_span.get("resource"))
            for scope_span in _items(resource_span.get("scopeSpans"), "scopeSpans"):
                family = conventions.scope_family(_scope_name(scope_span))
                spans = _items(scope_span.get("spans"), "spans")
                added += self._add_spans(spans, service, family)
        self.span_count += added
        return added

    def add_documents(self, documents: Iterable[Any]) -> None:
        """Add the spans of every document; stops at the first that is not OTLP trace data."""
        for document in documents:
            self.add_document(document)

    def _add_spans(
        self, raw_spans: Iterable[Any], service: str | None, scope_family: str | None
    ) -> int:
        # The hot loop of ``llmtrace report``: locals instead of globals and attribute lookups,
        # and the common attribute value types decoded inline.
        by_trace = self.by_trace
        kept = KEPT_ATTRIBUTES
        hashed = HASHED_ATTRIBUTES
        table = TABLE_ATTRIBUTES
        no_foreign: dict[str, Any] = {}  # shared, never written to
        families = self.families
        inferred_calls = self.inferred_calls
        intern = _intern
        decode = attribute_value
        to_int = integer
        to_float = double
        min_int = _MIN_INT64
        max_int = _MAX_INT64
        added = 0
        try:
            for raw in raw_spans:
                trace_id = raw["traceId"]
                trace_id = trace_id.lower() if len(trace_id) == 32 else normalize_id(trace_id, 32)
                span_id = raw["spanId"]
                span_id = span_id.lower() if len(span_id) == 16 else normalize_id(span_id, 16)
                parent_id = raw.get("parentSpanId")
                if parent_id is None or parent_id == "":
                    parent_id = None  # a root
                else:
                    parent_id = (
                        parent_id.lower() if len(parent_id) == 16 else normalize_id(parent_id, 16)
                    )
                kind = raw.get("kind", 0)
                if kind.__class__ is not int:
                    kind = _KIND_NAMES.get(kind, 0) if isinstance(kind, str) else 0
                attributes: dict[str, Any] = {}
                foreign = no_foreign  # made only for a span with attributes only the table reads
                raw_attributes = raw.get("attributes")
                if raw_attributes.__class__ is not list:
                    raw_attributes = _items(raw_attributes, "attributes")
                for attr in raw_attributes:
                    key = attr["key"]
                    if key in kept:
                        value = attr["value"]
                        if "stringValue" in value:
                            attributes[intern(key)] = intern(value["stringValue"])
                        elif "doubleValue" in value:
                            number = value["doubleValue"]
                            attributes[intern(key)] = (
                                number if number.__class__ is float else to_float(number)
                            )
                        elif "intValue" in value:
                            number = value["intValue"]
                            if number.__class__ is str and len(number) < 19 and number.isascii():
                                attributes[intern(key)] = int(number)  # 18 characters fit 64 bits
                            else:
                                attributes[intern(key)] = to_int(number)
                        else:
                            value = decode(value)
                            attributes[intern(key)] = stage_name(value) if key == _STAGE else value
                    elif key in hashed:
                        attributes[intern(key)] = hash(str(decode(attr["value"])))
                    elif key in table:
                        if foreign is no_foreign:
                            foreign = {}
                        foreign[key] = decode(attr["value"])
                name = raw.get("name")
                name = "" if name is None else intern(name)
                # times are strings of ASCII digits, as OTLP/JSON writes 64-bit integers, or else
                # integer() says what they are
                start = raw.get("startTimeUnixNano") or 0
                start = int(start) if start.__class__ is str and start.isascii() else to_int(start)
                end = raw.get("endTimeUnixNano") or 0
                end = int(end) if end.__class__ is str and end.isascii() else to_int(end)
                if not (min_int <= start <= max_int and min_int <= end <= max_int):
                    raise ValueError(f"time out of range: {start}, {end}")
                spans = by_trace.get(trace_id)
                if spans is None:
                    spans = by_trace[trace_id] = {}
                elif span_id in spans:
                    continue  # the same span read twice (overlapping files or query pages)
                if scope_family is None:  # else counted once for the scope's spans, below
                    family = conventions.span_family(None, attributes, foreign)
                    if family is not None:
                        families[family] = families.get(family, 0) + 1
                span = Span(span_id, parent_id, name, kind, start, end, attributes, service)
                if _STAGE not in attributes:
                    events = raw.get("events")
                    first_token_at = first_token_event(events) if events else None
                    if table_stage(span, foreign, first_token_at, inferred_calls) is None:
                        self.unassigned += 1
                spans[span_id] = span
                added += 1
        finally:
            # a span that is not OTLP ends the document; those before it were added
            if scope_family is not None and added:
                families[scope_family] = families.get(scope_family, 0) + added
        return added

    def assemble(self) -> tuple[list[Trace], int]:
        """Link spans into trees; return (traces, number of traces excluded for an open root)."""
        traces: list[Trace] = []
        excluded_open = 0
        by_trace = self.by_trace
        self.by_trace = {}
        linked = [(trace_id, link_children(spans)) for trace_id, spans in by_trace.items()]
        yield_to_wire(self.inferred_calls)
        self.inferred_calls = []
        for trace_id, roots in linked:
            for root in roots:
                if root.end <= 0 or root.end < root.start:
                    excluded_open += 1
                    continue
                traces.append(Trace(trace_id, root, orphan=root.parent_id is not None))
        return traces, excluded_open


def table_stage(
    span: Span, foreign: Mapping[str, Any], first_token_at: int | None, inferred: list[Span]
) -> bool | None:
    """Read a span without ``llmtrace.stage`` (another instrumentation's) through the conventions
    table, in place, whatever it was read from (OTLP JSON here, the SDK's spans in
    ``sdk.request_metrics``): ``span.attributes`` holds the attributes the analysis keeps,
    ``foreign`` those only the table reads, ``first_token_at`` the time of its first-token event.
    A model call the table makes is added to ``inferred``: a framework's may wrap its provider's
    (``yield_to_wire``). Returns ``conventions.normalize``'s answer (None: no stage found)."""
    attributes = span.attributes
    if (
        first_token_at is None
        and not foreign
        and not _CATCH_ALL
        and _CONVENTION_KEYS.isdisjoint(attributes)
    ):
        # nothing the table reads: it would find no rule and no alias (the common case of an
        # HTTP span, a workflow, or a span of llmtrace's own without a stage)
        return None
    assigned = conventions.normalize(attributes, foreign, first_token_at, span.start)
    if assigned and attributes[_STAGE] == _MODEL_CALL:
        inferred.append(span)
    return assigned


def yield_to_wire(calls: Iterable[Span]) -> None:
    """Frameworks add structure, providers keep the timing (docs/architecture.md, rule 8): a
    model call the conventions table inferred that has another model call below it (a LangChain
    LLM span over the OpenAI client's) is structure, so the call is counted once, by the span
    closest to the wire, with its first-token time and usage. Spans that declared their stage
    are left alone."""
    for call in calls:
        seen = {id(call)}
        stack = list(call.children)
        while stack:
            span = stack.pop()
            if id(span) in seen:
                continue  # a cycle of parent ids in a hostile file
            seen.add(id(span))
            if span.attributes.get(_STAGE) in _MODEL_CALL_STAGES:
                del call.attributes[_STAGE]
                break
            stack.extend(span.children)


def _scope_name(scope_span: Any) -> str | None:
    scope = scope_span.get("scope")
    name = scope.get("name") if scope.__class__ is dict else None
    return name if name.__class__ is str else None


def first_token_event(events: Any) -> int | None:
    """The time (unix ns) of the first first-token event among a span's events, if any.

    Events are read leniently: one that is not an object, has another name or no time that is
    a 64-bit integer (a JSON integer, or a string of digits) is passed over.
    """
    if events.__class__ is not list:
        return None
    for event in events:
        name = event.get("name") if event.__class__ is dict else None
        if name.__class__ is not str or name not in _FIRST_TOKEN_EVENTS:
            continue
        time = event.get("timeUnixNano")
        if time.__class__ is str and 0 < len(time) <= 19 and time.isascii() and time.isdigit():
            time = int(time)
        if time.__class__ is int and _MIN_INT64 <= time <= _MAX_INT64:
            return int(time)
    return None


def link_children(spans: Mapping[str, Span]) -> list[Span]:
    """Attach each span to its parent; return the roots (true roots and orphan subtrees)."""
    roots: list[Span] = []
    for span in spans.values():
        parent_id = span.parent_id
        parent = spans.get(parent_id) if parent_id is not None else None
        if parent is None or parent is span:
            roots.append(span)
            continue
        span.parent_id = parent.span_id  # share the parent's string: one copy per id
        attach(parent, span)
    return roots


_JSON_SPACE = " \t\r\n"


def documents_from_text(text: str) -> Iterator[Any]:
    """Decode one or more JSON documents written back to back (a whole-file JSON trace file),
    with the rules a trace file's lines are read by (orjson's): no NaN, no text that is not
    UTF-8, at most 1024 levels of nesting. Raises ``orjson.JSONDecodeError`` at the first error.
    """
    start = 0
    length = len(text)
    while True:
        while start < length and text[start] in _JSON_SPACE:
            start += 1
        if start >= length:
            return
        rest = text[start:] if start else text
        try:
            yield orjson.loads(rest)
            return
        except orjson.JSONDecodeError as exc:
            if exc.msg != "unexpected content after document":
                raise
            # another document follows this one: it ends where the next begins
            yield orjson.loads(rest[: exc.pos])
            start += exc.pos


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
