"""An exemplar set in a workspace is seen by the workspace's members only (directly or through a group), on
every path that shows a set or one of its versions; to anyone else it answers as a missing set. A set in no
workspace whose every version is hidden is hidden too. A new set goes to one of its creator's workspaces."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from agent.models import Workspace, WorkspaceMembership
from agent.roles import ASKER, CURATOR, VIEWER
from agent.services import few_shot
from agent.services import workspaces as workspace_services
from annotations import policies
from annotations.exemplars import services
from annotations.exemplars.importer import ImportProblem, export_version, import_upload
from annotations.exemplars.services import WORKSPACE_UNAVAILABLE
from annotations.models import Exemplar, ExemplarSet
from annotations.runs.pools import pool_from_spec
from tests.conftest import give_roles
from tests.test_access_matrix import url_names

pytestmark = pytest.mark.django_db

NAME = "teamset"
MISSING = 987654


@pytest.fixture
def team():
    return Workspace.objects.create(slug="team", name="Team")


@pytest.fixture
def people(django_user_model):
    def make(name, *roles):
        return give_roles(django_user_model.objects.create_user(name, password="pw-12345-x"),
                          VIEWER, ASKER, CURATOR, *roles)

    return make


@pytest.fixture
def member(people, team):
    account = people("mia")
    WorkspaceMembership.objects.create(workspace=team, user=account)
    return account


@pytest.fixture
def outsider(people):
    return people("otto")


def _publish(exemplar_set, database, curator, question="How many artists?"):
    exemplar = services.exemplar_create(user=curator, database=database, question=question)
    services.step_add(exemplar=exemplar, user=curator, thought="Count.", action='ExecuteSQL("SELECT 1")')
    services.step_add(exemplar=exemplar, user=curator, thought="Done.", action="Done")
    services.exemplar_submit(exemplar=exemplar, user=curator)
    reviewer = give_roles(type(curator).objects.create_user(f"rev{exemplar.pk}", password="pw-12345-x"), CURATOR)
    services.exemplar_review(exemplar=exemplar, user=reviewer, approve=True)
    return services.set_publish(exemplar_set=exemplar_set, exemplars=[exemplar], user=curator)


@pytest.fixture
def version(member, demo_database):
    """A version of a set in the workspace ``team``, drawing on the demo database (visible to everyone): only the
    set's workspace decides who sees it."""
    exemplar_set = services.set_create(name=NAME, user=member, workspace="team")
    return _publish(exemplar_set, demo_database, member)


# --- every path that shows a set or a version, generated from the URLconf ---------------------------------------

def _set_routes(exemplar_set, version) -> list[tuple[str, str, str]]:
    """(method, URL, name) for every named URL taking the set (``set_id``, or the API's set or version ``pk``)."""
    routes = []
    for name, pattern in sorted(url_names().items()):
        if "<int:set_id>" in pattern:
            kwargs = {"set_id": exemplar_set.pk}
            if "<int:number>" in pattern:
                kwargs["number"] = version.number
            query = "?a=1&b=1" if name.endswith("version_diff") else ""
            routes.append((name, reverse(name, kwargs=kwargs) + query))
        elif name.startswith("exemplar-set-version-") and "<pk>" in pattern:
            routes.append((name, reverse(name, kwargs={"pk": version.pk})))
        elif name.startswith("exemplar-set-") and "<pk>" in pattern:
            routes.append((name, reverse(name, kwargs={"pk": exemplar_set.pk})))
    return [(url, name) for name, url in routes]


def _call(client, url):
    """GET the route, or POST (an empty body) when it takes only POST; the method used and the response."""
    if url.startswith("/api/"):
        from django.urls import resolve

        if "get" not in resolve(url).func.actions:
            return "POST", client.post(url, "{}", content_type="application/json")
        return "GET", client.get(url)
    response = client.get(url)
    if response.status_code == 405:
        return "POST", client.post(url, {})
    return "GET", response


def _missing_url(url: str, exemplar_set, version) -> str:
    return (url.replace(f"/{exemplar_set.pk}/", f"/{MISSING}/").replace(f"/{version.pk}/", f"/{MISSING}/"))


def test_the_routes_cover_the_set_pages_and_api(version):
    names = {name for _, name in _set_routes(version.exemplar_set, version)}
    assert {"exemplars:set_detail", "exemplars:version_detail", "exemplars:version_preview",
            "exemplars:version_export", "exemplars:version_diff", "exemplars:set_publish",
            "experiments:candidate_new", "exemplar-set-detail", "exemplar-set-publish",
            "exemplar-set-version-detail"} <= names


def test_a_member_reaches_every_route_of_the_set(version, member, client):
    client.force_login(member)
    for url, name in _set_routes(version.exemplar_set, version):
        method, response = _call(client, url)
        assert response.status_code != 404, f"{method} {name}: {response.status_code}"


def test_a_non_member_gets_what_a_missing_set_gives_on_every_route(version, outsider, client):
    client.force_login(outsider)
    sets = ExemplarSet.objects.count()
    for url, name in _set_routes(version.exemplar_set, version):
        method, refused = _call(client, url)
        _, missing = _call(client, _missing_url(url, version.exemplar_set, version))
        assert refused.status_code == missing.status_code == 404, f"{method} {name}: {refused.status_code}"
        assert NAME.encode() not in refused.content, name
        if url.startswith("/api/"):
            assert refused.json() == missing.json(), name
        else:
            assert b"No such set." in refused.content and b"No such set." in missing.content, name
    assert ExemplarSet.objects.count() == sets  # the POSTs stored nothing
    assert version.exemplar_set.candidates.count() == 0


# --- the lists and pickers ---------------------------------------------------------------------------------------

def _listings(client, user, version, demo_database) -> dict[str, bool]:
    """Each place listing sets or versions: whether it shows this one."""
    client.force_login(user)
    label = f"{NAME} v{version.number}"

    def listed(route):
        body = client.get(reverse(route)).json()
        return body.get("results", body) if isinstance(body, dict) else body

    try:
        pool = bool(pool_from_spec(f"exemplars:{NAME}", versions=policies.visible_versions(user)).examples)
    except ValidationError:
        pool = False
    return {
        "set list page": NAME in client.get(reverse("exemplars:set_list")).content.decode(),
        "set list API": NAME in [s["name"] for s in listed("exemplar-set-list")],
        "version list API": version.pk in [v["id"] for v in listed("exemplar-set-version-list")],
        "Ask picker": label in client.get(reverse("ask")).content.decode(),
        "few-shot choices": version.pk in [pk for pk, _ in few_shot.choices(user, demo_database)],
        "few-shot by id": few_shot.by_id(version.pk, user) is not None,
        "ask --exemplars SET": few_shot.by_name(NAME, user) is not None,
        "ask --exemplars SET:1": few_shot.by_name(f"{NAME}:1", user) is not None,
        "pool exemplars:SET": pool,
        "policies": policies.can_see_set(user, version.exemplar_set) and policies.can_see_version(user, version),
        "exemplar page": label in client.get(
            reverse("exemplars:exemplar_detail", args=[version.exemplars[0]["exemplar_id"]])).content.decode(),
    }


def test_a_member_finds_the_set_and_its_version_everywhere(version, member, client, demo_database):
    seen = _listings(client, member, version, demo_database)
    assert all(seen.values()), seen


def test_a_non_member_finds_it_nowhere(version, outsider, client, demo_database):
    seen = _listings(client, outsider, version, demo_database)
    assert not any(seen.values()), seen


def test_membership_through_a_group_shows_it_and_removing_the_membership_hides_it_again(
        version, people, team, client, demo_database):
    grouped = people("gus")
    group = Group.objects.create(name="set-team")
    grouped.groups.add(group)
    assert not any(_listings(client, grouped, version, demo_database).values())
    workspace_services.workspace_member_add(workspace=team, group=group)
    assert all(_listings(client, grouped, version, demo_database).values())
    workspace_services.workspace_member_remove(workspace=team, group=group)
    seen = _listings(client, grouped, version, demo_database)
    assert not any(seen.values()), seen
    client.force_login(grouped)
    assert client.get(reverse("exemplars:set_detail", args=[version.exemplar_set_id])).status_code == 404


