"""The names of every Redis key an index uses.

For an index `news` under the default prefix::

    simhash:news:meta            hash   configuration: format, f, k, layout, scheme, id_buckets
    simhash:news:counts          hash   docs, fingerprints (kept by the atomic write script)
    simhash:news:t{i}:{key hex}  set    fingerprints whose table-i key is {key hex}
    simhash:news:id:{bucket}     hash   document id -> fingerprint
    simhash:news:fp:{bucket}     hash   fingerprint -> ids having it (netstrings)

Names and prefixes may not contain ':' or glob characters, so the pattern `simhash:news:*` matches this
index's keys and no other index's.
"""

from __future__ import annotations

import re

import xxhash

from .errors import InvalidArgument, InvalidType
from .layout import Layout

__all__ = ["KeySchema", "validate_name"]

_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


def validate_name(value: object, argument: str) -> str:
    """Check an index name or key prefix.

    Args:
        value: the name.
        argument: the argument's name, for the error message.

    Raises:
        InvalidType: the value is not a str.
        InvalidArgument: empty, longer than 100 characters, or containing characters other than
            letters, digits, '.', '_' and '-'.
    """
    if not isinstance(value, str):
        raise InvalidType(f"{argument} must be a str, got {type(value).__name__}")
    if not _NAME_RE.match(value):
        raise InvalidArgument(
            f"{argument} must be 1-100 characters of letters, digits, '.', '_' or '-', got {value!r}"
        )
    return value


class KeySchema:
    """Builds the key names of one index.

    Args:
        prefix: the key prefix.
        name: the index name.
        layout: the index's table layout (for the width of key values).
        id_buckets: how many buckets the id and fingerprint maps are spread over.
    """

    def __init__(self, prefix: str, name: str, layout: Layout, id_buckets: int) -> None:
        self.base = f"{prefix}:{name}"
        self.meta = f"{self.base}:meta".encode()
        self.counts = f"{self.base}:counts".encode()
        self.pattern = f"{self.base}:*"
        self.id_buckets = id_buckets
        self._table_formats = [
            f"{self.base}:t{i}:%0{width}x".encode() for i, width in enumerate(layout.hex_widths)
        ]
        self._id_prefix = f"{self.base}:id:".encode()
        self._fp_prefix = f"{self.base}:fp:".encode()
        self._layout = layout

    def tables(self, fingerprint: int) -> list[bytes]:
        """The table key of each table for a fingerprint.

        Args:
            fingerprint: an int in [0, 2**f).
        """
        values = self._layout.keys_of(fingerprint)
        return [fmt % value for fmt, value in zip(self._table_formats, values, strict=True)]

    def table(self, table: int, value: int) -> bytes:
        """The key of one table bucket.

        Args:
            table: the table number.
            value: the key value.
        """
        return self._table_formats[table] % value

    def table_pattern(self, table: int) -> str:
        """The SCAN pattern of every bucket of one table.

        Args:
            table: the table number.
        """
        return f"{self.base}:t{table}:*"

    def id_bucket(self, doc_id: bytes) -> bytes:
        """The id-map hash holding a document id.

        Args:
            doc_id: the UTF-8 encoded id.
        """
        return self._id_prefix + b"%d" % (xxhash.xxh3_64_intdigest(doc_id) % self.id_buckets)

    def fp_bucket(self, stored_fp: bytes) -> bytes:
        """The fingerprint-map hash holding a stored fingerprint.

        Args:
            stored_fp: the fingerprint as written by `codec.encode_fp`.
        """
        return self._fp_prefix + b"%d" % (xxhash.xxh3_64_intdigest(stored_fp) % self.id_buckets)
