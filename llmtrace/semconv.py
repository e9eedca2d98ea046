"""Every attribute name and stage name llmtrace writes or reads, defined once.

Standard names follow the OpenTelemetry GenAI semantic conventions (v1.41.0) and the HTTP/DB
conventions; only what has no standard name lives under ``llmtrace.*``.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

# --- the stage vocabulary (a contract: tests, docs and the report use these exact names) -----
STAGE: Final = "llmtrace.stage"

# --- request context (llmtrace.context): OpenTelemetry's general and GenAI names ---------------
SESSION_ID: Final = "session.id"
USER_ID: Final = "user.id"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"

Stage = Literal[
    "queue",
    "load",
    "prompt",
    "embedding",
    "retrieval",
    "rerank",
    "cache",
    "retry",
    "ttft",
    "generation",
    "tool",
    "network",
    "postprocess",
    "other",
]
STAGES: Final[tuple[str, ...]] = get_args(Stage)
# A model-call span's own tag: the call as a whole, which is ``ttft`` until its first-token event
# (FIRST_TOKEN_EVENT, at ``llmtrace.time_to_first_token``) and ``generation`` after it. A span's
# tag must read true where users read raw spans (Jaeger): the call is not all ``ttft``. The report
# splits such a span at its first token, so no time is ever reported under this name: it is a
# value of the tag, not a stage of the breakdown (``STAGES``).
LLM_STAGE: Final = "model"
# The tag earlier releases wrote on a model-call span. Both readers still split a span tagged
# ``ttft`` at its first token, so files recorded before read as they always did (and a span an
# application tags ``ttft`` itself reads the same way).
EARLIER_LLM_STAGE: Final = "ttft"
MODEL_CALL_STAGES: Final = frozenset({LLM_STAGE, EARLIER_LLM_STAGE})
# Every value a span's ``llmtrace.stage`` may take: the stages, and the model call's own tag.
SPAN_STAGES: Final[tuple[str, ...]] = (*STAGES, LLM_STAGE)

# --- GenAI semantic conventions ---------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_FREQUENCY_PENALTY: Final = "gen_ai.request.frequency_penalty"
GEN_AI_REQUEST_PRESENCE_PENALTY: Final = "gen_ai.request.presence_penalty"
GEN_AI_REQUEST_CHOICE_COUNT: Final = "gen_ai.request.choice.count"
GEN_AI_REQUEST_ENCODING_FORMATS: Final = "gen_ai.request.encoding_formats"
GEN_AI_EMBEDDINGS_DIMENSION_COUNT: Final = "gen_ai.embeddings.dimension.count"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_DATA_SOURCE_ID: Final = "gen_ai.data_source.id"
GEN_AI_RETRIEVAL_TOP_K: Final = "gen_ai.retrieval.top_k"
GEN_AI_RETRIEVAL_QUERY_TEXT: Final = "gen_ai.retrieval.query.text"
GEN_AI_RETRIEVAL_DOCUMENTS: Final = "gen_ai.retrieval.documents"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
# vLLM's server span (llm_request) carries these, in seconds.
GEN_AI_LATENCY_TIME_IN_QUEUE: Final = "gen_ai.latency.time_in_queue"
GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN: Final = "gen_ai.latency.time_to_first_token"
GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL: Final = "gen_ai.latency.time_in_model_prefill"
GEN_AI_LATENCY_TIME_IN_MODEL_DECODE: Final = "gen_ai.latency.time_in_model_decode"
GEN_AI_LATENCY_E2E: Final = "gen_ai.latency.e2e"

# gen_ai.operation.name values
OP_CHAT: Final = "chat"
OP_TEXT_COMPLETION: Final = "text_completion"
OP_EMBEDDINGS: Final = "embeddings"
OP_RETRIEVAL: Final = "retrieval"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_GENERATE_CONTENT: Final = "generate_content"

# --- general conventions ----------------------------------------------------------------------
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
ERROR_TYPE: Final = "error.type"
HTTP_REQUEST_METHOD: Final = "http.request.method"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
# On a model call the client sent more than once: how many times it resent the request.
HTTP_REQUEST_RESEND_COUNT: Final = "http.request.resend_count"
HTTP_ROUTE: Final = "http.route"
URL_FULL: Final = "url.full"
URL_PATH: Final = "url.path"
URL_SCHEME: Final = "url.scheme"
DB_SYSTEM_NAME: Final = "db.system.name"
DB_COLLECTION_NAME: Final = "db.collection.name"
DB_OPERATION_NAME: Final = "db.operation.name"
DB_OPERATION_BATCH_SIZE: Final = "db.operation.batch.size"

# --- llmtrace's own (no standard name exists) -------------------------------------------------
# Span events on a model call at the instants they happened, so that a trace viewer draws them on
# the span's bar (Jaeger lists them under the span's Logs): the first token (the moment the report
# splits the call into ttft and generation: the first chunk with output content, else the first
# chunk) and the response headers. The GenAI conventions name no such events. They carry no
# attributes (the times are the span's attributes too) and so no content, whatever is captured.
FIRST_TOKEN_EVENT: Final = "llmtrace.first_token"
RESPONSE_HEADERS_EVENT: Final = "llmtrace.response_headers"
TIME_TO_HEADERS: Final = "llmtrace.time_to_headers"
TIME_TO_FIRST_TOKEN: Final = "llmtrace.time_to_first_token"
GENERATION_TIME: Final = "llmtrace.generation_time"
OUTPUT_TOKENS_PER_SECOND: Final = "llmtrace.output_tokens_per_second"
CHUNK_COUNT: Final = "llmtrace.chunk_count"
STREAM_END: Final = "llmtrace.stream.end"  # completed | closed | abandoned | error
USAGE_INPUT_TOKENS_ESTIMATED: Final = "llmtrace.usage.input_tokens_estimated"
USAGE_OUTPUT_TOKENS_ESTIMATED: Final = "llmtrace.usage.output_tokens_estimated"
RETRIEVAL_RETURNED: Final = "llmtrace.retrieval.returned"
RERANK_TOP_N: Final = "llmtrace.rerank.top_n"
RERANK_INPUT_COUNT: Final = "llmtrace.rerank.input_count"
EMBEDDING_INPUT_COUNT: Final = "llmtrace.embedding.input_count"
EMBEDDING_BATCH_SIZE: Final = "llmtrace.embedding.batch_size"
PROMPT_CHARS: Final = "llmtrace.prompt.chars"
# A model call whose client retried (a refusal such as 429 or 503, or a failed connection):
# the time from the call's start to its last attempt (the refused attempts and the waits before
# trying again; the report's ``retry`` stage), and each refused attempt's error type (its status
# code as text, or the exception's class), in order.
RETRY_TIME: Final = "llmtrace.retry.time"
RETRY_ERROR_TYPES: Final = "llmtrace.retry.error_types"
# The span event at each retry, carrying the attempt it follows: its error type and status code,
# its own time to headers, the wait before the retry, and ``http.request.resend_count``.
RETRY_EVENT: Final = "llmtrace.retry"
RETRY_WAIT: Final = "llmtrace.retry.wait"
ATTEMPT_TIME_TO_HEADERS: Final = "llmtrace.attempt.time_to_headers"
# HTTP transport phases (seconds), from the client's own hooks.
HTTP_CONNECT: Final = "llmtrace.http.connect"
HTTP_TLS: Final = "llmtrace.http.tls"
HTTP_REQUEST_SENT: Final = "llmtrace.http.request_sent"
HTTP_RESPONSE_HEADERS: Final = "llmtrace.http.response_headers"
HTTP_BODY_COMPLETE: Final = "llmtrace.http.body_complete"
# Server-reported timings (seconds) returned in a response body or header.
SERVER_QUEUE_TIME: Final = "llmtrace.server.queue_time"
SERVER_PROMPT_TIME: Final = "llmtrace.server.prompt_time"
SERVER_GENERATION_TIME: Final = "llmtrace.server.generation_time"
SERVER_PROCESSING_TIME: Final = "llmtrace.server.processing_time"
SERVER_TIME_TO_FIRST_TOKEN: Final = "llmtrace.server.time_to_first_token"
SERVER_INFERENCE_TIME: Final = "llmtrace.server.inference_time"
# Server middleware: proxy queueing from X-Request-Start.
SERVER_PROXY_QUEUE_TIME: Final = "llmtrace.server.proxy_queue_time"
# Queue-stage spans: which queue (semaphore, worker pool, proxy) was waited for.
QUEUE_NAME: Final = "llmtrace.queue.name"
# The client's view of a streamed HTTP answer (llmtrace bench --url), seconds from sending the
# request: the first body byte, and the first complete SSE ``data:`` line (what a user sees first).
CLIENT_TIME_TO_FIRST_BYTE: Final = "llmtrace.client.time_to_first_byte"
CLIENT_TIME_TO_FIRST_EVENT: Final = "llmtrace.client.time_to_first_event"
# Benchmark runs.
BENCH_RUN: Final = "llmtrace.bench.run"
BENCH_QUESTION_ID: Final = "llmtrace.bench.question_id"
BENCH_CONCURRENCY: Final = "llmtrace.bench.concurrency"
BENCH_QUESTION_SET_HASH: Final = "llmtrace.bench.question_set_hash"
BENCH_WARMUP: Final = "llmtrace.bench.warmup"

# Instrumentation scope name used for every tracer and meter llmtrace creates.
SCOPE_NAME: Final = "llmtrace"

# --- Ollama (llmtrace.instrumentation.providers.ollama) -------------------------------------------------
GEN_AI_REQUEST_TOP_K: Final = "gen_ai.request.top_k"
# Server-reported time spent loading the model before the request could run (seconds; Ollama's
# load_duration). Part of the server's time to first token; the report counts it as stage load.
SERVER_LOAD_TIME: Final = "llmtrace.server.load_time"

# --- Cohere (llmtrace.instrumentation.providers.cohere) -------------------------------------------------
# A rerank call to a provider's API (no GenAI operation name exists for it yet).
OP_RERANK: Final = "rerank"
# What the provider bills, when it differs from the tokens the model processed (Cohere reports
# both: ``billed_units`` leaves out the prompt template's tokens; rerank bills search units).
USAGE_BILLED_INPUT_TOKENS: Final = "llmtrace.usage.billed_input_tokens"
USAGE_BILLED_OUTPUT_TOKENS: Final = "llmtrace.usage.billed_output_tokens"
USAGE_BILLED_SEARCH_UNITS: Final = "llmtrace.usage.billed_search_units"

# --- Amazon Bedrock (llmtrace.instrumentation.providers.bedrock): OpenTelemetry's AWS names --------------
AWS_REQUEST_ID: Final = "aws.request_id"
AWS_BEDROCK_GUARDRAIL_ID: Final = "aws.bedrock.guardrail.id"
# What a guardrail did (Bedrock: NONE, GUARDRAIL_INTERVENED / INTERVENED), on a guardrail check's
# span and on a model call a guardrail watched.
GUARDRAIL_ACTION: Final = "llmtrace.guardrail.action"
