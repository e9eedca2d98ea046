"""Amazon Bedrock Runtime's wire formats: request parameters, responses and streams of every
model family, read by shape (see :mod:`llmtrace.instrumentation.providers.bedrock`, which traces the calls).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace._checks import is_int
from llmtrace._urls import server_of
from llmtrace.instrumentation.response_summary import ResponseSummary
from llmtrace.sdk import content
from llmtrace.sdk.content import tool_call_part
from llmtrace.sdk.gate import (
    capture_settings,
)
from llmtrace.sdk.streaming import StreamedText

PROVIDER = "aws.bedrock"
SERVICE = "bedrock-runtime"

# operation name -> (streamed, Converse API)
OPERATIONS: dict[str, tuple[bool, bool]] = {
    "Converse": (False, True),
    "ConverseStream": (True, True),
    "InvokeModel": (False, False),
    "InvokeModelWithResponseStream": (True, False),
}

# Every operation traced here: the model calls, and the guardrail check (not a model call).
APPLY_GUARDRAIL = "ApplyGuardrail"
TRACED = frozenset((*OPERATIONS, APPLY_GUARDRAIL))
GUARDRAIL_ACTION = "amazon-bedrock-guardrailAction"

# Cross-region inference profiles put a geography before the model id.
_PROFILE_PREFIXES = ("us.", "eu.", "apac.", "global.", "us-gov.", "jp.", "au.", "ca.")

# Request parameter -> the names the model families give it, at the top of the body or in its
# ``inferenceConfig`` (Nova, Converse) / ``textGenerationConfig`` (Titan).
_REQUEST_PARAMETERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        semconv.GEN_AI_REQUEST_MAX_TOKENS,
        (
            "max_tokens",
            "max_tokens_to_sample",
            "max_gen_len",
            "maxTokens",
            "maxTokenCount",
            "max_new_tokens",
        ),
    ),
    (semconv.GEN_AI_REQUEST_TEMPERATURE, ("temperature",)),
    (semconv.GEN_AI_REQUEST_TOP_P, ("top_p", "topP", "p")),
)
_STOP_SEQUENCES = ("stop_sequences", "stopSequences", "stop")

# Usage attribute -> the names the families (and Converse) report it under, in a ``usage``
# object, at the top of the body, or in Bedrock's ``amazon-bedrock-invocationMetrics``.
_USAGE_NAMES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        semconv.GEN_AI_USAGE_INPUT_TOKENS,
        ("input_tokens", "inputTokens", "prompt_tokens", "prompt_token_count"),
    ),
    (
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
        ("output_tokens", "outputTokens", "completion_tokens", "generation_token_count"),
    ),
    (
        semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        ("cache_read_input_tokens", "cacheReadInputTokens", "cacheReadInputTokenCount"),
    ),
    (
        semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        ("cache_creation_input_tokens", "cacheWriteInputTokens", "cacheWriteInputTokenCount"),
    ),
)
_METRICS_USAGE: tuple[tuple[str, str], ...] = (
    (semconv.GEN_AI_USAGE_INPUT_TOKENS, "inputTokenCount"),
    (semconv.GEN_AI_USAGE_OUTPUT_TOKENS, "outputTokenCount"),
    (semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, "cacheReadInputTokenCount"),
    (semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, "cacheWriteInputTokenCount"),
)
_HEADER_USAGE: tuple[tuple[str, str], ...] = (
    (semconv.GEN_AI_USAGE_INPUT_TOKENS, "x-amzn-bedrock-input-token-count"),
    (semconv.GEN_AI_USAGE_OUTPUT_TOKENS, "x-amzn-bedrock-output-token-count"),
    (semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, "x-amzn-bedrock-cache-read-input-token-count"),
    (
        semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        "x-amzn-bedrock-cache-write-input-token-count",
    ),
)
_INVOCATION_METRICS = "amazon-bedrock-invocationMetrics"


def _count(value: Any) -> int | None:
    """A token count: an int, or an integral float (Titan sends ``28.0``); else None."""
    if is_int(value):
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _milliseconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number / 1000.0 if number >= 0 else None


def model_name(model_id: str) -> str:
    """The model's own id in a model id, inference-profile id or ARN:
    ``arn:...:inference-profile/us.anthropic.claude-3-7-...`` -> ``anthropic.claude-3-7-...``."""
    name = model_id.rsplit("/", 1)[-1]
    for prefix in _PROFILE_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def is_embedding_model(model_id: str) -> bool:
    name = model_name(model_id)
    return name.startswith(("amazon.titan-embed", "cohere.embed", "amazon.nova-2-multimodal-emb"))


def is_image_model(model_id: str) -> bool:
    """Image generation (Stability, Titan Image, Nova Canvas): ``generate_content``, not text."""
    return model_name(model_id).startswith(
        ("stability.", "amazon.titan-image", "amazon.nova-canvas")
    )


def is_bedrock_runtime(client: Any) -> bool:
    """Asked only for an operation name traced here. (Not cached per class: botocore builds a
    new client class for every client it creates.)"""
    try:
        return bool(client.meta.service_model.service_name == SERVICE)
    except Exception:
        return False


# --- requests ---------------------------------------------------------------------------------


def _request_parameters(body: Mapping[str, Any], attributes: dict[str, Any]) -> None:
    """Sampling parameters, from the body and its ``inferenceConfig``/``textGenerationConfig``."""
    sources: list[Mapping[str, Any]] = [body]
    for name in ("inferenceConfig", "textGenerationConfig"):
        config = body.get(name)
        if isinstance(config, Mapping):
            sources.append(config)
    for attribute, names in _REQUEST_PARAMETERS:
        for source in sources:
            value = next((source[n] for n in names if n in source), None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                attributes[attribute] = value
                break
    for source in sources:
        stop = next((source[n] for n in _STOP_SEQUENCES if n in source), None)
        if isinstance(stop, list) and stop and all(isinstance(item, str) for item in stop):
            attributes[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] = stop
            break


def _invoke_body(params: Mapping[str, Any]) -> Mapping[str, Any]:
    body = params.get("body")
    if isinstance(body, bytes | bytearray | str):
        try:
            decoded = json.loads(body)
        except ValueError:
            return {}
        return decoded if isinstance(decoded, Mapping) else {}
    return {}  # a file object: not read here (the client sends it)


Capture = tuple[int, Callable[[str], str] | None]  # (max bytes, redaction hook)


class Plan:
    """What was decided about one call before it is sent."""

    __slots__ = ("capture", "converse", "operation", "streamed")

    def __init__(self, operation: str, streamed: bool, converse: bool) -> None:
        self.operation = operation
        self.streamed = streamed
        self.converse = converse
        # (max bytes, redaction hook) when content is captured
        self.capture: Capture | None = None


def plan_call(
    client: Any, operation: str, params: Mapping[str, Any]
) -> tuple[str, dict[str, Any], Plan]:
    """(span name, start attributes, plan) of one model operation."""
    streamed, converse = OPERATIONS[operation]
    model_id = params.get("modelId")
    model = model_id if isinstance(model_id, str) else ""
    host, port = server_of(client.meta.endpoint_url)
    attributes: dict[str, Any] = {
        semconv.GEN_AI_PROVIDER_NAME: PROVIDER,
        semconv.SERVER_ADDRESS: host,
        semconv.SERVER_PORT: port,
        semconv.GEN_AI_REQUEST_STREAM: streamed,
    }
    if model:
        attributes[semconv.GEN_AI_REQUEST_MODEL] = model
    plan = Plan(operation, streamed, converse)
    capture, max_bytes, redact, _ = capture_settings()
    if capture:
        plan.capture = (max_bytes, redact)
    if converse:
        operation_name = semconv.OP_CHAT
        config = params.get("inferenceConfig")
        if isinstance(config, Mapping):
            _request_parameters(config, attributes)
        guardrail = params.get("guardrailConfig")
        guardrail_id = (
            guardrail.get("guardrailIdentifier") if isinstance(guardrail, Mapping) else None
        )
        body: Mapping[str, Any] = params
        inputs = params.get("messages")
    else:
        body = _invoke_body(params)
        if is_embedding_model(model):
            operation_name = semconv.OP_EMBEDDINGS
        elif is_image_model(model):
            operation_name = semconv.OP_GENERATE_CONTENT
        elif "messages" in body:
            operation_name = semconv.OP_CHAT
        else:
            operation_name = semconv.OP_TEXT_COMPLETION
        _request_parameters(body, attributes)
        guardrail_id = params.get("guardrailIdentifier")
        inputs = next(
            (body[name] for name in ("messages", "prompt", "inputText", "texts") if name in body),
            None,
        )
    attributes[semconv.GEN_AI_OPERATION_NAME] = operation_name
    attributes[semconv.STAGE] = (
        "embedding" if operation_name == semconv.OP_EMBEDDINGS else semconv.LLM_STAGE
    )
    if isinstance(guardrail_id, str) and guardrail_id:
        attributes[semconv.AWS_BEDROCK_GUARDRAIL_ID] = guardrail_id
    if plan.capture is not None and inputs is not None:
        attributes[semconv.GEN_AI_INPUT_MESSAGES] = content.encode_messages(
            input_messages(inputs), *plan.capture
        )
        system = body.get("system")
        if system is not None:
            attributes[semconv.GEN_AI_SYSTEM_INSTRUCTIONS] = content.encode_parts(
                block_parts(system), *plan.capture
            )
    name = f"{operation_name} {model}" if model else operation_name
    return name, attributes, plan


def block_parts(blocks: Any) -> list[dict[str, Any]]:
    """Parts of a Converse content list (``text``, ``toolUse``, ``toolResult``, ``reasoningContent``
    blocks) or an Anthropic-format one (typed blocks), or a string."""
    if not isinstance(blocks, list | tuple):
        return content.plain_parts(blocks)
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if not isinstance(block, Mapping):
            parts.extend(content.plain_parts([block]))
            continue
        use = block.get("toolUse")
        result = block.get("toolResult")
        if isinstance(use, Mapping):
            parts.append(tool_call_part(use.get("toolUseId"), use.get("name"), use.get("input")))
        elif isinstance(result, Mapping):
            parts.append(
                content.tool_call_response_part(result.get("toolUseId"), result.get("content"))
            )
        elif block.get("type") == "tool_use":
            parts.append(tool_call_part(block.get("id"), block.get("name"), block.get("input")))
        elif block.get("type") == "tool_result":
            parts.append(
                content.tool_call_response_part(block.get("tool_use_id"), block.get("content"))
            )
        else:
            parts.extend(content.plain_parts([block]))
    return parts


def input_messages(inputs: Any) -> list[dict[str, Any]]:
    """A request's messages (or prompt) in the parts shape."""
    if not isinstance(inputs, list | tuple):
        return [content.message("user", content.plain_parts(inputs))]
    messages = []
    for item in inputs:
        if isinstance(item, Mapping) and "role" in item:
            messages.append(content.message(item["role"], block_parts(item.get("content"))))
        else:
            messages.append(content.message("user", content.plain_parts([item])))
    return messages


