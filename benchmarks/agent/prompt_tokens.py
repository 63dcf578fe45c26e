"""Prompt tokens per LLM call with the paper's Spider exemplar set (`python -m benchmarks.agent.prompt_tokens`).

For N Spider dev questions spread over the databases (every len/N-th question), builds the exact messages
the Interactive-T2S agent sends with the paper's 2-shot Spider set (vendored in
annotations/exemplars/paper_prompts/spider, its own tool_desc.txt) and counts them with GPT-4o's tokenizer
(o200k_base, bundled by quicktok-v1; ``agent.llm.tokens``), chat framing included.

No LLM is called: after the first call, the conversation follows a fixed three-call trajectory with real
observations from the tools (SearchColumn on the whole question, ExecuteSQL of the gold query, Done), so the
later calls' sizes are those of a short, real-sized case. For comparison it also counts the authors' own
prompt layout for the same question (their code: tool description + exemplars in one system message,
"Schema of database X:" and "Q:" in the user message), which is what "the authors' equivalent" means below.

No Django: it uses the agent core only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

from agent.llm import Message
from agent.sql import connect
from agent.strategies.exemplars import parse_trajectory
from agent.strategies.prompt import build_messages, estimate_message_tokens, schema_text
from agent.tools.build import build_indexes
from agent.tools.toolbox import ToolBox

ROOT = Path(__file__).resolve().parents[2]
SPIDER = Path(os.environ.get("T2S_SHARED_DIR", ROOT.parent / "shared")) / "data" / "spider_dev"
PROMPTS = ROOT / "annotations" / "exemplars" / "paper_prompts" / "spider"


def paper_set() -> tuple[str, list, list]:
    shots, raw = [], []
    for db in sorted(p for p in PROMPTS.iterdir() if p.is_dir()):
        schema = (db / "schema.txt").read_text()
        for file in sorted(db.glob("*.txt")):
            if file.name == "schema.txt":
                continue
            text = file.read_text()
            shots.append(parse_trajectory(text, schema_text=schema))
            raw.append((db.name, schema, "\n".join(line for line in text.splitlines() if not line.startswith("#"))))
    return (PROMPTS / "tool_desc.txt").read_text().strip(), shots, raw


def authors_first_call(tool_desc: str, raw: list, db: str, schema: str, question: str) -> list[Message]:
    """The first messages in the layout of the authors' released code, for the same question."""
    by_db: dict[str, list[str]] = {}
    schemas: dict[str, str] = {}
    for name, shot_schema, text in raw:
        by_db.setdefault(name, []).append(text.strip())
        schemas[name] = shot_schema
    demos = "\n\n".join(f"Schema of database {name}:\n{schemas[name].strip()}\n\n" + "\n\n".join(texts)
                        for name, texts in by_db.items())
    system = f"{tool_desc}\n\n{demos}\n\nNow, solve the following question step by step."
    return [Message("system", system), Message("user", f"Schema of database {db}:\n{schema}\n\nQ: {question}")]


PROFILES = ("default", "paper")


def measure(picked: list[dict], shots: list, tool_desc: str, profile: str, tmp: Path) -> dict[str, list[int]]:
    """Prompt tokens of the three calls of each question, its live observations in ``profile``."""
    first, per_call, per_case = [], [], []
    for q in picked:
        path = SPIDER / "database" / q["db_id"] / f"{q['db_id']}.sqlite"
        connector = connect("sqlite", str(path))
        index_dir = tmp / q["db_id"]
        if not index_dir.exists():  # one build per database (the default column backend, as agents get)
            build_indexes(connector, index_dir)
        with ToolBox(connector, index_dir, profile=profile) as tools:
            history: list[tuple[str, str]] = []
            steps = [f'Thought: I need the columns.\nAction: SearchColumn({json.dumps(q["question"])})',
                     f'Thought: Now the query.\nAction: ExecuteSQL({json.dumps(q["query"])})',
                     "Thought: Done.\nAction: Done"]
            calls = []
            for text in steps:
                messages = build_messages(schema=tools.schema, question=q["question"], exemplars=shots,
                                          custom_tool_description=tool_desc, history=history)
                calls.append(estimate_message_tokens(messages))
                if "SearchColumn(" in text:
                    history.append((text, tools.run("SearchColumn", [q["question"]]).observation))
                elif "ExecuteSQL(" in text:
                    history.append((text, tools.run("ExecuteSQL", [q["query"]]).observation))
        connector.close()
        first.append(calls[0])
        per_call += calls
        per_case.append(sum(calls))
    return {"first": first, "per_call": per_call, "per_case": per_case}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--profile", choices=(*PROFILES, "both"), default="both",
                        help="observation profile of the live observations (the exemplars' text is the same)")
    args = parser.parse_args(argv)
    tool_desc, shots, raw = paper_set()
    dev = json.loads((SPIDER / "dev.json").read_text())
    step = max(1, len(dev) // args.questions)
    picked = [q for q in dev[::step] if (SPIDER / "database" / q["db_id"] / f"{q['db_id']}.sqlite").exists()]
    picked = picked[:args.questions]
    profiles = PROFILES if args.profile == "both" else (args.profile,)
    with tempfile.TemporaryDirectory() as tmp:
        results = {p: measure(picked, shots, tool_desc, p, Path(tmp)) for p in profiles}
        authors = []
        for q in picked:
            connector = connect("sqlite", str(SPIDER / "database" / q["db_id"] / f"{q['db_id']}.sqlite"))
            with ToolBox(connector, Path(tmp) / q["db_id"]) as tools:
                authors.append(estimate_message_tokens(authors_first_call(
                    tool_desc, raw, q["db_id"], schema_text(tools.schema), q["question"])))
            connector.close()
    print(f"{len(picked)} Spider dev questions (every {step}th), paper Spider set, o200k_base prompt tokens\n")
    print("| profile | first call mean (min-max) | per call mean (3-call trajectory) | per case (3 calls) |")
    print("|---|---|---|---|")
    for p, r in results.items():
        print(f"| {p} | {statistics.mean(r['first']):,.0f} ({min(r['first']):,}-{max(r['first']):,}) "
              f"| {statistics.mean(r['per_call']):,.0f} | {statistics.mean(r['per_case']):,.0f} |")
    print(f"\nThe authors' layout, first call: mean {statistics.mean(authors):,.0f}")


if __name__ == "__main__":
    main()
