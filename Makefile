# The two commands of README.md: `make demo` runs the main job, `make test` runs the whole suite.
# Each creates the virtual environment .venv on first use and installs the project into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The development environment's versions (lint tools, numpy and the other packages mypy reads, the test
# tools), one place for every install below and for scripts/matrix.sh; pyproject.toml's ranges stay the
# users'.
CONSTRAINTS := dev-constraints.txt

.PHONY: demo test test-pure lint lint-native native bench compat matrix clean

# setuptools reports every editable install of a project whose packages map folders (cli/ installs as
# simhash_redis.cli) with a notice, "Editable installation. Please be careful with folders in your working
# directory...", which pip prints as a BuildBackendWarning. Only that notice is filtered out: errors, and
# every other warning, still show.
EDITABLE := PYTHONWARNINGS='ignore:Editable installation'

$(BIN)/.installed: pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip -c $(CONSTRAINTS)
	$(EDITABLE) $(BIN)/python -m pip install --quiet -e '.[dev]' -c $(CONSTRAINTS)
	touch $@

# The compiled core (Rust, built by maturin from PyPI): optional, the pure engine runs without it.
# NATIVE_WHEEL names a wheel built already (scripts/matrix.sh builds its one abi3 wheel once).
NATIVE_SOURCES := native/Cargo.toml native/Cargo.lock native/pyproject.toml native/simhash_redis_native.pyi \
	$(wildcard native/src/*.rs native/src/*/*.rs)
NATIVE_WHEEL ?=
$(BIN)/.native: $(BIN)/.installed $(NATIVE_SOURCES)
	@if [ -n "$(NATIVE_WHEEL)" ]; then \
		$(BIN)/python -m pip install --quiet --force-reinstall --no-deps $(NATIVE_WHEEL) && touch $@; \
	elif command -v cargo >/dev/null 2>&1; then \
		$(BIN)/python -m pip install --quiet ./native && touch $@; \
	else \
		echo "cargo not found: the pure Python engine runs (install Rust, then make native, for the compiled core)"; \
	fi

native: $(BIN)/.native

demo: $(BIN)/.native
	$(BIN)/simhash-redis demo

# mypy checks for the oldest supported Python (pyproject.toml's python_version) against this
# environment's packages; MYPY_FLAGS adds to it (scripts/matrix.sh: another target version, a cache per
# environment).
MYPY_FLAGS ?=
lint: $(BIN)/.native
	$(BIN)/ruff check simhash_redis cli tests benchmarks scripts
	$(BIN)/ruff format --check simhash_redis cli tests benchmarks scripts
	$(BIN)/mypy $(MYPY_FLAGS)

# The Rust crate's own checks, where cargo is present.
lint-native:
	@if command -v cargo >/dev/null 2>&1; then \
		cd native && cargo fmt --check && cargo clippy --quiet --all-targets -- -D warnings && cargo test --quiet; \
	else \
		echo "cargo not found: the Rust crate is not checked"; \
	fi

# The suite in parallel processes (pytest-xdist): most of its time is spent waiting on servers it
# started, so two workers on two cores take ~60% of one's time. Each worker starts its own servers.
WORKERS := -n auto --maxprocesses=4
test: lint lint-native
	$(BIN)/python -m pytest $(WORKERS)

# The pure engine on the tests of fingerprints, sketches and the index's reads (the compiled core is
# used whenever it is installed, so `make test` alone would leave the fallback untested).
PURE_TESTS := tests/test_fingerprint.py tests/test_fingerprint_speed_exact.py tests/test_features.py \
	tests/test_scheme.py tests/test_minhash.py tests/test_verified.py tests/test_index_contract.py \
	tests/test_index_property.py tests/test_near_conversation.py tests/test_wire.py \
	tests/test_bulk.py tests/test_verified_mode.py tests/test_retention.py tests/test_banded_odd.py \
	tests/test_odd_sketch.py
# The engines differ in fingerprints, sketches and the read path's filter, not in transports: the
# cluster, asyncio and fakeredis cases of these files run in `make test` only.
test-pure: $(BIN)/.native
	SIMHASH_REDIS_ENGINE=python $(BIN)/python -m pytest -q $(WORKERS) $(PURE_TESTS) \
		-k "not cluster and not asyncio and not fake"

# The oldest redis-py the project supports, on the tests that reach into redis-py's connections.
COMPAT := .venv-redis5
compat:
	$(PYTHON) -m venv $(COMPAT)
	$(EDITABLE) $(COMPAT)/bin/python -m pip install --quiet -e '.[test]' -c $(CONSTRAINTS)
	$(COMPAT)/bin/python -m pip install --quiet 'redis==5.0.8'   # the oldest accepted, over the pin
	$(COMPAT)/bin/python -m pytest -q $(WORKERS) tests/test_index_contract.py tests/test_add_if_new.py \
		tests/test_wire.py tests/test_cluster.py tests/test_lost_replies.py tests/test_stalls.py \
		tests/test_security.py tests/test_near_conversation.py tests/test_asyncio.py

# The other supported Pythons (with CI's main run on 3.13: 3.10 with the oldest numpy and redis-py; 3.11 and
# 3.12 on request) and servers (Redis 6.2, Valkey 9.1; Redis 7.0 on request): see scripts/matrix.sh.
matrix: $(BIN)/.native
	bash scripts/matrix.sh

bench: $(BIN)/.installed
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) $(COMPAT) .venv-3.* .venv-servers build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis native/target
