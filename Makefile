# muarl: `make run` and `make test` set themselves up (a .venv with the project installed).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "needs $(PYTHON)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,train]'
	touch $(STAMP)

run: setup
	$(BIN)/muarl run

test: setup
	$(BIN)/ruff check backend rl tests bench migrations
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check backend rl tests bench migrations

bench: setup
	$(BIN)/python bench/env_bench.py

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
