"""The Lua scripts the index runs server-side: one `Script` per file of lua/, called by SHA, and the one
place where a server that lacks them (NOSCRIPT) gets them (`with_scripts`)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from importlib import resources
from typing import TypeVar

from ..transport import Command, ScriptMissing, Sender

__all__ = [
    "BAND_DROP",
    "BULK_FP",
    "BULK_IDS",
    "COUNT_FPS",
    "CREATE_META",
    "FP_IDS",
    "ID_CAS",
    "LOCK",
    "PIN_META",
    "SCRIPTS",
    "UNLOCK",
    "WRITE",
    "Script",
    "with_scripts",
]

T = TypeVar("T")

# Runs of a call that met NOSCRIPT: the scripts are loaded after the first, so a second means a server
# that forgets them at once (a failover between the load and the call, say); the third gives up.
_LOADS = 2


class Script:
    """A Lua script from the package's lua/ folder, called with EVALSHA.

    A line ``--! include NAME`` is replaced by lua/NAME.lua: helpers several scripts share (Redis runs
    each script alone, so the server gets the script with its helpers in it).

    Args:
        name: the file name without '.lua'.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = _included(_read(name))
        self.sha = hashlib.sha1(self.source).hexdigest().encode()

    def command(self, keys: list[bytes], args: list[bytes | int]) -> Command:
        """The EVALSHA command for one call.

        Args:
            keys: the keys the script touches.
            args: its other arguments.
        """
        return [b"EVALSHA", self.sha, len(keys), *keys, *args]


_INCLUDE = re.compile(rb"^--! include (\w+)$", re.MULTILINE)


def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath(f"lua/{name}.lua").read_bytes()


def _included(source: bytes) -> bytes:
    """The source with each ``--! include NAME`` line replaced by lua/NAME.lua."""
    return _INCLUDE.sub(lambda match: _read(match.group(1).decode()).rstrip(b"\n"), source)


#: A batch of document writes, atomic (a standalone server).
WRITE = Script("write")
#: A fingerprint out of a band table its sketches no longer have (verified mode).
BAND_DROP = Script("band_drop")
#: A document's commit point on a cluster: its id-map entry, compare-and-set.
ID_CAS = Script("id_cas")
#: An id into (or out of) a fingerprint's id list, with its sketch.
FP_IDS = Script("fp_ids")
#: The bulk path's fingerprint-map step.
BULK_FP = Script("bulk_fp")
#: The bulk path's id-map step.
BULK_IDS = Script("bulk_ids")
#: The fingerprints of a fingerprint-map hash, leaving out the fields of their sketches (verified mode).
COUNT_FPS = Script("count_fps")
#: An index's meta hash, created unless it exists.
CREATE_META = Script("create_meta")
#: A field of an index's meta hash, set unless it is.
PIN_META = Script("pin_meta")
#: A bucket lock taken or kept.
LOCK = Script("lock")
#: A bucket lock given back.
UNLOCK = Script("unlock")
#: Every script (lua/netstrings.lua is only included in others).
SCRIPTS = (
    WRITE,
    BAND_DROP,
    ID_CAS,
    FP_IDS,
    BULK_FP,
    BULK_IDS,
    COUNT_FPS,
    CREATE_META,
    PIN_META,
    LOCK,
    UNLOCK,
)


def with_scripts(sender: Sender, run: Callable[[], T], scripts: Sequence[Script] = SCRIPTS) -> T:
    """Run script calls; where the server lacks a script, load the scripts and run them again.

    The one place NOSCRIPT is handled: a restarted or failed-over server forgets the scripts loaded
    into it, so the first call after that is refused; `run` then runs again from the start once they are
    loaded (every script call is idempotent, and a conversation that keeps what was acknowledged
    resumes after it).

    Args:
        sender: where the scripts are loaded (every primary of a cluster).
        run: the calls: a round trip or a conversation, safe to run again.
        scripts: the scripts `run` may call (default: all of them).

    Raises:
        ScriptMissing: the server kept forgetting the scripts.
    """
    for attempt in range(_LOADS + 1):
        try:
            return run()
        except ScriptMissing:
            if attempt == _LOADS:
                raise
            for script in scripts:
                sender.broadcast([b"SCRIPT", b"LOAD", script.source])
    raise AssertionError("unreachable")