def test_a_superuser_sees_a_set_of_any_workspace(version, django_user_model):
    boss = django_user_model.objects.create_user("boss", password="pw-12345-x", is_superuser=True)
    assert policies.visible_sets(boss).filter(pk=version.exemplar_set_id).exists()
    assert policies.can_see_version(boss, version)


def test_a_non_member_experiment_or_candidate_of_the_set_is_hidden(version, member, outsider):
    from annotations.experiments import services as experiment_services

    candidate = experiment_services.candidate_create(exemplar_set=version.exemplar_set, user=member)
    assert policies.visible_candidates(member).filter(pk=candidate.pk).exists()
    assert not policies.visible_candidates(outsider).filter(pk=candidate.pk).exists()
    with pytest.raises(CommandError, match="No exemplar set"):
        call_command("candidate", "--set", NAME, "--new", "--user", outsider.username)


def test_the_workspace_page_lists_its_sets_and_the_set_page_names_its_workspace(version, member, client):
    client.force_login(member)
    page = client.get(reverse("workspace_detail", args=["team"])).content.decode()
    assert 'id="workspace-sets"' in page and NAME in page
    detail = client.get(version.exemplar_set.get_absolute_url()).content.decode()
    assert 'id="set-workspace"' in detail and "Team" in detail
    api = client.get(reverse("exemplar-set-detail", args=[version.exemplar_set_id])).json()
    assert api["workspace"] == "team"


# --- a set in no workspace -------------------------------------------------------------------------------------

@pytest.fixture
def secret_db(make_sqlite, upload_dir):
    from agent import services as agent_services

    return agent_services.database_register(
        name="secretdb", location=str(make_sqlite("CREATE TABLE t (x INTEGER);", "secret.sqlite")), refresh="sync")


def test_a_set_in_no_workspace_whose_versions_are_all_hidden_is_absent(secret_db, demo_database, member, outsider,
                                                                       client, grant):
    exemplar_set = services.set_create(name="spyset", user=None)
    version = _publish(exemplar_set, secret_db, member)
    assert exemplar_set.workspace is None
    client.force_login(outsider)
    assert "spyset" not in client.get(reverse("exemplars:set_list")).content.decode()
    assert "spyset" not in [s["name"] for s in client.get(reverse("exemplar-set-list")).json()["results"]]
    assert client.get(exemplar_set.get_absolute_url()).status_code == 404
    # one visible version makes the set visible again; the hidden version stays withheld
    _publish(exemplar_set, demo_database, member, question="How many albums?")
    page = client.get(exemplar_set.get_absolute_url()).content.decode()
    assert 'id="versions-withheld"' in page
    assert not policies.can_see_version(outsider, version)
    grant(secret_db, outsider)
    assert policies.can_see_version(outsider, version)


def test_an_empty_set_in_no_workspace_is_listed_for_every_reader(outsider, client):
    services.set_create(name="fresh", user=None)
    client.force_login(outsider)
    assert "fresh" in client.get(reverse("exemplars:set_list")).content.decode()


# --- creating a set in a workspace -----------------------------------------------------------------------------

def test_creating_in_a_workspace_one_is_not_in_is_refused_as_a_missing_one_with_nothing_stored(
        team, outsider, client, tmp_path):
    with pytest.raises(ValidationError) as not_member:
        services.set_create(name="x", user=outsider, workspace="team")
    with pytest.raises(ValidationError) as missing:
        services.set_create(name="x", user=outsider, workspace="nowhere")
    assert not_member.value.message_dict == missing.value.message_dict == {"workspace": [WORKSPACE_UNAVAILABLE]}

    client.force_login(outsider)
    page = client.post(reverse("exemplars:set_new"), {"name": "x", "workspace": "team"}, follow=True)
    assert WORKSPACE_UNAVAILABLE in page.content.decode()
    api = client.post(reverse("exemplar-set-list"), {"name": "x", "workspace": "team"},
                      content_type="application/json")
    assert api.status_code == 400 and api.json() == {"workspace": [WORKSPACE_UNAVAILABLE]}
    (tmp_path / "s.json").write_text("{}")
    with pytest.raises(CommandError, match="not available"):
        call_command("import_exemplars", str(tmp_path / "s.json"), "--format", "json", "--user", outsider.username,
                     "--workspace", "team")
    assert not ExemplarSet.objects.filter(name__in=["x", "s"]).exists()
    assert not ExemplarSet.objects.filter(workspace=team).exists()


