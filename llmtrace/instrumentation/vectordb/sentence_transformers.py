"""sentence-transformers: ``SentenceTransformer.encode`` as an ``embedding`` span.

``encode_query`` / ``encode_document`` call ``encode``, so patching ``encode`` alone gives one span
per call. The span is ``embeddings {model}`` (kind INTERNAL: the model runs in this process) with
``gen_ai.operation.name=embeddings``, ``gen_ai.request.model``, the number of inputs
(``llmtrace.embedding.input_count``), the encode batch size (``llmtrace.embedding.batch_size``)
and the dimension of the returned vectors (``gen_ai.embeddings.dimension.count``).

The model name is the Hub id the model card records; a model loaded from a local directory
without one is named by the last two parts of its path. Set ``model.model_card_data.model_id``
to name it explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

# The module opts out of type checking (a file-level "type: ignore"), so mypy sees no names in it.
from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

from llmtrace import semconv
from llmtrace.instrumentation._instrumentor import LibraryInstrumentor, PatchRow
from llmtrace.instrumentation.vectordb._spans import (
    NOTHING,
    Operation,
    Outcome,
    argument,
    sync_wrapper,
)
from llmtrace.sdk.gate import get_tracer

PROVIDER = "sentence_transformers"
_DEFAULT_BATCH_SIZE = 32  # encode()'s own default


def model_name(model: Any) -> str:
    """The name a span should carry for ``model`` (see the module doc)."""
    card = getattr(model, "model_card_data", None)
    for attribute in ("model_id", "base_model"):
        value = getattr(card, attribute, None)
        if isinstance(value, str) and value:
            return value
    transformers_model = getattr(model, "transformers_model", None)
    path = getattr(getattr(transformers_model, "config", None), "_name_or_path", None)
    if isinstance(path, str) and path:
        return "/".join(Path(path).parts[-2:]) if Path(path).is_dir() else path
    return type(model).__name__


def _input_count(inputs: Any) -> int:
    if isinstance(inputs, str | dict):
        return 1
    if isinstance(inputs, Sequence):
        return len(inputs)
    return 1


def _describe_encode(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Operation:
    inputs = argument(args, kwargs, 0, "inputs", argument(args, kwargs, 0, "sentences"))
    batch_size = argument(args, kwargs, 3, "batch_size", _DEFAULT_BATCH_SIZE)
    name = model_name(instance)
    attributes: dict[str, AttributeValue] = {
        semconv.STAGE: "embedding",
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_EMBEDDINGS,
        semconv.GEN_AI_PROVIDER_NAME: PROVIDER,
        semconv.GEN_AI_REQUEST_MODEL: name,
        semconv.EMBEDDING_INPUT_COUNT: _input_count(inputs),
        semconv.EMBEDDING_BATCH_SIZE: int(batch_size),
    }
    return Operation(
        name=f"{semconv.OP_EMBEDDINGS} {name}",
        stage="embedding",
        attributes=attributes,
        identity=(semconv.GEN_AI_REQUEST_MODEL, name),
        kind=SpanKind.INTERNAL,
    )


def _dimension(result: Any) -> int | None:
    shape = getattr(result, "shape", None)
    if shape is not None and len(shape) >= 1:
        return int(shape[-1])
    if isinstance(result, Sequence) and result:
        return _dimension(result[0])
    return None


def _read_encode(result: Any) -> Outcome:
    dimension = _dimension(result)
    if dimension is None:
        return NOTHING
    return Outcome(attributes={semconv.GEN_AI_EMBEDDINGS_DIMENSION_COUNT: dimension})


class SentenceTransformersInstrumentor(LibraryInstrumentor):
    """Traces ``SentenceTransformer.encode``."""

    package = "sentence-transformers"
    supported = ">= 3, < 8"

    def patches(self) -> Iterable[PatchRow]:
        # The class moved in 5.x; the top-level name exists in every supported version.
        yield (
            "sentence_transformers",
            "SentenceTransformer.encode",
            sync_wrapper(get_tracer(), _describe_encode, _read_encode),
        )
