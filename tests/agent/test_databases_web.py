import pytest
from django.urls import reverse

from agent import services
from agent.models import Database, mask_dsn

pytestmark = pytest.mark.django_db


def test_every_page_but_login_requires_authentication(client, demo_database):
    for url in [reverse("database_list"), demo_database.get_absolute_url(), reverse("database_register"), "/api/databases/"]:
        response = client.get(url)
        assert response.status_code in (302, 401, 403), url
    assert client.get(reverse("login")).status_code == 200


def test_database_list_and_schema_browser_show_the_demo(user_client, demo_database):
    listing = user_client.get(reverse("database_list")).content.decode()
    assert "chinook" in listing and "Ready" in listing
    page = user_client.get(demo_database.get_absolute_url()).content.decode()
    assert "InvoiceLine" in page
    assert "(ArtistId) → Artist(ArtistId)" in page  # foreign keys are shown with their direction
    assert "text field, distinct count: 275" in page  # statistics are shown


def test_first_rows_of_a_table_are_served_as_a_partial(user_client, demo_database):
    response = user_client.get(reverse("table_rows", args=["chinook", "Artist"]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "AC/DC" in html and "First rows of Artist (275 in all) · 10 rows shown" in html
    assert user_client.get(reverse("table_rows", args=["chinook", "NoSuchTable"])).status_code == 404


def test_cell_content_is_escaped(user_client, user, make_sqlite, grant):
    path = make_sqlite("CREATE TABLE t (x TEXT); INSERT INTO t VALUES ('<script>alert(1)</script>');")
    grant(services.database_register(name="xss", location=str(path), refresh="sync"), user)
    html = user_client.get(reverse("table_rows", args=["xss", "t"])).content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;" in html


def test_staff_can_register_from_the_browser(staff_client, chinook_copy, django_capture_on_commit_callbacks):
    from t2s_site.celery import app

    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = staff_client.post(reverse("database_register"),
                                         {"name": "shop", "location": str(chinook_copy), "description": "mine"})
    finally:
        app.conf.task_always_eager = False
    assert response.status_code == 302
    shop = Database.objects.get(name="shop")
    assert shop.status == Database.Status.READY and shop.table_count == 11


def test_registering_a_file_that_is_not_sqlite_is_refused(staff_client, upload_dir):
    from django.utils.html import escape

    from agent.services.locations import REFUSED

    bogus = upload_dir / "notes.txt"
    bogus.write_text("hello")
    response = staff_client.post(reverse("database_register"), {"name": "bogus", "location": str(bogus)})
    assert escape(REFUSED) in response.content.decode()  # the one message for every refused location
    assert not Database.objects.filter(name="bogus").exists()


def test_plain_users_cannot_register(user_client, chinook_copy):
    assert user_client.get(reverse("database_register")).status_code == 403
    assert user_client.post("/api/databases/", {"name": "x", "location": str(chinook_copy)}).status_code == 403


def test_dsn_password_is_never_rendered(staff, user, grant):
    from django.test import Client

    dsn = "postgresql://reader:s3cret-pw@127.0.0.1:1/nowhere"
    grant(Database.objects.create(name="pg", engine="postgresql", location=dsn, status="error",
                                  status_message="down"), user)
    staff_client, user_client = Client(), Client()
    staff_client.force_login(staff)
    user_client.force_login(user)
    for client in (staff_client, user_client):
        for url in [reverse("database_list"), reverse("database_detail", args=["pg"]), "/api/databases/",
                    "/api/databases/pg/"]:
            response = client.get(url)
            assert response.status_code == 200 and "s3cret-pw" not in response.content.decode(), url
    admin_page = staff_client.get(reverse("admin:agent_database_change", args=[Database.objects.get(name="pg").pk]))
    assert admin_page.status_code == 200 and "s3cret-pw" not in admin_page.content.decode()


def test_mask_dsn_handles_both_forms():
    assert mask_dsn("postgresql://u:pw@h:5432/d") == "postgresql://u:***@h:5432/d"
    assert mask_dsn("postgresql://u@h/d") == "postgresql://u@h/d"
    assert mask_dsn("host=h password=pw dbname=d") == "host=h password=*** dbname=d"


def test_api_lists_creates_and_serves_schema_with_token_auth(staff, client, chinook_copy):
    token = client.post("/api/token/", {"username": "sam", "password": "pw-sam-123"}).json()["token"]
    auth = {"HTTP_AUTHORIZATION": f"Token {token}"}
    created = client.post("/api/databases/", {"name": "api-db", "location": str(chinook_copy)}, **auth)
    assert created.status_code == 201, created.content
    services.database_refresh(database=Database.objects.get(name="api-db"))
    listing = client.get("/api/databases/", **auth).json()
    assert [d["name"] for d in listing["results"]] == ["api-db"]
    schema = client.get("/api/databases/api-db/schema/", **auth).json()
    assert {t["name"] for t in schema["schema"]["tables"]} >= {"Artist", "Track", "Invoice"}
    duplicate = client.post("/api/databases/", {"name": "api-db", "location": str(chinook_copy)}, **auth)
    assert duplicate.status_code == 400


def test_openapi_schema_is_served(user_client):
    response = user_client.get("/api/schema/")
    assert response.status_code == 200
    assert b"/api/databases/" in response.content


def test_admin_works_for_the_database_model(staff_client, demo_database):
    assert staff_client.get(reverse("admin:agent_database_changelist")).status_code == 200
    assert staff_client.get(reverse("admin:agent_database_change", args=[demo_database.pk])).status_code == 200


def test_registering_a_name_already_taken_is_refused_in_the_browser(staff_client, demo_database, chinook_copy):
    response = staff_client.post(reverse("database_register"), {"name": "chinook", "location": str(chinook_copy)})
    assert "This name is not available" in response.content.decode()
    demo_database.refresh_from_db()
    assert demo_database.location != str(chinook_copy)  # the existing registration is untouched
