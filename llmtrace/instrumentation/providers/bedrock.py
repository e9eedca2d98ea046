"""Amazon Bedrock Runtime through ``boto3``/``botocore``: one span per model call (and guardrail check).

Covers the four model operations of a ``bedrock-runtime`` client: ``converse``,
``converse_stream``, ``invoke_model`` and ``invoke_model_with_response_stream``; and the
guardrail check ``apply_guardrail`` (a span of its own, not a model call: stage ``prompt`` for a
check of the input, which runs before the model, ``postprocess`` for a check of the output, as
the stage contract of docs/architecture.md files guardrails; with ``aws.bedrock.guardrail.id``
and ``llmtrace.guardrail.action``).
Every other AWS call (the client's other operations, every other service,
``bedrock-agent-runtime`` included) is left alone and gets no span from here.

This module traces the calls; how each model family's requests, responses and streams are read
is in :mod:`llmtrace.instrumentation.providers.bedrock_formats`.

Where it hooks: ``botocore.client.BaseClient._make_api_call(operation_name, api_params)``, the
one method every client call goes through (retries inside). A call of any other operation costs
a set lookup; the service is checked only for the operation names traced here.

What is recorded:

- Converse / ConverseStream: one shape for every model. ``inferenceConfig`` (maxTokens,
  temperature, topP, stopSequences), ``usage`` (inputTokens, outputTokens, cacheReadInputTokens,
  cacheWriteInputTokens), ``stopReason``, and ``metrics.latencyMs`` as
  ``llmtrace.server.processing_time`` (the model's time on the service, which the report uses to
  tell network from model time).
- InvokeModel / InvokeModelWithResponseStream: the body is the model family's own format. The
  request parameters and the response's usage, finish reason, id and model are read by shape, so
  one reader serves Anthropic (Claude 2 text completion and Claude 3 Messages, prompt caching
  included), Amazon Nova and Titan (text; ``amazon.titan-embed-*`` and ``cohere.embed-*`` are
  ``embeddings`` calls with stage ``embedding``; Stability, Titan Image and Nova Canvas are
  ``generate_content``), Meta Llama, Mistral, Cohere Command, AI21 and
  OpenAI-compatible bodies (imported models). Counts the body leaves out are taken from the
  ``X-Amzn-Bedrock-Input-Token-Count`` / ``-Output-Token-Count`` / ``-Cache-*`` headers (a
  guarded Nova answer, Claude 2, Cohere Command and AI21 report them only there), and
  ``X-Amzn-Bedrock-Invocation-Latency`` is the server's processing time. A stream's final
  ``amazon-bedrock-invocationMetrics`` gives the same, and ``firstByteLatency`` as
  ``llmtrace.server.time_to_first_token``. When the model's own usage and Bedrock's invocation
  metrics disagree (a Claude tool-use stream does), the model's usage is recorded.
- InvokeModel returns the body unread (a ``StreamingBody``): it is read here, and the caller gets
  a ``StreamingBody`` over the same bytes.
- Streams: botocore's ``EventStream`` is wrapped in llmtrace's stream recorder (TTFT at the first
  content delta: ``contentBlockDelta`` for ConverseStream, the ``chunk`` whose model JSON carries
  output for InvokeModelWithResponseStream), ending the span exactly once on every path.
- Errors: the caller's exception unchanged (``ClientError`` and its modeled subclasses,
  ``EventStreamError`` mid-stream); ``error.type`` is the AWS error code
  (``ThrottlingException``, ``modelStreamErrorException``), ``aws.request_id`` the request's id.
- Content, when captured (off by default): the request's messages (or prompt) and system
  prompt, and the output text with its tool calls (Converse ``toolUse`` blocks, Anthropic
  ``tool_use`` blocks; streamed ones rebuilt from their deltas).
- ``aws.bedrock.guardrail.id`` when the call names a guardrail, and ``llmtrace.guardrail.action``
  when an InvokeModel body or chunk reports ``amazon-bedrock-guardrailAction``. No request header is read: the
  SigV4 ``Authorization``, ``X-Amz-Security-Token`` and ``X-Amz-Date`` never reach a span.

Time to headers: botocore sends through urllib3, which llmtrace does not hook. The endpoint's
``Endpoint._send(request)`` returns when urllib3 has the response headers, for a streamed or
InvokeModel answer before its body is read; the wrapper there records the moment for a Bedrock
call in flight and only reads a context variable for any other AWS call. For Converse (a JSON
answer) botocore reads the body inside ``_send``: the time to headers includes the body, which
Bedrock sends with its headers once the answer is complete.

OpenTelemetry's botocore instrumentation: it spans every AWS call, and for ``bedrock-runtime``
records GenAI attributes of its own. With both active there would be two model spans per call
(rule 4 of docs/architecture.md). llmtrace's span is the model span (stage, TTFT and generation
timing, usage), and the botocore instrumentation's span is suppressed for exactly the calls llmtrace
traces, through its own hook: ``_AwsSdkExtension.should_trace_service_call()`` answering False is
its "no span for this call" path. It is answered False only for the operations of
``bedrock-runtime`` traced here, while llmtrace traces (whichever of the two wrappers is
outermost); its spans of every other AWS call are unchanged, and it still injects the X-Ray
trace header, under llmtrace's span. Both patch ``BaseClient._make_api_call``: uninstrument them
in the reverse order they were instrumented (each restores what it found).

Not traced: ``bedrock-agent-runtime`` (``retrieve_and_generate``, ``invoke_agent``: the agent's
retrieval and model calls run inside AWS, out of sight; OpenTelemetry's botocore span, when
installed, still times the call), ``invoke_model_with_bidirectional_stream``, ``count_tokens``
and the asynchronous invocations. aiobotocore is not instrumented.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from llmtrace import semconv
from llmtrace._checks import is_int
from llmtrace._urls import server_of
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.model_call import call_model, start_model_call
from llmtrace.instrumentation.providers.bedrock_formats import (
    APPLY_GUARDRAIL,
    PROVIDER,
    SERVICE,
    TRACED,
    ConverseStreamParser,
    InvokeStreamParser,
    Output,
    Plan,
    header_attributes,
    headers_of,
    is_bedrock_runtime,
    metadata_attributes,
    plan_call,
    summarize_converse,
    summarize_invoke,
)
from llmtrace.instrumentation.response_summary import ResponseSummary
from llmtrace.sdk._safety import log_once
from llmtrace.sdk.gate import (
    ModelCall,
    counts_untraced,
    current_model_call,
    get_tracer,
    should_trace,
)
from llmtrace.sdk.span_errors import record_error
from llmtrace.sdk.streaming import STATUS_OK, StreamRecorder, TracedStream, end_model_call

logger = logging.getLogger(__name__)


def aws_error_code(exc: BaseException) -> str | None:
    """The AWS error code of a botocore ``ClientError`` (``ThrottlingException``, ...)."""
    response = getattr(exc, "response", None)
    error = response.get("Error") if isinstance(response, Mapping) else None
    code = error.get("Code") if isinstance(error, Mapping) else None
    return code if isinstance(code, str) and code else None


def record_aws_error(span: Span, exc: BaseException) -> None:
    """Mark ``span`` failed by ``exc``; ``error.type`` is the AWS error code when it has one."""
    record_error(span, exc)
    response = getattr(exc, "response", None)
    if not isinstance(response, Mapping) or not span.is_recording():
        return
    attributes: dict[str, Any] = {}
    code = aws_error_code(exc)
    if code is not None:
        attributes[semconv.ERROR_TYPE] = code
    metadata = response.get("ResponseMetadata")
    if isinstance(metadata, Mapping):
        status = metadata.get("HTTPStatusCode")
        if is_int(status):
            attributes[semconv.HTTP_RESPONSE_STATUS_CODE] = status
    metadata_attributes(response, attributes)
    if attributes:
        span.set_attributes(attributes)


class _AwsStreamRecorder(StreamRecorder):
    """The shared stream lifecycle; an AWS error mid-stream is typed by its error code."""

    __slots__ = ()

    def end(self, how: str, exc: BaseException | None = None, at: float | None = None) -> None:
        if how == "error" and exc is not None and not self.ended and aws_error_code(exc):
            try:
                record_aws_error(self.span, exc)
            except Exception:
                log_once(logger, "stream error recording failed")
            exc = None  # recorded: the lifecycle only ends the span
        super().end(how, exc, at)


class _BedrockCall(ModelCall):
    """A Bedrock model call in flight (the endpoint's send hook records only these)."""

    __slots__ = ()


# --- the call ---------------------------------------------------------------------------------


def _start(
    client: Any, operation: str, params: Any, traced: bool
) -> tuple[_BedrockCall, Plan] | None:
    """The call started, traced or (``traced`` False) only counted in the metrics."""
    try:
        if not isinstance(params, Mapping):
            return None
        name, attributes, plan = plan_call(client, operation, params)
        return start_model_call(name, attributes, _BedrockCall, traced=traced), plan
    except Exception:
        log_once(logger, "Bedrock call span start failed")
        return None


def _fail(call: ModelCall, exc: BaseException) -> None:
    span = call.span
    try:
        call.set_collected()
        if isinstance(exc, Exception):
            record_aws_error(span, exc)
        else:
            span.set_attribute(semconv.STREAM_END, "cancelled")
    except Exception:
        log_once(logger, "Bedrock call error recording failed")
    finally:
        end_model_call(call)


def _read_body(result: dict[str, Any], call: ModelCall) -> bytes | None:
    """InvokeModel's body, read; the caller gets a ``StreamingBody`` over the same bytes. A read
    that fails ends the span failed and leaves the caller a body raising the same exception
    (raises :class:`_BodyFailed`)."""
    from botocore.response import StreamingBody  # type: ignore[import-untyped]

    body = result.get("body")
    if body is None or not hasattr(body, "read"):
        return None
    try:
        data = body.read()
    except Exception as exc:
        result["body"] = _failed_body_class()(exc)
        _fail(call, exc)
        raise _BodyFailed from exc
    except BaseException as exc:
        _fail(call, exc)
        raise
    result["body"] = StreamingBody(io.BytesIO(data), len(data))
    return data if isinstance(data, bytes) else None


class _BodyFailed(Exception):
    """The body could not be read: the span is ended already."""


@functools.cache
def _failed_body_class() -> type:
    from botocore.response import StreamingBody

    class FailedBody(StreamingBody):  # type: ignore[misc]
        """A body whose read failed in the instrumentation: reading it raises that error."""

        def __init__(self, exc: Exception) -> None:
            super().__init__(io.BytesIO(b""), 0)
            self._failure = exc

        def read(self, amt: int | None = None) -> bytes:
            raise self._failure

        def readlines(self) -> list[bytes]:
            raise self._failure

    return FailedBody


def _finish(result: Any, call: ModelCall, plan: Plan) -> Any:
    span = call.span
    if not isinstance(result, dict):
        call.set_collected()
        end_model_call(call)
        return result
    attributes: dict[str, Any] = {}
    metadata_attributes(result, attributes)
    if plan.streamed:
        key = "stream" if plan.converse else "body"
        events = result.get(key)
        call.headers_received()
        if events is None:
            call.add_attributes(attributes)
            call.set_collected()
            span.set_status(STATUS_OK)
            end_model_call(call)
            return result
        parser: Any = (
            ConverseStreamParser(plan.capture)
            if plan.converse
            else InvokeStreamParser(plan.capture)
        )
        recorder = _AwsStreamRecorder(span, started_at=call.started_at, parser=parser)
        call.add_attributes(attributes)
        recorder.collected = call.collected
        result[key] = TracedStream(events, recorder)
        return result
    output = Output(plan.capture) if plan.capture is not None else None
    summary = ResponseSummary(output)
    if plan.converse:
        summarize_converse(result, summary, attributes)
        if output is not None:
            output.add_body(result)
    else:
        try:
            data = _read_body(result, call)
        except _BodyFailed:
            return result
        body: Any = None
        if data:
            try:
                body = json.loads(data)
            except ValueError:
                body = None
        summarize_invoke(body, summary, attributes)
        header_attributes(headers_of(result), summary, attributes)
        if output is not None and isinstance(body, Mapping):
            output.add_body(body)
    if output is not None:
        summary.output = output.attribute(summary.finish_reasons)
    try:
        collected = call.take_collected()
        if span.is_recording():
            collected.update(attributes)
            summary.write(collected, collected)
            span.set_attributes(collected)
        span.set_status(STATUS_OK)
    finally:
        end_model_call(call)
    return result


def _make_api_call(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``BaseClient._make_api_call(operation_name, api_params)``: a span for Bedrock model calls."""
    operation = args[0] if args else kwargs.get("operation_name")
    if (
        operation not in TRACED
        or current_model_call() is not None
        or not is_bedrock_runtime(instance)
    ):
        return wrapped(*args, **kwargs)
    traced = should_trace()
    params = args[1] if len(args) > 1 else kwargs.get("api_params")
    if operation == APPLY_GUARDRAIL:
        if not traced:
            return wrapped(*args, **kwargs)
        return _apply_guardrail(wrapped, instance, params, args, kwargs)
    # A model call the gate keeps untraced is still counted in the GenAI client metrics.
    if not traced and not counts_untraced():
        return wrapped(*args, **kwargs)
    started = _start(instance, operation, params, traced)
    if started is None:
        return wrapped(*args, **kwargs)
    call, plan = started
    # Failed by _fail: an AWS error's code, HTTP status and request id are in its response (see
    # record_aws_error), not in its class.
    return call_model(call, wrapped, args, kwargs, _finish, plan, fail=_fail)


def _apply_guardrail(wrapped: Any, client: Any, params: Any, args: Any, kwargs: Any) -> Any:
    """``apply_guardrail``: a span of stage ``prompt`` (source INPUT: the check runs before the
    model) or ``postprocess`` (source OUTPUT), with the guardrail's id and its action."""
    try:
        params = params if isinstance(params, Mapping) else {}
        guardrail_id = params.get("guardrailIdentifier")
        host, port = server_of(client.meta.endpoint_url)
        attributes: dict[str, Any] = {
            semconv.STAGE: "prompt" if params.get("source") == "INPUT" else "postprocess",
            semconv.GEN_AI_PROVIDER_NAME: PROVIDER,
            semconv.SERVER_ADDRESS: host,
            semconv.SERVER_PORT: port,
        }
        if isinstance(guardrail_id, str) and guardrail_id:
            attributes[semconv.AWS_BEDROCK_GUARDRAIL_ID] = guardrail_id
        name = f"apply_guardrail {guardrail_id}" if guardrail_id else "apply_guardrail"
        span = get_tracer().start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
    except Exception:
        log_once(logger, "Bedrock guardrail span start failed")
        return wrapped(*args, **kwargs)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        try:
            result = wrapped(*args, **kwargs)
        finally:
            otel_context.detach(token)
    except BaseException as exc:
        try:
            if isinstance(exc, Exception):
                record_aws_error(span, exc)
        finally:
            span.end()
        raise
    try:
        found: dict[str, Any] = {}
        metadata_attributes(result, found)
        action = result.get("action") if isinstance(result, Mapping) else None
        if isinstance(action, str) and action:
            found[semconv.GUARDRAIL_ACTION] = action
        span.set_attributes(found)
        span.set_status(STATUS_OK)
    except Exception:
        log_once(logger, "Bedrock guardrail recording failed")
    finally:
        span.end()
    return result


def _send(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``Endpoint._send(request)``: returns once urllib3 has the response headers."""
    call = current_model_call()
    if call is None or call.__class__ is not _BedrockCall:
        return wrapped(*args, **kwargs)
    # botocore's retry modes send again from its endpoint loop, within the one API call: a send
    # after a refused attempt is a retry.
    if call.answer is not None and call.refused():
        call.retrying(time.monotonic())
    try:
        response = wrapped(*args, **kwargs)
    except BaseException as exc:
        call.attempt_failed(exc)
        raise
    call.headers_received()
    status = getattr(response, "status_code", None)
    if is_int(status):
        call.answer = status
        if status >= 400:
            # botocore reads a refused answer's body whole next (``AWSResponse.content``, which
            # keeps it): read here, the wait before a retry is counted from the answer's end.
            with contextlib.suppress(Exception):
                response.content  # noqa: B018
                call.answered_at = time.monotonic()
    return response


def _quiet_botocore_span(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> bool:
    """OpenTelemetry's botocore instrumentation asks this before spanning an AWS call: no span
    for a Bedrock model call llmtrace traces (or is about to, its wrapper being innermost)."""
    context = getattr(instance, "_call_context", None)
    if (
        context is not None
        and getattr(context, "operation", None) in TRACED
        and getattr(context, "service", None) == SERVICE
        and (isinstance(current_model_call(), _BedrockCall) or should_trace())
    ):
        return False
    return bool(wrapped(*args, **kwargs))


class BedrockInstrumentor(LibraryInstrumentor):
    """Traces the model calls of boto3's ``bedrock-runtime`` clients."""

    package = "boto3"
    supported = ">= 1.34, < 2"

    def patches(self) -> Iterable[PatchRow]:
        yield "botocore.client", "BaseClient._make_api_call", _make_api_call
        yield "botocore.endpoint", "Endpoint._send", _send
        # OpenTelemetry's botocore span for a call llmtrace traces is suppressed (one span per
        # call); skipped when opentelemetry-instrumentation-botocore is not installed.
        yield (
            "opentelemetry.instrumentation.botocore.extensions.types",
            "_AwsSdkExtension.should_trace_service_call",
            _quiet_botocore_span,
        )
