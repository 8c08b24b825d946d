"""Old module paths of simhash-redis 0.1, kept importable for one release as aliases of their new homes.

`import simhash_redis.loader` (or `from simhash_redis.loader import Loader`) gives the module that now
lives at `simhash_redis.jobs.loader`, the same object, with a DeprecationWarning. The aliases go in 0.3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

__all__ = ["EAGER", "MOVED", "install"]

#: Old module path -> new module path.
MOVED = {
    f"simhash_redis.{old}": f"simhash_redis.{new}"
    for old, new in {
        "cluster": "transport.cluster",
        "config": "store.config",
        "connection": "transport.connection",
        "dedupe": "jobs.dedupe",
        "demo": "tools.demo",
        "dump": "jobs.dump",
        "bitsums": "fingerprinting.bitsums",
        "evaluation": "tools.evaluation",
        "features": "fingerprinting.tokens",
        "keys": "store.keys",
        "layout": "store.layout",
        "loader": "jobs.loader",
        "locks": "store.locks",
        "minhash": "fingerprinting.minhash",
        "planner": "tools.planner",
        "retry": "transport.retry",
        "scheme": "fingerprinting.scheme",
        "scripts": "store.scripts",
        "server": "tools.server",
        "stats": "jobs.stats",
        "verified": "index.verified_index",
        "verify": "index.consistency",
        "wire": "transport.wire",
        "writes": "store.writes",
        "xxh3": "fingerprinting.xxh3",
    }.items()
}


class _Aliases(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module path and loads the module at its new one."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} has moved to {new}; the old path goes in simhash-redis 0.3",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was imported at its new path."""


#: Old paths that are also names of the package's public face (`simhash_redis.fingerprint` is the
#: function): registered up front, since importing an alias would rebind the package's attribute.
EAGER = {"simhash_redis.fingerprint": "simhash_redis.fingerprinting.simhash"}


def install() -> None:
    """Put the alias finder last on sys.meta_path (once), after every real module has had its turn."""
    for old, new in EAGER.items():
        sys.modules.setdefault(old, importlib.import_module(new))
    if not any(isinstance(finder, _Aliases) for finder in sys.meta_path):
        sys.meta_path.append(_Aliases())
