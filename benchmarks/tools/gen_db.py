"""A large synthetic SQLite database for the speed benchmark, generated deterministically.

40 tables x 10,000 rows; each table has an id, a foreign key to an earlier
table (a tree, so every pair of tables is joinable), six text columns and
table 0 a numeric one: 321 columns, 2.4 million text cells of seven kinds
(person names, cities, categories, product names, sentences, codes, emails)
with realistic repetition. Same seed, same bytes: the file is cached by name.
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
from pathlib import Path

SEED = 20260101
TABLES = 40
ROWS = 10_000
TEXT_COLUMNS = 6
VERSION = 1
KINDS = ("person", "city", "category", "product", "sentence", "code", "email")
_SYLLABLES = ("ka", "lo", "mi", "ran", "te", "vo", "shi", "ber", "dal", "qu", "nor", "el", "sta", "vin", "gor",
              "ple", "tha", "rix", "mun", "so", "fe", "dra", "lun", "ca", "pe", "zor", "ha", "bri", "ton", "ya")
_ACCENTED = {"a": "á", "e": "é", "o": "ö", "u": "ü", "i": "í"}


def default_path() -> Path:
    return Path(tempfile.gettempdir()) / "t2s-bench" / f"generated-v{VERSION}-{TABLES}x{ROWS}.sqlite"


def _word(rng: random.Random, lo: int = 2, hi: int = 3) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(lo, hi)))


def _vocab(rng: random.Random, n: int, lo: int = 2, hi: int = 3) -> list[str]:
    words: dict[str, None] = {}
    while len(words) < n:
        w = _word(rng, lo, hi)
        if rng.random() < 0.05:  # some accented spellings, as in real names
            i = rng.randrange(len(w))
            w = w[:i] + _ACCENTED.get(w[i], w[i]) + w[i + 1:]
        words[w] = None
    return list(words)


def generate(path: Path | None = None) -> Path:
    """Create the database at ``path`` (default: a cache file) unless it already exists."""
    path = path or default_path()
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    first = [w.capitalize() for w in _vocab(rng, 300)]
    last = [w.capitalize() for w in _vocab(rng, 500, 2, 4)]
    cities = [" ".join(w.capitalize() for w in (_word(rng), _word(rng, 1, 2))[: rng.randint(1, 2)])
              for _ in range(3000)]
    categories = ["Electronics", "Garden Tools", "Home & Kitchen", "Books", "Toys", "Sports", "Beauty",
                  "Automotive", "Grocery", "Office Supplies", "Music", "Pet Supplies", "Jewelry", "Shoes",
                  "Baby Products", "Health", "Software", "Video Games", "Crafts", "Outdoor"]
    adjectives = [w.capitalize() for w in _vocab(rng, 400)]
    nouns = [w.capitalize() for w in _vocab(rng, 800)]
    words = _vocab(rng, 5000, 1, 4)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    kinds_of: list[list[str]] = []
    for t in range(TABLES):
        kinds = [KINDS[(t + j) % len(KINDS)] for j in range(TEXT_COLUMNS)]
        kinds_of.append(kinds)
        cols = ["id INTEGER PRIMARY KEY"]
        if t > 0:
            parent = rng.randrange(t)
            cols.append(f"t{parent:02d}_id INTEGER REFERENCES t{parent:02d}(id)")
        else:
            cols.append("amount REAL")
        cols += [f"{kind}_{j} TEXT" for j, kind in enumerate(kinds)]
        conn.execute(f"CREATE TABLE t{t:02d} ({', '.join(cols)})")
        rows = []
        for i in range(1, ROWS + 1):
            row: list[object] = [i, rng.randint(1, ROWS) if t > 0 else round(rng.uniform(1, 1000), 2)]
            for kind in kinds:
                if kind == "person":
                    row.append(f"{rng.choice(first)} {rng.choice(last)}")
                elif kind == "city":
                    row.append(rng.choice(cities))
                elif kind == "category":
                    row.append(rng.choice(categories))
                elif kind == "product":
                    row.append(f"{rng.choice(adjectives)} {rng.choice(nouns)} {rng.choice('XYZ')}-{rng.randint(1, 99)}")
                elif kind == "sentence":
                    row.append(" ".join(rng.choice(words) for _ in range(rng.randint(5, 14))).capitalize() + ".")
                elif kind == "code":
                    row.append(f"{rng.choice('ABCDEFGH')}{rng.choice('KLMNP')}-{rng.randint(0, 999_999):06d}")
                else:
                    row.append(f"{rng.choice(first).lower()}.{rng.choice(last).lower()}{rng.randint(1, 99)}"
                               f"@{rng.choice(('example.com', 'mail.test', 'corp.test'))}")
            rows.append(row)
        conn.executemany(f"INSERT INTO t{t:02d} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    conn.commit()
    conn.close()
    tmp.rename(path)
    return path


if __name__ == "__main__":
    print(generate())
