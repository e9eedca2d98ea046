"""What a model's response said, whichever provider sent it: one summary every parser fills.

Each provider reads its own shapes (an OpenAI chunk, an Anthropic event, a Bedrock event, an
Ollama line, a whole response of any of them) and keeps what they say about the call in a
:class:`ResponseSummary`: response id, model, finish reasons, token counts and the output text
captured within its byte budget (opt-in). The summary alone turns that into span attributes, once,
at the end of the call (:meth:`ResponseSummary.write`), so the names, the order and which values
count as plain are decided in one place.

A stream's parser is a summary (it subclasses it and fills its fields chunk by chunk, with no
object in between on the per-chunk path); a whole response's recorder makes one, fills it and
hands it the attributes gathered during the call (:meth:`ResponseSummary.record`).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace.sdk import content
from llmtrace.sdk.streaming import StreamedText

# The classes a value may have to be set without being looked at again (see
# llmtrace.sdk.streaming.set_span_attributes).
_STR = frozenset((str,))
_INT = frozenset((int,))


class ResponseSummary:
    """A response's id, model, finish reasons, token counts and captured output. O(1) state
    unless content is captured.

    ``response_id``, ``response_model``: as the provider reported them, None when it did not.
    ``finish_reasons``: a list or tuple of the choices' reasons in order, None when none was given.
    ``usage``: ``gen_ai.usage.*`` (and ``llmtrace.usage.*``) attribute -> count, only the counts
    the provider reported, in the order its parser wants them set; None when none was.
    ``text``: the output captured within the byte budget while content is captured, else None.
    ``output``: ``gen_ai.output.messages`` when the parser built it itself (tool calls, reasoning
    or a shape of its own); when None, :meth:`write` builds it from ``text``.
    """

    __slots__ = ("finish_reasons", "output", "response_id", "response_model", "text", "usage")

    def __init__(self, text: StreamedText | None = None) -> None:
        self.response_id: Any = None
        self.response_model: Any = None
        self.finish_reasons: Any = None
        self.usage: dict[str, Any] | None = None
        self.text = text
        self.output: str | None = None

    def output_tokens(self) -> int | None:
        """The output tokens the provider reported, or None when it did not."""
        usage = self.usage
        value = usage.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS) if usage else None
        return value if isinstance(value, int) else None

    def first_reason(self) -> Any:
        """The first choice's finish reason (the captured message's), or None."""
        reasons = self.finish_reasons
        return reasons[0] if reasons else None

    def write(self, plain: dict[str, Any], other: dict[str, Any]) -> None:
        """Add the summary's attributes: to ``plain`` those whose values are plain (a str, an
        int, a tuple of str: what the SDK keeps as they are), the others to ``other`` (a server
        may send anything in a response's fields). Absent values are left out."""
        response_id = self.response_id
        if response_id is not None:
            (plain if response_id.__class__ is str else other)[semconv.GEN_AI_RESPONSE_ID] = (
                response_id
            )
        model = self.response_model
        if model is not None:
            (plain if model.__class__ is str else other)[semconv.GEN_AI_RESPONSE_MODEL] = model
        reasons = self.finish_reasons
        if reasons is not None:
            (plain if reasons.__class__ is tuple and set(map(type, reasons)) <= _STR else other)[
                semconv.GEN_AI_RESPONSE_FINISH_REASONS
            ] = reasons
        usage = self.usage
        if usage:
            (plain if set(map(type, usage.values())) <= _INT else other).update(usage)
        output = self.output
        if output is None:
            text = self.text
            if text is not None and (text.parts or text.tool_call_pieces):
                output = text.output_messages(finish_reason=self.first_reason())
        if output is not None:
            other[semconv.GEN_AI_OUTPUT_MESSAGES] = output

    def set_on(self, span: Span, after: dict[str, Any] | None = None) -> None:
        """The end of a stream (a parser's ``finish``, see
        :class:`~llmtrace.sdk.streaming.ChunkParser`): the summary's attributes, then ``after``
        (what else the stream said), set on ``span`` (the recorder's stand-in, which gathers
        them). The parser fills its fields before it calls this."""
        attributes: dict[str, Any] = {}
        self.write(attributes, attributes)
        if after:
            attributes.update(after)
        if attributes:
            span.set_attributes(attributes)

    def record(
        self, span: Span, attributes: dict[str, Any], after: dict[str, Any] | None = None
    ) -> None:
        """The end of a whole (non-streamed) response: the summary's attributes added to
        ``attributes`` (gathered during the call), then ``after`` (what else the provider said,
        such as a server's own timings), all set on ``span`` with the content where the capture
        mode says (see :func:`llmtrace.sdk.content.set_call_attributes`)."""
        self.write(attributes, attributes)
        if after:
            attributes.update(after)
        content.set_call_attributes(span, attributes)
