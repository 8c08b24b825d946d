"""The compiled core of simhash-redis: the typed boundary of the extension module.

Every function is bit for bit what the pure engine computes. The package imports the extension in one
module, `simhash_redis/compiled.py` (which checks it and sets the exception types); the native engine,
`simhash_redis/fingerprinting/native.py`, validates and prepares arguments exactly as the pure functions
do before calling in here.
"""

from collections.abc import Callable, Sequence
from typing import Final, TypeAlias

__version__: Final[str]
#: Tag of a prepared token document: ``(TOKENS, tokens, name)``.
TOKENS: Final[int]
#: Tag of a prepared weighted document: ``(WEIGHTED, names, weights)``.
WEIGHTED: Final[int]

#: A document as the engine takes it: text, UTF-8 bytes, or a tuple prepared by the adapter.
PreparedDoc: TypeAlias = (
    str | bytes | tuple[int, list[str] | tuple[str, ...], str] | tuple[int, list[str], list[float]]
)
#: What `Normalizer.image_parts` gives, as lists, plus the code point's NFKC image.
ImageParts: TypeAlias = tuple[list[int], list[int], bool, list[int]] | None

class Unicode:
    """A normalizer's Unicode tables, and its functions the extension's boundary asks where they do not
    suffice (between two passes of the Rust code, which never calls into Python)."""

    def __init__(
        self,
        load_tables: Callable[[], tuple[bytes, bytes, bytes]],
        image_parts: Callable[[int], ImageParts],
        normalize: Callable[[str], str],
        char_info: Callable[[int], tuple[int, bool]],
        is_normalized: Callable[[str], bool],
    ) -> None: ...
    def loaded(self) -> bool:
        """Tell whether the tables are loaded."""
    def load(self) -> None:
        """Load the tables now (they are loaded on first non-ASCII text otherwise)."""

class Engine:
    """The fingerprint engine of one (validated) scheme."""

    def __init__(
        self,
        unicode: Unicode,
        features: str,
        n: int,
        f: int,
        binary: bool,
        seed: int,
        stopwords: Sequence[str],
    ) -> None: ...
    @property
    def f(self) -> int:
        """The fingerprint width."""
    def fingerprint(self, doc: PreparedDoc, chunk_chars: int) -> int:
        """Fingerprint one prepared document; texts are cut in chunks past chunk_chars characters."""
    def fingerprint_many(self, docs: list[PreparedDoc], chunk_chars: int) -> list[int]:
        """Fingerprint prepared documents, detached from Python where the tables suffice."""

class MinHash:
    """The sketches of one `MinHasher`."""

    def __init__(
        self, unicode: Unicode, num_perm: int, bits: int, n: int, seed: int, a: bytes, b: bytes
    ) -> None: ...
    def sketch(self, doc: str | bytes | list[str] | tuple[str, ...], name: str = "doc") -> bytes:
        """The sketch of one document."""
    def sketch_many(self, docs: list[str | bytes | list[str] | tuple[str, ...]]) -> list[bytes]:
        """The sketches of many documents, detached from Python where the tables suffice."""
    def estimate(self, a: bytes, b: bytes) -> float:
        """The Jaccard estimate of two sketches of this hasher."""

class Lane:
    """The service's fast lane: an HTTP/1.1 loop over the connections given to it, the whole plain requests
    read together answered by one call of `answer` on the loop's thread (the GIL taken for it), a
    connection given back to `hand_off` at the first request `answer` declines or the lane does not take
    (one with a body of a `streamed` media type, at its head)."""

    def __init__(
        self,
        answer: Callable[
            [
                list[
                    tuple[
                        str,
                        bytes,
                        list[tuple[bytes, bytes]],
                        bytes,
                        tuple[str, int] | None,
                        tuple[str, int] | None,
                        bool,
                    ]
                ]
            ],
            list[tuple[bytes, bool] | None],
        ],
        hand_off: Callable[[int, bytes], None],
        keep_alive: float,
        max_body: int,
        streamed: list[bytes],
    ) -> None: ...
    def adopt(self, fd: int) -> None:
        """Take a connected socket's descriptor: the lane owns it from now on."""
    def stop(self) -> None:
        """Take no more connections; answer the requests read, then let `run` return."""
    def run(self) -> None:
        """Serve on this thread, the GIL released, until stopped (once per lane)."""

class OddSketch:
    """The odd sketches of one `OddSketcher` (n, seed)."""

    def __init__(self, unicode: Unicode, n: int, seed: int) -> None: ...
    def sketch(
        self, doc: str | bytes | list[str] | tuple[str, ...], level: int | None = None, name: str = "doc"
    ) -> bytes:
        """The sketch of one document at a level (None: its own)."""
    def sketch_many(
        self, docs: list[str | bytes | list[str] | tuple[str, ...]], level: int | None = None
    ) -> list[bytes]:
        """The sketches of many documents, detached from Python where the tables suffice."""
    def sketch_levels(
        self, doc: str | bytes | list[str] | tuple[str, ...], levels: list[int], name: str = "doc"
    ) -> list[bytes]:
        """The sketches of one document at each of several levels."""
    def banded_many(
        self, docs: list[str | bytes | list[str] | tuple[str, ...]], bands: MinHash, above: int
    ) -> list[bytes]:
        """`BandedOddSketcher`'s query sketches (band values, odd sketches at the own level, below and
        above), each document's shingles made once; ValueError where `bands` has another n or seed."""
    def banded_stored_many(
        self, docs: list[str | bytes | list[str] | tuple[str, ...]], bands: MinHash
    ) -> list[bytes]:
        """`BandedOddSketcher`'s stored sketches (band values, odd sketch at the own level: the first
        bytes of `banded_many`'s), each document's shingles made once; errors as `banded_many`."""

