from agent.sql import SchemaInfo, connect

SCRIPT = """
CREATE TABLE "Order Lines" (order_id INTEGER, line_no INTEGER, product TEXT, qty REAL,
    PRIMARY KEY (order_id, line_no));
CREATE TABLE Shipment (id INTEGER PRIMARY KEY, order_id INTEGER, line_no INTEGER, shipped DATE,
    FOREIGN KEY (order_id, line_no) REFERENCES "Order Lines" (order_id, line_no));
CREATE TABLE employee (id INTEGER PRIMARY KEY, name TEXT, manager_id INTEGER REFERENCES employee(id),
    dept TEXT, CamelCase TEXT, empty_col TEXT);
CREATE TABLE owner_less (x INTEGER REFERENCES employee);
INSERT INTO "Order Lines" VALUES (1, 1, 'apple', 2.5), (1, 2, 'pear', 1), (2, 1, 'plum', 4);
INSERT INTO Shipment VALUES (10, 1, 2, '2024-01-03'), (11, 2, 1, '2024-02-01');
INSERT INTO employee (id, name, manager_id, dept) VALUES
    (1, 'Ada', NULL, 'R&D'), (2, 'Bob', 1, 'R&D'), (3, 'Cy', 1, 'Sales'), (4, 'Di', 2, 'R&D'),
    (5, 'Ed', 2, 'Sales'), (6, 'Flo', 3, 'R&D');
"""


def test_composite_self_referencing_and_odd_names(make_sqlite):
    with connect("sqlite", str(make_sqlite(SCRIPT))) as db:
        schema = db.introspect()
    lines = schema.table("order lines")
    assert lines.name == "Order Lines"
    assert lines.primary_key == ("order_id", "line_no")
    shipment = schema.table("Shipment")
    [fk] = shipment.foreign_keys
    assert (fk.columns, fk.ref_table, fk.ref_columns) == (("order_id", "line_no"), "Order Lines", ("order_id", "line_no"))
    [self_fk] = schema.table("employee").foreign_keys
    assert (self_fk.columns, self_fk.ref_table, self_fk.ref_columns) == (("manager_id",), "employee", ("id",))
    # REFERENCES without a column list points at the primary key.
    assert schema.table("owner_less").foreign_keys[0].ref_columns == ("id",)


def test_statistics_follow_the_papers_kinds(make_sqlite):
    with connect("sqlite", str(make_sqlite(SCRIPT))) as db:
        schema = db.introspect()
    employee = schema.table("employee")
    assert employee.row_count == 6
    dept = employee.column("dept").stats
    assert dept.kind == "enum"
    assert dept.values == (("R&D", 4), ("Sales", 2))
    assert employee.column("id").stats.describe() == "numeric range: 1 .. 6; distinct count: 6"
    assert employee.column("name").stats.kind == "text"
    assert employee.column("empty_col").stats.kind == "empty"
    assert schema.table("Shipment").column("shipped").stats.kind == "date"


def test_long_text_samples_are_cut_to_100_characters(make_sqlite):
    rows = ",".join(f"({i}, '{'word ' * 60}{i}')" for i in range(30))
    path = make_sqlite(f"CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes VALUES {rows};")
    with connect("sqlite", str(path)) as db:
        stats = db.introspect().table("notes").column("body").stats
    assert stats.kind == "text"
    assert all(len(s) <= 100 for s in stats.samples)


def test_schema_round_trips_through_json(make_sqlite):
    with connect("sqlite", str(make_sqlite(SCRIPT))) as db:
        schema = db.introspect()
    assert SchemaInfo.from_dict(schema.to_dict()) == schema


def test_fingerprint_changes_when_the_file_changes(make_sqlite):
    path = make_sqlite(SCRIPT)
    with connect("sqlite", str(path)) as db:
        before = db.fingerprint()
    import sqlite3
    import time

    time.sleep(0.01)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO employee (id, name) VALUES (7, 'Gus')")
    conn.close()
    with connect("sqlite", str(path)) as db:
        assert db.fingerprint() != before
