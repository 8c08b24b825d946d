"""What every input reader shares: the `Record` it yields, its `ReadOptions`, and the checks of a record
(a bad line is one `InputError` and never stops the good ones)."""

from __future__ import annotations

import codecs
import contextlib
import gzip
import io
import os
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple

from .. import defaults
from ..checks import is_int
from ..codec import parse_fingerprint
from ..errors import InputError, InvalidArgument

STDIN = "-"
GZIP_MAGIC = b"\x1f\x8b"
BOM = b"\xef\xbb\xbf"


class Record(NamedTuple):
    """One document of bulk input."""

    source: str
    line: int | None
    id: str
    doc: str | int
    #: doc is a precomputed fingerprint's text (hex or decimal), not a document's text.
    is_fingerprint: bool = False


@dataclass(frozen=True)
class ReadOptions:
    """How records are found in the input.

    Attributes:
        id_field: JSON field, or CSV/TSV column (a header name, or a 1-based number), holding the id.
        fingerprint_field: when set, the field or column of a precomputed fingerprint, read instead of a text.
        id_prefix: plain text: ids are this prefix plus the line number (default: the file name as given, ':'
            and the xxh3-64 hash of the line's text in hex: ``news.txt:d447b1ea40e6988b``).
        encoding: a Python codec that encodes a line end as the byte 0x0A (UTF-8, single-byte codecs).
        prefix_input: ids start with the input's name, so that inputs which name their documents alike keep
            them apart: ``a.jsonl:7`` (``stdin:7``), ``folder/2024/a.txt``, ``a.txt:P7`` (plain text numbered
            by --id-prefix); a file of `files` format is named by its path as always.
        namespace: what the readers put before each id of the input they read (from prefix_input).
    """

    id_field: str = "id"
    text_field: str = "text"
    fingerprint_field: str | None = None
    header: bool = True
    id_prefix: str | None = None
    encoding: str = "utf-8"
    prefix_input: bool = False
    namespace: str = ""

    def __post_init__(self) -> None:
        """Keep the encoding's canonical name (``latin1`` -> ``iso8859-1``; ``utf-8-sig`` -> ``utf-8``).

        Raises:
            InvalidArgument: no such codec, or one that does not encode a line end as the byte 0x0A.
        """
        try:
            name = codecs.lookup(self.encoding).name
        except (LookupError, TypeError):
            raise InvalidArgument(f"unknown encoding {self.encoding!r}") from None
        # utf-8-sig's encoder writes a BOM first: the check below would fail (the readers drop a BOM).
        name = "utf-8" if name == "utf-8-sig" else name
        try:
            splits = "a\nb".encode(name) == b"a\nb"
        except (UnicodeError, LookupError):
            splits = False
        if not splits:
            raise InvalidArgument(
                f"encoding {self.encoding!r} cannot be read line by line (a line end is not the byte "
                "0x0A in it): convert the input to UTF-8 first (iconv -f ENCODING -t UTF-8)"
            )
        object.__setattr__(self, "encoding", name)


def files_under(root: Path, hidden: str | tuple[str, ...]) -> Iterator[Path]:
    """The files of a directory tree in name order, but those (and folders) whose names start `hidden`."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(hidden))
        for name in sorted(files):
            if not name.startswith(hidden):
                yield Path(folder) / name


@contextlib.contextmanager
def open_input(path: str) -> Iterator[IO[bytes]]:
    """Open a file, or "-" for standard input (left open), as a byte stream; gunzipped if it starts so."""
    with contextlib.ExitStack() as stack:
        raw = sys.stdin.buffer if path == STDIN else stack.enter_context(open(path, "rb"))
        buffered: io.BufferedReader = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[arg-type]
        if buffered.peek(2)[:2] == GZIP_MAGIC:
            yield stack.enter_context(gzip.GzipFile(fileobj=buffered, mode="rb"))  # type: ignore[arg-type]
        else:
            yield buffered


#: What reading truncated or corrupt gzip data raises (zlib.error: a damaged deflate block or header).
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


def gzip_fault(source: str, exc: Exception, last: int) -> InputError:
    """The fatal error that ends a compressed input that cannot be read on, after the last line read."""
    reason = f"truncated or corrupt gzip data after line {last}: {exc}"
    return InputError(source, last + 1, reason, fatal=True)


def source_name(path: str) -> str:
    """The name an input's errors carry: the path as given, or ``<stdin>`` for "-"."""
    return "<stdin>" if path == STDIN else path