# --- responses --------------------------------------------------------------------------------


def usage_attributes(source: Any, attributes: dict[str, Any]) -> None:
    """Token counts under any family's names in ``source`` (a usage object or a body); a count
    already known is kept."""
    if not isinstance(source, Mapping):
        return
    for attribute, names in _USAGE_NAMES:
        if attribute in attributes:
            continue
        for name in names:
            value = _count(source.get(name))
            if value is not None:
                attributes[attribute] = value
                break


def _invocation_metrics(metrics: Any, usage: dict[str, Any], attributes: dict[str, Any]) -> None:
    """Bedrock's own counts (into ``usage``, filling what the model left out) and timings (into
    ``attributes``) at the end of a stream."""
    if not isinstance(metrics, Mapping):
        return
    for attribute, name in _METRICS_USAGE:
        value = _count(metrics.get(name))
        if value is not None and attribute not in usage:
            usage[attribute] = value
    latency = _milliseconds(metrics.get("invocationLatency"))
    if latency is not None:
        attributes[semconv.SERVER_PROCESSING_TIME] = latency
    first_byte = _milliseconds(metrics.get("firstByteLatency"))
    if first_byte is not None:
        attributes[semconv.SERVER_TIME_TO_FIRST_TOKEN] = first_byte


def _finish_reasons(body: Mapping[str, Any]) -> list[str]:
    """Every family's finish reason(s) in a whole InvokeModel body."""
    for name in ("stop_reason", "stopReason", "finish_reason", "completionReason"):
        value = body.get(name)
        if isinstance(value, str) and value:
            return [value]
    reasons: list[str] = []
    for list_name, reason_names in (
        ("results", ("completionReason",)),  # Titan
        ("generations", ("finish_reason",)),  # Cohere Command
        ("outputs", ("stop_reason",)),  # Mistral
        ("choices", ("finish_reason", "stop_reason")),  # OpenAI-compatible, Mistral chat
        ("completions", ("finishReason",)),  # AI21 Jurassic
    ):
        items = body.get(list_name)
        if not isinstance(items, list):
            continue
        for item in items:
            if not isinstance(item, Mapping):
                continue
            for reason_name in reason_names:
                reason = item.get(reason_name)
                if isinstance(reason, Mapping):  # AI21: {"reason": "endoftext"}
                    reason = reason.get("reason")
                if isinstance(reason, str) and reason:
                    reasons.append(reason)
                    break
        if reasons:
            break
    return reasons


