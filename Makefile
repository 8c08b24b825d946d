# The two commands of README.md: `make demo` runs the main job, `make test` runs the whole suite.
# Each creates the virtual environment .venv on first use and installs the project into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/simhash-redis demo

lint: $(BIN)/.installed
	$(BIN)/ruff check simhash_redis cli tests benchmarks
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest

bench: $(BIN)/.installed
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