def encoding_name(encoding: str) -> str:
    """How messages name an encoding: UTF-8 as people write it, others by their codec name."""
    return "UTF-8" if codecs.lookup(encoding).name == "utf-8" else encoding


def decode(raw: bytes, source: str, line: int | None, encoding: str = "utf-8") -> str | InputError:
    """Bytes of the input (a line, or a whole file: line None) as text, or why they do not decode."""
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        return InputError(source, line, f"not valid {encoding_name(encoding)} (byte {exc.start})")


def line_text(raw: bytes, number: int, source: str, encoding: str = "utf-8") -> str | InputError:
    """Line `number` (1-based) decoded, without its line end or a UTF-8 BOM on line 1."""
    if number == 1 and encoding == "utf-8":
        raw = raw.removeprefix(BOM)
    return decode(raw.rstrip(b"\r\n"), source, number, encoding)


def numbered_lines(stream: IO[bytes], source: str, encoding: str) -> Iterator[tuple[int, str | InputError]]:
    """Numbered, decoded lines without their line ends (a leading BOM is dropped)."""
    for number, raw in enumerate(stream, 1):
        yield number, line_text(raw, number, source, encoding)


def is_blank(text: str) -> bool:
    """Tell whether a text is empty or only white space."""
    # Not `not text.strip()`: that copies every multi-kilobyte document just to test it.
    return not text or text.isspace()


def is_utf8(*texts: str) -> bool:
    """Tell whether every text can be written in UTF-8 (holds no lone surrogate)."""
    try:
        for text in texts:
            text.encode()
    except UnicodeEncodeError:
        return False
    return True


def checked_id(value: object, source: str, line: int | None, namespace: str = "") -> str | InputError:
    """A record's id as read (a string, or an integer from JSON) after namespace, or why it cannot be one."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return InputError(source, line, f"the id must be a string or an integer, got {type(value).__name__}")
    doc_id = namespace + str(value)
    try:
        size = len(doc_id.encode("utf-8"))
    except UnicodeEncodeError:
        return InputError(source, line, "the id is not valid Unicode (it contains a lone surrogate)")
    if not 1 <= size <= defaults.MAX_ID_BYTES:
        return InputError(source, line, f"the id must be 1..{defaults.MAX_ID_BYTES} UTF-8 bytes, got {size}")
    return doc_id


def checked_record(
    raw_id: object, raw_doc: object, source: str, line: int | None, options: ReadOptions
) -> Record | InputError:
    """The record of an id and a text (with fingerprint_field, a fingerprint) as read, or its InputError."""
    doc_id = checked_id(raw_id, source, line, options.namespace)
    if isinstance(doc_id, InputError):
        return doc_id
    is_fp = options.fingerprint_field is not None
    if is_fp and is_int(raw_doc):
        return Record(source, line, doc_id, str(raw_doc), True)
    if isinstance(raw_doc, str) and not is_blank(raw_doc):
        return Record(source, line, doc_id, raw_doc, is_fp)
    what = "fingerprint" if is_fp else "text"
    if not isinstance(raw_doc, str):
        return InputError(source, line, f"the {what} must be a string, got {type(raw_doc).__name__}")
    return InputError(source, line, f"empty {what}")


def fingerprint_read(record: Record, f: int, fp_base: str) -> Record | InputError:
    """The record with its precomputed fingerprint's text read (`parse_fingerprint`), or why it cannot be."""
    try:
        return record._replace(doc=parse_fingerprint(str(record.doc), f, fp_base))
    except InvalidArgument as exc:
        return InputError(record.source, record.line, str(exc))