def test_an_upload_into_a_workspace_one_is_not_in_stores_nothing(version, outsider, member, client):
    data = json.dumps(export_version(version)).encode()
    exemplars_before = Exemplar.objects.count()
    with pytest.raises(ImportProblem, match="not available"):
        import_upload(chunks=[data], size=len(data), filename="s.json", user=outsider, name="copy", workspace="team")
    client.force_login(outsider)
    from django.core.files.uploadedfile import SimpleUploadedFile

    page = client.post(reverse("exemplars:set_upload"),
                       {"file": SimpleUploadedFile("s.json", data), "name": "copy", "workspace": "team"})
    assert page.status_code == 400 and WORKSPACE_UNAVAILABLE in page.content.decode()
    assert not ExemplarSet.objects.filter(name="copy").exists() and Exemplar.objects.count() == exemplars_before
    # a member's upload goes to the workspace
    result = import_upload(chunks=[data], size=len(data), filename="s.json", user=member, name="copy",
                           workspace="team")
    assert result.versions[0].exemplar_set.workspace.slug == "team"


def test_a_new_set_goes_to_the_creators_only_workspace_by_default(team, member, client, outsider):
    client.force_login(member)
    created = client.post(reverse("exemplar-set-list"), {"name": "mine"}, content_type="application/json")
    assert created.status_code == 201 and created.json()["workspace"] == "team"
    form = client.get(reverse("exemplars:set_list")).content.decode()
    assert '<option value="team" selected>' in form
    none = client.post(reverse("exemplar-set-list"), {"name": "open", "workspace": ""},
                       content_type="application/json")
    assert none.json()["workspace"] is None
    Workspace.objects.create(slug="other", name="Other").memberships.create(user=member)
    assert services.set_create(name="two", user=member).workspace is None  # two workspaces: no default
    assert services.set_create(name="three", user=outsider).workspace is None


# --- pages that name the version a session or a run used --------------------------------------------------------

def test_a_session_or_run_page_does_not_name_a_version_of_a_set_its_reader_may_not_see(
        version, outsider, team, client, demo_database):
    from agent.models import AgentSession
    from annotations.runs.models import Dataset, DatasetQuestion, Run

    source = {"id": version.pk, "set_id": version.exemplar_set_id, "set": NAME, "number": 1, "exemplars": 1}
    session = AgentSession.objects.create(database=demo_database, question="How many?", created_by=outsider,
                                          status=AgentSession.Status.ANSWERED,
                                          config={"exemplar_set_version": source, "exemplars_choice": "chosen"})
    dataset = Dataset.objects.create(name="mini", kind="spider", source_path="/nowhere", question_count=1)
    DatasetQuestion.objects.create(dataset=dataset, index=0, db_id="chinook", database=demo_database,
                                   question="How many artists?", gold_sql="SELECT count(*) FROM Artist")
    run = Run.objects.create(name="r", dataset=dataset, source=Run.Source.AGENT, status="done", created_by=outsider,
                             config={"exemplar_set_version": version.pk, "exemplars_choice": "chosen"})
    client.force_login(outsider)
    for url in (session.get_absolute_url(), run.get_absolute_url()):
        page = client.get(url).content.decode()
        assert NAME not in page and "a set version you may not see" in page, url
    WorkspaceMembership.objects.create(workspace=team, user=outsider)
    for url in (session.get_absolute_url(), run.get_absolute_url()):
        assert f"{NAME} v1" in client.get(url).content.decode(), url
