"""JSON Lines inputs: an object per line, its record, and runs of raw lines parsed where they are used.

A line is parsed by orjson where installed (`jsontext`), else by the stdlib, with the stdlib's values
and errors either way. Where the compiled core runs, it reads the lines of the plain shape itself,
precomputed fingerprints and texts alike (the texts fingerprinted as it reads them; every other line
here), so a large load needs no record, and no str per text, per line.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator, Sequence
from typing import IO, Any, NamedTuple

from .. import defaults
from ..codec import parse_fingerprint
from ..errors import InputError, InvalidArgument
from ..fingerprinting import Scheme, engines
from .jsontext import loads, loads_object
from .records import (
    ReadOptions,
    Record,
    checked_doc,
    checked_id,
    gunzipped,
    gzip_fault,
    is_blank,
    line_text,
)

__all__ = [
    "Fingerprints",
    "JsonLine",
    "JsonLines",
    "jsonl_chunks",
    "read_json_lines",
    "read_jsonl",
]


class JsonLine(NamedTuple):
    """One JSON object of a JSON Lines input, and where it was found."""

    source: str
    line: int
    value: dict[str, Any]


def _json_object(raw: bytes, number: int, source: str) -> dict[str, Any] | InputError | None:
    """The object on one line as read (line end included), an InputError, or None for a blank line."""
    obj = loads_object(raw)
    if obj is not None:
        return obj
    text = line_text(raw, number, source)
    if isinstance(text, InputError):
        return text
    if is_blank(text):
        return None
    try:
        obj = loads(text)
    except ValueError as exc:
        return InputError(source, number, f"not valid JSON ({exc})")
    if not isinstance(obj, dict):
        return InputError(source, number, f"expected a JSON object, got {type(obj).__name__}")
    return obj


def read_json_lines(
    path: str | os.PathLike[str], source: str | None = None
) -> Iterator[JsonLine | InputError]:
    """The objects of a JSON Lines file (gzipped or not), and an InputError for each bad line.

    Blank lines are skipped; a leading BOM and CRLF line ends are allowed.

    Args:
        path: the file.
        source: the name errors give for it (default: the path).

    Raises:
        OSError: the file cannot be opened.
        EOFError, gzip.BadGzipFile: the gzip data is truncated or corrupt.
    """
    name = source if source is not None else str(path)
    with open(path, "rb") as file, gunzipped(file) as stream:
        for number, raw in enumerate(stream, 1):
            obj = _json_object(raw, number, name)
            if isinstance(obj, dict):
                yield JsonLine(name, number, obj)
            elif obj is not None:
                yield obj


def _json_record(raw: bytes, number: int, source: str, options: ReadOptions) -> Record | InputError | None:
    """The record of one JSON line as read from the input (line end included), None for a blank line."""
    obj = _json_object(raw, number, source)
    if not isinstance(obj, dict):
        return obj
    return _record_of(obj, number, source, options)


def _record_of(obj: dict[str, Any], number: int, source: str, options: ReadOptions) -> Record | InputError:
    """The record of one JSON line's object."""
    doc_field = options.fingerprint_field or options.text_field
    missing = [name for name in (options.id_field, doc_field) if name not in obj]
    if missing:
        return InputError(source, number, f"no {missing[0]!r} field")
    doc_id = checked_id(obj[options.id_field], source, number)
    doc = checked_doc(obj[doc_field], source, number, options)
    bad = doc_id if isinstance(doc_id, InputError) else doc
    if isinstance(bad, InputError):
        return bad
    return Record(source, number, str(doc_id), str(doc), options.fingerprint_field is not None)


def read_jsonl(stream: IO[bytes], source: str, options: ReadOptions) -> Iterator[Record | InputError]:
    """The records of a JSON Lines stream, and an InputError for each bad line (blank lines skipped).

    Args:
        stream: the input, as bytes.
        source: its name, for errors.
        options: where ids, texts and fingerprints are found.
    """
    for number, raw in enumerate(stream, 1):
        item = _json_record(raw, number, source, options)
        if item is not None:
            yield item


