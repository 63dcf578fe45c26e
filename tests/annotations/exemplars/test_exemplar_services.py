import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from agent.models import AgentSession, Turn
from agent.roles import CURATOR
from agent.strategies.prompt import Exemplar as PromptExemplar
from annotations.exemplars import selectors, services
from annotations.models import Exemplar, ExemplarSetVersion
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db


def test_steps_run_the_real_tools_and_done_fills_the_final_sql(demo_database, author, build_exemplar):
    exemplar = build_exemplar(demo_database, author)
    steps = selectors.exemplar_steps(exemplar)
    assert [s.position for s in steps] == [0, 1, 2]
    assert "AC/DC" in steps[0].observation and steps[0].ok
    assert "2" in steps[1].observation and steps[1].ok
    assert steps[2].is_done and steps[2].observation is None
    assert exemplar.final_sql.startswith("SELECT COUNT(*) FROM Album")
    assert exemplar.state == Exemplar.State.DRAFT


def test_a_malformed_action_is_refused(demo_database, author):
    exemplar = services.exemplar_create(user=author, database=demo_database, question="q")
    with pytest.raises(ValidationError):
        services.step_add(exemplar=exemplar, user=author, thought="", action='ExecuteSQL("SELECT 1')
    assert not exemplar.steps.exists()


def test_changing_a_step_marks_later_observations_stale_and_rerun_clears_them(demo_database, author, build_exemplar):
    exemplar = build_exemplar(demo_database, author)
    first, second, _ = selectors.exemplar_steps(exemplar)
    services.step_update(step=first, user=author, thought=first.thought, action='SearchValue("Aerosmith")')
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.observation is None and second.stale
    with pytest.raises(ValidationError):
        services.exemplar_submit(exemplar=exemplar, user=author)
    assert services.exemplar_rerun_stale(exemplar=exemplar, user=author) == 2
    first.refresh_from_db()
    second.refresh_from_db()
    assert "Aerosmith" in first.observation and not second.stale


def test_move_and_delete_keep_positions_dense(demo_database, author):
    exemplar = services.exemplar_create(user=author, database=demo_database, question="q")
    for value in ("AC/DC", "Aerosmith", "Queen"):
        services.step_add(exemplar=exemplar, user=author, thought=value, action=f'SearchValue("{value}")')
    a, b, c = selectors.exemplar_steps(exemplar)
    services.step_move(step=c, user=author, offset=-1)
    assert [s.thought for s in selectors.exemplar_steps(exemplar)] == ["AC/DC", "Queen", "Aerosmith"]
    assert [s.stale for s in selectors.exemplar_steps(exemplar)] == [False, True, True]
    services.step_delete(step=a, user=author)
    assert [(s.position, s.thought) for s in selectors.exemplar_steps(exemplar)] == [(0, "Queen"), (1, "Aerosmith")]


def test_review_rules(demo_database, author, reviewer, build_exemplar, django_user_model):
    exemplar = build_exemplar(demo_database, author)
    services.exemplar_submit(exemplar=exemplar, user=author)
    assert exemplar.state == Exemplar.State.IN_REVIEW
    with pytest.raises(PermissionDenied):  # not a reviewer
        services.exemplar_review(exemplar=exemplar, user=author, approve=True)
    curator_author = give_roles(django_user_model.objects.create_user("sta", password="x"), CURATOR)
    own = build_exemplar(demo_database, curator_author)
    services.exemplar_submit(exemplar=own, user=curator_author)
    with pytest.raises(PermissionDenied, match="your own"):  # a reviewer cannot approve their own
        services.exemplar_review(exemplar=own, user=curator_author, approve=True)
    with pytest.raises(ValidationError):  # a rejection says why
        services.exemplar_review(exemplar=exemplar, user=reviewer, approve=False)
    services.exemplar_review(exemplar=exemplar, user=reviewer, approve=True, comment="good")
    assert exemplar.state == Exemplar.State.APPROVED and exemplar.reviewer == reviewer


def test_a_superuser_may_approve_their_own_and_it_is_recorded(demo_database, build_exemplar, django_user_model):
    boss = django_user_model.objects.create_superuser("boss", "b@example.com", "x")
    exemplar = build_exemplar(demo_database, boss)
    services.exemplar_submit(exemplar=exemplar, user=boss)
    services.exemplar_review(exemplar=exemplar, user=boss, approve=True)
    assert exemplar.state == Exemplar.State.APPROVED
    assert exemplar.review_comment.startswith("[self-approved by a superuser]")


def test_a_user_with_the_review_permission_reviews(demo_database, author, build_exemplar, django_user_model):
    from django.contrib.auth.models import Permission

    checker = django_user_model.objects.create_user("chk", password="x")
    checker.user_permissions.add(Permission.objects.get(codename="review_exemplar"))
    checker = django_user_model.objects.get(pk=checker.pk)
    exemplar = build_exemplar(demo_database, author)
    services.exemplar_submit(exemplar=exemplar, user=author)
    services.exemplar_review(exemplar=exemplar, user=checker, approve=True)
    assert exemplar.state == Exemplar.State.APPROVED


