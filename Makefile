# Every target sets up .venv itself on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench lint format clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: $(STAMP) lint
	$(BIN)/python -m pytest

demo: $(STAMP)
	$(BIN)/hetbed demo --out out/demo

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache
