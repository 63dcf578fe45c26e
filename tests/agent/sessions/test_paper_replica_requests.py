"""The paper-replica preset sends the authors' LLM requests byte for byte.

The expected requests are rebuilt here the way the authors' release builds them (their prompt loader,
schema table, missing-key patch, driver and final-answer script, written again from reading their code)
from their released exemplar files (vendored in annotations/exemplars/paper_prompts/spider), and compared
with what the replica sent to the replay LLM server: every message of every call, and the stop sequences.
Observations are the replica's own (the tools are compared elsewhere); their framing is compared here.
"""

import sqlite3
from pathlib import Path

import pytest

from agent.models import AgentSession
from agent.services import sessions
from agent.sql import ForeignKey, connect, with_foreign_keys
from agent.strategies.prompt import paper_schema_text
from annotations.exemplars.paper_sets import PROMPTS_DIR
from tests.conftest import SPIDER_DIR

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]

AUTHORS_STOP = ["\nObservation", "\nThought", "[END]"]
# preprocess/spider_missing_fk.json of their release, for the dev databases: {db: {table: {column: "t.c"}}}
AUTHORS_MISSING_FK = {"flight_2": {"airlines": {"uid": "flights.Airline"}}}
# A question per database (index into that database's dev questions) and the table the script queries.
CASES = [("concert_singer", 0, "singer"), ("concert_singer", 7, "concert"), ("flight_2", 0, "airlines"),
         ("flight_2", 11, "flights"), ("car_1", 3, "car_makers"), ("dog_kennels", 5, "Dogs")]


# --- the authors' side ----------------------------------------------------------------------------------------

def authors_system_prompt(spider_prompts: Path, *, tool_desc: str = "tool_desc.txt") -> str:
    """Their load_schema_and_examples_dialog + load_tooldesc + chat_with_LLM's system message. Their glob
    order of the database folders is the file system's; the vendored folders are taken sorted."""
    blocks = []
    for folder in sorted(p for p in spider_prompts.iterdir() if p.is_dir()):
        schema = (folder / "schema.txt").read_text()
        examples = []
        for path in sorted(p for p in folder.glob("*.txt") if p.name not in ("schema.txt", "test.txt")):
            lines = [line for line in path.read_text().splitlines(keepends=True) if not line.startswith("#")]
            examples.append("".join(lines).strip())
        blocks.append(f"Schema of database {folder.name}:\n{schema.strip()}\n\n" + "\n\n".join(examples))
    tooldesc_demos = (spider_prompts / tool_desc).read_text().strip() + "\n\n" + "\n\n".join(blocks)
    return tooldesc_demos.strip() + "\n\nNow, solve the following question step by step."


def authors_schema_table(db_id: str) -> str:
    """Their spider_step2_dbs_info table, on the database as their spider_step0 left it (a table they rebuilt
    to add missing keys holds only those keys)."""
    conn = sqlite3.connect(f"file:{SPIDER_DIR / 'database' / db_id / f'{db_id}.sqlite'}?mode=ro", uri=True)
    conn.text_factory = lambda b: b.decode(errors="ignore")
    try:
        cur = conn.cursor()
        tables = [r[0] for r in cur.execute("SELECT name FROM sqlite_master WHERE type='table'")
                  if r[0] != "sqlite_sequence"]
        md = "| Table | Primary Key | Foreign Key | Row Count |\n| --- | --- | --- | --- |\n"
        for table in sorted(tables):
            pk = ", ".join(c[1] for c in cur.execute(f"PRAGMA table_info(`{table}`)").fetchall() if c[5] == 1)
            added = AUTHORS_MISSING_FK.get(db_id, {}).get(table)
            if added:
                fks = [(None, None, ref.split(".")[0], col, ref.split(".")[1]) for col, ref in added.items()]
            else:
                fks = cur.execute(f"PRAGMA foreign_key_list(`{table}`)").fetchall()
            fk = ", ".join(f"{f[3]} references {f[2]}({f[4]})" for f in fks)
            count = cur.execute(f"SELECT COUNT(*) FROM `{table}`").fetchone()[0]
            md += f"| {table} | {pk} | {fk} | {count} |\n"
        return md.strip()
    finally:
        conn.close()


def authors_step(content: str) -> str:
    """chat_with_LLM's handling of one choice: strip, cut at "Observation", preprocess_output, strip, and
    "Thought: " in front."""
    content = content.strip().split("Observation")[0]
    if "\nAction: " in content:
        content = "\nAction: ".join(content.split("\nAction: ")[:2])
    content = " ".join(content.replace("\n", " ").split()).replace("Action:", "\nAction:")
    out = content.replace("[END]", "").strip()
    return out if out.startswith("Thought: ") else "Thought: " + out


def cut_at_stop(text: str) -> str:
    cuts = [i for i in (text.find(s) for s in AUTHORS_STOP) if i != -1]
    return text[:min(cuts)] if cuts else text


def script_for(table: str) -> list[str]:
    """A failing query, one with CAST that ends up the answer, a SELECT * probe, then Done; completions
    spread over lines and carrying text past the stops, as models write them."""
    return [
        f'Thought: First a query\non a column that   does not exist.\nAction: ExecuteSQL("SELECT nosuch FROM {table}")'
        "\nObservation: invented by the model",
        f'I count\n  the rows.\nAction: ExecuteSQL("SELECT CAST(count(*) AS REAL)\n FROM {table}") [END] trailing',
        f'Thought: a look at the rows\nAction: ExecuteSQL("SELECT * FROM {table}")\nThought: more',
        "Thought: The count answers the question.\nAction: Done",
    ]


# --- the comparison -------------------------------------------------------------------------------------------

@pytest.fixture
def dev_questions():
    import json

    return json.loads((SPIDER_DIR / "dev.json").read_text())


def test_the_replica_sends_the_authors_requests_byte_for_byte(spider_database, replay_llm, dev_questions):
    databases = {db_id: spider_database(db_id) for db_id in dict.fromkeys(db for db, _, _ in CASES)}
    cases = []
    for db_id, n, table in CASES:
        question = [q for q in dev_questions if q["db_id"] == db_id][n]["question"]
        cases.append((db_id, question, table))
    server = replay_llm({"scripts": {question: script_for(table) for _, question, table in cases}})
    system = authors_system_prompt(PROMPTS_DIR / "spider")

    for db_id, question, table in cases:
        session = sessions.session_create(database=databases[db_id], question=question, paper_replica=True,
                                          enqueue=False)
        assert session.config["exemplar_warnings"] == []  # their exemplar text is sent as written, by design
        sessions.session_execute(session_id=session.pk)
        session.refresh_from_db()
        records = sessions.session_records(session)
        requests = server.chat_requests_for(question)
        assert len(requests) == 4 and len(records) == 4

        user = f"Schema of database {db_id}:\n{authors_schema_table(db_id)}\n\nQ: {question.strip()}"
        expected = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        for i, (request, raw) in enumerate(zip(requests, script_for(table), strict=True)):
            assert request.messages == expected, f"{db_id}: request {i} differs"
            assert request.params["stop"] == AUTHORS_STOP
            expected = [*expected, {"role": "assistant", "content": authors_step(cut_at_stop(raw))},
                        {"role": "user", "content": "Observation: " + (records[i].observation or "").strip()}]
        # their answer: the last ExecuteSQL that is no SELECT * probe, failed or not, CAST removed
        assert session.final_sql == f"SELECT count(*) FROM {table}"
    assert AgentSession.objects.filter(status=AgentSession.Status.ANSWERED).count() == len(cases)


# Without the shared folder, one placeholder case that the shared_data marker skips with its reason (an empty
# parameter set would be skipped for another reason, which CI refuses).
@pytest.mark.parametrize("db_id", sorted(p.name for p in (SPIDER_DIR / "database").iterdir()
                                          if (p / f"{p.name}.sqlite").is_file()) if SPIDER_DIR.is_dir()
                         else ["no-shared-folder"])
def test_the_schema_table_is_the_authors_on_every_spider_dev_database(db_id):
    conn = connect("sqlite", str(SPIDER_DIR / "database" / db_id / f"{db_id}.sqlite"))
    try:
        schema = conn.introspect(with_stats=True)
    finally:
        conn.close()
    keys = [ForeignKey(table, (column,), *ref.split(".")[:1], tuple(ref.split(".")[1:]))
            for table, columns in AUTHORS_MISSING_FK.get(db_id, {}).items() for column, ref in columns.items()]
    assert paper_schema_text(with_foreign_keys(schema, keys)) == authors_schema_table(db_id)


def test_the_ablation_sends_the_no_findpath_text_once_and_the_closing_line(spider_database, replay_llm):
    database = spider_database("concert_singer")
    server = replay_llm(['Thought: count\nAction: ExecuteSQL("SELECT count(*) FROM singer")', "Action: Done"])
    session = sessions.session_create(database=database, question="How many singers do we have?",
                                      paper_replica=True, enqueue=False,
                                      options={"enabled_tools": ["SearchColumn", "SearchValue", "ExecuteSQL"]})
    sessions.session_execute(session_id=session.pk)
    system = server.chat_requests()[0].messages[0]["content"]
    no_findpath = (PROMPTS_DIR / "spider" / "tool_desc_no_findpath.txt").read_text().strip()
    # their file ends with "Here are some examples:"; nothing is added after it
    assert system.startswith(no_findpath + "\n\nSchema of database academic:\n")
    assert system.count("Here are some examples:") == 1 and "Here are some exemplars:" not in system
    assert "FindShortestPath(" not in system.split(no_findpath, 1)[1]
    assert system.endswith("\n\nNow, solve the following question step by step.")


