"""The service's settings, handed from ``simhash-redis serve`` to each worker process through one
environment variable."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArgument
from ..index.mode import Asking
from ..index.verified_index import checked_threshold
from ..tools.connect import index_options

__all__ = ["CONFIG_ENV", "SERVE_ASKING", "TOKEN_ENV", "ServiceConfig", "check_url"]

#: The environment variable carrying a `ServiceConfig` to the worker processes, as JSON.
CONFIG_ENV = "SIMHASH_REDIS_SERVICE_CONFIG"
#: The environment variable holding the bearer token, when not given on the command line.
TOKEN_ENV = "SIMHASH_REDIS_TOKEN"
#: serve's words for each mode, in the refusals that name them.
SERVE_ASKING = Asking(
    plain="--plain", verified="--verified", threshold="--threshold", band_buckets="--band-buckets"
)


def check_url(url: str) -> None:
    """Refuse a malformed Redis URL at start (every call would fail on it, blaming the caller).

    Raises:
        InvalidArgument: the URL is malformed (the message shows it with its password masked).
    """
    from ..transport.connection import client_from_url

    client_from_url(url, cluster=False).close()  # parses and checks what a client would; connects not


@dataclass(frozen=True)
class ServiceConfig:
    """What a worker needs: where the indexes are, how new ones are made, and the limits.

    Attributes:
        redis_url: the Redis URL; None: $SIMHASH_REDIS_URL, else the embedded server.
        index: the index /readyz checks when it exists.
        k, f, layout, scheme, verified, threshold, band_buckets, retention, sliding, id_buckets: the
            configuration of an index a write creates (the CLI's global options of those names).
        create: whether a write to an unknown index creates it (else 404 index_not_found).
        token: the bearer token every /v1 call and /metrics must carry; None: no authentication.
        max_body: the largest request body in bytes (of a JSON Lines body, the largest line).
        timeout: seconds a single call may wait for its batch (then 504), a part of a body may take to
            come (then 408), and a stalled Redis may hold a call.
        batch: documents per library call of a JSON Lines stream (fewer once they hold max_body bytes).
        access_log: write one JSON line per request on stderr.
    """

    redis_url: str | None = field(default=None, repr=False)
    index: str = "default"
    k: int | None = None
    f: int | None = None
    layout: str | None = None
    scheme: str | None = None
    verified: bool | None = None
    threshold: float | None = None
    band_buckets: int | None = None
    retention: str | None = None
    sliding: bool = False
    id_buckets: int | None = None
    create: bool = True
    token: str | None = field(default=None, repr=False)
    max_body: int = 16 * 1024 * 1024
    timeout: float = 30.0
    batch: int = 1000
    access_log: bool = True

    def to_env(self) -> dict[str, str]:
        """The environment variables that carry this configuration to a worker."""
        return {CONFIG_ENV: json.dumps(dataclasses.asdict(self))}

    @classmethod
    def from_env(cls) -> ServiceConfig:
        """The configuration `to_env` stored (else defaults; else the token from $SIMHASH_REDIS_TOKEN);
        InvalidArgument if it is malformed."""
        raw = os.environ.get(CONFIG_ENV)
        try:
            values: dict[str, Any] = json.loads(raw) if raw else {}
            config = cls(**values)
        except (ValueError, TypeError) as exc:
            raise InvalidArgument(f"${CONFIG_ENV} is malformed: {exc}") from None
        if config.token is None and os.environ.get(TOKEN_ENV):
            config = dataclasses.replace(config, token=os.environ[TOKEN_ENV])
        return config

    def check(self) -> ServiceConfig:
        """This configuration, once checked (InvalidArgument)."""
        for name in ("max_body", "timeout", "batch"):
            if not getattr(self, name) > 0:
                raise InvalidArgument(f"{name} must be > 0, got {getattr(self, name)!r}")
        given = SERVE_ASKING.asked_by(None, threshold=self.threshold, band_buckets=self.band_buckets)
        if self.verified is False and given:
            raise InvalidArgument(f"--plain cannot go with {given}: they belong to verified mode")
        if self.token is not None and not self.token:
            raise InvalidArgument("the bearer token is empty")
        if self.redis_url:
            check_url(self.redis_url)
        self.index_options()
        return self

    def asked_mode(self) -> bool | None:
        """The mode asked for: True (verified, threshold or band_buckets), False (plain), None."""
        if self.verified is None and (self.threshold is not None or self.band_buckets is not None):
            return True
        return self.verified

    def asked_by(self) -> str | None:
        """What asked for verified mode, in serve's options ("--threshold"); None if nothing did."""
        return SERVE_ASKING.asked_by(self.verified, threshold=self.threshold, band_buckets=self.band_buckets)

    def index_options(self) -> dict[str, Any]:
        """The arguments of `SimhashIndex` that create an index as configured (the mode aside);
        InvalidArgument if they are malformed or contradict each other."""
        # The verified mode's arguments checked now (serve refuses to start), not by a first write.
        checked_threshold(None, self.threshold, self.band_buckets)
        return index_options(self)
