"""What each LlamaIndex span is: the kinds of object and method llmtrace keeps, their span names
and start attributes, and what a model response says (see
:mod:`llmtrace.instrumentation.frameworks.llama_index`, which turns the dispatcher's notices into spans).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from opentelemetry.trace import Span

from llmtrace import semconv
from llmtrace._checks import is_int
from llmtrace._urls import default_port
from llmtrace.instrumentation.model_call import field_of, fields_of
from llmtrace.instrumentation.provider import configured_provider_name, provider_name
from llmtrace.instrumentation.providers.openai import summarize_stream
from llmtrace.instrumentation.response_summary import ResponseSummary

# What a kept span is.
ENGINE = "engine"
WORKFLOW = "workflow"
STEP = "step"
RETRIEVAL = "retrieval"
RERANK = "rerank"
SYNTHESIZER = "synthesizer"
MODEL = "model"
EMBEDDING = "embedding"
TOOL = "tool"

CHAT_METHODS = frozenset({"chat", "achat", "stream_chat", "astream_chat"})
COMPLETE_METHODS = frozenset({"complete", "acomplete", "stream_complete", "astream_complete"})
# Kinds whose nested calls on the same object are the same operation (``complete`` sending
# ``chat``, a tool's ``__call__`` calling ``call``, a batch embedding its texts).
ONE_PER_OBJECT = frozenset({MODEL, EMBEDDING, TOOL, RERANK, RETRIEVAL})


def span_kinds() -> list[tuple[type, frozenset[str], str]]:
    """(base class, the methods kept, kind), in the order they are tried."""
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.base.llms.base import BaseLLM
    from llama_index.core.chat_engine.types import BaseChatEngine
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.response_synthesizers.base import BaseSynthesizer
    from llama_index.core.tools.types import BaseTool
    from llama_index.core.workflow import Workflow

    return [
        (BaseLLM, CHAT_METHODS | COMPLETE_METHODS, MODEL),
        (
            BaseEmbedding,
            frozenset(
                {
                    "get_query_embedding",
                    "aget_query_embedding",
                    "get_text_embedding",
                    "aget_text_embedding",
                    "get_text_embedding_batch",
                    "aget_text_embedding_batch",
                    "get_agg_embedding_from_queries",
                    "aget_agg_embedding_from_queries",
                }
            ),
            EMBEDDING,
        ),
        (BaseRetriever, frozenset({"retrieve", "aretrieve"}), RETRIEVAL),
        (
            BaseNodePostprocessor,
            frozenset({"_postprocess_nodes", "_apostprocess_nodes"}),
            RERANK,
        ),
        (BaseSynthesizer, frozenset({"synthesize", "asynthesize"}), SYNTHESIZER),
        (BaseQueryEngine, frozenset({"query", "aquery"}), ENGINE),
        (BaseChatEngine, CHAT_METHODS, ENGINE),
        (BaseTool, frozenset({"call", "acall", "__call__"}), TOOL),
        (Workflow, frozenset({"run"}), WORKFLOW),
    ]


def is_agent(workflow: Any) -> bool:
    try:
        from llama_index.core.agent.workflow import AgentWorkflow, BaseWorkflowAgent

        if isinstance(workflow, (AgentWorkflow, BaseWorkflowAgent)):
            return True
    except ImportError:
        pass
    return "agent" in type(workflow).__name__.lower()


class ResponseParser(ResponseSummary):
    """What LlamaIndex's ``ChatResponse``/``CompletionResponse`` objects say about one model call:
    content for TTFT, and the provider's own response (``raw``: an OpenAI- or LiteLLM-shaped
    response or chunk, or an Anthropic message) for id, model, finish reasons and usage."""

    __slots__ = ("reasons", "reported_usage")

    def __init__(self) -> None:
        ResponseSummary.__init__(self)
        self.reasons: dict[int, str] = {}
        self.reported_usage: Any = None

    def has_content(self, response: Any) -> bool:
        if getattr(response, "delta", None):
            return True
        message = getattr(response, "message", None)
        extra = getattr(message, "additional_kwargs", None) or {}
        return bool(extra.get("tool_calls"))

    def observe(self, response: Any) -> None:
        raw = getattr(response, "raw", None)
        if raw is None:
            return
        get = fields_of(raw).get
        response_id = get("id")
        if self.response_id is None and isinstance(response_id, str) and response_id:
            self.response_id = response_id
        model = get("model")
        if isinstance(model, str) and model:
            self.response_model = model
        usage = get("usage")
        if usage is not None:
            self.reported_usage = usage
        for position, choice in enumerate(get("choices") or ()):
            reason = field_of(choice, "finish_reason")
            if reason:
                index = field_of(choice, "index")
                self.reasons[index if isinstance(index, int) else position] = str(reason)
        stop_reason = get("stop_reason")  # an Anthropic message
        if isinstance(stop_reason, str) and stop_reason:
            self.reasons[0] = stop_reason

    def finish(self, span: Span) -> None:
        summarize_stream(self, self.reasons, self.reported_usage)
        self.set_on(span)

    def output_tokens(self) -> int | None:
        value = field_of(self.reported_usage, "completion_tokens")
        if value is None:
            value = field_of(self.reported_usage, "output_tokens")
        return value if is_int(value) else None


def method_of(span_id: str) -> str:
    """The method of a dispatcher span id (``{class}.{method}-{uuid}``)."""
    return span_id.split("-", 1)[0].rsplit(".", 1)[-1]


def describe(kind: str, id_: str, instance: Any, bound_args: Any) -> tuple[str, dict[str, Any]]:
    """The span's name and start attributes."""
    arguments = getattr(bound_args, "arguments", None) or {}
    class_name = type(instance).__name__
    if kind == MODEL:
        model = getattr(instance, "model", None) or getattr(instance, "model_name", None)
        model = str(model or class_name)
        method = method_of(id_)
        operation = semconv.OP_CHAT if method in CHAT_METHODS else semconv.OP_TEXT_COMPLETION
        attributes: dict[str, Any] = {
            semconv.STAGE: semconv.LLM_STAGE,
            semconv.GEN_AI_OPERATION_NAME: operation,
            semconv.GEN_AI_REQUEST_MODEL: model,
            semconv.GEN_AI_REQUEST_STREAM: "stream" in method,
        }
        attributes.update(endpoint_attributes(instance, model))
        for name, attribute in (
            ("temperature", semconv.GEN_AI_REQUEST_TEMPERATURE),
            ("max_tokens", semconv.GEN_AI_REQUEST_MAX_TOKENS),
        ):
            value = getattr(instance, name, None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                attributes[attribute] = value
        return f"{operation} {model}", attributes
    if kind == EMBEDDING:
        model = str(getattr(instance, "model_name", None) or class_name)
        attributes = {
            semconv.STAGE: "embedding",
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EMBEDDINGS,
            semconv.GEN_AI_REQUEST_MODEL: model,
        }
        texts = arguments.get("texts", arguments.get("queries"))
        count = len(texts) if isinstance(texts, list) else 1
        attributes[semconv.EMBEDDING_INPUT_COUNT] = count
        return f"{semconv.OP_EMBEDDINGS} {model}", attributes
    if kind == RETRIEVAL:
        store = getattr(instance, "_vector_store", None)
        source = type(store).__name__ if store is not None else class_name
        attributes = {
            semconv.STAGE: "retrieval",
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_RETRIEVAL,
            semconv.GEN_AI_DATA_SOURCE_ID: source,
        }
        top_k = getattr(instance, "_similarity_top_k", getattr(instance, "similarity_top_k", None))
        if is_int(top_k):
            attributes[semconv.GEN_AI_RETRIEVAL_TOP_K] = top_k
        return f"{semconv.OP_RETRIEVAL} {source}", attributes
    if kind == RERANK:
        attributes = {semconv.STAGE: "rerank"}
        nodes = arguments.get("nodes")
        if isinstance(nodes, list):
            attributes[semconv.RERANK_INPUT_COUNT] = len(nodes)
        top_n = getattr(instance, "top_n", None)
        if is_int(top_n):
            attributes[semconv.RERANK_TOP_N] = top_n
        model = getattr(instance, "model", None)
        if isinstance(model, str) and model:
            attributes[semconv.GEN_AI_REQUEST_MODEL] = model
        return f"rerank {class_name}", attributes
    if kind == TOOL:
        metadata = getattr(instance, "metadata", None)
        tool = str(getattr(metadata, "name", None) or class_name)
        attributes = {
            semconv.STAGE: "tool",
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: tool,
        }
        return f"{semconv.OP_EXECUTE_TOOL} {tool}", attributes
    if kind == SYNTHESIZER:
        return class_name, {semconv.STAGE: "postprocess"}
    if kind == WORKFLOW and is_agent(instance):
        attributes = {
            semconv.STAGE: "other",
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
            semconv.GEN_AI_AGENT_NAME: class_name,
        }
        return f"{semconv.OP_INVOKE_AGENT} {class_name}", attributes
    if kind == STEP:
        return method_of(id_), {semconv.STAGE: "other"}
    return class_name, {semconv.STAGE: "other"}


def endpoint_attributes(llm: Any, model: str) -> dict[str, Any]:
    """``gen_ai.provider.name`` and ``server.*`` of a model: LlamaIndex's LiteLLM model is named
    as the LiteLLM instrumentation names its calls; another with an ``api_base``, from its URL."""
    extra = getattr(llm, "additional_kwargs", None)
    api_base = getattr(llm, "api_base", None) or (
        extra.get("api_base") if isinstance(extra, dict) else None
    )
    if not isinstance(api_base, str):
        api_base = None
    if type(llm).__module__.startswith("llama_index.llms.litellm"):
        from llmtrace.instrumentation.frameworks.litellm import _endpoint

        custom = getattr(llm, "_custom_llm_provider", None)
        custom = custom if isinstance(custom, str) else None
        return dict(_endpoint(model, custom, api_base, configured_provider_name())[1])
    if api_base is None:
        return {}
    parts = urlsplit(api_base)
    if not parts.hostname:
        return {}
    return {
        semconv.GEN_AI_PROVIDER_NAME: provider_name(parts.hostname, parts.port, parts.path),
        semconv.SERVER_ADDRESS: parts.hostname,
        semconv.SERVER_PORT: parts.port or default_port(parts.scheme),
    }
