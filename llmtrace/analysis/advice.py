"""Advice for a stage, each sentence citing the measurement it rests on.

No advice without evidence: every rule reads a figure measured in the traces (a stage's time,
a token count, an attribute) and stays silent when that figure is missing or unremarkable.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from llmtrace import semconv as sc
from llmtrace.analysis.units import format_count, format_seconds, format_share

# Thresholds above which a size is worth naming; below them the rule stays silent.
MANY_DOCUMENTS = 10
LONG_PROMPT_TOKENS = 2000
LONG_OUTPUT_TOKENS = 400
REPEAT_SHARE = 0.10


@dataclass(slots=True)
class Evidence:
    """Aggregated facts from span attributes (means are per call, over calls reporting them)."""

    model_calls: int = 0
    model_calls_per_trace: float = 0.0
    input_tokens_mean: float | None = None
    output_tokens_mean: float | None = None
    output_tokens_per_second_mean: float | None = None
    max_tokens_mean: float | None = None
    non_streamed_calls: int = 0
    # model calls that may have streamed (not known to be unstreamed) with no first-token time:
    # their whole duration counts as ttft ("first-token time not recorded")
    first_token_unrecorded: int = 0
    length_finished_calls: int = 0
    retrieval_calls: int = 0
    retrieval_returned_mean: float | None = None
    retrieval_top_k_mean: float | None = None
    rerank_inputs_mean: float | None = None
    embedding_inputs_mean: float | None = None
    prompt_chars_mean: float | None = None
    new_connection_calls: int = 0
    connect_mean: float | None = None
    server_joined_calls: int = 0
    server_queue_mean: float | None = None
    hashed_prompts: int = 0
    repeated_prompts: int = 0
    hashed_queries: int = 0
    repeated_queries: int = 0
    slowest_tool: dict[str, Any] | None = None
    # model calls the client retried, the mean time lost before their last attempt, and how
    # often each error type refused an attempt (status codes as text, exception classes)
    retried_calls: int = 0
    retry_mean: float | None = None
    retry_error_counts: dict[str, int] = field(default_factory=dict)
    # model calls that failed and whose requests went on to a later call that answered (a
    # framework's retry or fallback), and their error types
    superseded_calls: int = 0
    superseded_error_counts: dict[str, int] = field(default_factory=dict)
    unclaimed_spans: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evidence:
        known = {name for name in cls.__dataclass_fields__}
        return cls(**{key: value for key, value in data.items() if key in known})


@dataclass(slots=True)
class StageFigures:
    """What advice needs to know about one stage."""

    stage: str
    mean: float
    p95: float
    share: float


def _context_size(evidence: Evidence) -> str | None:
    parts = []
    if evidence.retrieval_returned_mean is not None and (
        evidence.retrieval_returned_mean >= MANY_DOCUMENTS
    ):
        parts.append(
            f"retrieval returned {format_count(evidence.retrieval_returned_mean)} documents on "
            f"average ({sc.RETRIEVAL_RETURNED})"
        )
    if evidence.input_tokens_mean is not None and evidence.input_tokens_mean >= LONG_PROMPT_TOKENS:
        parts.append(
            f"prompts averaged {format_count(evidence.input_tokens_mean)} input tokens "
            f"({sc.GEN_AI_USAGE_INPUT_TOKENS})"
        )
    if not parts:
        return None
    return " and ".join(parts) + ": lower top_k or compress the context"


def _advise_ttft(figures: StageFigures, evidence: Evidence) -> list[str]:
    advice = []
    context = _context_size(evidence)
    if context:
        advice.append(context[0].upper() + context[1:] + " to cut time to first token.")
    if evidence.first_token_unrecorded:
        advice.append(
            f"{evidence.first_token_unrecorded} of {evidence.model_calls} model calls recorded "
            "no first-token time, so their whole duration counts as time to first token "
            f"(first-token time not recorded): record it ({sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK}) "
            "to tell prompt processing from generation."
        )
    if evidence.non_streamed_calls:
        advice.append(
            f"{evidence.non_streamed_calls} of {evidence.model_calls} model calls were not "
            f"streamed ({sc.GEN_AI_REQUEST_STREAM}=false), so their whole duration counts as "
            "time to first token: stream responses so users see output sooner."
        )
    if not advice:
        # Say what is known about the prompt behind it, and no more: a server that reports no
        # usage (llama.cpp streams) leaves the context size unknown, not small.
        if evidence.input_tokens_mean is None:
            basis = "input token counts were not reported, so the prompt size is unknown"
        else:
            basis = f"prompts averaged {format_count(evidence.input_tokens_mean)} input tokens"
        if evidence.retrieval_returned_mean is not None:
            basis += (
                f"; retrieval returned {format_count(evidence.retrieval_returned_mean)} "
                "documents on average"
            )
        advice.append(
            f"Time to first token took {format_seconds(figures.mean)} per request on average "
            f"(P95 {format_seconds(figures.p95)}) and {basis}: fewer or shorter passages cut "
            "prompt processing; otherwise try a smaller or faster model, or prefix caching for "
            "the shared prompt."
        )
    return advice


def _advise_generation(figures: StageFigures, evidence: Evidence) -> list[str]:
    advice = []
    if evidence.output_tokens_mean is not None:
        speed = ""
        if evidence.output_tokens_per_second_mean:
            speed = f" at {format_count(evidence.output_tokens_per_second_mean)} tokens/s"
        if evidence.output_tokens_mean >= LONG_OUTPUT_TOKENS:
            remedy = "cap max_tokens and ask for shorter answers."
        else:
            remedy = "the outputs are short, so the model's decoding speed sets this: use a faster model or serving engine."
        advice.append(
            f"Responses averaged {format_count(evidence.output_tokens_mean)} output tokens{speed} "
            f"({sc.GEN_AI_USAGE_OUTPUT_TOKENS}), {format_seconds(figures.mean)} of generation "
            f"per request: {remedy}"
        )
    if evidence.non_streamed_calls:
        advice.append(
            f"{evidence.non_streamed_calls} of {evidence.model_calls} model calls were not "
            f"streamed ({sc.GEN_AI_REQUEST_STREAM}=false): stream to the user so the wait is "
            "spent reading."
        )
    if evidence.length_finished_calls:
        advice.append(
            f"{evidence.length_finished_calls} of {evidence.model_calls} responses stopped at "
            "max_tokens (finish reason 'length'): the limit, not the answer, sets their length."
        )
    if not advice:
        advice.append(
            f"Generation took {format_seconds(figures.mean)} per request on average (P95 "
            f"{format_seconds(figures.p95)}): cap max_tokens and stream to the user."
        )
    return advice


def _advise_queue(figures: StageFigures, evidence: Evidence) -> list[str]:
    where = ""
    if evidence.server_queue_mean:
        where = (
            f"; the model server reported {format_seconds(evidence.server_queue_mean)} of queueing "
            f"per call ({sc.GEN_AI_LATENCY_TIME_IN_QUEUE} / {sc.SERVER_PROXY_QUEUE_TIME})"
        )
    return [
        f"Requests waited {format_seconds(figures.mean)} in queues on average (P95 "
        f"{format_seconds(figures.p95)}, {format_share(figures.share)} of the time){where}: "
        "raise the concurrency limit, batch requests, or add replicas."
    ]


def _advise_network(figures: StageFigures, evidence: Evidence) -> list[str]:
    advice = []
    if evidence.new_connection_calls and evidence.connect_mean is not None:
        advice.append(
            f"{evidence.new_connection_calls} of {evidence.model_calls} model calls opened a new "
            f"connection ({sc.HTTP_CONNECT}, {format_seconds(evidence.connect_mean)} each): reuse "
            "one client so connections are kept alive."
        )
    basis = " (client TTFT minus server TTFT)" if evidence.server_joined_calls else " (HTTP phases)"
    advice.append(
        f"Network took {format_seconds(figures.mean)} per request on average{basis}: run the "
        "application in the model endpoint's region, or closer to it."
    )
    return advice


def _counted(counts: dict[str, int]) -> str:
    """``429 (4), 503 (1)``: most frequent first."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{name} ({count})" for name, count in ordered)


