"""An index's life: its configuration checked against the meta; a lost meta restored; deleted by name."""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import RedisCluster

from .. import defaults
from ..errors import ConfigurationMismatch, IndexNotFound, InvalidArgument
from ..store import (
    IndexConfig,
    KeySchema,
    Retention,
    drop_keys,
    open_meta,
    read_meta,
    restore_meta,
    validate_name,
)
from ..transport import Sender, open_sender

__all__ = [
    "CONFIG_ARGS",
    "check_unchanged",
    "drop_index",
    "list_indexes",
    "open_config",
    "requested",
    "restore",
]

#: The arguments of `SimhashIndex` that make up an index's configuration.
CONFIG_ARGS = ("k", "f", "layout", "scheme", "id_buckets", "verification", "retention")


def requested(args: dict[str, Any]) -> tuple[IndexConfig, set[str]]:
    """The configuration `SimhashIndex`'s arguments ask for, and which of its parts they name."""
    stated = {arg: args.get(arg) for arg in CONFIG_ARGS}
    retention = stated["retention"]
    if retention is not None and not isinstance(retention, Retention):
        stated["retention"] = Retention.of(retention)
    return IndexConfig.build(**stated), {arg for arg, value in stated.items() if value is not None}


def open_config(
    sender: Sender, prefix: str, name: str, wanted: IndexConfig, given: set[str], create: bool
) -> tuple[IndexConfig, bool]:
    """The stored configuration (created from `wanted` if allowed and missing), checked against the parts
    named in `given`; and whether this call created the index."""
    # A layout whose every query reads a large part of the index is refused for new indexes only.
    refusal = None
    if wanted.layout.read_fraction >= defaults.MAX_READ_FRACTION:
        refusal = InvalidArgument(
            f"k={wanted.layout.k} with {wanted.layout.describe()} makes every query read back "
            f"{wanted.layout.read_fraction:.0%} of the index (new indexes allow under "
            f"{defaults.MAX_READ_FRACTION:.0%}): choose a smaller k, or a layout from `simhash-redis plan`"
        )
    meta, created = open_meta(sender, prefix, name, wanted.to_meta() if create else None, refusal)
    if meta is None:
        raise IndexNotFound(f"no index named {name!r}")
    stored = IndexConfig.from_meta(meta)
    wanted.check_against(stored, given, name)
    return stored, created


def check_unchanged(sender: Sender, meta_key: bytes, name: str, config: IndexConfig) -> None:
    """Refuse to go on writing with a configuration the index no longer has (IndexNotFound: dropped)."""
    stored = read_meta(sender, meta_key)
    if stored is None:
        raise IndexNotFound(
            f"index {name!r} was dropped since it was opened here: open it again to create it"
        )
    now, then = IndexConfig.from_meta(stored).to_meta(), config.to_meta()
    if now != then:
        changed = ", ".join(
            sorted(field for field in now.keys() | then.keys() if now.get(field) != then.get(field))
        )
        raise ConfigurationMismatch(
            f"index {name!r} changed since it was opened here (its {changed}: created again, or its verified "
            "mode pinned by another worker); nothing was written: open it again"
        )


def restore(client: redis.Redis | RedisCluster, name: str, config: dict[str, Any]) -> None:
    """`SimhashIndex.restore`: write a lost meta key from a stated configuration the data fits."""
    if config.get("k") is None:
        raise InvalidArgument("restoring an index needs the k it was created with")
    wanted, _ = requested(config)
    prefix = validate_name(config.get("prefix", defaults.PREFIX), "prefix")
    keys = KeySchema.of(prefix, validate_name(name, "name"), wanted)
    restore_meta(open_sender(client, config.get("backoff")), keys, wanted.layout.f, wanted.to_meta())


def drop_index(client: redis.Redis | RedisCluster, name: str, *, prefix: str = defaults.PREFIX) -> int:
    """Delete every key of an index by its name, also when its meta is lost or unreadable; the number deleted.

    Raises:
        InvalidArgument, InvalidType: a malformed name or prefix.
        RedisUnavailable: the server cannot be reached; run it again to finish.
    """
    return drop_keys(open_sender(client), validate_name(prefix, "prefix"), validate_name(name, "name"))


def list_indexes(client: redis.Redis | RedisCluster, *, prefix: str = defaults.PREFIX) -> list[str]:
    """The names of the indexes on a server (those with a meta key under the prefix), sorted."""
    head = validate_name(prefix, "prefix") + ":"
    names = set()
    for keys in open_sender(client).scan(f"{head}*:meta", 10_000):
        for key in keys:
            name = bytes(key).decode(errors="replace")[len(head) : -len(":meta")]
            if name and ":" not in name:  # another prefix's keys that happen to match the pattern
                names.add(name)
    return sorted(names)
