"""How the index's batch methods take their arguments apart, with the same errors everywhere."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import redis
from redis.cluster import RedisCluster

from ..checks import is_int
from ..errors import InvalidArgument, InvalidFingerprint, InvalidType
from ..transport import Backoff, bridged, is_asyncio_client

__all__ = [
    "as_batch",
    "blank",
    "check_client",
    "check_fp",
    "check_k",
    "check_max_candidates",
    "check_options",
    "check_pairs",
    "check_text",
    "chunks",
    "fingerprints",
    "is_integer",
    "iterable",
]


def as_batch(value: object, argument: str) -> list[Any]:
    """A batch argument as a list; InvalidType for a str, bytes, mapping or non-iterable."""
    return list(iterable(value, argument))


def iterable(value: object, argument: str) -> Iterable[Any]:
    """`as_batch` without reading the items."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidType(
            f"{argument} must be a list (or other iterable) of items, got {type(value).__name__}"
        )
    return value


def check_options(backoff: object, batch_size: object) -> int:
    """The batch size, once it and the backoff are checked."""
    if backoff is not None and not isinstance(backoff, Backoff):
        raise InvalidType(f"backoff must be a simhash_redis.Backoff, got {type(backoff).__name__}")
    if not is_int(batch_size) or batch_size < 1:
        raise InvalidArgument(f"batch_size must be a positive int, got {batch_size!r}")
    return batch_size


def check_client(client: object) -> None:
    """Refuse (InvalidType) a client the index cannot use (an asyncio one outside `AsyncSimhashIndex`)."""
    if isinstance(client, (redis.Redis, RedisCluster)) or (is_asyncio_client(client) and bridged()):
        return
    kind = type(client)
    name = f"{kind.__module__}.{kind.__qualname__}"
    if is_asyncio_client(client):
        raise InvalidType(
            f"client must be a redis.Redis or redis.cluster.RedisCluster, got the asyncio client {name}: "
            "use simhash_redis.asyncio.AsyncSimhashIndex with it"
        )
    raise InvalidType(f"client must be a redis.Redis or redis.cluster.RedisCluster, got {name}")


def is_integer(value: object) -> bool:
    """Tell an int-like scalar (numpy integers too) from a document; a bool is neither."""
    if isinstance(value, (str, bytes, bool)):
        return False
    return hasattr(value, "__index__")


def check_pairs(batch: list[Any]) -> list[tuple[str, Any]]:
    """The batch, once every item is checked to be an (id, document) pair."""
    for item in batch:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidType(f"items must be (id, document) pairs, got {type(item).__name__}")
    return batch


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Items in lists of `size` (the last may be shorter)."""
    source = iter(items)
    while batch := list(itertools.islice(source, size)):
        yield batch


def check_fp(value: Any, f: int) -> int:
    """A fingerprint given as an int, checked against the index's width."""
    if isinstance(value, bool):
        raise InvalidType("fingerprint must be an int or a document, got bool")
    fp = operator.index(value)
    if not 0 <= fp < 1 << f:
        raise InvalidFingerprint(f"fingerprint must be in 0..2**{f}-1 for this index, got {fp}")
    return fp


def check_max_candidates(cap: object) -> int | None:
    """A verified index's max_candidates: a positive integer (numpy's too) or None, else InvalidArgument."""
    if cap is None:
        return None
    if not is_integer(cap) or operator.index(cap) < 1:  # type: ignore[arg-type]
        raise InvalidArgument(f"max_candidates must be a positive int or None, got {cap!r:.40}")
    return operator.index(cap)  # type: ignore[arg-type]


def check_k(k: int | None, index_k: int) -> int:
    """The distance a query asks for: its own k (checked), or the index's."""
    if k is None:
        return index_k
    if not is_int(k):
        raise InvalidType(f"k must be an int, got {type(k).__name__}")
    if not 0 <= k <= index_k:
        raise InvalidArgument(f"k must be in 0..{index_k} (the index's k), got {k}")
    return k


def blank(doc: object) -> bool:
    """Tell an empty text, or one of white space only (str or bytes), from any other document."""
    return isinstance(doc, (str, bytes, bytearray)) and (not doc or doc.isspace())


def check_text(doc: object, position: int | None = None) -> None:
    """Refuse (InvalidArgument) a `blank` text, as the CLI does."""
    if blank(doc):
        where = "" if position is None else f" (document {position} of the call)"
        raise InvalidArgument(
            f"the text{where} is empty or only white space: it has no word to fingerprint (its fingerprint, "
            "0, would make it a near-duplicate of every other empty text); leave it out"
        )


def fingerprints(docs: Sequence[Any], f: int, of_texts: Callable[[list[Any]], list[int]]) -> list[int]:
    """The fingerprints of documents: ints checked, texts checked then fingerprinted in one batch."""
    docs = as_batch(docs, "docs")
    out: list[int | None] = [None] * len(docs)
    texts: list[Any] = []
    where: list[int] = []
    for i, doc in enumerate(docs):
        if isinstance(doc, int) or is_integer(doc):
            out[i] = check_fp(doc, f)
        else:
            check_text(doc, i if len(docs) > 1 else None)
            texts.append(doc)
            where.append(i)
    for i, fp in zip(where, of_texts(texts) if texts else [], strict=True):
        out[i] = fp
    return out  # type: ignore[return-value]


def texts(batch: Iterable[object]) -> list[Any]:
    """Documents (queries) a sketch can be made from: texts, UTF-8 bytes or tokens, not fingerprints."""
    docs = as_batch(batch, "queries")
    for i, doc in enumerate(docs):
        if isinstance(doc, (int, dict)) or not isinstance(doc, (str, bytes, Sequence)):
            raise InvalidType(
                f"docs[{i}] must be a text, bytes or tokens (a sketch needs the text), "
                f"got {type(doc).__name__}"
            )
    return docs