class Output(StreamedText):
    """Output content for ``gen_ai.output.messages`` (kept only when content is captured): text,
    and tool calls by content block, from a whole body or piece by piece from a stream. Text
    beyond the byte budget is not kept."""

    __slots__ = ("calls",)

    def __init__(self, capture: Capture) -> None:
        super().__init__(*capture)
        self.calls: dict[Any, dict[str, Any]] = {}

    def start_call(self, index: Any, call_id: Any, name: Any, arguments: Any = "") -> None:
        self.calls[index] = {"id": call_id, "name": name, "arguments": arguments}

    def call_input(self, index: Any, fragment: Any) -> None:
        call = self.calls.get(index)
        if call is not None and isinstance(fragment, str) and isinstance(call["arguments"], str):
            call["arguments"] += fragment

    def add_body(self, body: Mapping[str, Any]) -> None:
        """A whole Converse or InvokeModel body's text and tool calls, whatever the family."""
        content = body.get("content")  # Anthropic
        output = body.get("output")  # Converse, Nova
        if isinstance(output, Mapping):
            message = output.get("message")
            if isinstance(message, Mapping):
                content = message.get("content")
        if isinstance(content, list):
            for index, block in enumerate(content):
                if not isinstance(block, Mapping):
                    continue
                self.add(block.get("text"))
                tool = block.get("toolUse")
                if isinstance(tool, Mapping):
                    self.start_call(
                        index, tool.get("toolUseId"), tool.get("name"), tool.get("input")
                    )
                elif block.get("type") == "tool_use":
                    self.start_call(index, block.get("id"), block.get("name"), block.get("input"))
        for name in ("completion", "generation", "text", "outputText"):
            self.add(body.get(name))
        for list_name, text_name in (
            ("results", "outputText"),
            ("generations", "text"),
            ("outputs", "text"),
            ("choices", "text"),
        ):
            items = body.get(list_name)
            if isinstance(items, list):
                for item in items:
                    if isinstance(item, Mapping):
                        self.add(item.get(text_name))

    def attribute(self, finish_reasons: Any = None) -> str | None:
        """``gen_ai.output.messages``, or None when nothing was said; ``finish_reasons``: those
        of the response, the first being the message's."""
        if not self.parts and not self.calls:
            return None
        return self.output_messages(
            finish_reason=finish_reasons[0] if finish_reasons else None,
            tool_calls=[
                tool_call_part(call["id"], call["name"], call["arguments"])
                for call in self.calls.values()
            ],
        )


