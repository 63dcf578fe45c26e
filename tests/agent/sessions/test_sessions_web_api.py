import pytest
from django.urls import reverse

from agent.models import AgentSession
from agent.services import sessions

pytestmark = pytest.mark.django_db

SCRIPT = ['Thought: count\nAction: ExecuteSQL("SELECT count(*) FROM singer")', "Thought: ok\nAction: Done"]


def test_ask_page_explains_how_to_configure_an_llm_when_there_is_none(user_client, demo_database, settings):
    settings.T2S = {**settings.T2S, "LLM_MODEL": "", "LLM_BASE_URL": ""}
    html = user_client.get(reverse("ask")).content.decode()
    assert "No LLM is configured" in html and "OPENAI_BASE_URL" in html
    response = user_client.post(reverse("ask"), {"database": "chinook", "question": "How many artists?",
                                                 "strategy": "interactive_t2s", "max_rounds": 12,
                                                 "temperature": 0.7, "tools": ["ExecuteSQL"]})
    assert "No LLM endpoint is configured" in response.content.decode()
    assert not AgentSession.objects.exists()


def test_ask_creates_a_session_and_its_page_shows_turns_and_answer(user_client, spider_database, replay_llm,
                                                                 django_capture_on_commit_callbacks):
    spider_database("concert_singer")
    replay_llm(SCRIPT)
    response = user_client.post(reverse("ask"), {
        "database": "concert_singer", "question": "How many singers?", "strategy": "interactive_t2s",
        "max_rounds": 5, "temperature": 0.7, "tools": ["SearchColumn", "SearchValue", "ExecuteSQL"]})
    session = AgentSession.objects.get()
    assert response.status_code == 302 and response.url == session.get_absolute_url()
    assert session.config["strategy"]["max_rounds"] == 5
    live = user_client.get(session.get_absolute_url(), HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 1s"' in live  # queued: the page keeps polling
    sessions.session_execute(session_id=session.pk)
    page = user_client.get(session.get_absolute_url()).content.decode()
    assert "Answered" in page and "SELECT count(*) FROM singer" in page and "every 1s" not in page
    history = user_client.get(reverse("session_list"), {"database": "concert_singer", "status": "answered"})
    assert "How many singers?" in history.content.decode()
    assert "How many singers?" not in user_client.get(reverse("session_list"), {"status": "failed"}).content.decode()


def test_api_create_follow_and_cancel(user_client, spider_database, replay_llm):
    spider_database("concert_singer")
    replay_llm(SCRIPT)
    created = user_client.post("/api/sessions/", {"database": "concert_singer", "question": "How many singers?",
                                                  "options": {"max_rounds": 4}}, content_type="application/json")
    assert created.status_code == 201, created.content
    session_id = created.json()["id"]
    assert created.json()["status"] == "queued"
    sessions.session_execute(session_id=session_id)
    detail = user_client.get(f"/api/sessions/{session_id}/").json()
    assert detail["status"] == "answered"
    assert [t["tool"] for t in detail["turns"]] == ["ExecuteSQL", "Done"]
    assert detail["turns"][0]["result"]["rows"] == [[6]]
    listing = user_client.get("/api/sessions/", {"database": "concert_singer", "status": "answered"}).json()
    assert [s["id"] for s in listing["results"]] == [session_id]
    queued = user_client.post("/api/sessions/", {"database": "concert_singer", "question": "Again?"},
                              content_type="application/json").json()
    cancelled = user_client.post(f"/api/sessions/{queued['id']}/cancel/").json()
    assert cancelled["status"] == "cancelled"


def test_api_rejects_bad_input_without_storing_anything(user_client, spider_database, replay_llm):
    spider_database("concert_singer")
    replay_llm(SCRIPT)
    bad = user_client.post("/api/sessions/", {"database": "concert_singer", "question": "q",
                                              "options": {"max_rounds": -1}}, content_type="application/json")
    assert bad.status_code == 400 and "options" in bad.json()
    missing = user_client.post("/api/sessions/", {"database": "nope", "question": "q"},
                               content_type="application/json")
    assert missing.status_code == 400 and "database" in missing.json()
    assert not AgentSession.objects.exists()



@pytest.mark.parametrize(("options", "message"), [
    ({"max_rounds": "8"}, "max_rounds must be a whole number, not str."),
    ({"max_rounds": True}, "max_rounds must be a whole number, not bool."),
    ({"temperature": "hot"}, "temperature must be a number, not str."),
    ({"enabled_tools": "ExecuteSQL"}, "enabled_tools must be a list of strings, not str."),
    ({"max_total_tokens": [1]}, "max_total_tokens must be a whole number or null, not list."),
])
def test_api_names_a_wrongly_typed_option_instead_of_a_python_error(user_client, spider_database, replay_llm,
                                                                     options, message):
    spider_database("concert_singer")
    replay_llm(SCRIPT)
    bad = user_client.post("/api/sessions/", {"database": "concert_singer", "question": "q", "options": options},
                           content_type="application/json")
    assert bad.status_code == 400
    assert bad.json() == {"options": [message]}
    assert not AgentSession.objects.exists()

def test_only_the_asker_or_staff_can_cancel(client, django_user_model, spider_database, replay_llm, grant):
    spider_database("concert_singer")
    replay_llm(SCRIPT)
    owner = django_user_model.objects.create_user("owner", password="pw-owner-1")
    other = django_user_model.objects.create_user("other", password="pw-other-1")
    from agent.models import Database

    grant(Database.objects.get(name="concert_singer"), owner, other)  # both see it; only the owner may cancel

    session = sessions.session_create(database=Database.objects.get(name="concert_singer"), question="q",
                                      user=owner, enqueue=False)
    client.force_login(other)
    assert client.post(f"/api/sessions/{session.pk}/cancel/").status_code == 403
    session.refresh_from_db()
    assert session.status == AgentSession.Status.QUEUED


def test_tool_console_runs_a_tool_and_shows_the_observation(user_client, demo_database):
    page = user_client.get(reverse("tool_console"), {"database": "chinook", "tool": "SearchValue"})
    assert page.status_code == 200 and "Artist.Name" in page.content.decode()  # autocomplete lists
    response = user_client.post(reverse("tool_console"), {"database": "chinook", "tool": "SearchValue",
                                                          "value": "AC/DC"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert 'SearchValue(&quot;AC/DC&quot;)' in html and "Artist.Name = &#x27;AC/DC&#x27;" in html
    sql = user_client.post(reverse("tool_console"), {"database": "chinook", "tool": "ExecuteSQL",
                                                     "sql": "DELETE FROM Artist"}, HTTP_HX_REQUEST="true")
    assert "badge error" in sql.content.decode()
