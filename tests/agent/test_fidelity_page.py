import pytest

from agent.strategies.dart_sql import FIDELITY as DART
from agent.strategies.hdsp import FIDELITY as HDSP_LISTS
from agent.strategies.interactive_t2s import FIDELITY as AGENT
from agent.strategies.scl_sql import FIDELITY as SCL

pytestmark = pytest.mark.django_db


def test_fidelity_page_lists_what_follows_each_paper_and_what_differs(user_client) -> None:
    page = user_client.get("/fidelity/").content.decode()
    for name, lists in (("interactive_t2s", AGENT), ("dart_sql", DART), ("scl_sql", SCL), ("hdsp", HDSP_LISTS)):
        section = page.split(f'id="fidelity-{name}"')[1].split("</article>")[0]
        assert "As in the paper" in section and "Differs" in section
        assert section.count("<li>") == len(lists["as_in_paper"]) + len(lists["differs"])
    hdsp = page.split('id="fidelity-hdsp"')[1].split("</article>")[0]
    assert "t_nc is not given by the paper" in hdsp and "<td>t_nc</td><td>0.8</td>" in hdsp


def test_fidelity_page_needs_a_login(client) -> None:
    assert client.get("/fidelity/").status_code == 302
