"""The paper's 2-shot sets are vendored, published on first run, and used unless a user says otherwise."""

from io import StringIO

import pytest
from django.core.management import call_command

from agent.services import sessions
from annotations.exemplars import paper_sets
from annotations.exemplars.importer import ensure_paper_sets
from annotations.exemplars.selectors import few_shot_for_version
from annotations.models import Dataset, DatasetQuestion, ExemplarSet, ExemplarSetVersion
from tests.conftest import SHARED_DIR

pytestmark = pytest.mark.django_db

VENDORED = paper_sets.PROMPTS_DIR
REFERENCE = SHARED_DIR / "reference" / "interactive_t2s_prompts"


def test_the_vendored_folders_are_the_authors_files_with_their_licence():
    assert (VENDORED / "LICENSE").read_text().startswith("MIT License")
    assert "JimXiongGM/Interactive-Text-to-SQL" in (VENDORED / "ORIGIN.md").read_text()
    for folder in paper_sets.FOLDERS.values():
        files = sorted(p.relative_to(VENDORED / folder) for p in (VENDORED / folder).rglob("*") if p.is_file())
        assert files, folder
        if REFERENCE.is_dir():  # byte for byte what the authors released
            for rel in files:
                assert (VENDORED / folder / rel).read_bytes() == (REFERENCE / folder / rel).read_bytes(), rel


def test_the_three_paper_sets_are_published_after_migrate_with_two_exemplars_each():
    versions = {v.exemplar_set.name: v for v in ExemplarSetVersion.objects.filter(
        exemplar_set__name__in=paper_sets.FOLDERS).select_related("exemplar_set")}
    assert sorted(versions) == sorted(paper_sets.FOLDERS)
    for name, version in versions.items():
        folder = VENDORED / paper_sets.FOLDERS[name]
        assert version.number == 1 and version.exemplar_count == 2
        assert version.tool_description == (folder / "tool_desc.txt").read_text().strip()
        no_findpath = folder / "tool_desc_no_findpath.txt"
        assert version.tool_description_no_findpath == (no_findpath.read_text().strip() if no_findpath.exists() else "")
    assert versions[paper_sets.SPIDER].tool_description_no_findpath  # Spider ships the Table 10 text
    assert {e["database"] for e in versions[paper_sets.SPIDER].exemplars} == {"academic", "activity_1"}
    assert all(e["evidence"] for e in versions[paper_sets.BIRD_WITH_EVIDENCE].exemplars)


def test_publishing_again_is_idempotent():
    before = ExemplarSetVersion.objects.count()
    assert ensure_paper_sets() == []
    call_command("migrate", verbosity=0, stdout=StringIO())  # every migrate runs it; nothing new
    assert ExemplarSetVersion.objects.count() == before


def test_a_fresh_install_gets_them_back_if_one_is_missing():
    version = ExemplarSetVersion.objects.get(exemplar_set__name=paper_sets.BIRD_NO_EVIDENCE)
    ExemplarSetVersion.objects.filter(pk=version.pk)._raw_delete(ExemplarSetVersion.objects.db)
    ExemplarSet.objects.filter(name=paper_sets.BIRD_NO_EVIDENCE).delete()
    created = ensure_paper_sets()
    assert [v.exemplar_set.name for v in created] == [paper_sets.BIRD_NO_EVIDENCE]


def _bird_database(demo_database):
    dataset = Dataset.objects.create(name="bird-mini", kind=Dataset.Kind.BIRD, source_path="/x")
    DatasetQuestion.objects.create(dataset=dataset, index=0, db_id="chinook", database=demo_database,
                                   question="q", gold_sql="SELECT 1")
    return dataset


