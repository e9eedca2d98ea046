"""The Bedrock instrumentation against the real ``boto3`` ``bedrock-runtime`` client over real HTTP.

The simulated server speaks Bedrock Runtime's wire format (tests/servers/bedrock.py): Converse
and InvokeModel JSON, and the AWS event-stream binary framing of ConverseStream and
InvokeModelWithResponseStream, decoded by botocore's own parser. The client signs every request
with SigV4 (fixed test credentials) as it would for AWS.

Every recording in ``recorded/bedrock`` is replayed through the real client
(``test_recording_replays_with_recorded_values``): the model calls' token counts, ids, models
and finish reasons equal the recorded ones (read here from the recorded bodies and headers, with
botocore's event-stream decoder for the streams). ``apply_guardrail`` is sent too: a guardrail
check, its span has the recorded action and no model attributes. The ``bedrock-agent-runtime``
calls (``retrieve_and_generate``, ``invoke_agent``) are sent as well: not traced, they make no
span and still work. Every recording can be sent by
boto3 1.44.8; none needs a parameter the current client has dropped.

Kept whole (past 800 lines): every test here is one provider's own behaviour against one
simulated server; what all providers share is in test_every_provider.py.
"""

from __future__ import annotations

import base64
import gc
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from botocore.eventstream import EventStreamBuffer
from botocore.exceptions import ClientError, EventStreamError
from opentelemetry.trace import SpanKind, StatusCode
from urllib3.exceptions import ProtocolError

from llmtrace import semconv
from llmtrace.instrumentation import registry
from tests.frameworks.timing import assert_ttft
from tests.providers.sdk_checks import (
    assert_no_secret_in,
    cassette_interactions,
    exported_spans,
    model_spans,
    only_span,
)
from tests.providers.table import AWS_ACCESS_KEY, AWS_SECRET_KEY, AWS_SESSION_TOKEN, BEDROCK
from tests.servers import bedrock
from tests.servers.fixtures import RECORDED
from tests.subprocesses import run_instrumented_app

PROVIDER = BEDROCK
CLAUDE = "anthropic.claude-3-haiku-20240307-v1:0"
NOVA = "amazon.nova-lite-v1:0"
TITAN = "amazon.titan-text-express-v1"
LLAMA = "meta.llama3-8b-instruct-v1:0"
MESSAGES = [{"role": "user", "content": [{"text": "Say hello"}]}]


def _named(spans: Any) -> list[tuple[str, str]]:
    return [(s.name, s.instrumentation_scope.name) for s in spans.get_finished_spans()]


def _invoke_body(**extra: Any) -> str:
    return json.dumps({"messages": MESSAGES, "max_tokens": 50, "temperature": 0.2, **extra})


# --- Converse ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("instrumented")
def test_converse_records_usage_finish_reason_and_server_time(server, spans):
    result = PROVIDER.client(server).converse(
        modelId=CLAUDE,
        messages=MESSAGES,
        inferenceConfig={"maxTokens": 64, "temperature": 0.5, "topP": 0.9, "stopSequences": ["x"]},
        guardrailConfig={"guardrailIdentifier": "gr-1", "guardrailVersion": "1"},
    )
    span = only_span(spans)
    a = span.attributes
    assert span.name == f"chat {CLAUDE}"
    assert span.kind == SpanKind.CLIENT
    assert span.status.status_code == StatusCode.OK
    assert a[semconv.STAGE] == semconv.LLM_STAGE
    assert a[semconv.GEN_AI_PROVIDER_NAME] == "aws.bedrock"
    assert a[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert a[semconv.GEN_AI_REQUEST_MODEL] == CLAUDE
    assert a[semconv.GEN_AI_REQUEST_STREAM] is False
    assert a[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 64
    assert a[semconv.GEN_AI_REQUEST_TEMPERATURE] == 0.5
    assert a[semconv.GEN_AI_REQUEST_TOP_P] == 0.9
    assert a[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] == ("x",)
    assert a[semconv.AWS_BEDROCK_GUARDRAIL_ID] == "gr-1"
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == result["usage"]["inputTokens"] == 10
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == result["usage"]["outputTokens"] == 4
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert a[semconv.SERVER_PROCESSING_TIME] == result["metrics"]["latencyMs"] / 1000
    assert a[semconv.AWS_REQUEST_ID] == result["ResponseMetadata"]["RequestId"]
    assert a[semconv.SERVER_ADDRESS] == "127.0.0.1"
    assert a[semconv.SERVER_PORT] == server.port
    assert semconv.TIME_TO_HEADERS in a


# --- InvokeModel, per model family ------------------------------------------------------------

_FAMILIES = {
    # model id: (body sent, expected finish reasons, id/model reported, operation)
    CLAUDE: (_invoke_body(), ("end_turn",), True, "chat"),
    "anthropic.claude-v2:1": (
        json.dumps({"prompt": "\n\nHuman: hi\n\nAssistant:", "max_tokens_to_sample": 50}),
        ("stop_sequence",),
        False,
        "text_completion",
    ),
    NOVA: (
        json.dumps({"messages": MESSAGES, "inferenceConfig": {"maxTokens": 50}}),
        ("end_turn",),
        False,
        "chat",
    ),
    TITAN: (
        json.dumps({"inputText": "hi", "textGenerationConfig": {"maxTokenCount": 50}}),
        ("FINISH",),
        False,
        "text_completion",
    ),
    LLAMA: (json.dumps({"prompt": "hi", "max_gen_len": 50}), ("stop",), False, "text_completion"),
    "mistral.mistral-7b-instruct-v0:2": (
        json.dumps({"prompt": "<s>[INST] hi [/INST]", "max_tokens": 50}),
        ("stop",),
        False,
        "text_completion",
    ),
    "cohere.command-text-v14": (
        json.dumps({"prompt": "hi", "max_tokens": 50}),
        ("COMPLETE",),
        True,
        "text_completion",
    ),
}


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("model_id", sorted(_FAMILIES))
def test_invoke_model_reads_each_family_and_leaves_the_body_to_the_caller(server, spans, model_id):
    body, reasons, reports_id, operation = _FAMILIES[model_id]
    result = PROVIDER.client(server).invoke_model(modelId=model_id, body=body)
    returned = json.loads(result["body"].read())  # the caller still reads the whole body
    assert returned
    span = only_span(spans)
    a = span.attributes
    assert span.name == f"{operation} {model_id}"
    assert a[semconv.GEN_AI_OPERATION_NAME] == operation
    assert a[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 50
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == reasons
    assert (semconv.GEN_AI_RESPONSE_ID in a) == reports_id
    if reports_id:
        assert a[semconv.GEN_AI_RESPONSE_ID] == returned["id"]
    headers = result["ResponseMetadata"]["HTTPHeaders"]
    assert (
        a[semconv.SERVER_PROCESSING_TIME]
        == int(headers["x-amzn-bedrock-invocation-latency"]) / 1000
    )


@pytest.mark.usefixtures("instrumented")
def test_titan_embeddings_are_an_embedding_stage(server, spans):
    result = PROVIDER.client(server).invoke_model(
        modelId="amazon.titan-embed-text-v2:0", body=json.dumps({"inputText": "hello"})
    )
    vector = json.loads(result["body"].read())["embedding"]
    span = only_span(spans)
    a = span.attributes
    assert span.name == "embeddings amazon.titan-embed-text-v2:0"
    assert a[semconv.STAGE] == "embedding"
    assert a[semconv.GEN_AI_OPERATION_NAME] == "embeddings"
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert semconv.GEN_AI_USAGE_OUTPUT_TOKENS not in a
    assert a[semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == len(vector)


@pytest.mark.usefixtures("instrumented")
def test_image_generation_is_generate_content(server, spans):
    model_id = "stability.sd3-5-large-v1:0"
    PROVIDER.client(server).invoke_model(
        modelId=model_id, body=json.dumps({"prompt": "a lighthouse"})
    )
    span = only_span(spans)
    assert span.name == f"generate_content {model_id}"
    assert span.attributes[semconv.GEN_AI_OPERATION_NAME] == "generate_content"


# --- streams ----------------------------------------------------------------------------------


def _converse_stream(client: Any) -> Any:
    return client.converse_stream(modelId=CLAUDE, messages=MESSAGES)["stream"]


@pytest.mark.usefixtures("instrumented")
def test_converse_stream_records_usage_and_first_token(server, spans):
    server.configure(first_token_delay=0.05, token_delay=0.01)
    events = list(_converse_stream(PROVIDER.client(server)))
    span = only_span(spans)
    a = span.attributes
    assert a[semconv.GEN_AI_REQUEST_STREAM] is True
    assert a[semconv.STREAM_END] == "completed"
    assert a[semconv.CHUNK_COUNT] == len(events) == 8
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    # messageStart arrives with the headers, the first delta after the injected delay
    assert a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] < 0.05 <= a[semconv.TIME_TO_FIRST_TOKEN]
    # The last token leaves the server 30 ms after the first (a late first one shortens the rest).
    assert a[semconv.TIME_TO_FIRST_TOKEN] + a[semconv.GENERATION_TIME] >= 0.05 + 0.03 - 0.002
    assert a[semconv.GENERATION_TIME] > 0
    assert semconv.SERVER_PROCESSING_TIME in a
    assert span.status.status_code == StatusCode.OK


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize(
    ("model_id", "reasons", "reports_id"),
    [
        (CLAUDE, ("end_turn",), True),
        (NOVA, ("end_turn",), False),
        (TITAN, ("FINISH",), False),
        (LLAMA, ("stop",), False),
    ],
)
def test_invoke_model_stream_reads_each_family(server, spans, model_id, reasons, reports_id):
    server.configure(first_token_delay=0.03)
    response = PROVIDER.client(server).invoke_model_with_response_stream(
        modelId=model_id, body=_invoke_body()
    )
    chunks = [json.loads(event["chunk"]["bytes"]) for event in response["body"]]
    span = only_span(spans)
    a = span.attributes
    assert a[semconv.CHUNK_COUNT] == len(chunks)
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == reasons
    assert (semconv.GEN_AI_RESPONSE_ID in a) == reports_id
    assert a[semconv.TIME_TO_FIRST_TOKEN] >= 0.03
    metrics = next(
        c["amazon-bedrock-invocationMetrics"]
        for c in chunks
        if "amazon-bedrock-invocationMetrics" in c
    )
    assert a[semconv.SERVER_TIME_TO_FIRST_TOKEN] == metrics["firstByteLatency"] / 1000
    assert a[semconv.SERVER_PROCESSING_TIME] == metrics["invocationLatency"] / 1000


def _invoke_stream(client: Any) -> Any:
    return client.invoke_model_with_response_stream(modelId=CLAUDE, body=_invoke_body())["body"]


_STREAMS = {
    "converse_stream": _converse_stream,
    "invoke_model_with_response_stream": _invoke_stream,
}


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("operation", ["converse_stream", "invoke_model_with_response_stream"])
def test_time_to_headers_is_timed_when_the_headers_arrive(server, spans, operation):
    """botocore's urllib3 is not hooked: the endpoint's send returns at the response headers,
    before the stream's first event, and that moment is the time to headers."""
    server.configure(headers_delay=0.05, first_token_delay=0.2, tokens=["a"])
    client = PROVIDER.client(server)
    list(_STREAMS[operation](client))  # connection warm-up
    spans.clear()
    list(_STREAMS[operation](client))
    (span,) = model_spans(spans)
    a = span.attributes
    assert 0.05 <= a[semconv.TIME_TO_HEADERS] < 0.15
    assert a[semconv.TIME_TO_FIRST_TOKEN] >= 0.2


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("operation", sorted(_STREAMS))
def test_ttft_within_5ms_of_the_injected_delay(server, spans, operation):
    """The first token the span reports is the one the server sent, within 5 ms (median of six
    requests), and never earlier than the injected delay."""
    delay = 0.2
    server.configure(headers_delay=0.05, first_token_delay=delay, token_delay=0.01)
    client = PROVIDER.client(server)
    list(_STREAMS[operation](client))  # connection warm-up
    found, requests = [], []
    for _ in range(6):
        spans.clear()
        list(_STREAMS[operation](client))
        (span,) = model_spans(spans)
        found.append(span)
        requests.append(server.requests[-1])
        assert span.attributes[semconv.TIME_TO_HEADERS] >= 0.05
    assert_ttft(found, requests, delay)


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("operation", sorted(_STREAMS))
def test_stream_closed_early_ends_span_once(server, spans, operation):
    stream = _STREAMS[operation](PROVIDER.client(server))
    for _event in stream:
        break
    stream.close()
    stream.close()
    span = only_span(spans)
    assert span.attributes[semconv.STREAM_END] == "closed"
    assert span.status.status_code == StatusCode.UNSET


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("read", [0, 2])
def test_stream_dropped_ends_span_as_abandoned(server, spans, read):
    stream = _converse_stream(PROVIDER.client(server))
    for _ in range(read):
        next(stream)
    del stream
    gc.collect()
    span = only_span(spans)
    assert span.attributes[semconv.STREAM_END] == "abandoned"


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("operation", sorted(_STREAMS))
def test_stream_cut_mid_way_raises_unchanged_and_ends_failed(server, spans, operation):
    server.configure(fail_after_chunks=2)
    stream = _STREAMS[operation](PROVIDER.client(server))
    with pytest.raises(ProtocolError):
        for _event in stream:
            pass
    span = only_span(spans)
    assert span.attributes[semconv.STREAM_END] == "error"
    assert span.attributes[semconv.ERROR_TYPE] == "ProtocolError"
    assert span.status.status_code == StatusCode.ERROR


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("operation", sorted(_STREAMS))
def test_stream_exception_event_keeps_its_aws_code(server, spans, operation):
    server.configure(fail_after_chunks=2)
    server.bedrock_stream_exception = "modelStreamErrorException"
    stream = _STREAMS[operation](PROVIDER.client(server))
    received = []
    with pytest.raises(EventStreamError) as raised:
        for event in stream:
            received.append(event)
    assert raised.value.response["Error"]["Code"] == "modelStreamErrorException"
    span = only_span(spans)
    a = span.attributes
    assert a[semconv.STREAM_END] == "error"
    assert a[semconv.ERROR_TYPE] == "modelStreamErrorException"
    assert a[semconv.CHUNK_COUNT] == len(received)
    assert span.status.status_code == StatusCode.ERROR
    # one exception event, beside the headers' and the first token's instants
    timing = (semconv.RESPONSE_HEADERS_EVENT, semconv.FIRST_TOKEN_EVENT)
    assert [e.name for e in span.events if e.name not in timing] == ["exception"]


# --- errors and credentials -------------------------------------------------------------------


def _read_cut_body(client: Any) -> BaseException:
    result = client.invoke_model(modelId=CLAUDE, body=_invoke_body())
    with pytest.raises(Exception) as raised:
        result["body"].read()
    return raised.value


def test_invoke_model_body_cut_mid_way_fails_the_same_for_the_caller(server, spans):
    """InvokeModel's body is read by the instrumentation: when that read fails, the caller's own
    read raises the same exception it would have raised uninstrumented, and the span fails."""
    server.configure(fail_after_chunks=0)
    client = PROVIDER.client(server)
    plain = _read_cut_body(client)
    registry.instrument(["bedrock"])
    try:
        spans.clear()
        traced = _read_cut_body(client)
    finally:
        registry.uninstrument()
    assert type(traced) is type(plain)
    assert str(traced) == str(plain)
    span = only_span(spans)
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[semconv.ERROR_TYPE] == type(plain).__qualname__


def test_client_made_before_instrumentation_is_traced(server, spans):
    client = PROVIDER.client(server)
    registry.instrument(["bedrock"])
    try:
        client.converse(modelId=CLAUDE, messages=MESSAGES)
    finally:
        registry.uninstrument()
    assert only_span(spans).attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4


def _failing_call(client: Any) -> None:
    client.converse(modelId=CLAUDE, messages=MESSAGES)


@pytest.mark.parametrize(
    ("status", "code"),
    [(400, "ValidationException"), (429, "ThrottlingException"), (500, "InternalServerException")],
)
def test_errors_pass_unchanged_with_the_aws_error_code(server, spans, status, code):
    server.configure(status=status)
    client = PROVIDER.client(server)
    with pytest.raises(ClientError) as plain:
        _failing_call(client)
    names = registry.instrument(["bedrock"])
    try:
        assert names == ["bedrock"]
        spans.clear()
        with pytest.raises(ClientError) as traced:
            _failing_call(client)
    finally:
        registry.uninstrument()
    assert type(traced.value) is type(plain.value)
    assert (
        traced.value.response["Error"]
        == plain.value.response["Error"]
        == {
            "Message": "simulated failure",
            "Code": code,
        }
    )
    span = only_span(spans)
    a = span.attributes
    assert span.status.status_code == StatusCode.ERROR
    assert a[semconv.ERROR_TYPE] == code
    assert a[semconv.HTTP_RESPONSE_STATUS_CODE] == status
    assert a[semconv.AWS_REQUEST_ID] == traced.value.response["ResponseMetadata"]["RequestId"]


@pytest.mark.usefixtures("instrumented")
def test_no_credential_reaches_a_span(server, spans):
    client = PROVIDER.client(server)
    client.converse(modelId=CLAUDE, messages=MESSAGES)
    list(_converse_stream(client))
    client.invoke_model(modelId=CLAUDE, body=_invoke_body())
    server.configure(status=403)
    with pytest.raises(ClientError):
        client.invoke_model(modelId=CLAUDE, body=_invoke_body())
    sent = server.requests[-1].headers
    assert sent["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert sent["x-amz-security-token"] == AWS_SESSION_TOKEN
    assert len(spans.get_finished_spans()) == 4
    assert_no_secret_in(
        spans,
        AWS_ACCESS_KEY,
        AWS_SECRET_KEY,
        AWS_SESSION_TOKEN,
        "Signature=",
        "AWS4-HMAC",
        sent["x-amz-date"],
    )


@pytest.mark.usefixtures("instrumented")
def test_content_is_captured_only_when_asked(server, spans, monkeypatch):
    client = PROVIDER.client(server)
    client.converse(modelId=CLAUDE, messages=MESSAGES, system=[{"text": "Be brief"}])
    assert semconv.GEN_AI_INPUT_MESSAGES not in only_span(spans).attributes
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    from llmtrace import options

    options.reload()
    for call in (
        lambda: client.converse(modelId=CLAUDE, messages=MESSAGES, system=[{"text": "Be brief"}]),
        lambda: list(_converse_stream(client)),
        lambda: client.invoke_model(modelId=CLAUDE, body=_invoke_body())["body"].read(),
        lambda: list(_invoke_stream(client)),
    ):
        spans.clear()
        call()
        a = only_span(spans).attributes
        assert "Say hello" in a[semconv.GEN_AI_INPUT_MESSAGES]
        (message,) = json.loads(a[semconv.GEN_AI_OUTPUT_MESSAGES])
        assert message["role"] == "assistant"
        assert message["parts"] == [{"type": "text", "content": "Hello, world!"}]


# --- what is not traced, and coexistence ------------------------------------------------------


@pytest.mark.usefixtures("instrumented")
def test_other_aws_calls_make_no_span(server, spans):
    assert PROVIDER.client(server).list_async_invokes()["ResponseMetadata"]["HTTPStatusCode"] == 200
    with pytest.raises(Exception):  # noqa: B017 (an S3 answer the simulated server cannot give)
        PROVIDER.client(server, service="s3").list_buckets()
    assert spans.get_finished_spans() == ()


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize(("source", "stage"), [("INPUT", "prompt"), ("OUTPUT", "postprocess")])
def test_apply_guardrail_is_a_guardrail_stage_not_a_model_call(server, spans, source, stage):
    server.configure(headers_delay=0.05)
    result = PROVIDER.client(server).apply_guardrail(
        guardrailIdentifier="gr-7",
        guardrailVersion="1",
        source=source,
        content=[{"text": {"text": "hello"}}],
    )
    span = only_span(spans)
    a = span.attributes
    assert span.name == "apply_guardrail gr-7"
    assert a[semconv.STAGE] == stage
    assert semconv.GEN_AI_OPERATION_NAME not in a  # not counted as a model call
    assert a[semconv.AWS_BEDROCK_GUARDRAIL_ID] == "gr-7"
    assert a[semconv.GUARDRAIL_ACTION] == result["action"] == "NONE"
    assert a[semconv.AWS_REQUEST_ID] == result["ResponseMetadata"]["RequestId"]
    assert (span.end_time - span.start_time) / 1e9 >= 0.05
    assert span.status.status_code == StatusCode.OK


@pytest.mark.usefixtures("instrumented")
def test_apply_guardrail_error_keeps_its_aws_code(server, spans):
    server.configure(status=429)
    with pytest.raises(ClientError) as raised:
        PROVIDER.client(server).apply_guardrail(
            guardrailIdentifier="gr-7", guardrailVersion="1", source="INPUT", content=[]
        )
    assert type(raised.value).__name__ == "ThrottlingException"
    span = only_span(spans)
    assert span.attributes[semconv.ERROR_TYPE] == "ThrottlingException"
    assert span.status.status_code == StatusCode.ERROR


def test_instrument_and_uninstrument_restore_every_original():
    from botocore.client import BaseClient
    from botocore.endpoint import Endpoint
    from opentelemetry.instrumentation.botocore.extensions.types import _AwsSdkExtension

    originals = (
        BaseClient.__dict__["_make_api_call"],
        Endpoint.__dict__["_send"],
        _AwsSdkExtension.__dict__["should_trace_service_call"],
    )
    assert registry.instrument(["bedrock"]) == ["bedrock"]
    try:
        assert BaseClient.__dict__["_make_api_call"] is not originals[0]
        assert Endpoint.__dict__["_send"] is not originals[1]
        assert _AwsSdkExtension.__dict__["should_trace_service_call"] is not originals[2]
    finally:
        registry.uninstrument()
    assert (
        BaseClient.__dict__["_make_api_call"],
        Endpoint.__dict__["_send"],
        _AwsSdkExtension.__dict__["should_trace_service_call"],
    ) == originals


def test_not_traced_after_uninstrument(server, spans):
    registry.instrument(["bedrock"])
    registry.uninstrument()
    PROVIDER.client(server).converse(modelId=CLAUDE, messages=MESSAGES)
    assert spans.get_finished_spans() == ()


@pytest.mark.parametrize("otel_first", [True, False])
def test_one_model_span_with_opentelemetry_botocore_instrumentation(server, spans, otel_first):
    """OpenTelemetry's botocore instrumentation spans every AWS call: for a model call llmtrace
    traces, its span is suppressed (either wrapper outermost); its other spans are unchanged."""
    from opentelemetry.instrumentation.botocore import BotocoreInstrumentor

    otel = BotocoreInstrumentor()
    if otel_first:
        otel.instrument()
        registry.instrument(["bedrock"])
    else:
        registry.instrument(["bedrock"])
        otel.instrument()
    try:
        client = PROVIDER.client(server)
        client.converse(modelId=CLAUDE, messages=MESSAGES)
        list(_converse_stream(client))
        client.invoke_model(modelId=CLAUDE, body=_invoke_body())["body"].read()
        list(_invoke_stream(client))
        finished = spans.get_finished_spans()
        assert len(finished) == 4, [(s.name, s.instrumentation_scope.name) for s in finished]
        assert {s.instrumentation_scope.name for s in finished} == {"llmtrace"}
        assert all(s.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4 for s in finished)
        # The X-Ray header OpenTelemetry's instrumentation injects names llmtrace's span.
        trace_header = server.requests[-1].headers["x-amzn-trace-id"]
        assert format(finished[-1].context.trace_id, "032x")[8:] in trace_header
        spans.clear()
        client.apply_guardrail(
            guardrailIdentifier="g", guardrailVersion="1", source="INPUT", content=[]
        )
        client.list_async_invokes()  # not traced by llmtrace: OpenTelemetry's span stays
        assert _named(spans) == [
            ("apply_guardrail g", "llmtrace"),
            (
                "Bedrock Runtime.ListAsyncInvokes",
                "opentelemetry.instrumentation.botocore.bedrock-runtime",
            ),
        ]
    finally:
        # Both wrap BaseClient._make_api_call: undone in the reverse order they were done.
        if otel_first:
            registry.uninstrument()
            otel.uninstrument()
        else:
            otel.uninstrument()
            registry.uninstrument()
    spans.clear()
    server.configure(status=200)
    with_otel_only = BotocoreInstrumentor()
    with_otel_only.instrument()
    try:
        PROVIDER.client(server).converse(modelId=CLAUDE, messages=MESSAGES)
    finally:
        with_otel_only.uninstrument()
    (span,) = spans.get_finished_spans()  # llmtrace gone: OpenTelemetry's span is back
    assert span.instrumentation_scope.name.startswith("opentelemetry.instrumentation.botocore")


def test_langchain_span_is_structure_over_the_bedrock_span(server, spans, monkeypatch):
    """ChatBedrock over an instrumented client: the Bedrock span beneath owns TTFT and usage
    (rule 8 of docs/architecture.md), LangChain's span is structure (stage ``other``)."""
    from langchain_aws import ChatBedrock

    for variable, value in (
        ("AWS_ACCESS_KEY_ID", AWS_ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", AWS_SECRET_KEY),
    ):
        monkeypatch.setenv(variable, value)
    registry.instrument(["langchain", "bedrock"])
    try:
        model = ChatBedrock(model_id=CLAUDE, region_name="us-east-1", endpoint_url=server.url)
        spans.clear()
        model.invoke("Say hello")
    finally:
        registry.uninstrument(["langchain", "bedrock"])
    finished = spans.get_finished_spans()
    (provider,) = [
        s
        for s in finished
        if s.instrumentation_scope.name == "llmtrace"
        and s.attributes.get(semconv.GEN_AI_PROVIDER_NAME) == "aws.bedrock"
        and s.attributes.get(semconv.STAGE) == semconv.LLM_STAGE
    ]
    (framework,) = [
        s
        for s in finished
        if s.attributes.get(semconv.STAGE) == "other"
        and semconv.GEN_AI_OPERATION_NAME in s.attributes
    ]
    assert provider.parent.span_id == framework.context.span_id
    assert provider.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert [s for s in finished if s.attributes.get(semconv.STAGE) == semconv.LLM_STAGE] == [
        provider
    ]


# --- replay of the recordings -----------------------------------------------------------------

# Operation, by the recorded path's last segment.
_ACTIONS = {
    "converse": "converse",
    "converse-stream": "converse_stream",
    "invoke": "invoke_model",
    "invoke-with-response-stream": "invoke_model_with_response_stream",
}


def _interaction(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    first = cassette_interactions(path)[0]
    return first["request"], first["response"]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _header(headers: dict[str, Any], name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name.lower():
            value = value[0] if isinstance(value, list) else value
            return _text(value)
    return None


def _send_recorded(client: Any, request: dict[str, Any], server: Any) -> Any:
    """The recorded request sent again through the real client (its parameters rebuilt from the
    recorded path, headers and body); returns what the client returned, streams read whole."""
    uri = request["uri"]
    host = uri.split("/")[2]
    path = "/" + uri.split("/", 3)[3]
    body = _text(request["body"])
    if host.startswith("bedrock-agent-runtime"):
        agent = PROVIDER.client(server, service="bedrock-agent-runtime")
        sent = json.loads(body)
        if path == "/retrieveAndGenerate":
            return agent.retrieve_and_generate(**sent)
        _, _, agent_id, _, alias_id, _, session_id, _ = path.split("/")
        answer = agent.invoke_agent(
            agentId=agent_id, agentAliasId=alias_id, sessionId=session_id, **sent
        )
        return [event for event in answer["completion"]]
    if path.startswith("/guardrail/"):
        _, _, guardrail_id, _, version, _ = path.split("/")
        return client.apply_guardrail(
            guardrailIdentifier=guardrail_id, guardrailVersion=version, **json.loads(body)
        )
    model_id = unquote(path.split("/model/")[1].rsplit("/", 1)[0])
    action = _ACTIONS[path.rsplit("/", 1)[1]]
    if action.startswith("converse"):
        result = getattr(client, action)(modelId=model_id, **json.loads(body))
        if action == "converse_stream":
            result["stream"] = list(result["stream"])
        return result
    params: dict[str, Any] = {"modelId": model_id, "body": body}
    for header, name in (
        ("X-Amzn-Bedrock-GuardrailIdentifier", "guardrailIdentifier"),
        ("X-Amzn-Bedrock-GuardrailVersion", "guardrailVersion"),
        ("X-Amzn-Bedrock-Trace", "trace"),
    ):
        value = _header(request.get("headers"), header)
        if value is not None:
            params[name] = value
    result = getattr(client, action)(**params)
    if action == "invoke_model":
        result["body"] = result["body"].read()
    else:
        result["body"] = list(result["body"])
    return result


def _stream_payloads(data: bytes) -> list[dict[str, Any]]:
    """A recorded event stream decoded with botocore's decoder: each event's JSON (an
    InvokeModelWithResponseStream chunk's inner model JSON)."""
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    payloads = []
    for message in buffer:
        payload = json.loads(message.payload)
        if "bytes" in payload:
            payload = json.loads(base64.b64decode(payload["bytes"]))
        payloads.append({"event": message.headers[":event-type"], **payload})
    return payloads


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _count(value: Any) -> int | None:
    return None if value is None else int(value)


def _expected(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """What the span must say, read from the recording by hand (family by family)."""
    path = request["uri"].split("amazonaws.com", 1)[1]
    action = path.rsplit("/", 1)[1]
    raw = response["body"]["string"]
    headers = response.get("headers") or {}
    expected: dict[str, Any] = {}
    if action == "converse":
        body = json.loads(raw)
        usage = body.get("usage", {})
        expected.update(
            input=usage.get("inputTokens"),
            output=usage.get("outputTokens"),
            cache_read=usage.get("cacheReadInputTokens"),
            cache_write=usage.get("cacheWriteInputTokens"),
            finish=[body["stopReason"]],
        )
    elif action == "converse-stream":
        events = _stream_payloads(raw)
        stop = next(e for e in events if e["event"] == "messageStop")
        usage = next(e for e in events if e["event"] == "metadata").get("usage", {})
        expected.update(
            input=usage.get("inputTokens"),
            output=usage.get("outputTokens"),
            cache_read=usage.get("cacheReadInputTokens"),
            cache_write=usage.get("cacheWriteInputTokens"),
            finish=[stop["stopReason"]],
        )
    elif action == "invoke":
        body = json.loads(raw)
        usage = body.get("usage", {})
        results = body.get("results") or [{}]
        expected.update(
            input=_count(
                _first(
                    usage.get("input_tokens"),
                    usage.get("inputTokens"),
                    usage.get("prompt_tokens"),
                    body.get("prompt_token_count"),
                    body.get("inputTextTokenCount"),
                    _header(headers, "X-Amzn-Bedrock-Input-Token-Count"),
                )
            ),
            output=_count(
                _first(
                    usage.get("output_tokens"),
                    usage.get("outputTokens"),
                    usage.get("completion_tokens"),
                    body.get("generation_token_count"),
                    results[0].get("tokenCount"),
                    _header(headers, "X-Amzn-Bedrock-Output-Token-Count"),
                )
            ),
            cache_read=_count(
                _first(
                    usage.get("cache_read_input_tokens"),
                    usage.get("cacheReadInputTokenCount"),
                    _header(headers, "X-Amzn-Bedrock-Cache-Read-Input-Token-Count"),
                )
            ),
            cache_write=_count(
                _first(
                    usage.get("cache_creation_input_tokens"),
                    usage.get("cacheWriteInputTokenCount"),
                    _header(headers, "X-Amzn-Bedrock-Cache-Write-Input-Token-Count"),
                )
            ),
            finish=[
                _first(
                    body.get("stop_reason"),
                    body.get("stopReason"),
                    results[0].get("completionReason"),
                    (body.get("generations") or [{}])[0].get("finish_reason"),
                    (body.get("choices") or [{}])[0].get("finish_reason"),
                    ((body.get("completions") or [{}])[0].get("finishReason") or {}).get("reason"),
                )
            ],
            id=str(body["id"]) if body.get("id") not in (None, "") else None,
            model=body.get("model"),
        )
    else:  # invoke-with-response-stream
        chunks = _stream_payloads(raw)
        start = next((c["message"] for c in chunks if c.get("type") == "message_start"), None)
        if start is not None:  # Anthropic
            delta = [c for c in chunks if c.get("type") == "message_delta"][-1]
            expected.update(
                input=start["usage"]["input_tokens"],
                output=delta["usage"]["output_tokens"],
                finish=[delta["delta"]["stop_reason"]],
                id=start["id"],
                model=start["model"],
            )
        elif any("messageStart" in c for c in chunks):  # Nova
            usage = next(c for c in chunks if "metadata" in c)["metadata"]["usage"]
            stop = next(c for c in chunks if "messageStop" in c)["messageStop"]
            expected.update(
                input=usage["inputTokens"],
                output=usage["outputTokens"],
                cache_read=usage.get("cacheReadInputTokenCount"),
                cache_write=usage.get("cacheWriteInputTokenCount"),
                finish=[stop["stopReason"]],
            )
        else:  # Titan: counts on the chunks
            last = chunks[-1]
            expected.update(
                input=int(chunks[0]["inputTextTokenCount"]),
                output=int(last["totalOutputTextTokenCount"]),
                finish=[last["completionReason"]] if last.get("completionReason") else None,
            )
    return expected


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("path", PROVIDER.cassettes, ids=lambda path: path.stem)
def test_recording_replays_with_recorded_values(server, spans, path):
    request, response = _interaction(path)
    raw = response["body"]["string"]
    content_type = bedrock.EVENTSTREAM if isinstance(raw, bytes) else "application/json"
    server.play_cassette({"request": request, "response": response}, content_type=content_type)
    client = PROVIDER.client(server)
    result = _send_recorded(client, request, server)
    assert result
    uri = request["uri"]
    if "bedrock-agent-runtime" in uri:
        assert _named(spans) == []  # agent runtime calls are not traced
        return
    if "/guardrail/" in uri:
        span = only_span(spans)
        sent = json.loads(_text(request["body"]))
        assert span.attributes[semconv.STAGE] == (
            "prompt" if sent["source"] == "INPUT" else "postprocess"
        )
        assert span.attributes[semconv.GUARDRAIL_ACTION] == json.loads(raw)["action"]
        assert span.attributes[semconv.AWS_BEDROCK_GUARDRAIL_ID] == uri.split("/")[4]
        return
    span = only_span(spans)
    a = span.attributes
    assert span.status.status_code == StatusCode.OK
    expected = _expected(request, response)
    assert a[semconv.GEN_AI_REQUEST_MODEL] == unquote(uri.split("/model/")[1].rsplit("/", 1)[0])
    for key, attribute in (
        ("input", semconv.GEN_AI_USAGE_INPUT_TOKENS),
        ("output", semconv.GEN_AI_USAGE_OUTPUT_TOKENS),
        ("cache_read", semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
        ("cache_write", semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
        ("id", semconv.GEN_AI_RESPONSE_ID),
        ("model", semconv.GEN_AI_RESPONSE_MODEL),
    ):
        if expected.get(key) is None:
            assert attribute not in a, (key, a.get(attribute))
        else:
            assert a[attribute] == expected[key], key
    if expected.get("finish"):
        assert list(a[semconv.GEN_AI_RESPONSE_FINISH_REASONS]) == expected["finish"]
    # A guardrail's action, where the model's answer reports one.
    if isinstance(raw, bytes):
        actions = {p.get("amazon-bedrock-guardrailAction") for p in _stream_payloads(raw)}
    else:
        actions = {json.loads(raw).get("amazon-bedrock-guardrailAction")}
    actions.discard(None)
    assert a.get(semconv.GUARDRAIL_ACTION) == (actions.pop() if actions else None)
    if isinstance(raw, bytes):
        assert a[semconv.STREAM_END] == "completed"
        assert a[semconv.CHUNK_COUNT] == len(_stream_payloads(raw))
        assert semconv.TIME_TO_FIRST_TOKEN in a


_TOOL_RECORDINGS: dict[str, list[tuple[str, Any]] | None] = {
    # recording: the tool calls as recorded (name, arguments); None: rebuilt from its deltas
    "converse_mistral_tool_use": [("top_song", {"sign": "Radio XYZ"})],
    "converse_stream_anthropic_tool_call": [("top_song", {"sign": "WZPZ"})],
    "converse_stream_anthropic_tool_use": [("get_weather", {"location": "Barcelona"})],
    "invoke_model_nova_tool_use": [("get_weather", {"location": "Seattle"})],
    "invoke_model_with_response_stream_anthropic_tools": None,
}


def _anthropic_stream_tool_calls(raw: bytes) -> list[tuple[str, Any]]:
    chunks = _stream_payloads(raw)
    calls = []
    for start in chunks:
        if start.get("content_block", {}).get("type") != "tool_use":
            continue
        pieces = [
            c["delta"]["partial_json"]
            for c in chunks
            if c.get("index") == start["index"] and c.get("type") == "content_block_delta"
        ]
        calls.append((start["content_block"]["name"], json.loads("".join(pieces))))
    return calls


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("name", sorted(_TOOL_RECORDINGS))
def test_recorded_tool_calls_are_captured_with_content(server, spans, monkeypatch, name):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    from llmtrace import options

    options.reload()
    request, response = _interaction(RECORDED / "bedrock" / f"{name}.yaml")
    raw = response["body"]["string"]
    content_type = bedrock.EVENTSTREAM if isinstance(raw, bytes) else "application/json"
    server.play_cassette({"request": request, "response": response}, content_type=content_type)
    _send_recorded(PROVIDER.client(server), request, server)
    a = only_span(spans).attributes
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_use",)
    (message,) = json.loads(a[semconv.GEN_AI_OUTPUT_MESSAGES])
    expected = _TOOL_RECORDINGS[name] or _anthropic_stream_tool_calls(raw)
    assert len(expected) >= 1
    found = [
        (
            c["name"],
            json.loads(c["arguments"]) if isinstance(c["arguments"], str) else c["arguments"],
        )
        for c in message["parts"]
        if c["type"] == "tool_call"
    ]
    assert found == expected


_APP = """
import sys

import boto3
import botocore.config

client = boto3.client(
    "bedrock-runtime",
    region_name="us-east-1",
    endpoint_url=sys.argv[1],
    aws_access_key_id="AKIDEXAMPLE",
    aws_secret_access_key="secret",
    config=botocore.config.Config(retries={"max_attempts": 1}),
)
messages = [{"role": "user", "content": [{"text": "Say hello"}]}]
client.converse(modelId="m", messages=messages)
for _event in client.converse_stream(modelId="m", messages=messages)["stream"]:
    pass
"""


def test_unmodified_app_under_opentelemetry_instrument(server, tmp_path):
    """``opentelemetry-instrument`` loads llmtrace's entry point and OpenTelemetry's own botocore
    instrumentation (installed here): each Bedrock call still has one span, llmtrace's."""
    done, traces = run_instrumented_app(_APP, tmp_path, "bedrock-app", server.url)
    assert done.returncode == 0, done.stderr[-3000:]
    spans = exported_spans(traces)
    assert [(scope, span["name"]) for scope, span in spans] == [
        ("llmtrace", "chat m"),
        ("llmtrace", "chat m"),
    ]
    for _, span in spans:
        attributes = {a["key"]: a["value"] for a in span["attributes"]}
        assert attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == {"intValue": "4"}
