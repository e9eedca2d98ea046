"""``groq`` (0.10 to 1.x): one span per chat completion and embeddings call.

Groq's SDK is generated like OpenAI's and speaks OpenAI's wire format under ``/openai/v1``: the
same ``request`` wrapper and request planner serve it (:mod:`llmtrace.instrumentation.providers.openai`);
only what Groq says differently is here:

- ``gen_ai.provider.name`` is ``groq`` wherever the client is pointed (a proxy or a local test
  server still speaks Groq's API for Groq's client).
- A stream reports usage in its last chunk under ``x_groq.usage``, unasked: no
  ``stream_options`` is injected, and the counts are read from there.
- Usage carries the server's own timings (``queue_time``, ``prompt_time``,
  ``completion_time``, in seconds), recorded as ``llmtrace.server.queue_time`` /
  ``prompt_time`` / ``generation_time`` so the report can tell Groq's queue from the network.
  ``total_time`` is left out: it excludes the queue, where ``llmtrace.server.processing_time``
  means all the time the server held the request.
- A reasoning model's streamed ``reasoning`` delta is output: it counts for time to first token.

Audio, files, batches and model listings make no span (they are not model calls the report
splits into stages).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.model_call import Plan, field_of, fields_of, request_patches
from llmtrace.instrumentation.providers.openai import ChatChunkParser
from llmtrace.instrumentation.providers.openai import plan_request as plan_openai_request
from llmtrace.sdk.gate import capture_settings

PROVIDER = "groq"

# Groq's usage timing (seconds) -> attribute. Its total_time is prompt + completion time only.
_SERVER_TIMINGS: dict[str, str] = {
    "queue_time": semconv.SERVER_QUEUE_TIME,
    "prompt_time": semconv.SERVER_PROMPT_TIME,
    "completion_time": semconv.SERVER_GENERATION_TIME,
}


def server_timings(usage: Any) -> dict[str, float]:
    """The server timings a Groq ``usage`` object reports (only those present and valid)."""
    attributes: dict[str, float] = {}
    if usage is None:
        return attributes
    get = fields_of(usage).get
    for name, attribute in _SERVER_TIMINGS.items():
        value = get(name)
        if value.__class__ in (float, int) and value >= 0:
            attributes[attribute] = float(value)
    return attributes


class GroqChunkParser(ChatChunkParser):
    """Chat completion chunks, with usage (and server timings) from ``x_groq`` in the last one."""

    __slots__ = ()

    def has_content(self, chunk: Any) -> bool:
        if super().has_content(chunk):
            return True
        for choice in chunk.choices or ():
            if field_of(field_of(choice, "delta"), "reasoning"):
                return True
        return False

    def observe(self, chunk: Any) -> None:
        super().observe(chunk)
        x_groq = field_of(chunk, "x_groq")
        if x_groq is not None:
            usage = field_of(x_groq, "usage")
            if usage is not None:
                self.reported_usage = usage

    def finish_into(self, plain: dict[str, Any], attributes: dict[str, Any]) -> None:
        super().finish_into(plain, attributes)
        attributes.update(server_timings(self.reported_usage))


def _recording_server_timings(
    record: Callable[[Span, Any, dict[str, Any]], None],
) -> Callable[[Span, Any, dict[str, Any]], None]:
    """``record`` (OpenAI's reading of a whole response), plus Groq's server timings."""

    def record_response(span: Span, response: Any, attributes: dict[str, Any]) -> None:
        if response is not None:
            attributes.update(server_timings(field_of(response, "usage")))
        record(span, response, attributes)

    return record_response


def plan_request(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Plan | None:
    """OpenAI's plan for the same request, with Groq's provider name, response reading and
    stream parser (and nothing injected into the request: Groq reports stream usage unasked)."""
    plan = plan_openai_request(instance, args, kwargs)
    if plan is None:
        return None
    plan.attributes[semconv.GEN_AI_PROVIDER_NAME] = PROVIDER
    plan.args = None
    plan.kwargs = None
    plan.record_response = _recording_server_timings(plan.record_response)
    capture, max_bytes, redact, _ = capture_settings()
    if capture:
        plan.parser_factory = lambda: GroqChunkParser(text_budget=max_bytes, redact=redact)
    else:
        plan.parser_factory = GroqChunkParser
    return plan


class GroqInstrumentor(LibraryInstrumentor):
    """Traces chat completions and embeddings of ``groq.Groq`` / ``AsyncGroq``."""

    package = "groq"
    supported = ">= 0.10, < 2"

    def patches(self) -> Iterable[PatchRow]:
        yield from request_patches("groq", plan_request)