def test_the_set_that_fits_spider_own_databases_and_bird(demo_database):
    assert paper_sets.default_version(database=demo_database).exemplar_set.name == paper_sets.SPIDER
    spider = Dataset.objects.create(name="sp", kind=Dataset.Kind.SPIDER, source_path="/x")
    assert paper_sets.default_version(dataset=spider).exemplar_set.name == paper_sets.SPIDER
    bird = _bird_database(demo_database)
    assert paper_sets.default_version(dataset=bird).exemplar_set.name == paper_sets.BIRD_WITH_EVIDENCE
    assert paper_sets.default_version(dataset=bird, use_evidence=False).exemplar_set.name == \
        paper_sets.BIRD_NO_EVIDENCE
    assert paper_sets.default_version(database=demo_database).exemplar_set.name == paper_sets.BIRD_WITH_EVIDENCE


def test_a_session_without_a_chosen_set_is_two_shot_with_the_paper_set(demo_database, replay_llm):
    server = replay_llm(['Thought: count\nAction: ExecuteSQL("SELECT COUNT(*) FROM Artist")',
                         "Thought: ok\nAction: Done"])
    session = sessions.session_create(database=demo_database, question="How many artists are there?",
                                      enqueue=False)
    assert session.config["exemplars_choice"] == "default"
    assert session.config["exemplar_set_version"]["set"] == paper_sets.SPIDER
    assert session.config["exemplar_set_version"]["exemplars"] == 2
    sessions.session_execute(session_id=session.pk)
    system = server.chat_requests()[0].messages[0]["content"]
    assert system.startswith("When presented with a question, you need to use specific tools")  # tool_desc.txt
    assert "Which female students and male professors participated in the Soccer activity?" in system


def test_zero_shot_is_there_when_asked_for(demo_database, replay_llm):
    server = replay_llm(["Thought: ok\nAction: Done"])
    session = sessions.session_create(database=demo_database, question="q", zero_shot=True, enqueue=False)
    assert session.config["exemplar_set_version"] is None and session.config["exemplars_choice"] == "zero-shot"
    sessions.session_execute(session_id=session.pk)
    system = server.chat_requests()[0].messages[0]["content"]
    assert "Here are some examples" not in system and "Soccer" not in system


def test_a_chosen_set_wins_and_pipeline_strategies_get_none_by_default(demo_database, replay_llm):
    replay_llm([])
    chosen = ExemplarSetVersion.objects.get(exemplar_set__name=paper_sets.BIRD_NO_EVIDENCE)
    session = sessions.session_create(database=demo_database, question="q", few_shot=few_shot_for_version(chosen),
                                      enqueue=False)
    assert session.config["exemplars_choice"] == "chosen"
    assert session.config["exemplar_set_version"]["id"] == chosen.pk
    hdsp = sessions.session_create(database=demo_database, question="q", strategy="hdsp", enqueue=False)
    assert hdsp.config["exemplar_set_version"] is None


def test_the_session_page_says_which_set_and_why(demo_database, staff_client, replay_llm):
    replay_llm([])
    session = sessions.session_create(database=demo_database, question="q", enqueue=False)
    page = staff_client.get(session.get_absolute_url()).content.decode()
    assert "paper-spider v1" in page and "the paper's set for this database (default)" in page


def test_the_api_and_ask_command_default_to_the_paper_set_and_take_zero_shot(demo_database, staff_client,
                                                                               replay_llm):
    replay_llm([])
    made = staff_client.post("/api/sessions/", {"database": "chinook", "question": "How many artists?"},
                             content_type="application/json").json()
    from agent.models import AgentSession

    assert AgentSession.objects.get(pk=made["id"]).config["exemplars_choice"] == "default"
    made = staff_client.post("/api/sessions/", {"database": "chinook", "question": "q", "zero_shot": True},
                             content_type="application/json").json()
    assert AgentSession.objects.get(pk=made["id"]).config["exemplar_set_version"] is None
    call_command("ask", "chinook", "How many artists?", "--zero-shot", stdout=StringIO())
    assert AgentSession.objects.latest("pk").config["exemplars_choice"] == "zero-shot"
    call_command("ask", "chinook", "How many artists?", stdout=StringIO())
    assert AgentSession.objects.latest("pk").config["exemplar_set_version"]["set"] == paper_sets.SPIDER
