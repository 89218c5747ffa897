# segmentlake developer entry points. Everything runs from the project's own .venv.
# `make setup` is idempotent and cheap when nothing changed; every other target calls it.

PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup quickstart test test-cluster lint format

setup: $(STAMP)
	$(BIN)/python -m segmentlake.spark prepare
	@# Bytecode, as a wheel install writes it: a metadata command compiles no source on start.
	$(BIN)/python -m compileall -q segmentlake

# Reinstall only when the dependency list changed; the editable install picks up code edits.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

quickstart: setup
	$(BIN)/segmentlake quickstart

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy segmentlake
	$(BIN)/lint-imports

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The suite's drivers start from a class data sharing archive, built once per JDK and
# classpath (tests/jvm_archive.py; ~85 s the first time, nothing after).
test: lint
	$(BIN)/python -m tests.jvm_archive
	$(BIN)/pytest

# The suite once more with executors in JVMs of their own, as on a cluster (not run by CI,
# which runs tests/spark/test_cluster_mode.py; docs/development.md). Tests that start their
# own drivers pick their own masters, so they are left out here.
test-cluster: setup
	$(BIN)/python -m tests.jvm_archive
	SEGMENTLAKE_TEST_MASTER='local-cluster[2,1,1536]' $(BIN)/pytest -m 'not multiprocess' -rs
