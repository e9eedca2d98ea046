"""One RAG request as each peer instrumentation writes it, as OTLP JSON.

Attribute names, span names, scope names and events are the peers' own, read from their sources
(the versions named in ``llmtrace/analysis/conventions.py``). Every request is the same: the
root, a retrieval (10-110 ms), a streamed chat call (120-620 ms, first token at 300 ms, when the
peer records it), a tool call (630-780 ms); the root ends at 800 ms.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.analysis.otlp_lines import MS, T0, attribute, otlp_span

FIRST_TOKEN_MS = 300
ROOT_MS = 800


@dataclass
class Shape:
    """A peer's spans for one request: (scope, name, start ms, end ms, attributes, events)."""

    family: str
    records_first_token: bool
    spans: list[tuple[str, str, int, int, dict[str, Any], list[tuple[str, int]]]] = field(
        default_factory=list
    )


def _iso(ms: int) -> str:
    """Unix ms as the ISO text Langfuse's serializer writes (JSON-quoted)."""
    from datetime import UTC, datetime, timedelta

    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=(T0 // 1000) + ms * 1000)
    return json.dumps(moment.isoformat())


CHAT, RETRIEVAL, TOOL = (120, 620), (10, 110), (630, 780)


def shapes() -> dict[str, Shape]:
    ttft_s = FIRST_TOKEN_MS / 1000
    return {
        # opentelemetry-instrumentation-openai-v2 2.4b0 through opentelemetry-util-genai 1.1b0;
        # the retrieval and the tool written by the application in the conventions' terms
        "opentelemetry-genai": Shape(
            "OpenTelemetry GenAI",
            True,
            [
                ("rag-app", "answer", 0, ROOT_MS, {"gen_ai.operation.name": "invoke_workflow"}, []),
                (
                    "rag-app",
                    "retrieval docs",
                    *RETRIEVAL,
                    {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "docs"},
                    [],
                ),
                (
                    "opentelemetry.util.genai.handler",
                    "chat m-small",
                    *CHAT,
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "openai",
                        "gen_ai.request.model": "m-small",
                        "gen_ai.request.stream": True,
                        "gen_ai.response.time_to_first_chunk": ttft_s,
                        "gen_ai.usage.input_tokens": 120,
                        "gen_ai.usage.output_tokens": 40,
                    },
                    [],
                ),
                (
                    "rag-app",
                    "execute_tool lookup",
                    *TOOL,
                    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"},
                    [],
                ),
            ],
        ),
        # openinference-instrumentation-openai 0.1.66 (the model call, its first-token event) and
        # -langchain 0.1.80 (chain, retriever, tool)
        "openinference": Shape(
            "OpenInference",
            True,
            [
                (
                    "openinference.instrumentation.langchain",
                    "RunnableSequence",
                    0,
                    ROOT_MS,
                    {"openinference.span.kind": "CHAIN"},
                    [],
                ),
                (
                    "openinference.instrumentation.langchain",
                    "VectorStoreRetriever",
                    *RETRIEVAL,
                    {"openinference.span.kind": "RETRIEVER", "input.value": "question"},
                    [],
                ),
                (
                    "openinference.instrumentation.openai",
                    "ChatCompletion",
                    *CHAT,
                    {
                        "openinference.span.kind": "LLM",
                        "llm.model_name": "m-small",
                        "llm.invocation_parameters": '{"model": "m-small", "stream": true}',
                        "llm.token_count.prompt": 120,
                        "llm.token_count.completion": 40,
                        "llm.token_count.total": 160,
                    },
                    [("First Token Stream Event", CHAT[0] + FIRST_TOKEN_MS)],
                ),
                (
                    "openinference.instrumentation.langchain",
                    "lookup",
                    *TOOL,
                    {"openinference.span.kind": "TOOL", "tool.name": "lookup"},
                    [],
                ),
            ],
        ),
        # traceloop-sdk 0.62.4: its decorators, opentelemetry-instrumentation-openai and
        # -chromadb 0.62.4; no first-token time on the span (only a histogram)
        "openllmetry": Shape(
            "OpenLLMetry",
            False,
            [
                (
                    "traceloop.tracer",
                    "answer.workflow",
                    0,
                    ROOT_MS,
                    {"traceloop.span.kind": "workflow", "traceloop.entity.name": "answer"},
                    [],
                ),
                (
                    "opentelemetry.instrumentation.chromadb",
                    "chroma.query",
                    *RETRIEVAL,
                    {"db.system": "chroma", "db.operation": "query"},
                    [],
                ),
                (
                    "opentelemetry.instrumentation.openai.v1",
                    "openai.chat",
                    *CHAT,
                    {
                        "gen_ai.operation.name": "chat",
                        "llm.request.type": "chat",
                        "gen_ai.system": "openai",
                        "gen_ai.request.model": "m-small",
                        "llm.is_streaming": True,
                        "gen_ai.usage.prompt_tokens": 120,
                        "gen_ai.usage.completion_tokens": 40,
                    },
                    [],
                ),
                (
                    "traceloop.tracer",
                    "lookup.tool",
                    *TOOL,
                    {"traceloop.span.kind": "tool", "traceloop.entity.name": "lookup"},
                    [],
                ),
            ],
        ),
        # openlit 1.45.0: the model call with gen_ai.server.time_to_first_token as a span
        # attribute (timed from the response headers, so not read as a first-token time), chroma
        # with the database conventions; the application's own root and tool
        "openlit": Shape(
            "OpenLIT",
            False,
            [
                ("rag-app", "answer", 0, ROOT_MS, {}, []),
                (
                    "openlit.otel.tracing",
                    "query docs",
                    *RETRIEVAL,
                    {
                        "telemetry.sdk.name": "openlit",
                        "db.system.name": "chroma",
                        "db.operation.name": "QUERY",
                        "db.response.returned_rows": 4,
                        "db.vector.query.top_k": 4,
                    },
                    [],
                ),
                (
                    "openlit.otel.tracing",
                    "chat m-small",
                    *CHAT,
                    {
                        "telemetry.sdk.name": "openlit",
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "openai",
                        "gen_ai.request.model": "m-small",
                        "gen_ai.request.stream": True,
                        "gen_ai.server.time_to_first_token": ttft_s,
                        "gen_ai.usage.input_tokens": 120,
                        "gen_ai.usage.output_tokens": 40,
                    },
                    [],
                ),
                (
                    "rag-app",
                    "execute_tool lookup",
                    *TOOL,
                    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"},
                    [],
                ),
            ],
        ),
        # logfire-sdk 5.4.0 (instrument_openai): no first-token time
        "logfire": Shape(
            "Logfire",
            False,
            [
                ("logfire", "answer", 0, ROOT_MS, {"logfire.span_type": "span"}, []),
                (
                    "logfire",
                    "retrieval docs",
                    *RETRIEVAL,
                    {"logfire.span_type": "span", "gen_ai.operation.name": "retrieval"},
                    [],
                ),
                (
                    "logfire.openai",
                    "Chat Completion with 'm-small'",
                    *CHAT,
                    {
                        "logfire.span_type": "span",
                        "logfire.msg_template": "Chat Completion with {request_data[model]!r}",
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "openai",
                        "gen_ai.request.model": "m-small",
                        "request_data": '{"model": "m-small", "stream": true}',
                    },
                    [],
                ),
                (
                    "logfire",
                    "execute_tool lookup",
                    *TOOL,
                    {"logfire.span_type": "span", "gen_ai.operation.name": "execute_tool"},
                    [],
                ),
            ],
        ),
        # langfuse 5.0.4: @observe(as_type=...) and its openai wrapper (a generation with the
        # completion start time, JSON-quoted, and usage details as JSON)
        "langfuse": Shape(
            "Langfuse",
            True,
            [
                ("langfuse-sdk", "answer", 0, ROOT_MS, {"langfuse.observation.type": "span"}, []),
                (
                    "langfuse-sdk",
                    "retrieve",
                    *RETRIEVAL,
                    {"langfuse.observation.type": "retriever"},
                    [],
                ),
                (
                    "langfuse-sdk",
                    "OpenAI-generation",
                    *CHAT,
                    {
                        "langfuse.observation.type": "generation",
                        "langfuse.observation.model.name": "m-small",
                        "langfuse.observation.completion_start_time": _iso(
                            CHAT[0] + FIRST_TOKEN_MS
                        ),
                        "langfuse.observation.usage_details": (
                            '{"input": 120, "output": 40, "total": 160}'
                        ),
                    },
                    [],
                ),
                ("langfuse-sdk", "lookup", *TOOL, {"langfuse.observation.type": "tool"}, []),
            ],
        ),
    }