#: What `JsonLines.fingerprints` gives: ids, fingerprints, and each error with the good lines before it.
Fingerprints = tuple[list[str], list[int], list[tuple[int, InputError]]]


def _utf8(*texts: str) -> bool:
    """Tell whether every text can be written in UTF-8 (a field name from a command line may hold
    lone surrogates, which no line can match)."""
    try:
        for text in texts:
            text.encode()
    except UnicodeEncodeError:
        return False
    return True


class JsonLines:
    """Consecutive raw lines of a JSON Lines input, to be parsed where they are fingerprinted.

    Read from a file, they travel as the block of bytes they were read as: `raws`, the lines, are cut
    from it where they are used (a worker process), so the reading process does no work per line.

    Args:
        source: the input's name, for errors.
        first: the line number of the first line.
        raws: the lines, their line ends included or not; or a block of whole lines, as read.
        options: where ids, texts and fingerprints are found.
        count: how many lines the block holds, when given one (counted here otherwise).
    """

    __slots__ = ("_block", "_raws", "count", "first", "options", "source")

    def __init__(
        self,
        source: str,
        first: int,
        raws: list[bytes] | bytes,
        options: ReadOptions,
        count: int | None = None,
    ) -> None:
        self.source, self.first, self.options = source, first, options
        if isinstance(raws, bytes):
            self._block: bytes | None = raws
            self._raws: list[bytes] | None = None
            self.count = count if count is not None else len(_lines_of(raws))
        else:
            self._block, self._raws, self.count = None, raws, len(raws)

    def __reduce__(self) -> tuple[Any, ...]:
        # A block travels as itself: one bytes object to pickle, not one per line.
        held = self._block if self._block is not None else self._raws
        return JsonLines, (self.source, self.first, held, self.options, self.count)

    @property
    def held(self) -> list[bytes] | bytes:
        """The lines as held: the block they were read as, else the list (what the compiled core takes)."""
        return self._block if self._block is not None else self.raws

    @property
    def raws(self) -> list[bytes]:
        """The lines: as given, or cut from the block (without their b"\\n")."""
        if self._raws is None:
            assert self._block is not None
            self._raws = _lines_of(self._block)
        return self._raws

    def records(self) -> list[Record | InputError]:
        """The lines' records and errors, in input order (blank lines left out)."""
        items = (
            _json_record(raw, number, self.source, self.options)
            for number, raw in enumerate(self.raws, self.first)
        )
        return [item for item in items if item is not None]

    def fingerprints(self, f: int, fp_base: str) -> Fingerprints:
        """The ids and precomputed fingerprints of lines read with `fingerprint_field`, and each error
        with the number of good lines before it: what `records` and `codec.parse_fingerprint` give, without
        a record per line.

        The compiled core reads the lines of the plain shape (`native.fingerprint_lines`); the others,
        and every line under the pure engine, are read here (an ASCII id and a fingerprint string the
        short way, anything else the general one), so every error is the same.

        Args:
            f: the fingerprints' width.
            fp_base: how their strings are read (`parse_fingerprint`).
        """
        done = self._natively(f, fp_base, len(self.raws))
        if done is not None:
            return done
        everything = range(len(self.raws))
        return _merged([], [], everything, [self._line(at, f, fp_base) for at in everything])

    def fingerprints_here(self, f: int, fp_base: str) -> Fingerprints | None:
        """`fingerprints` when the compiled core reads nearly every line itself, else None.

        The lines it leaves (at most one in 16 here) cost the pure reader 3-20 times more each: a run of
        mostly such lines is parsed faster by a worker process than by the one that reads and writes.

        Args:
            f: the fingerprints' width.
            fp_base: how their strings are read (`parse_fingerprint`).
        """
        return self._natively(f, fp_base, len(self.raws) // 16)

    def _natively(self, f: int, fp_base: str, most: int) -> Fingerprints | None:
        """`fingerprints` by the compiled core and, for at most `most` lines, the pure reader; else None."""
        core, options = engines.native, self.options
        fp_field = options.fingerprint_field or options.text_field
        if core is None or fp_base not in ("auto", "hex", "dec") or not _utf8(options.id_field, fp_field):
            return None
        read: tuple[list[str], list[int], list[int]] = core.fingerprint_lines(
            self.held, options.id_field, fp_field, f, fp_base, defaults.MAX_ID_BYTES
        )
        ids, fps, others = read
        if len(others) > most:
            return None
        return _merged(ids, fps, others, [self._line(position, f, fp_base) for position in others])

    def texts_fingerprinted(self, scheme: Scheme) -> Fingerprints | None:
        """The ids and text fingerprints of lines read with `text_field`, and each error with the number
        of good lines before it, as `records` and `scheme.fingerprint_many` give them; None under the
        pure engine.

        The compiled core reads and fingerprints the lines of the plain shape
        (`native.fingerprint_text_lines`) without a record or a str per text; the others are read here.

        Args:
            scheme: the scheme the texts are fingerprinted with.
        """
        core, options = engines.native, self.options
        if core is None or options.fingerprint_field is not None:
            return None
        if not _utf8(options.id_field, options.text_field):
            return None
        read: tuple[list[str], list[int], list[int]] = core.fingerprint_text_lines(
            self.held, scheme, options.id_field, options.text_field, defaults.MAX_ID_BYTES
        )
        ids, fps, others = read
        if not others:
            return ids, fps, []
        items = [
            _json_record(self.raws[position], self.first + position, self.source, options)
            for position in others
        ]
        texts = [str(item.doc) for item in items if isinstance(item, Record)]
        computed = iter(scheme.fingerprint_many(texts))
        results = [(item.id, next(computed)) if isinstance(item, Record) else item for item in items]
        return _merged(ids, fps, others, results)

    def _line(self, position: int, f: int, fp_base: str) -> tuple[str, int] | InputError | None:
        """One line's id and fingerprint, its error, or None for a blank line (the pure reader)."""
        options, source, number = self.options, self.source, self.first + position
        obj = _json_object(self.raws[position], number, source)
        if obj is None or isinstance(obj, InputError):
            return obj
        id_field, fp_field = options.id_field, options.fingerprint_field or options.text_field
        doc_id, text = obj.get(id_field), obj.get(fp_field)
        if not (
            isinstance(doc_id, str)
            and doc_id.isascii()
            and 0 < len(doc_id) <= defaults.MAX_ID_BYTES
            and isinstance(text, str)
            and not is_blank(text)
        ):  # the short way is what _record_of gives for these; anything else goes through it
            record = _record_of(obj, number, source, options)
            if isinstance(record, InputError):
                return record
            doc_id, text = record.id, str(record.doc)
        try:
            return doc_id, parse_fingerprint(text, f, fp_base)
        except InvalidArgument as exc:
            return InputError(source, number, str(exc))


def _merged(
    ids: list[str],
    fps: list[int],
    others: Sequence[int],
    results: Sequence[tuple[str, int] | InputError | None],
) -> Fingerprints:
    """The compiled core's ids and fingerprints with the pure reader's `results` of the `others` lines
    (their positions, ascending), each where it was: after the plain lines before it."""
    if not others:
        return ids, fps, []
    all_ids: list[str] = []
    all_fps: list[int] = []
    errors: list[tuple[int, InputError]] = []
    done = 0
    for count, (position, item) in enumerate(zip(others, results, strict=True)):
        plain = position - count  # plain lines before this one
        all_ids += ids[done:plain]
        all_fps += fps[done:plain]
        done = plain
        if isinstance(item, InputError):
            errors.append((len(all_ids), item))
        elif item is not None:
            all_ids.append(item[0])
            all_fps.append(item[1])
    all_ids += ids[done:]
    all_fps += fps[done:]
    return all_ids, all_fps, errors


def _lines_of(block: bytes) -> list[bytes]:
    """The lines of a block, cut at each b"\\n" as a binary file's iteration cuts them, without it
    (readers strip line ends anyway: keeping it would copy every line once more)."""
    lines = block.split(b"\n")
    if not lines[-1]:
        lines.pop()
    return lines


#: Bytes per line the first read of a JSON Lines stream assumes (then the mean of the lines read so far).
_FIRST_LINE_BYTES = 256
#: The bounds of a read: big enough that runs of short lines come from few reads, small enough to stream.
_READ_BYTES = (1 << 16, 1 << 24)
#: Above this many bytes a line, lines are found one byte search each; below, counted from a guess
#: (counting costs about 0.3 ns a byte here, a search step about 70 ns).
_SEARCH_LINE_BYTES = 256


def _end_of_lines(data: bytearray, start: int, stop: int, lines: int, per_line: int) -> int:
    """The offset just past the `lines`-th line end in `data[start:stop]`, or 0 if it holds fewer.

    Long lines are stepped over by one byte search each; short ones counted in one call up to a guess
    (`per_line` bytes a line) that is then moved line by line: no Python step per byte either way.
    """
    if per_line > _SEARCH_LINE_BYTES:
        end = start
        for _ in range(lines):
            end = data.find(b"\n", end, stop) + 1
            if not end:
                return 0
        return end
    end = data.rfind(b"\n", start, min(start + lines * per_line, stop)) + 1 or start
    found = data.count(b"\n", start, end)
    while found < lines:
        end = data.find(b"\n", end, stop) + 1
        if not end:
            return 0
        found += 1
    while found > lines:
        end = data.rfind(b"\n", start, end - 1) + 1
        found -= 1
    return end


def jsonl_chunks(
    stream: IO[bytes], source: str, options: ReadOptions, size: int
) -> Iterator[JsonLines | InputError]:
    """A JSON Lines stream as runs of `size` raw lines (the last one shorter), then the fatal error of
    truncated gzip data if any (after every whole line before it).

    The stream is read into one buffer that is cut into runs without a step per line, each run copied
    out once as the block of bytes it travels as (`JsonLines`): the reading process does little more
    than copy the input. Reads go through `readinto1` where the stream has it, so truncated gzip data
    loses no line decompressed before the fault.

    Args:
        stream: the input, as bytes.
        source: its name, for errors.
        options: where ids, texts and fingerprints are found.
        size: lines per run.
    """
    readinto = getattr(stream, "readinto1", None) or stream.readinto  # type: ignore[attr-defined]
    buf, filled, first, fault, done = bytearray(), 0, 1, None, False
    per_line, seen_bytes, seen_lines = _FIRST_LINE_BYTES, 0, 0
    while not done:
        # At least one read more than what is held: fewer than `size` lines may fill a read (long ones).
        want = max(min(size * per_line, _READ_BYTES[1]), filled + _READ_BYTES[0])
        if len(buf) < want:
            grown = bytearray(want)
            grown[:filled] = buf[:filled]
            buf = grown
        with memoryview(buf) as view:
            try:
                while filled < want:
                    got = readinto(view[filled:want])
                    if not got:
                        done = True
                        break
                    filled += got
            except (EOFError, gzip.BadGzipFile) as exc:
                fault, done = exc, True
            start = 0
            while end := _end_of_lines(buf, start, filled, size, per_line):
                yield JsonLines(source, first, bytes(view[start:end]), options, size)
                first += size
                seen_bytes, seen_lines = seen_bytes + end - start, seen_lines + size
                per_line = max(1, seen_bytes // seen_lines)
                start = end
            rest = bytes(view[start:filled])
        buf[: len(rest)], filled = rest, len(rest)
    whole = rest if fault is None else rest[: rest.rfind(b"\n") + 1]
    if whole:
        count = whole.count(b"\n") + (not whole.endswith(b"\n"))
        yield JsonLines(source, first, whole, options, count)
        first += count
    if fault is not None:
        yield gzip_fault(source, fault, first - 1)
