"""The SearchColumn paraphrase set of `make eval-tools` holds what it claims (the eval checks tables.json names too)."""

from __future__ import annotations

import json
from pathlib import Path

from agent.tools.text import stemmed_tokens

PARAPHRASES = Path(__file__).parents[3] / "benchmarks" / "tools" / "paraphrases.json"


def test_paraphrases_share_no_word_with_their_column_or_table() -> None:
    pairs = json.loads(PARAPHRASES.read_text(encoding="utf-8"))["pairs"]
    assert len(pairs) >= 40
    assert len({(p["db_id"], p["table"], p["column"], p["query"]) for p in pairs}) == len(pairs)
    for p in pairs:
        named = set(stemmed_tokens(p["column"])) | set(stemmed_tokens(p["table"]))
        assert not named & set(stemmed_tokens(p["query"])), p
