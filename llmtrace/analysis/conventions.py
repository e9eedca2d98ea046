"""What other instrumentations record, in the analysis's own terms: one table, read by both readers.

Services instrumented by OpenTelemetry's GenAI instrumentations, OpenInference, OpenLLMetry,
OpenLIT, Logfire or Langfuse carry no ``llmtrace.stage``. This module says, as plain data, how a
span of theirs is read:

* ``STAGE_RULES``, in priority order: the first rule whose every condition holds (the attribute
  is a string among the listed values) gives the span its stage. A rule whose stage is ``None``
  names structure (a workflow, an agent, a chain): the span is recognised and inherits its
  parent's stage, as any span without a stage does. A span no rule matches is *unassigned*.
* ``ALIASES``: attributes under another name (or in another form) than the one the analysis
  reads, in priority order per target. ``VALUE`` copies the value; ``ISO_TIME`` reads an ISO 8601
  timestamp (plain or JSON-quoted, as Langfuse writes it) as seconds after the span's start;
  ``JSON_FIELD`` reads one field of a JSON object written as a string. A target the span already
  carries is never overwritten.
* ``FIRST_TOKEN_EVENTS``: span events whose time is the first token (seconds after the start).
* ``FAMILIES``: which instrumentation a span comes from, by its scope name (prefix), or failing
  that by an attribute key only that family writes; the report counts spans per family.

An explicit ``llmtrace.stage`` always wins: none of this touches llmtrace's own spans. The Python
reader (``otlp.py``) applies the table through ``normalize``; the native reader receives the very
same table (``native_table``) when its store is made and applies it in Rust (``native/src/
conventions.rs``); ``tests/analysis/test_conventions.py`` requires equal results from both.

Read from the peers' sources (the versions last checked): openinference-semantic-conventions
0.1.42 and openinference-instrumentation-openai 0.1.66, traceloop-sdk and
opentelemetry-instrumentation-openai / -chromadb 0.62.4 (opentelemetry-semantic-conventions-ai
0.5.1), openlit 1.45.0, logfire-sdk 5.4.0, langfuse 5.0.4, opentelemetry-instrumentation-openai-v2
2.4b0 with opentelemetry-util-genai 1.1b0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

import orjson

from llmtrace import semconv as sc

VALUE = "value"
ISO_TIME = "iso_time"
JSON_FIELD = "json_field"


@dataclass(frozen=True, slots=True)
class StageRule:
    """``stage`` when every (key, values) holds: the attribute is a string among ``values``."""

    stage: str | None
    when: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True, slots=True)
class Alias:
    """``target`` read from ``source`` the way ``kind`` says (``field``: the JSON field)."""

    target: str
    source: str
    kind: str = VALUE
    field: str = ""


@dataclass(frozen=True, slots=True)
class Family:
    """An instrumentation: scope names starting with one of ``scopes``, or attribute ``keys``."""

    name: str
    scopes: tuple[str, ...]
    keys: tuple[str, ...] = ()


# The stage the table gives a model call it infers: split at its first token into ttft and
# generation, as any span tagged with one of ``sc.MODEL_CALL_STAGES``. The table's stages are
# names of the vocabulary (the native reader keeps a rule's stage as its index there), so it is
# the name earlier releases tagged model calls with; nothing is written with it.
MODEL_CALL = sc.EARLIER_LLM_STAGE

# Vector stores as db.system.name / db.system name them (OpenLIT, OpenLLMetry and the database
# conventions), and the operations that read from them.
VECTOR_STORES = (
    "chroma",
    "chromadb",
    "qdrant",
    "pinecone",
    "weaviate",
    "milvus",
    "pgvector",
    "lancedb",
    "marqo",
    "astra",
    "elasticsearch",
    "opensearch",
    "redis",
    "faiss",
)
VECTOR_READS = (
    "query",
    "_query",
    "search",
    "get",
    "peek",
    "fetch",
    "select",
    "QUERY",
    "SEARCH",
    "GET",
    "PEEK",
    "FETCH",
    "SELECT",
)


def _when(*pairs: tuple[str, tuple[str, ...]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return pairs


STAGE_RULES: tuple[StageRule, ...] = (
    # Logfire's logs are instants, never a stage: the log closing its instrumented stream
    # ("streaming response from ... took ...") repeats the call's GenAI attributes
    StageRule(None, _when(("logfire.span_type", ("log",)))),
    # OpenTelemetry GenAI conventions (and everyone who writes them: OpenLLMetry, OpenLIT,
    # Logfire, the openai-v2 instrumentation)
    StageRule(
        MODEL_CALL,
        _when(("gen_ai.operation.name", ("chat", "text_completion", "generate_content"))),
    ),
    StageRule("embedding", _when(("gen_ai.operation.name", ("embeddings",)))),
    StageRule("retrieval", _when(("gen_ai.operation.name", ("retrieval",)))),
    StageRule("tool", _when(("gen_ai.operation.name", ("execute_tool",)))),
    StageRule(
        None,
        _when(
            (
                "gen_ai.operation.name",
                ("invoke_agent", "invoke_workflow", "create_agent", "execute_task"),
            )
        ),
    ),
    # database conventions: a read from a vector store is retrieval (OpenLIT writes
    # db.operation.name, OpenLLMetry the older db.operation)
    StageRule(
        "retrieval", _when(("db.system.name", VECTOR_STORES), ("db.operation.name", VECTOR_READS))
    ),
    StageRule("retrieval", _when(("db.system", VECTOR_STORES), ("db.operation", VECTOR_READS))),
    StageRule(
        "retrieval", _when(("db.system", VECTOR_STORES), ("db.operation.name", VECTOR_READS))
    ),
    # opentelemetry-instrumentation-qdrant 0.62.4 (OpenLLMetry) writes db.system "Qdrant" and no
    # operation (the method is only in the span name): all its spans, writes too, are retrieval
    StageRule("retrieval", _when(("db.system", ("Qdrant",)))),
    # OpenInference
    StageRule(MODEL_CALL, _when(("openinference.span.kind", ("LLM",)))),
    StageRule("embedding", _when(("openinference.span.kind", ("EMBEDDING",)))),
    StageRule("retrieval", _when(("openinference.span.kind", ("RETRIEVER",)))),
    StageRule("rerank", _when(("openinference.span.kind", ("RERANKER",)))),
    StageRule("tool", _when(("openinference.span.kind", ("TOOL",)))),
    StageRule("postprocess", _when(("openinference.span.kind", ("GUARDRAIL", "EVALUATOR")))),
    StageRule(None, _when(("openinference.span.kind", ("CHAIN", "AGENT", "PROMPT")))),
    # OpenLLMetry (traceloop-sdk): its decorators, and llm.request.type on older model spans
    StageRule("tool", _when(("traceloop.span.kind", ("tool",)))),
    StageRule(None, _when(("traceloop.span.kind", ("workflow", "task", "agent")))),
    StageRule(MODEL_CALL, _when(("llm.request.type", ("chat", "completion")))),
    StageRule("embedding", _when(("llm.request.type", ("embedding",)))),
    StageRule("rerank", _when(("llm.request.type", ("rerank",)))),
    # Langfuse (observation types of its @observe and its openai wrapper)
    StageRule(MODEL_CALL, _when(("langfuse.observation.type", ("generation",)))),
    StageRule("embedding", _when(("langfuse.observation.type", ("embedding",)))),
    StageRule("retrieval", _when(("langfuse.observation.type", ("retriever",)))),
    StageRule("tool", _when(("langfuse.observation.type", ("tool",)))),
    StageRule("postprocess", _when(("langfuse.observation.type", ("guardrail", "evaluator")))),
    StageRule(None, _when(("langfuse.observation.type", ("span", "agent", "chain", "event")))),
    # Logfire: its spans and logs are application structure unless a rule above says more
    StageRule(None, _when(("logfire.span_type", ("span", "pending_span")))),
)

ALIASES: tuple[Alias, ...] = (
    # time to first token, seconds after the span's start. Not gen_ai.server.time_to_first_token:
    # the one instrumentation that writes it as a span attribute (OpenLIT 1.45) times it from
    # when the stream object is handed back (the response headers are in) to the first chunk of
    # any kind, the role-only one included, not from the request: read as a first-token time it
    # would turn the whole wait for the first token into generation. Such a call counts as one
    # whose first-token time was not recorded.
    Alias(
        sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
        "langfuse.observation.completion_start_time",
        ISO_TIME,
    ),
    # token usage
    Alias(sc.GEN_AI_USAGE_INPUT_TOKENS, "gen_ai.usage.prompt_tokens"),
    Alias(sc.GEN_AI_USAGE_INPUT_TOKENS, "llm.token_count.prompt"),
    # Langfuse: its own names from @observe, OpenAI's from its openai wrapper's streams
    Alias(sc.GEN_AI_USAGE_INPUT_TOKENS, "langfuse.observation.usage_details", JSON_FIELD, "input"),
    Alias(
        sc.GEN_AI_USAGE_INPUT_TOKENS,
        "langfuse.observation.usage_details",
        JSON_FIELD,
        "prompt_tokens",
    ),
    Alias(sc.GEN_AI_USAGE_OUTPUT_TOKENS, "gen_ai.usage.completion_tokens"),
    Alias(sc.GEN_AI_USAGE_OUTPUT_TOKENS, "llm.token_count.completion"),
    Alias(
        sc.GEN_AI_USAGE_OUTPUT_TOKENS, "langfuse.observation.usage_details", JSON_FIELD, "output"
    ),
    Alias(
        sc.GEN_AI_USAGE_OUTPUT_TOKENS,
        "langfuse.observation.usage_details",
        JSON_FIELD,
        "completion_tokens",
    ),
    # the model
    Alias(sc.GEN_AI_REQUEST_MODEL, "llm.model_name"),
    Alias(sc.GEN_AI_REQUEST_MODEL, "embedding.model_name"),
    Alias(sc.GEN_AI_REQUEST_MODEL, "langfuse.observation.model.name"),
    # whether the call streamed
    Alias(sc.GEN_AI_REQUEST_STREAM, "llm.is_streaming"),
    Alias(sc.GEN_AI_REQUEST_STREAM, "gen_ai.is_streaming"),
    Alias(sc.GEN_AI_REQUEST_STREAM, "llm.invocation_parameters", JSON_FIELD, "stream"),
    Alias(sc.GEN_AI_REQUEST_STREAM, "request_data", JSON_FIELD, "stream"),
    # retrieval sizes
    Alias(sc.RETRIEVAL_RETURNED, "db.response.returned_rows"),
    Alias(sc.RETRIEVAL_RETURNED, "gen_ai.retrieval.document_count"),
    Alias(sc.GEN_AI_RETRIEVAL_TOP_K, "db.vector.query.top_k"),
    Alias(sc.GEN_AI_TOOL_NAME, "tool.name"),
)

# OpenInference's streaming wrapper adds this event when the first chunk arrives.
FIRST_TOKEN_EVENTS: tuple[str, ...] = ("First Token Stream Event",)
FIRST_TOKEN_TARGET = sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK

FAMILIES: tuple[Family, ...] = (
    Family("llmtrace", (sc.SCOPE_NAME,), (sc.STAGE,)),
    Family("OpenInference", ("openinference.",), ("openinference.span.kind",)),
    Family(
        "OpenLLMetry",
        (
            "traceloop.",
            "opentelemetry.instrumentation.openai.",
            # its other instrumentations name their scope after the library; anthropic and
            # langchain are left out, OpenTelemetry's own GenAI packages use those names too
            "opentelemetry.instrumentation.llamaindex",
            "opentelemetry.instrumentation.chromadb",
            "opentelemetry.instrumentation.qdrant",
            "opentelemetry.instrumentation.pinecone",
            "opentelemetry.instrumentation.weaviate",
            "opentelemetry.instrumentation.milvus",
            "opentelemetry.instrumentation.lancedb",
        ),
        ("traceloop.span.kind", "llm.request.type"),
    ),
    Family("OpenLIT", ("openlit",)),
    Family("Logfire", ("logfire",), ("logfire.span_type",)),
    Family("Langfuse", ("langfuse",), ("langfuse.observation.type",)),
    Family(
        "OpenTelemetry GenAI",
        ("opentelemetry.instrumentation.openai_v2", "opentelemetry.util.genai"),
        ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.system"),
    ),
    Family("OpenTelemetry database", (), ("db.system.name", "db.system")),
)

# Every attribute key the table reads: the readers keep these while they read a span.
CONVENTION_KEYS: frozenset[str] = frozenset(
    {key for rule in STAGE_RULES for key, _ in rule.when}
    | {alias.source for alias in ALIASES}
    | {key for family in FAMILIES for key in family.keys}
)


def native_table() -> tuple[Any, ...]:
    """The table as plain tuples for the native reader: (rules, aliases, first-token events,
    families), each field in the order its dataclass declares it."""
    return (
        [(rule.stage, [(key, list(values)) for key, values in rule.when]) for rule in STAGE_RULES],
        [(a.target, a.source, a.kind, a.field) for a in ALIASES],
        list(FIRST_TOKEN_EVENTS),
        [(f.name, list(f.scopes), list(f.keys)) for f in FAMILIES],
    )


def stage_rule(attributes: Mapping[str, Any], foreign: Mapping[str, Any]) -> StageRule | None:
    """The first rule whose every condition holds for a span's attributes (the kept ones and
    those only the table reads), if any."""
    for rule in STAGE_RULES:
        for key, values in rule.when:
            value = foreign[key] if key in foreign else attributes.get(key)
            if value.__class__ is not str or value not in values:
                break
        else:
            return rule
    return None


def scope_family(scope: str | None) -> str | None:
    """The family whose scope names start like ``scope``, if any."""
    if scope:
        for family in FAMILIES:
            if scope.startswith(family.scopes) and family.scopes:
                return family.name
    return None


def span_family(
    scope: str | None, attributes: Mapping[str, Any], foreign: Mapping[str, Any]
) -> str | None:
    """The family of the span's scope, or else the first family one of whose keys it carries."""
    family = scope_family(scope)
    if family is None:
        for candidate in FAMILIES:
            for key in candidate.keys:
                if key in foreign or key in attributes:
                    return candidate.name
    return family


