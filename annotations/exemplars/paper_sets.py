"""The paper's 2-shot exemplar sets, vendored in ``paper_prompts/`` and published on first run.

The paper always prompts with two exemplars: the Spider set for Spider, and one of two BIRD sets
depending on whether the evidence is shown. ``ensure_paper_sets`` imports the vendored folders as
published sets (``importer.ensure_paper_sets``, idempotent: a set that exists by name is left alone) after
every ``migrate`` (``AnnotationsConfig.ready``), so ``make run`` and a fresh test database both have them.
``default_version`` picks the set that fits a database or a dataset: the default whenever a user
neither picks a set nor asks for zero-shot.
"""

from __future__ import annotations

from pathlib import Path

from annotations.models import ExemplarSetVersion

PROMPTS_DIR = Path(__file__).resolve().parent / "paper_prompts"

SPIDER = "paper-spider"
BIRD_WITH_EVIDENCE = "paper-bird-evidence"
BIRD_NO_EVIDENCE = "paper-bird-no-evidence"

# set name -> vendored folder
FOLDERS: dict[str, str] = {
    SPIDER: "spider",
    BIRD_WITH_EVIDENCE: "bird-with_evidence",
    BIRD_NO_EVIDENCE: "bird-no_evidence",
}


def default_set_name(*, bird: bool, use_evidence: bool) -> str:
    if not bird:
        return SPIDER
    return BIRD_WITH_EVIDENCE if use_evidence else BIRD_NO_EVIDENCE


def is_bird_database(database) -> bool:
    """A database imported with a BIRD dataset."""
    from annotations.models import Dataset, DatasetQuestion

    return DatasetQuestion.objects.filter(database=database, dataset__kind=Dataset.Kind.BIRD).exists()


def fits_database(set_name: str, *, database, bird: bool | None = None) -> bool:
    """Whether a set is usable on a database: the paper's BIRD sets (their prompts are BIRD's, with or without
    evidence) only on BIRD databases; every other set anywhere. ``bird``: whether it is one, when known."""
    if set_name not in (BIRD_WITH_EVIDENCE, BIRD_NO_EVIDENCE):
        return True
    return is_bird_database(database) if bird is None else bird


def default_version(*, database=None, dataset=None, use_evidence: bool = True) -> ExemplarSetVersion | None:
    """The newest version of the paper set that fits: BIRD (with or without evidence) for a BIRD dataset or a
    database imported with one, Spider for everything else (Spider and your own databases)."""
    from annotations.models import Dataset

    if dataset is not None:
        bird = dataset.kind == Dataset.Kind.BIRD
    elif database is not None:
        bird = is_bird_database(database)
    else:
        bird = False
    name = default_set_name(bird=bird, use_evidence=use_evidence)
    return (ExemplarSetVersion.objects.select_related("exemplar_set")
            .filter(exemplar_set__name=name).order_by("-number").first())