def summarize_invoke(body: Any, summary: ResponseSummary, attributes: dict[str, Any]) -> None:
    """A whole InvokeModel body's usage, finish reasons, id and model into ``summary``; its
    guardrail action and embedding size into ``attributes``."""
    if not isinstance(body, Mapping):
        return
    usage = summary.usage if summary.usage is not None else {}
    summary.usage = usage
    usage_attributes(body.get("usage"), usage)
    usage_attributes(body, usage)  # Llama's *_token_count at the top
    if semconv.GEN_AI_USAGE_INPUT_TOKENS not in usage:
        value = _count(body.get("inputTextTokenCount"))  # Titan
        if value is not None:
            usage[semconv.GEN_AI_USAGE_INPUT_TOKENS] = value
    results = body.get("results")
    if semconv.GEN_AI_USAGE_OUTPUT_TOKENS not in usage and isinstance(results, list):
        counts = [_count(r.get("tokenCount")) for r in results if isinstance(r, Mapping)]
        if counts and all(c is not None for c in counts):
            usage[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = sum(c for c in counts if c)
    reasons = _finish_reasons(body)
    if reasons:
        summary.finish_reasons = reasons
    response_id = body.get("id", body.get("response_id"))
    if is_int(response_id):
        response_id = str(response_id)  # AI21 Jurassic's numeric id
    if isinstance(response_id, str) and response_id:
        summary.response_id = response_id
    model = body.get("model")
    if isinstance(model, str) and model:
        summary.response_model = model
    action = body.get(GUARDRAIL_ACTION)
    if isinstance(action, str) and action:
        attributes[semconv.GUARDRAIL_ACTION] = action
    embedding = body.get("embedding")
    embeddings = body.get("embeddings")
    if isinstance(embeddings, list) and embeddings and isinstance(embeddings[0], list):
        embedding = embeddings[0]
    if isinstance(embedding, list):
        attributes[semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = len(embedding)


def summarize_converse(
    result: Mapping[str, Any], summary: ResponseSummary, attributes: dict[str, Any]
) -> None:
    """A Converse result's (or a ConverseStream ``metadata`` event's) usage and stop reason into
    ``summary``; the server's latency into ``attributes``."""
    usage = summary.usage if summary.usage is not None else {}
    summary.usage = usage
    usage_attributes(result.get("usage"), usage)
    reason = result.get("stopReason")
    if isinstance(reason, str) and reason:
        summary.finish_reasons = [reason]
    metrics = result.get("metrics")
    if isinstance(metrics, Mapping):
        latency = _milliseconds(metrics.get("latencyMs"))
        if latency is not None:
            attributes[semconv.SERVER_PROCESSING_TIME] = latency


def headers_of(result: Any) -> Mapping[str, Any]:
    metadata = result.get("ResponseMetadata") if isinstance(result, Mapping) else None
    headers = metadata.get("HTTPHeaders") if isinstance(metadata, Mapping) else None
    return headers if isinstance(headers, Mapping) else {}


def metadata_attributes(result: Any, attributes: dict[str, Any]) -> None:
    """The request id (``aws.request_id``) from botocore's ResponseMetadata."""
    metadata = result.get("ResponseMetadata") if isinstance(result, Mapping) else None
    if isinstance(metadata, Mapping):
        request_id = metadata.get("RequestId")
        if isinstance(request_id, str) and request_id:
            attributes[semconv.AWS_REQUEST_ID] = request_id


def header_attributes(
    headers: Mapping[str, Any], summary: ResponseSummary, attributes: dict[str, Any]
) -> None:
    """InvokeModel's ``X-Amzn-Bedrock-*`` headers (botocore lower-cases header names): counts
    the body did not report (into ``summary``), and the invocation latency."""
    usage = summary.usage if summary.usage is not None else {}
    summary.usage = usage
    for attribute, name in _HEADER_USAGE:
        if attribute not in usage:
            value = _count(headers.get(name))
            if value is not None:
                usage[attribute] = value
    if semconv.SERVER_PROCESSING_TIME not in attributes:
        latency = _milliseconds(headers.get("x-amzn-bedrock-invocation-latency"))
        if latency is not None:
            attributes[semconv.SERVER_PROCESSING_TIME] = latency


# --- streams ----------------------------------------------------------------------------------


class ConverseStreamParser(ResponseSummary):
    """ConverseStream events (botocore's parsed dicts): ``contentBlockDelta`` is output;
    ``messageStop`` has the stop reason, ``metadata`` the usage and latency."""

    __slots__ = ("attributes",)

    def __init__(self, capture: Capture | None = None) -> None:
        ResponseSummary.__init__(self, Output(capture) if capture is not None else None)
        # What the stream says beside the summary (the server's latency).
        self.attributes: dict[str, Any] = {}

    def has_content(self, event: Any) -> bool:
        return "contentBlockDelta" in event

    def observe(self, event: Any) -> None:
        output: Any = self.text
        if "contentBlockDelta" in event:
            if output is not None:
                block = event["contentBlockDelta"]
                delta = block.get("delta", {})
                output.add(delta.get("text"))
                tool = delta.get("toolUse")
                if isinstance(tool, Mapping):
                    output.call_input(block.get("contentBlockIndex"), tool.get("input"))
        elif "messageStop" in event:
            reason = event["messageStop"].get("stopReason")
            if isinstance(reason, str) and reason:
                self.finish_reasons = [reason]
        elif "metadata" in event:
            summarize_converse(event["metadata"], self, self.attributes)
        elif "contentBlockStart" in event and output is not None:
            _tool_start(output, event["contentBlockStart"])

    def finish(self, span: Span) -> None:
        _finish_stream(span, self, self.attributes)


def _tool_start(output: Output, block: Any) -> None:
    """A ``contentBlockStart`` (Converse, Nova) that opens a tool call."""
    start = block.get("start") if isinstance(block, Mapping) else None
    tool = start.get("toolUse") if isinstance(start, Mapping) else None
    if isinstance(tool, Mapping):
        output.start_call(block.get("contentBlockIndex"), tool.get("toolUseId"), tool.get("name"))


def _finish_stream(span: Span, summary: ResponseSummary, attributes: dict[str, Any]) -> None:
    output: Any = summary.text
    if output is not None:
        summary.output = output.attribute(summary.finish_reasons)
    summary.set_on(span, attributes)


def _chunk_text(chunk: Mapping[str, Any]) -> tuple[bool, str]:
    """(carries output, its text) for one model family's streamed chunk."""
    kind = chunk.get("type")
    if kind is not None:  # Anthropic
        if kind == "content_block_delta":
            delta = chunk.get("delta")
            text = delta.get("text") if isinstance(delta, Mapping) else None
            return True, text if isinstance(text, str) else ""
        return False, ""
    delta_event = chunk.get("contentBlockDelta")  # Nova
    if isinstance(delta_event, Mapping):
        delta = delta_event.get("delta")
        text = delta.get("text") if isinstance(delta, Mapping) else None
        return True, text if isinstance(text, str) else ""
    for name in ("outputText", "generation", "text", "completion"):  # Titan, Llama, Cohere
        text = chunk.get(name)
        if isinstance(text, str):
            return bool(text), text
    for list_name in ("outputs", "generations", "choices"):  # Mistral, Cohere, OpenAI-like
        items = chunk.get(list_name)
        if isinstance(items, list) and items and isinstance(items[0], Mapping):
            first = items[0]
            text = first.get("text")
            if text is None and isinstance(first.get("delta"), Mapping):
                text = first["delta"].get("content")
            if isinstance(text, str):
                return bool(text), text
    return False, ""


class InvokeStreamParser(ResponseSummary):
    """InvokeModelWithResponseStream ``chunk`` events: each carries the model family's JSON.

    Each chunk's JSON is decoded once (``has_content`` and ``observe`` see the same event).
    """

    __slots__ = ("_last", "_last_event", "attributes", "metrics")

    def __init__(self, capture: Capture | None = None) -> None:
        ResponseSummary.__init__(self, Output(capture) if capture is not None else None)
        self.usage = {}
        # What the stream says beside the summary (guardrail action, Bedrock's timings).
        self.attributes: dict[str, Any] = {}
        self.metrics: dict[str, Any] = {}
        self._last_event: Any = None
        self._last: Mapping[str, Any] = {}

    def _decoded(self, event: Any) -> Mapping[str, Any]:
        if event is self._last_event:
            return self._last
        decoded: Any = None
        chunk = event.get("chunk") if isinstance(event, Mapping) else None
        data = chunk.get("bytes") if isinstance(chunk, Mapping) else None
        if isinstance(data, bytes | bytearray | str):
            try:
                decoded = json.loads(data)
            except ValueError:
                decoded = None
        self._last_event = event
        self._last = decoded if isinstance(decoded, Mapping) else {}
        return self._last

    def has_content(self, event: Any) -> bool:
        return _chunk_text(self._decoded(event))[0]

    def observe(self, event: Any) -> None:
        chunk = self._decoded(event)
        self._last_event = None  # the next event is decoded afresh
        if not chunk:
            return
        output: Any = self.text
        if output is not None:
            self._capture(chunk, output)
        kind = chunk.get("type")
        if kind == "message_start":  # Anthropic
            message = chunk.get("message")
            if isinstance(message, Mapping):
                value = message.get("id")
                if isinstance(value, str) and value:
                    self.response_id = value
                value = message.get("model")
                if isinstance(value, str) and value:
                    self.response_model = value
                self._usage(message.get("usage"))
        elif kind == "message_delta":
            delta = chunk.get("delta")
            reason = delta.get("stop_reason") if isinstance(delta, Mapping) else None
            if isinstance(reason, str) and reason:
                self.finish_reasons = [reason]
            # message_delta's usage is cumulative: it replaces message_start's.
            self._usage(chunk.get("usage"))
        elif kind is None:
            self._other_family(chunk)
        metrics = chunk.get(_INVOCATION_METRICS)
        if isinstance(metrics, Mapping):
            self.metrics = dict(metrics)
        action = chunk.get(GUARDRAIL_ACTION)
        if isinstance(action, str) and action:
            self.attributes[semconv.GUARDRAIL_ACTION] = action

    @staticmethod
    def _capture(chunk: Mapping[str, Any], output: Output) -> None:
        output.add(_chunk_text(chunk)[1])
        kind = chunk.get("type")
        if kind == "content_block_start":  # Anthropic
            block = chunk.get("content_block")
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                output.start_call(chunk.get("index"), block.get("id"), block.get("name"))
        elif kind == "content_block_delta":
            delta = chunk.get("delta")
            if isinstance(delta, Mapping):
                output.call_input(chunk.get("index"), delta.get("partial_json"))
        elif "contentBlockStart" in chunk:  # Nova
            _tool_start(output, chunk["contentBlockStart"])
        elif "contentBlockDelta" in chunk:
            block = chunk["contentBlockDelta"]
            delta = block.get("delta") if isinstance(block, Mapping) else None
            tool = delta.get("toolUse") if isinstance(delta, Mapping) else None
            if isinstance(tool, Mapping):
                output.call_input(block.get("contentBlockIndex"), tool.get("input"))

    def _usage(self, usage: Any) -> None:
        found: dict[str, Any] = {}
        usage_attributes(usage, found)
        self.usage.update(found)  # type: ignore[union-attr]

    def _other_family(self, chunk: Mapping[str, Any]) -> None:
        stop = chunk.get("messageStop")  # Nova
        if isinstance(stop, Mapping):
            reason = stop.get("stopReason")
            if isinstance(reason, str) and reason:
                self.finish_reasons = [reason]
            return
        metadata = chunk.get("metadata")
        if isinstance(metadata, Mapping):
            self._usage(metadata.get("usage"))
            return
        # Titan, Llama, Mistral, Cohere: counts ride on the chunks, the last one cumulative.
        found: dict[str, Any] = {}
        usage_attributes(chunk, found)
        for attribute, name in (
            (semconv.GEN_AI_USAGE_INPUT_TOKENS, "inputTextTokenCount"),
            (semconv.GEN_AI_USAGE_OUTPUT_TOKENS, "totalOutputTextTokenCount"),
        ):
            value = _count(chunk.get(name))
            if value is not None:
                found[attribute] = value
        self.usage.update(found)  # type: ignore[union-attr]
        reasons = _finish_reasons(chunk)
        if reasons:
            self.finish_reasons = reasons

    def output_tokens(self) -> int | None:
        tokens = self.usage.get(  # type: ignore[union-attr]
            semconv.GEN_AI_USAGE_OUTPUT_TOKENS, self.metrics.get("outputTokenCount")
        )
        return tokens if isinstance(tokens, int) else None

    def finish(self, span: Span) -> None:
        _invocation_metrics(self.metrics, self.usage, self.attributes)  # type: ignore[arg-type]
        _finish_stream(span, self, self.attributes)
