"""SearchColumn's default model: all-MiniLM-L6-v2 run in numpy, checked against sentence-transformers on torch."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agent.sql import Connector
from agent.tools import DEFAULT_COLUMN_BACKEND, ToolBox, build_indexes, clear_cache, read_manifest
from agent.tools.minilm import shared_model

REFERENCE = Path(__file__).parents[2] / "support" / "data" / "minilm_reference.json"


def test_numpy_forward_pass_matches_sentence_transformers() -> None:
    ref = json.loads(REFERENCE.read_text(encoding="utf-8"))
    ours = shared_model().embed(ref["sentences"])
    cosines = (ours * np.array(ref["vectors"], dtype=np.float32)).sum(axis=1)
    assert cosines.min() > 0.9999, cosines
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_a_sentence_embeds_the_same_alone_or_in_a_padded_batch() -> None:
    model = shared_model()
    texts = ["age", "the name of the stadium where the most concerts were held in 2014 or 2015"]
    together = model.embed(texts)
    alone = np.vstack([model.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)


def test_no_torch_is_loaded() -> None:
    shared_model().embed(["singer age"])
    assert "torch" not in sys.modules and "sentence_transformers" not in sys.modules


@pytest.fixture()
def default_toolbox(connector: Connector, index_dir: Path) -> Iterator[ToolBox]:
    build_indexes(connector, index_dir)
    yield ToolBox(connector, index_dir)
    clear_cache()


def test_default_backend_is_hybrid_and_finds_a_paraphrase(default_toolbox: ToolBox, index_dir: Path) -> None:
    manifest = read_manifest(index_dir)
    assert manifest is not None and manifest.column_backend == DEFAULT_COLUMN_BACKEND == "hybrid"
    # No word shared with singer.age: BM25 alone finds nothing here.
    lines = default_toolbox.run("SearchColumn", ["how old"]).observation.splitlines()
    assert any(line.startswith("- singer.age ") for line in lines[1:4]), lines


def test_default_backend_always_returns_the_top_five(default_toolbox: ToolBox) -> None:
    lines = default_toolbox.run("SearchColumn", ["xylophone"]).observation.splitlines()
    assert lines[0] == "'xylophone':" and len(lines) == 1 + 5


def test_words_of_the_column_name_still_rank_it_first(default_toolbox: ToolBox) -> None:
    assert default_toolbox.run("SearchColumn", ["cityname"]).observation.splitlines()[1].startswith(
        '- "Stage Venue".CityName TEXT')
    assert default_toolbox.run("SearchColumn", ["concert theme"]).observation.splitlines()[1].startswith(
        "- concert.theme TEXT")


def test_embedding_ranking_reads_a_hybrid_index_without_bm25(connector: Connector, index_dir: Path) -> None:
    from agent.tools.column_index import ColumnIndex
    from agent.tools.search_column import format_column

    build_indexes(connector, index_dir)
    index = ColumnIndex(index_dir / read_manifest(index_dir).version, "hybrid")
    phrase = "concert theme"
    fused = index.search_many([phrase], 5)[0]
    alone = index.search_many([phrase], 5, ranking="embedding")[0]
    sims = index.vectors @ index.embedder.embed([phrase])[0]
    best = sorted(range(len(index.docs)), key=lambda i: -float(sims[i]))[:5]
    assert [(d.table, d.column) for d, _ in alone] == [(index.docs[i].table, index.docs[i].column) for i in best]
    assert [s for _, s in alone] == pytest.approx([float(sims[i]) for i in best])
    assert all(s < 0.1 for _, s in fused)  # reciprocal-rank scores, not cosines
    with ToolBox(connector, index_dir, column_ranking="embedding") as tools:
        lines = tools.run("SearchColumn", [phrase]).observation.splitlines()[1:]
    assert [line.split(" | ")[0] for line in lines] == [format_column(d).split(" | ")[0] for d, _ in alone]
    clear_cache()
