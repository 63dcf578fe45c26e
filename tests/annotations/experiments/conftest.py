"""Fixtures for exemplar experiments: a small dataset on a built database, exemplars whose text carries a
marker the scripted LLM looks for, a published set, and the workers' job done in this process."""

from __future__ import annotations

import pytest

from agent.models import AgentSession, DatabaseGrant
from agent.roles import ANNOTATOR, CURATOR
from agent.services import sessions
from annotations.exemplars import services as exemplar_services
from annotations.runs import services as run_services
from annotations.runs.models import Run
from tests.conftest import give_roles, group_of_testers, seed_taxonomy_and_roles
from tests.support.run_dataset import question as shop_question
from tests.support.run_dataset import write_dataset


@pytest.fixture(autouse=True)
def seeded(db):
    """The seeded taxonomy and roles (a transactional test elsewhere may have flushed them)."""
    seed_taxonomy_and_roles()


@pytest.fixture
def shop(db, tmp_path):
    """A JSONL dataset of 8 count questions on the ``shop`` database (indexed), granted to ``testers``."""
    path = write_dataset(tmp_path / "shop-data", 8)
    dataset = run_services.dataset_import(kind="jsonl", path=path, name="shop-8")
    for database_id in set(dataset.questions.exclude(database=None).values_list("database_id", flat=True)):
        DatabaseGrant.objects.get_or_create(database_id=database_id, group=group_of_testers())
    return dataset


@pytest.fixture
def curator(django_user_model):
    user = django_user_model.objects.create_user("cleo", "cleo@example.com", "pw-cleo-123")
    user.groups.add(group_of_testers())
    return give_roles(user, CURATOR)


@pytest.fixture
def annotator(django_user_model):
    user = django_user_model.objects.create_user("ana", "ana@example.com", "pw-ana-123")
    user.groups.add(group_of_testers())
    return give_roles(user, ANNOTATOR)


@pytest.fixture
def make_exemplar(shop):
    """An exemplar on the shop database whose thought carries ``marker`` (so the replay script can tell whether
    it is in the prompt), written through the services with the real tools; ``approve`` reviews it too."""

    def make(marker: str, *, author, reviewer=None, question: str | None = None):
        database = shop.questions.first().database
        exemplar = exemplar_services.exemplar_create(
            user=author, database=database, question=question or f"How many items have an id below 10? ({marker})")
        exemplar_services.step_add(exemplar=exemplar, user=author, thought=f"Count them. {marker}",
                                   action='ExecuteSQL("SELECT count(*) FROM item WHERE id < 10")')
        exemplar_services.step_add(exemplar=exemplar, user=author, thought="That answers it.", action="Done")
        exemplar.refresh_from_db()
        if reviewer is not None:
            exemplar_services.exemplar_submit(exemplar=exemplar, user=author)
            exemplar_services.exemplar_review(exemplar=exemplar, user=reviewer, approve=True)
        return exemplar

    return make


@pytest.fixture
def team(make_exemplar, annotator, curator):
    """Set "team" published as v1 with one approved exemplar, A (its thought carries MARK-A)."""
    a = make_exemplar("MARK-A", author=annotator, reviewer=curator)
    exemplar_set = exemplar_services.set_create(name="team", user=curator)
    exemplar_services.set_publish(exemplar_set=exemplar_set, exemplars=[a], user=curator)
    return exemplar_set


def gold_of(i: int) -> str:
    return shop_question(i)[1]


def helped_script(helped: dict[int, str], *, n: int = 8, always_right: set[int] = frozenset()) -> dict:
    """A keyed replay script over the shop questions: question i is answered with its gold query when the
    system message holds the marker ``helped[i]`` (else a wrong query); questions in ``always_right`` always
    get the gold, the rest always a wrong one. Stateless per turn, so every trial and arm gets the same."""
    scripts = {}
    for i in range(n):
        text, gold = shop_question(i)
        right = f'Thought: count, question {i}\nAction: ExecuteSQL("{gold}")'
        wrong = f'Thought: guess, question {i}\nAction: ExecuteSQL("SELECT count(*) FROM item WHERE grp = 99")'
        if i in helped:
            first = {"if_system_contains": helped[i], "then": right, "else": wrong}
        else:
            first = right if i in always_right else wrong
        scripts[text] = {"by_turn": [first, "Thought: that is the answer\nAction: Done"]}
    return {"scripts": scripts}


def drive(runs, *, passes: int = 400) -> None:
    """What the dispatch, session and evaluation tasks do, in this process, until every run is scored."""
    runs = list(runs)
    for _ in range(passes):
        busy = [run for run in runs if run_services.run_dispatch(run=run)]
        queued = list(AgentSession.objects.filter(status="queued").values_list("pk", flat=True))
        for pk in queued:
            sessions.session_execute(session_id=pk)
        for run in runs:
            run.refresh_from_db()
            if run.status == Run.Status.EVALUATING:
                run_services.run_evaluate(run=run)
        if not busy and not queued:
            break
    else:
        pytest.fail("the experiment's runs still had work in flight")
    for run in runs:
        run.refresh_from_db()
