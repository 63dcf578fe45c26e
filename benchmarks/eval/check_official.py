"""Agreement of annotations.evaluation with the official scripts, question by question.

    python -m benchmarks.eval.check_official [--skip-script]

Spider: the test-suite ``evaluation.py --etype exec`` (default flags) on
(1) its own evaluation_examples/predict.txt + gold.txt and (2) a full-dev
prediction file built deterministically from dev_gold.sql with realistic
perturbations (benchmarks/eval/perturb.py). Per-question decisions come from
the official ``eval_exec_match`` called exactly as its ``evaluate`` loop
calls it; the script is also run whole, and its printed totals must equal
the sum of those decisions. Hardness buckets are compared on all 1034 gold
queries. BIRD: mini-dev EX and Soft-F1 functions on a small BIRD-shaped
fixture (there is no BIRD data here), plus its R-VES aggregation helpers.

Exit status 1 when any decision differs.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sqlite3
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from annotations.evaluation import (
    Status,
    evaluate,
    load_bird_dev,
    load_bird_predictions,
    load_spider_gold_sql,
    load_spider_predictions,
    pair_items,
    spider_db_resolver,
    spider_hardness,
)
from annotations.evaluation.formats import GoldItem
from annotations.evaluation.runner import bird_db_resolver
from annotations.evaluation.ves import drop_outliers, r_ves

from .official import (
    SPIDER_DATA,
    SPIDER_EVAL_DIR,
    bird_modules,
    parse_script_scores,
    private_database_copy,
    run_spider_script,
    spider_modules,
)
from .perturb import write_perturbed

EXAMPLES = SPIDER_EVAL_DIR / "evaluation_examples"


@dataclass
class Agreement:
    name: str
    questions: int = 0
    executable: int = 0
    agree: int = 0
    official_correct: int = 0
    ours_correct: int = 0
    disagreements: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    official_seconds: float = 0.0
    ours_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.disagreements

    def lines(self) -> list[str]:
        out = [f"{self.name}: {self.agree}/{self.executable} executable questions agree "
               f"({self.questions} in the file)"]
        if self.official_correct or self.ours_correct:
            out[0] += f"; correct: official {self.official_correct}, ours {self.ours_correct}"
        out += [f"  note: {n}" for n in self.notes]
        out += [f"  DISAGREE {d}" for d in self.disagreements]
        return out


def _nonblank(path: Path) -> list[list[str]]:
    # The official reader: strip, skip blank (session separator) lines, split on tabs.
    return [line.strip().split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def official_spider_decisions(gold: Path, pred: Path, db_dir: Path) -> list[int | None]:
    """Per non-blank line: 1/0 as ``evaluate()`` of evaluation.py decides, None when not executable."""
    _, exec_eval, _ = spider_modules()
    decisions: list[int | None] = []
    for p, g in zip(_nonblank(pred), _nonblank(gold), strict=True):
        p_str = p[0].replace("value", "1")
        g_str, db_name = g[0], g[1]
        db = db_dir / db_name / f"{db_name}.sqlite"
        if not db.exists():
            decisions.append(None)
            continue
        decisions.append(exec_eval.eval_exec_match(db=str(db), p_str=p_str, g_str=g_str, plug_value=False,
                                                   keep_distinct=False, progress_bar_for_each_datapoint=False))
    return decisions


def official_hardness(sqls: list[GoldItem], db_dir: Path) -> list[str]:
    evaluation, _, process_sql = spider_modules()
    tables = {t["db_id"]: t for t in json.loads((SPIDER_DATA / "tables.json").read_text())}
    schemas: dict[str, object] = {}
    levels = []
    for g in sqls:
        if g.db_id not in schemas:
            db = db_dir / g.db_id / f"{g.db_id}.sqlite"
            if db.exists():
                schemas[g.db_id] = process_sql.Schema(process_sql.get_schema(str(db)))
            else:  # wta_1: the schema from tables.json (the parser only needs names)
                t = tables[g.db_id]
                schema = {name.lower(): [c[1].lower() for c in t["column_names_original"] if c[0] == i]
                          for i, name in enumerate(t["table_names_original"])}
                schemas[g.db_id] = process_sql.Schema(schema)
        levels.append(evaluation.Evaluator().eval_hardness(process_sql.get_sql(schemas[g.db_id], g.sql)))
    return levels


def check_spider_file(name: str, gold: Path, pred: Path, db_dir: Path, *, run_script: bool,
                      workdir: Path) -> Agreement:
    import time

    result = Agreement(name)
    started = time.perf_counter()
    gold_items = load_spider_gold_sql(gold)
    preds = load_spider_predictions(pred)
    items, issues = pair_items(gold_items, preds)
    report = evaluate(items, mode="spider", db_resolver=spider_db_resolver(db_dir), workers=2)
    result.ours_seconds = time.perf_counter() - started
    if preds.issues or issues:
        result.notes.append(f"{len(preds.issues) + len(issues)} prediction file issues: "
                            + "; ".join(str(i) for i in (*preds.issues, *issues))[:300])

    official = official_spider_decisions(gold, pred, db_dir)
    result.questions = len(official)
    pred_lines = _nonblank(pred)
    for q, off in zip(report.per_question, official, strict=True):
        if off is None or q.status == Status.NOT_EXECUTABLE:
            if (off is None) != (q.status == Status.NOT_EXECUTABLE):
                result.disagreements.append(f"#{q.index}: executability differs")
            continue
        result.executable += 1
        result.official_correct += off
        result.ours_correct += bool(q.ex)
        if bool(off) == bool(q.ex):
            result.agree += 1
        else:
            result.disagreements.append(
                f"#{q.index} [{q.db_id}] official={off} ours={q.ex} ({q.status}: {q.error[:120]})\n"
                f"      pred: {pred_lines[q.index][0][:200]}\n      gold: {items[q.index].gold_sql[:200]}")

    if run_script:
        # The whole script, on the executable questions only (it would crash on wta_1).
        keep = [i for i, off in enumerate(official) if off is not None]
        g_lines, p_lines = _nonblank(gold), _nonblank(pred)
        g_sub, p_sub = workdir / f"{name}-gold.txt", workdir / f"{name}-pred.txt"
        g_sub.write_text("".join("\t".join(g_lines[i]) + "\n" for i in keep), encoding="utf-8")
        p_sub.write_text("".join(p_lines[i][0] + "\n" for i in keep), encoding="utf-8")
        stdout, seconds = run_spider_script(g_sub, p_sub, db_dir)
        result.official_seconds = seconds
        scores = parse_script_scores(stdout)
        count, acc = scores["all"]
        replica = sum(official[i] or 0 for i in keep) / len(keep)
        if count != len(keep) or abs(acc - round(replica, 3)) > 0.0005:
            result.disagreements.append(f"script total {acc:.3f} over {count} != per-question replica "
                                        f"{replica:.3f} over {len(keep)}")
        else:
            result.notes.append(f"official script run whole: EX {acc:.3f} over {count} questions "
                                f"in {seconds:.1f} s (= per-question replica)")
    return result


def check_hardness(name: str, gold_path: Path, db_dir: Path) -> Agreement:
    gold = load_spider_gold_sql(gold_path)
    official = official_hardness(gold, db_dir)
    result = Agreement(name, questions=len(gold), executable=len(gold))
    for g, off in zip(gold, official, strict=True):
        ours = spider_hardness(g.sql)
        if ours == off:
            result.agree += 1
        else:
            result.disagreements.append(f"#{g.index} official={off} ours={ours}: {g.sql[:160]}")
    counts = Counter(official)
    result.notes.append("official buckets: " + ", ".join(f"{k} {counts[k]}" for k in ("easy", "medium", "hard",
                                                                                        "extra")))
    return result


# --- BIRD ------------------------------------------------------------------------------

_BIRD_DBS = {
    "tiny_bank": """
        CREATE TABLE account (account_id INTEGER PRIMARY KEY, district TEXT, balance REAL, opened TEXT);
        INSERT INTO account VALUES (1, 'Praha', 100.0, '1995-03-24'), (2, 'Brno', 250.5, '1996-01-01'),
            (3, 'Praha', NULL, '1997-07-07'), (4, 'Ostrava', 100.0, '1995-03-24'), (5, NULL, 0.0, '1999-12-31');
        CREATE TABLE loan (loan_id INTEGER PRIMARY KEY, account_id INTEGER, amount INTEGER, status TEXT);
        INSERT INTO loan VALUES (10, 1, 5000, 'A'), (11, 1, 7000, 'B'), (12, 2, 5000, 'A'), (13, 4, 9000, 'C');
    """,
    "tiny_school": """
        CREATE TABLE student (id INTEGER PRIMARY KEY, name TEXT, grade INTEGER, score REAL);
        INSERT INTO student VALUES (1, 'Ana', 9, 88.5), (2, 'Ben', 10, 92.0), (3, 'Cai', 9, 88.5),
            (4, 'Dee', 11, NULL), (5, 'Eli', 10, 75.25), (6, 'Ana', 12, 60.0);
    """,
}

# (db_id, difficulty, gold, prediction): rights, wrongs, errors, partial overlaps, empty results.
_BIRD_CASES = [
    ("tiny_bank", "simple", "SELECT COUNT(*) FROM account", "SELECT COUNT(account_id) FROM account"),
    ("tiny_bank", "simple", "SELECT district FROM account WHERE balance = 100",
     "SELECT district FROM account WHERE balance = 100.0"),
    ("tiny_bank", "simple", "SELECT district, balance FROM account", "SELECT balance, district FROM account"),
    ("tiny_bank", "moderate", "SELECT DISTINCT district FROM account", "SELECT district FROM account"),
    ("tiny_bank", "moderate", "SELECT account_id FROM loan ORDER BY amount DESC",
     "SELECT account_id FROM loan ORDER BY amount ASC"),
    ("tiny_bank", "moderate", "SELECT account_id, amount FROM loan", "SELECT account_id, amount FROM loan LIMIT 2"),
    ("tiny_bank", "challenging",
     "SELECT T1.district, SUM(T2.amount) FROM account T1 JOIN loan T2 ON T1.account_id = T2.account_id "
     "GROUP BY T1.district",
     "SELECT T1.district, SUM(T2.amount) FROM account T1 LEFT JOIN loan T2 ON T1.account_id = T2.account_id "
     "GROUP BY T1.district"),
    ("tiny_bank", "simple", "SELECT account_id FROM account WHERE district = 'Plzen'",
     "SELECT account_id FROM account WHERE district = 'Kladno'"),
    ("tiny_bank", "simple", "SELECT account_id FROM account WHERE district = 'Plzen'",
     "SELECT account_id FROM account WHERE district = 'Praha'"),
    ("tiny_bank", "moderate", "SELECT balance FROM account", "SELECT balance FROM acount"),
    ("tiny_bank", "moderate", "SELECT district FROM account WHERE balance IS NULL",
     "SELECT district FROM account WHERE balance = NULL"),
    ("tiny_bank", "challenging", "SELECT opened, COUNT(*) FROM account GROUP BY opened",
     "SELECT opened, COUNT(*) + 0.0 FROM account GROUP BY opened"),
    ("tiny_bank", "simple", "SELECT amount FROM loan WHERE status = 'A'", "SELECT '5000' FROM loan WHERE status='A'"),
    ("tiny_school", "simple", "SELECT name FROM student WHERE grade = 9", "SELECT name FROM student WHERE grade < 11"),
    ("tiny_school", "simple", "SELECT name, score FROM student WHERE grade = 9",
     "SELECT name, grade FROM student WHERE grade = 9"),
    ("tiny_school", "moderate", "SELECT AVG(score) FROM student", "SELECT SUM(score) / COUNT(score) FROM student"),
    ("tiny_school", "moderate", "SELECT name FROM student ORDER BY score DESC LIMIT 1",
     "SELECT name FROM student WHERE score = (SELECT MAX(score) FROM student)"),
    ("tiny_school", "challenging", "SELECT name, grade, score FROM student WHERE score > 80",
     "SELECT name, grade, score, id FROM student WHERE score > 80"),
    ("tiny_school", "challenging", "SELECT name FROM student", "SELECT name FROM student UNION ALL SELECT 'Zed'"),
    ("tiny_school", "simple", "SELECT id FROM student WHERE name = 'Ana'", "SELECT id FROM student WHERE id IN (1, 6)"),
    ("tiny_school", "moderate", "SELECT score FROM student WHERE grade = 10", "SELECT score FROM student"),
    ("tiny_school", "simple", "SELECT grade FROM student", "SELECT DISTINCT grade FROM student"),
]


def build_bird_fixture(root: Path) -> tuple[Path, Path, Path, Path]:
    """(db_root, gold .sql, predictions .json, difficulty .jsonl) in BIRD mini-dev's layout."""
    db_root = root / "dev_databases"
    for db_id, script in _BIRD_DBS.items():
        (db_root / db_id).mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(db_root / db_id / f"{db_id}.sqlite")
        conn.executescript(script)
        conn.close()
    gold = root / "mini_dev_gold.sql"
    gold.write_text("".join(f"{g}\t{db}\n" for db, _, g, _ in _BIRD_CASES), encoding="utf-8")
    preds = {str(i): f"{p}\t----- bird -----\t{db}" for i, (db, _, _, p) in enumerate(_BIRD_CASES)}
    pred = root / "predict_mini_dev.json"
    pred.write_text(json.dumps(preds, indent=4), encoding="utf-8")
    diff = root / "mini_dev.jsonl"
    diff.write_text("".join(json.dumps({"question_id": i, "db_id": db, "question": "", "evidence": "",
                                        "SQL": g, "difficulty": d}) + "\n"
                            for i, (db, d, g, _) in enumerate(_BIRD_CASES)), encoding="utf-8")
    return db_root, gold, pred, diff


def check_bird(workdir: Path) -> list[Agreement]:
    ex_mod, f1_mod, ves_mod = bird_modules()
    db_root, _gold, pred, diff = build_bird_fixture(workdir / "bird")
    items, _ = pair_items(load_bird_dev(diff), load_bird_predictions(pred))
    report = evaluate(items, mode="bird", db_resolver=bird_db_resolver(db_root), workers=2)
    ex_result = Agreement("BIRD fixture EX", questions=len(items))
    f1_result = Agreement("BIRD fixture Soft-F1", questions=len(items))
    for q, (db, _, g, p) in zip(report.per_question, _BIRD_CASES, strict=True):
        path = str(db_root / db / f"{db}.sqlite")
        off_ex = ex_mod.execute_model(p, g, path, q.index, 30.0, "SQLite")["res"]
        off_f1 = f1_mod.execute_model(p, g, path, q.index, 30.0, "SQLite")["res"]
        for res, off, ours in ((ex_result, off_ex, int(bool(q.ex))), (f1_result, off_f1, q.soft_f1 or 0.0)):
            res.executable += 1
            res.official_correct += int(off == 1)
            res.ours_correct += int(ours == 1)
            if math.isclose(off, ours, abs_tol=1e-12):
                res.agree += 1
            else:
                res.disagreements.append(f"#{q.index} official={off} ours={ours} ({q.status}) pred: {p}")
    f1_result.notes.append(f"mean Soft-F1 ours {report.totals.soft_f1:.2f}")

    ves_result = Agreement("BIRD R-VES helpers (random inputs)")
    rng = random.Random(7)
    for trial in range(200):
        ratios = [rng.lognormvariate(0, 0.6) for _ in range(rng.randint(3, 40))]
        if trial % 10 == 0:
            ratios.append(50.0)  # an outlier the 3-sigma rule must drop
        rewards = [rng.choice([0, 0.25, 0.5, 0.75, 1, 1.25]) for _ in range(rng.randint(1, 30))]
        ves_result.questions += 2
        ves_result.executable += 2
        off_clean = [float(x) for x in ves_mod.clean_abnormal(ratios)]
        ves_result.agree += off_clean == drop_outliers(ratios)
        off_ves = ves_mod.compute_ves([{"reward": r} for r in rewards])
        ours_ves = r_ves(rewards)
        if ours_ves is not None and math.isclose(off_ves, ours_ves, rel_tol=1e-12):
            ves_result.agree += 1
        else:
            ves_result.disagreements.append(f"R-VES of {rewards}: official {off_ves}, ours {ours_ves}")
    if ves_result.agree != ves_result.executable and not ves_result.disagreements:
        ves_result.disagreements.append("outlier filtering differs")
    return [ex_result, f1_result, ves_result]