def test_only_approved_exemplars_are_published(demo_database, author, reviewer, build_exemplar, approved):
    good = approved(demo_database)
    draft = build_exemplar(demo_database, author, question="Draft question?")
    exemplar_set = services.set_create(name="demo", user=reviewer)
    with pytest.raises(ValidationError, match="Only approved"):
        services.set_publish(exemplar_set=exemplar_set, exemplars=[good, draft], user=reviewer)
    assert not ExemplarSetVersion.objects.filter(exemplar_set=exemplar_set).exists()
    version = services.set_publish(exemplar_set=exemplar_set, exemplars=[good], user=reviewer, note="first")
    assert version.number == 1 and version.exemplars[0]["exemplar_id"] == good.pk


def test_editing_an_approved_exemplar_returns_it_to_draft_and_versions_keep_their_copy(
        demo_database, reviewer, author, approved):
    exemplar = approved(demo_database)
    exemplar_set = services.set_create(name="demo", user=reviewer)
    v1 = services.set_publish(exemplar_set=exemplar_set, exemplars=[exemplar], user=reviewer)
    services.exemplar_update(exemplar=exemplar, user=author, question="How many albums has AC/DC released?",
                             evidence="", notes="", tags="count, 1 join")
    assert exemplar.state == Exemplar.State.DRAFT and exemplar.reviewer is None
    v1.refresh_from_db()
    assert v1.exemplars[0]["question"] == "How many albums has AC/DC?"
    with pytest.raises(ValidationError):  # a draft cannot be published
        services.set_publish(exemplar_set=exemplar_set, exemplars=[exemplar], user=reviewer)


def test_versions_are_immutable_numbered_and_diffable(demo_database, reviewer, approved):
    one = approved(demo_database)
    two = approved(demo_database, question="Which artist is called Queen?",
                   actions=[("Look it up.", 'SearchValue("Queen", table="Artist")'),
                            ("Query.", "ExecuteSQL(\"SELECT Name FROM Artist WHERE Name = 'Queen'\")"),
                            ("Done.", "Done")])
    exemplar_set = services.set_create(name="demo", user=reviewer)
    v1 = services.set_publish(exemplar_set=exemplar_set, exemplars=[one], user=reviewer)
    v2 = services.set_publish(exemplar_set=exemplar_set, exemplars=[one, two], user=reviewer, note="2-shot")
    assert (v1.number, v2.number) == (1, 2)
    with pytest.raises(ValidationError, match="Nothing changed"):
        services.set_publish(exemplar_set=exemplar_set, exemplars=[one, two], user=reviewer)
    v1.note = "edited"
    with pytest.raises(ValidationError, match="immutable"):
        v1.save()
    with pytest.raises(ValidationError):
        v1.delete()
    diff = selectors.version_diff(v1, v2)
    assert diff[0].startswith("--- demo v1") and any(line.startswith("+Q: Which artist is called Queen?")
                                                      for line in diff)
    assert selectors.version_diff(v2, v2) == []


def test_exemplars_for_version_feed_the_prompt(demo_database, reviewer, approved):
    from agent.strategies.prompt import build_messages

    exemplar = approved(demo_database)
    exemplar_set = services.set_create(name="demo", user=reviewer)
    version = services.set_publish(exemplar_set=exemplar_set, exemplars=[exemplar], user=reviewer)
    shots = selectors.exemplars_for_version(version)
    assert isinstance(shots[0], PromptExemplar)
    assert shots[0].question == "How many albums has AC/DC?" and len(shots[0].steps) == 3
    assert "| Album |" in shots[0].schema_text
    system = build_messages(schema=demo_database.schema_info(), question="q", exemplars=shots)[0].content
    assert 'Action: SearchValue("AC/DC")' in system
    assert selectors.version_token_estimate(version) > 100
    assert version in selectors.published_versions()


def test_promote_a_session_into_a_draft(demo_database, author):
    session = AgentSession.objects.create(database=demo_database, question="How many genres?",
                                          status=AgentSession.Status.ANSWERED, final_sql="SELECT COUNT(*) FROM Genre")
    Turn.objects.create(session=session, index=0, thought="Count them.", action='ExecuteSQL("SELECT COUNT(*) FROM Genre")',
                        tool="ExecuteSQL", observation="[(25,)]", tool_ok=True)
    Turn.objects.create(session=session, index=1, thought="Done.", action="Done", tool="Done")
    Turn.objects.create(session=session, index=2, completion=None, error="LLM failed")
    exemplar = services.exemplar_promote_session(session=session, user=author)
    steps = selectors.exemplar_steps(exemplar)
    assert exemplar.state == Exemplar.State.DRAFT and exemplar.source == f"session #{session.pk}"
    assert [(s.action, s.observation) for s in steps] == [('ExecuteSQL("SELECT COUNT(*) FROM Genre")', "[(25,)]"),
                                                         ("Done", None)]
    assert exemplar.final_sql == "SELECT COUNT(*) FROM Genre"