def _rate_limited(error_type: str) -> bool:
    return error_type == "429" or "RateLimit" in error_type or "Throttling" in error_type


def _advise_retry(figures: StageFigures, evidence: Evidence) -> list[str]:
    if not evidence.retried_calls and not evidence.superseded_calls:
        return []
    errors = list(evidence.retry_error_counts) + list(evidence.superseded_error_counts)
    rate_limited = any(_rate_limited(error_type) for error_type in errors)
    cause = "rate limiting" if rate_limited else "refused or failed attempts"
    advice = []
    if evidence.retried_calls:
        mean = (
            "" if evidence.retry_mean is None else f", {format_seconds(evidence.retry_mean)} each"
        )
        advice.append(
            f"{evidence.retried_calls} of {evidence.model_calls} model calls "
            f"({format_share(evidence.retried_calls / evidence.model_calls)}) were retried after "
            f"{_counted(evidence.retry_error_counts)}, and waiting before the retries took "
            f"{format_seconds(figures.mean)} per request on average{mean} ({sc.RETRY_TIME}): "
            f"time lost to {cause}."
        )
    if evidence.superseded_calls:
        advice.append(
            f"{evidence.superseded_calls} of {evidence.model_calls} model calls failed "
            f"({_counted(evidence.superseded_error_counts)}) and their requests went on to a "
            "later call that answered (a framework's retry or fallback): the failed calls and "
            f"the waits after them are stage retry, {format_seconds(figures.mean)} per request "
            f"on average with the client's own retries: time lost to {cause}."
        )
    if rate_limited:
        advice.append(
            "Raise the provider's rate limit, spread requests over time or over more keys or "
            "deployments, or fall back to another deployment when one refuses."
        )
    else:
        advice.append(
            "Look at why the provider refused (its status codes above), and fall back to another "
            "deployment rather than waiting on a failing one."
        )
    return advice


