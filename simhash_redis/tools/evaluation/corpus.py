"""The evaluation's inputs: a JSON Lines corpus of documents, and optional labelled pairs."""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

from ...errors import InputError
from ...fingerprinting.charclass import is_cjk
from ...jobs.jsonlines import read_json_lines
from ...jobs.records import open_input

__all__ = ["Doc", "detect_lang", "load_corpus", "load_pairs"]


@dataclasses.dataclass(frozen=True)
class Doc:
    """One corpus document: id, text and language ("en", "zh", ...)."""

    id: str
    text: str
    lang: str


def detect_lang(text: str) -> str:
    """A text's language group: "zh" when CJK characters are a fifth of its letters or more, else "en"."""
    letters = [ord(c) for c in text if c.isalnum()]
    cjk = sum(1 for cp in letters if is_cjk(cp))
    return "zh" if letters and cjk * 5 >= len(letters) else "en"


def load_corpus(path: str | Path) -> list[Doc]:
    """The documents of a JSON Lines corpus (gzipped or not) of objects with id, text and optional lang
    (else `detect_lang`), in file order; InputError for a malformed record or a repeated id."""
    docs: list[Doc] = []
    seen: set[str] = set()
    for source, number, row in read_json_lines(path):
        doc_id, text, lang = row.get("id"), row.get("text"), row.get("lang")
        if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
            raise InputError(source, number, "id must be a string")
        if not isinstance(text, str):
            raise InputError(source, number, "text must be a string")
        if lang is not None and not isinstance(lang, str):
            raise InputError(source, number, "lang must be a string")
        doc_id = str(doc_id)
        if doc_id in seen:
            raise InputError(source, number, f"id {doc_id!r} repeats")
        seen.add(doc_id)
        docs.append(Doc(doc_id, text, lang or detect_lang(text)))
    return docs


def _label(value: object, source: str, line: int) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return int(value)
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "dup", "duplicate", "1.0"):
        return 1
    if text in ("0", "false", "no", "0.0"):
        return 0
    raise InputError(source, line, f"label must be 1/0 or true/false, got {value!r}")


def load_pairs(path: str | Path) -> list[tuple[str, str, int | None]]:
    """(id_a, id_b, label) triples (label 1, 0 or None) from JSON Lines objects {id_a, id_b, label?} in a
    .jsonl/.json(.gz) file, else from CSV rows id_a,id_b[,label] (a header row naming id_a is skipped);
    InputError for a malformed row."""
    path = Path(path)
    out: list[tuple[str, str, int | None]] = []
    if ".jsonl" in path.suffixes or ".json" in path.suffixes:
        for source, number, row in read_json_lines(path):
            if "id_a" not in row or "id_b" not in row:
                raise InputError(source, number, "expected an object with id_a and id_b")
            out.append((str(row["id_a"]), str(row["id_b"]), _label(row.get("label"), source, number)))
        return out
    with open_input(str(path)) as data, io.TextIOWrapper(data, encoding="utf-8") as text:
        for number, fields in enumerate(csv.reader(text), 1):
            if not fields or (number == 1 and fields[0].strip() == "id_a"):
                continue
            if len(fields) not in (2, 3):
                raise InputError(str(path), number, "expected id_a,id_b[,label]")
            label = _label(fields[2], str(path), number) if len(fields) == 3 else None
            out.append((fields[0].strip(), fields[1].strip(), label))
    return out
