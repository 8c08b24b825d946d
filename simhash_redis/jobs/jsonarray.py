"""JSON array inputs, read element by element, never whole: a bad element is one `InputError` at its line
(the scanner looks at ASCII bytes only, which no byte of a UTF-8 character can be)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import IO

from ..errors import InputError
from .jsonlines import _json_record
from .records import BOM, ReadOptions, Record

_WHITE = b" \t\r\n"
#: What ends or nests an element outside strings.
_OUTSIDE = re.compile(rb'[\[\]{}",]')
_NOT_WHITE = re.compile(rb"[^ \t\r\n]")
#: Bytes read at a time.
_CHUNK = 1 << 20


def starts_array(stream: IO[bytes]) -> bool:
    """Tell, by a peek, whether a buffered stream holds a JSON array ("[" after white space and a BOM)."""
    peek = getattr(stream, "peek", None)
    if peek is None:
        return False
    head: bytes = peek(4096)[:4096].removeprefix(BOM).lstrip(_WHITE)
    return head[:1] == b"["


class _Scanner:
    """The raw elements of the array a stream holds, each with the line it starts on."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.buf = b""
        self.pos = 0
        self.line = 1  # the line at self.pos
        self.eof = False

    def _more(self) -> bool:
        """Read another chunk, dropping what is consumed; False at the end of the input."""
        if self.eof:
            return False
        chunk = self.stream.read(_CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def _skip_white(self) -> bytes:
        """Move past white space; the next byte, or b"" at the end of the input."""
        while True:
            found = _NOT_WHITE.search(self.buf, self.pos)
            end = len(self.buf) if found is None else found.start()
            self.line += self.buf.count(b"\n", self.pos, end)
            self.pos = end
            if found is not None:
                return self.buf[end : end + 1]
            if not self._more():
                return b""

    def elements(self, source: str) -> Iterator[tuple[int, bytes] | InputError]:
        """(line, raw element) of each element, then an InputError if the array is malformed."""
        self._more()
        if self.buf.startswith(BOM):
            self.pos = len(BOM)
        if self._skip_white() != b"[":
            yield InputError(source, self.line, "expected a JSON array")
            return
        self.pos += 1
        first = True
        while True:
            head = self._skip_white()
            if head == b"]" and first:  # an empty array
                self.pos += 1
                break
            line = self.line
            end, closer = self._element_end()  # may read on: the element starts at pos still
            raw = self.buf[self.pos : end]
            self.line += raw.count(b"\n")
            self.pos = end + 1
            if closer == b"":
                yield InputError(source, line, "the JSON array is not closed: the input ends inside it")
                return
            if not raw.strip(_WHITE):
                yield InputError(source, line, "not valid JSON (an empty element of the array)")
            else:
                yield line, raw
            first = False
            if closer == b"]":
                break
        if self._skip_white():
            yield InputError(source, self.line, "not valid JSON (more after the array's closing bracket)")

    def _element_end(self) -> tuple[int, bytes]:
        """Where the element at `pos` ends (the offset of the "," or "]" after it) and that byte; b""
        when the input ends first. The buffer may be read further (offsets stay relative to it)."""
        depth, scan, in_string = 0, self.pos, False
        while True:
            if in_string:
                # bytes.find (memchr) rather than a regular expression: strings are most of a document.
                quote = self.buf.find(b'"', scan)
                if quote >= 0:
                    slash = self.buf.find(b"\\", scan, quote)
                    if slash < 0:
                        in_string, scan = False, quote + 1
                        continue
                    if slash + 1 < len(self.buf):  # else the escaped byte is in the next chunk
                        scan = slash + 2
                        continue
            else:
                found = _OUTSIDE.search(self.buf, scan)
                if found is not None:
                    byte, scan = found.group(), found.end()
                    if byte == b'"':
                        in_string = True
                    elif byte in b"[{":
                        depth += 1
                    elif depth == 0 and byte in b",]":
                        return found.start(), byte
                    elif byte in b"]}":
                        depth = max(0, depth - 1)  # a stray closer stays in the element: JSON refuses it
                    continue
            consumed = self.pos
            if not self._more():
                return len(self.buf), b""
            scan -= consumed


def read_json_array(stream: IO[bytes], source: str, options: ReadOptions) -> Iterator[Record | InputError]:
    """The records of a stream holding one JSON array of objects, an InputError for each bad element."""
    for item in _Scanner(stream).elements(source):
        record = item if isinstance(item, InputError) else _json_record(item[1], item[0], source, options)
        if record is not None:
            yield record