def test_the_replica_applies_flight_2s_key_itself(spider_database, replay_llm):
    database = spider_database("flight_2")  # registered without the import's --patch flight_2
    assert database.foreign_key_patches == []
    replay_llm(['Thought: join\nAction: FindShortestPath("airlines.Airline", "flights.FlightNo")',
                'Action: ExecuteSQL("SELECT count(*) FROM flights")', "Action: Done"])
    session = sessions.session_create(database=database, question="How many flights?", paper_replica=True,
                                      enqueue=False)
    sessions.session_execute(session_id=session.pk)
    path = sessions.session_records(session)[0].observation
    assert "airlines.uid" in path and "flights.Airline" in path
    user = sessions.session_records(session)[0].messages[1].content
    assert "| airlines | uid | uid references flights(Airline) | 12 |" in user
    # without the preset the database's schema is as declared
    replay_llm(['Action: FindShortestPath("airlines.Airline", "flights.FlightNo")',
                'Action: ExecuteSQL("SELECT count(*) FROM flights")', "Action: Done"])
    plain = sessions.session_create(database=database, question="How many flights?", enqueue=False)
    sessions.session_execute(session_id=plain.pk)
    assert "airlines.uid" not in sessions.session_records(plain)[0].observation


def test_a_step_is_read_and_refused_as_the_authors_parser_reads_it(spider_database, replay_llm):
    database = spider_database("concert_singer")
    replay_llm(["Thought: I will just answer 6.",
                # a second "\nAction: " line is dropped as they drop it; two on one line are refused
                'Thought: one Action: SearchValue("x") Action: ExecuteSQL("SELECT 1")',
                # the call is read from the first tool name on, up to the last ")"
                'Thought: look\nAction: I will call SearchValue("Netherlands") now',
                'Action: SearchColumn("a") SearchColumn("b")',
                "Thought: done\nAction: Done",
                'Action: ExecuteSQL("SELECT count(*) FROM singer")', "Action: Done"])
    session = sessions.session_create(database=database, question="How many singers do we have?",
                                      paper_replica=True, enqueue=False)
    sessions.session_execute(session_id=session.pk)
    records = sessions.session_records(session)
    observations = [t.observation for t in records]
    assert observations[:2] == [
        "Error: No valid action found. Please provide an action after `Action:` .",
        "Error: More than one `Action:` found. Please provide only one action.",
    ]
    assert records[2].tool == "SearchValue" and records[2].args == ("Netherlands",) and records[2].tool_ok
    assert observations[3].startswith("Error: Action parsing error. SyntaxError: ")
    assert observations[4] == "Error. You must call ExecuteSQL function to provide the answer at least once."
    assert records[2].messages[-2].content == "Thought: one \nAction: SearchValue(\"x\") \nAction: ExecuteSQL(\"SELECT 1\")"


def test_a_case_is_run_again_only_when_their_retry_test_says_so(spider_database, replay_llm):
    database = spider_database("concert_singer")
    # "[(None, None, None)]" is no "invalid result" of theirs: the case stands
    replay_llm(['Action: ExecuteSQL("SELECT DISTINCT NULL, NULL, NULL FROM singer")', "Action: Done"])
    session = sessions.session_create(database=database, question="q1", paper_replica=True, enqueue=False)
    sessions.session_execute(session_id=session.pk)
    records = sessions.session_records(session)
    assert records[0].observation.startswith("[(None, None, None)]") and len(records) == 2
    # rounds ran out: their test reads the observation before the last one ("[(6,)]"), so no new attempt
    replay_llm(['Action: ExecuteSQL("SELECT count(*) FROM singer")',
                "Action: ExecuteSQL(\"SELECT name FROM singer WHERE name = 'nobody'\")"])
    session = sessions.session_create(database=database, question="q2", paper_replica=True, enqueue=False,
                                      options={"max_rounds": 2})
    sessions.session_execute(session_id=session.pk)
    records = sessions.session_records(session)
    assert [r.observation for r in records] == ["[(6,)]", "[]"]
    session.refresh_from_db()
    assert session.status == AgentSession.Status.MAX_ROUNDS