_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9})\d*)?(Z|[+-]\d{2}:\d{2})?"
)
_DAY_ZERO = date(1970, 1, 1).toordinal()


def iso_nanos(text: str) -> int | None:
    """Unix nanoseconds of an ISO 8601 timestamp (UTC when no offset is given), optionally
    JSON-quoted; None when it is not one. Digits past nanoseconds are ignored."""
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1]
    match = _ISO.fullmatch(text) if text.isascii() else None
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    try:
        days = date(int(year), int(month), int(day)).toordinal() - _DAY_ZERO
    except ValueError:
        return None
    if int(hour) > 23 or int(minute) > 59 or int(second) > 59:
        return None
    seconds = days * 86400 + int(hour) * 3600 + int(minute) * 60 + int(second)
    if offset and offset != "Z":
        sign = -1 if offset[0] == "-" else 1
        seconds -= sign * (int(offset[1:3]) * 3600 + int(offset[4:6]) * 60)
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    return seconds * 1_000_000_000 + nanos


def json_field(text: Any, name: str) -> Any:
    """One field of a JSON object written as a string: a number or a boolean, else None."""
    if text.__class__ is not str:
        return None
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if document.__class__ is not dict:
        return None
    value = document.get(name)
    if value.__class__ is int:
        return value if -(2**63) <= value < 2**63 else None
    if value.__class__ is float or value.__class__ is bool:
        return value
    return None


def _alias_value(alias: Alias, value: Any, start: int) -> Any:
    if alias.kind == VALUE:
        return value
    if alias.kind == ISO_TIME:
        nanos = iso_nanos(value) if value.__class__ is str else None
        return None if nanos is None else (nanos - start) / 1e9
    return json_field(value, alias.field)


def normalize(
    attributes: dict[str, Any], foreign: Mapping[str, Any], first_token_at: int | None, start: int
) -> bool | None:
    """Apply the table to one span that has no ``llmtrace.stage``, in place.

    ``attributes`` holds the attributes the analysis reads, ``foreign`` those only the table
    reads, ``first_token_at`` the time of a first-token event (unix ns) if there was one.
    Afterwards ``attributes`` carries the stage and the aliased values. Returns True when a rule
    gave a stage, False when one named the span structure, None when no rule matched (the span
    is unassigned).
    """
    for alias in ALIASES:
        if alias.target in attributes:
            continue
        value = foreign.get(alias.source)
        if value is None:
            continue
        converted = _alias_value(alias, value, start)
        if converted is not None:
            attributes[alias.target] = converted
    if first_token_at is not None and FIRST_TOKEN_TARGET not in attributes:
        attributes[FIRST_TOKEN_TARGET] = (first_token_at - start) / 1e9
    rule = stage_rule(attributes, foreign)
    if rule is None:
        return None
    if rule.stage is None:
        return False
    attributes[sc.STAGE] = rule.stage
    return True