def request_document(shape: Shape, index: int, service: str = "rag") -> dict[str, Any]:
    """Request ``index`` (a trace of its own, 1 s after the previous) as one OTLP document, its
    spans grouped by scope as an SDK exports them; the root is the first span."""
    trace_id = f"{index + 1:08x}{0xFEED:024x}"
    base = T0 + index * 1000 * MS
    root_id = f"{index + 1:08x}{0:08x}"
    by_scope: dict[str, list[dict[str, Any]]] = {}
    for number, (scope, name, start, end, attrs, events) in enumerate(shape.spans):
        span_id = root_id if number == 0 else f"{index + 1:08x}{number:08x}"
        span = otlp_span(
            trace_id,
            span_id,
            None if number == 0 else root_id,
            name,
            base + start * MS,
            base + end * MS,
            kind=3 if "chat" in name.lower() or "generation" in name.lower() else 1,
        )
        span["attributes"] = [attribute(key, value) for key, value in attrs.items()]
        if events:
            span["events"] = [
                {"timeUnixNano": str(base + at * MS), "name": event, "attributes": []}
                for event, at in events
            ]
        by_scope.setdefault(scope, []).append(span)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [attribute("service.name", service)]},
                "scopeSpans": [
                    {"scope": {"name": scope, "version": "1.0"}, "spans": spans}
                    for scope, spans in by_scope.items()
                ],
            }
        ]
    }


def _shift_iso(shape: Shape, index: int) -> Shape:
    """Langfuse's completion start time is absolute: request ``index`` starts ``index`` s later."""
    spans = []
    for scope, name, start, end, attrs, events in shape.spans:
        key = "langfuse.observation.completion_start_time"
        if key in attrs:
            attrs = {**attrs, key: _iso(CHAT[0] + FIRST_TOKEN_MS + index * 1000)}
        spans.append((scope, name, start, end, attrs, events))
    return Shape(shape.family, shape.records_first_token, spans)


def request_lines(peer: str, requests: int, first: int = 0, service: str = "rag") -> list[str]:
    """``requests`` requests of ``peer`` as OTLP JSON lines, numbered from ``first``."""
    shape = shapes()[peer]
    return [
        json.dumps(
            request_document(_shift_iso(shape, index), index, service), separators=(",", ":")
        )
        for index in range(first, first + requests)
    ]