def _advise_retrieval(figures: StageFigures, evidence: Evidence) -> list[str]:
    context = _context_size(evidence)
    advice = [context[0].upper() + context[1:] + "."] if context else []
    advice.append(
        f"Retrieval took {format_seconds(figures.mean)} per request on average over "
        f"{evidence.retrieval_calls} searches: check the index type and the vector store's "
        "latency, and cache results for repeated queries."
    )
    return advice


def _advise_rerank(figures: StageFigures, evidence: Evidence) -> list[str]:
    if evidence.rerank_inputs_mean is not None:
        return [
            f"Reranking took {format_seconds(figures.mean)} per request over "
            f"{format_count(evidence.rerank_inputs_mean)} candidates on average "
            f"({sc.RERANK_INPUT_COUNT}): rerank fewer candidates or use a smaller reranker."
        ]
    return [
        f"Reranking took {format_seconds(figures.mean)} per request on average: rerank fewer "
        "candidates or use a smaller reranker."
    ]


def _advise_embedding(figures: StageFigures, evidence: Evidence) -> list[str]:
    inputs = ""
    if evidence.embedding_inputs_mean is not None:
        inputs = f" for {format_count(evidence.embedding_inputs_mean)} inputs per call ({sc.EMBEDDING_INPUT_COUNT})"
    return [
        f"Embedding took {format_seconds(figures.mean)} per request on average{inputs}: batch "
        "inputs, cache embeddings of repeated texts, or use a smaller embedding model."
    ]


def _advise_tool(figures: StageFigures, evidence: Evidence) -> list[str]:
    tool = evidence.slowest_tool
    if tool:
        return [
            f"Tool '{tool['name']}' took {format_seconds(tool['mean'])} per call over "
            f"{tool['calls']} calls: cache its results or run independent tools concurrently."
        ]
    return [f"Tools took {format_seconds(figures.mean)} per request on average."]


def _advise_other(figures: StageFigures, evidence: Evidence) -> list[str]:
    if evidence.unclaimed_spans:
        top = evidence.unclaimed_spans[0]
        return [
            f"{format_share(figures.share)} of the time is claimed by no stage, most of it in "
            f"span '{top['name']}' ({format_seconds(top['mean'])} per request): wrap that code in "
            "llmtrace.span(..., stage=...) to see what it is."
        ]
    return []


def _advise_simple(label: str, remedy: str) -> Any:
    def advise(figures: StageFigures, evidence: Evidence) -> list[str]:
        return [f"{label} took {format_seconds(figures.mean)} per request on average: {remedy}."]

    return advise


_RULES = {
    "ttft": _advise_ttft,
    "generation": _advise_generation,
    "queue": _advise_queue,
    "network": _advise_network,
    "retry": _advise_retry,
    "retrieval": _advise_retrieval,
    "rerank": _advise_rerank,
    "embedding": _advise_embedding,
    "tool": _advise_tool,
    "other": _advise_other,
    "load": _advise_simple(
        "Loading", "load models and resources once at startup and keep them warm"
    ),
    "prompt": _advise_simple(
        "Prompt building", "cache templates and tokenization, pack less context"
    ),
    "cache": _advise_simple("Cache lookups", "move the cache closer or use a faster store"),
    "postprocess": _advise_simple(
        "Postprocessing", "run validation and guardrails concurrently or on a smaller model"
    ),
}


def advise_stage(figures: StageFigures, evidence: Evidence) -> list[str]:
    """Advice for one stage (the bottleneck or the tail driver), citing its evidence."""
    rule = _RULES.get(figures.stage)
    return rule(figures, evidence) if rule else []


def advise_caching(evidence: Evidence) -> list[str]:
    """Cache advice, only when identical requests were actually seen (content hashes)."""
    advice = []
    if (
        evidence.hashed_prompts
        and evidence.repeated_prompts / evidence.hashed_prompts >= REPEAT_SHARE
    ):
        advice.append(
            f"{evidence.repeated_prompts} of {evidence.hashed_prompts} model calls repeated an "
            f"earlier prompt exactly (identical {sc.GEN_AI_INPUT_MESSAGES}): cache responses for "
            "repeated requests."
        )
    if (
        evidence.hashed_queries
        and evidence.repeated_queries / evidence.hashed_queries >= REPEAT_SHARE
    ):
        advice.append(
            f"{evidence.repeated_queries} of {evidence.hashed_queries} retrievals repeated an "
            f"earlier query exactly ({sc.GEN_AI_RETRIEVAL_QUERY_TEXT}): cache retrieval results."
        )
    return advice
