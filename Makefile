# The two commands of README.md: `make demo` runs the main job, `make test` runs the whole suite.
# Each creates the virtual environment .venv on first use and installs the project into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench compat clean

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

# The oldest redis-py the project supports, on the tests that reach into redis-py's connections.
COMPAT := .venv-redis5
compat:
	$(PYTHON) -m venv $(COMPAT)
	$(COMPAT)/bin/python -m pip install --quiet -e '.[test]' 'redis==5.0.8'
	$(COMPAT)/bin/python -m pytest -q tests/test_index_contract.py tests/test_index_property.py \
		tests/test_add_if_new.py tests/test_verify.py tests/test_wire.py tests/test_cluster.py \
		tests/test_lost_replies.py tests/test_stalls.py tests/test_security.py \
		tests/test_near_conversation.py tests/test_write_formats.py

bench: $(BIN)/.installed
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) $(COMPAT) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
