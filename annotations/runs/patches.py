"""Optional, visible corrections of a benchmark's databases, applied when a dataset is imported.

The paper's authors added foreign keys that some Spider databases use but do not declare
(``preprocess/spider_missing_fk.json`` in their release). The one that matters most on Spider dev is
flight_2's airlines.uid = flights.Airline: without it FindShortestPath finds no join path for the questions
joining airlines and flights. It is declared as their file writes it (airlines.uid references flights.Airline),
so the schema table shows it on the row they show it on; the paper-replica preset applies the same key by
itself (``agent.strategies.authors_rules.MISSING_FOREIGN_KEYS``) whether or not the import did.

A patch is stored on the dataset (which patches its import applied) and on each patched database (the keys,
with their source), shown on both pages, and used by the schema, the prompt and FindShortestPath.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DatasetPatch:
    name: str
    kind: str  # the dataset kind it applies to
    db_id: str
    foreign_keys: tuple[dict, ...]
    source: str

    def key_dicts(self) -> list[dict]:
        return [{**fk, "source": f"patch {self.name}: {self.source}"} for fk in self.foreign_keys]


PATCHES: dict[str, DatasetPatch] = {
    "flight_2": DatasetPatch(
        name="flight_2", kind="spider", db_id="flight_2",
        foreign_keys=({"table": "airlines", "columns": ["uid"], "ref_table": "flights", "ref_columns": ["Airline"]},),
        source="the paper authors' spider_missing_fk.json (airlines.uid references flights.Airline)"),
}


def patches_for(kind: str, names: list[str] | tuple[str, ...]) -> list[DatasetPatch]:
    """The named patches; a name unknown or for another kind of dataset raises ValueError."""
    out = []
    for name in names:
        patch = PATCHES.get(name)
        if patch is None or patch.kind != kind:
            known = ", ".join(n for n, p in PATCHES.items() if p.kind == kind) or "none"
            raise ValueError(f"No patch {name!r} for {kind} datasets (known: {known}).")
        out.append(patch)
    return out