def odd_estimate(a: bytes, b: bytes) -> float:
    """`OddSketcher.estimate` of two sketches, as the pure estimator gives it."""

def check_tokens(tokens: list[object] | tuple[object, ...], name: str) -> None:
    """Raise the wrong-type error unless every token is a str."""

def hits(
    fps: list[int],
    replies: list[list[bytes]],
    tables: int,
    k_fast: int,
    k: int,
    wrap64: bool,
    slow: Callable[[object, int], tuple[int, int]],
) -> list[dict[bytes, tuple[int, int]]]:
    """For each query, {stored value: (fingerprint, distance)} of its candidates within k."""

def scan_sets(data: bytes, pos: int, want: int) -> tuple[int, int, bool]:
    """(end, whole replies, next is another shape) of up to `want` SMEMBERS replies from `pos`."""

def hash_values(data: bytes, fields: list[bytes]) -> list[bytes | None]:
    """The value of each field in one HGETALL reply in its RESP form (None where absent)."""

def hits_in_sets(
    fps: list[int],
    data: bytes,
    tables: int,
    k_fast: int,
    k: int,
    wrap64: bool,
    slow: Callable[[object, int], tuple[int, int]],
) -> list[dict[bytes, tuple[int, int]]]:
    """`hits` over the whole SMEMBERS replies `scan_sets` found, in their RESP form."""

#: A column of entries: (the entries end to end, their ends as a uint64 array's bytes), or
#: (fingerprints as a uint64 array's bytes, signed) whose entries are their stored forms.
Column: TypeAlias = tuple[bytes, bytes] | tuple[bytes, bool]

class GroupedCommands:
    """One command per group (`head`, its key, its positions' entries): chunks of (RESP, commands)."""

    def __init__(
        self,
        head: bytes,
        head_args: int,
        key: tuple[bytes, int],
        groups: tuple[bytes, bytes, bytes],
        columns: list[Column],
        chunk_args: int,
    ) -> None: ...
    def __iter__(self) -> GroupedCommands: ...
    def __next__(self) -> tuple[bytes, int]: ...

class ScriptRuns:
    """Calls of a script on runs of groups (sizes and entries per group): chunks of (RESP, commands)."""

    def __init__(
        self,
        sha: bytes,
        counts: bytes | None,
        key: tuple[bytes, int],
        groups: tuple[bytes, bytes, bytes],
        columns: list[Column],
        call_entries: int,
        chunk_args: int,
    ) -> None: ...
    def __iter__(self) -> ScriptRuns: ...
    def __next__(self) -> tuple[bytes, int]: ...

class AttachCalls:
    """The calls of store/lua/bulk_fp.lua for runs of groups: chunks of (RESP, commands)."""

    def __init__(
        self,
        sha: bytes,
        counts: bytes | None,
        prefix: bytes,
        groups: tuple[bytes, bytes, bytes],
        fps: Column,
        ids: Column,
        joined: dict[int, bytes],
        call_pairs: int,
        chunk_args: int,
    ) -> None: ...
    def __iter__(self) -> AttachCalls: ...
    def __next__(self) -> tuple[bytes, int]: ...

def pack_column(items: list[bytes]) -> Column:
    """A list of bytes as a column."""

def unpack_column(column: Column) -> list[bytes]:
    """A column's entries as a list."""

def column_buckets(column: Column, buckets: int) -> bytes:
    """xxh3_64 of each entry of a column modulo buckets, as a uint64 array's bytes."""

def fingerprint_lines(
    raws: list[bytes], id_field: str, fp_field: str, f: int, base: str, max_id: int
) -> tuple[list[str], list[int], list[int]]:
    """Ids and fingerprints of the plain JSON lines, and the positions of the others."""

def fingerprint_text_lines(
    engine: Engine, raws: list[bytes], id_field: str, text_field: str, max_id: int, chunk_chars: int
) -> tuple[list[str], list[int], list[int]]:
    """Ids and text fingerprints of the plain JSON lines, and the positions of the others."""

def fingerprint_stored_many(
    engine: Engine, odd: OddSketch, bands: MinHash, texts: list[str | bytes], chunk_chars: int
) -> tuple[list[int], list[bytes]]:
    """Fingerprints and stored `BandedOddSketcher` sketches of texts, each text tokenised once where the
    scheme shares the sketches' tokens; ValueError where the engine and sketcher differ in Unicode rules."""

def sketch_text_lines(
    engine: Engine,
    odd: OddSketch,
    bands: MinHash,
    raws: list[bytes],
    id_field: str,
    text_field: str,
    max_id: int,
    chunk_chars: int,
) -> tuple[list[str], list[int], list[bytes], list[int]]:
    """`fingerprint_text_lines` with the texts' stored sketches, as `fingerprint_stored_many` makes them."""

def fingerprint_packed_texts(
    engine: Engine, data: bytes, offsets: bytes, wide: bool, chunk_chars: int
) -> tuple[list[int], list[int]]:
    """Fingerprints of texts laid end to end, cut at Arrow offsets (valid, not blank), and the others' positions."""

def set_error_types(value_error: type[ValueError], type_error: type[TypeError]) -> bool:
    """Make bad arguments raise these types; False when types were set already."""