def run_checks(*, run_script: bool = True, out=print) -> list[Agreement]:
    workdir = Path(tempfile.mkdtemp(prefix="t2s-check-"))
    db_dir = private_database_copy()
    try:
        results = [check_spider_file("evaluation_examples", EXAMPLES / "gold.txt", EXAMPLES / "predict.txt",
                                     db_dir, run_script=run_script, workdir=workdir)]
        dev_pred, dev_gold = workdir / "dev-perturbed-pred.txt", workdir / "dev-gold.txt"
        kinds = write_perturbed(SPIDER_DATA / "dev_gold.sql", dev_pred, gold_out=dev_gold)
        dev = check_spider_file("spider-dev-perturbed", dev_gold, dev_pred, db_dir, run_script=run_script,
                                workdir=workdir)
        dev.notes.append("perturbations: " + ", ".join(f"{k} {n}" for k, n in
                                                       Counter(k for _, k, _ in kinds).most_common()))
        results.append(dev)
        results.append(check_hardness("Spider dev hardness", SPIDER_DATA / "dev_gold.sql", db_dir))
        results.append(check_hardness("evaluation_examples hardness", EXAMPLES / "gold.txt", db_dir))
        results.extend(check_bird(workdir))
        for r in results:
            for line in r.lines():
                out(line)
        return results
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(db_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-script", action="store_true",
                        help="do not also run evaluation.py whole (the per-question oracle still runs)")
    args = parser.parse_args(argv)
    results = run_checks(run_script=not args.skip_script)
    ok = all(r.ok for r in results)
    print("AGREEMENT: all decisions agree" if ok else "AGREEMENT: differences found (see DISAGREE lines)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
