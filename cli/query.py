"""`near`, `add`, `get` and `remove`: one document at a time."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer

from simhash_redis import Match, SimhashIndex, VerifiedIndex, VerifiedMatch
from simhash_redis.codec import format_fingerprint, parse_fingerprint
from simhash_redis.errors import InputError
from simhash_redis.jobs.arrow import EXTENSIONS as TABLE_EXTENSIONS
from simhash_redis.jobs.dedupe import near_records
from simhash_redis.jobs.readers import STDIN, ReadOptions, Record, detect_format, read
from simhash_redis.store.keys import encode_id

from .common import ExitCode, echo_json, fail, registrar, settings, tsv_row
from .fingerprint import read_text
from .options import DocId, Encoding, FormatOpt, FpField, IdField, JsonOut, TextArg, TextField, TextFile

__all__ = ["add", "get", "near", "register", "remove"]


def near(
    ctx: typer.Context,
    text: Annotated[str | None, typer.Argument(help="The query text.", show_default=False)] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", help="Read the query text from this file (- for stdin).", show_default=False),
    ] = None,
    fingerprint: Annotated[
        str | None,
        typer.Option(
            "--fingerprint", help="Query by a fingerprint (hex, 0x-hex or decimal).", show_default=False
        ),
    ] = None,
    k: Annotated[
        int | None,
        typer.Option(
            "-k", "--distance", min=0, help="Largest distance (default: the index's k).", show_default=False
        ),
    ] = None,
    json_out: JsonOut = False,
    encoding: Encoding = "utf-8",
    fmt: FormatOpt = None,
    id_field: IdField = "id",
    text_field: TextField = "text",
    fingerprint_field: FpField = None,
) -> None:
    """Print the stored documents near a text or fingerprint, nearest first: 'ID<TAB>DISTANCE<TAB>HEX'.

    In a verified index (created with --verified), a text's matches are those confirmed by their
    sketches, most similar first, with a fourth column: the estimated Jaccard similarity.

    A --file that is a table (.parquet, .arrow/.feather, or any input with --format) holds many
    queries, one a row: each match is printed after its query's id, 'QUERY<TAB>ID<TAB>DISTANCE<TAB>HEX'
    (--json: a {"query", "matches"} line per row).

    \b
    Examples:
      simhash-redis --index news near "text of an article"
      simhash-redis --index news near --fingerprint 0x8ffffffffffffff1 -k 2 --json
      simhash-redis --index news near --file candidates.parquet --text-field content

    \f
    Args:
        ctx: the command's context (global settings).
        text: the query text.
        file: read the query text from this file.
        fingerprint: query by this fingerprint instead.
        k: the largest distance.
        json_out: print JSON.
        encoding: how the file or stdin is encoded.
        fmt: read --file as a table of queries in this format.
        id_field, text_field, fingerprint_field: the table's columns (as `load` reads them).

    Raises:
        typer.Exit: no text, more than one query, or a table's options without a table (usage); bad
            rows in a table (input).
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    state = settings(ctx)
    table = None if file is None else _table_format(str(file), None if fmt is None else fmt.value)
    stray = [
        name
        for name, given in (
            ("--format", fmt is not None),
            ("--id-field", id_field != "id"),
            ("--text-field", text_field != "text"),
            ("--fingerprint-field", fingerprint_field is not None),
        )
        if given
    ]
    if table is None and stray:
        raise fail(
            f"{', '.join(stray)} read a --file of many queries (.parquet, .arrow, or any input with "
            "--format), not a query text",
            ExitCode.USAGE,
        )
    if table is not None and file is not None:
        if text is not None or fingerprint is not None:
            raise fail("give TEXT, --file or --fingerprint, only one", ExitCode.USAGE)
        options = ReadOptions(
            id_field=id_field, text_field=text_field, fingerprint_field=fingerprint_field, encoding=encoding
        )
        index = state.open_index(create=False)
        _near_table(index, state.verified_of(index), read(str(file), table, options), k, json_out)
        return
    index = state.open_index(create=False)
    verified = state.verified_of(index)
    matches: list[Match] | list[VerifiedMatch]
    if fingerprint is not None:
        if text is not None or file is not None:
            raise fail("give TEXT, --file or --fingerprint, only one", ExitCode.USAGE)
        if verified is not None:
            raise fail(
                f"index {index.name!r} is verified: its matches are confirmed from the query's text, so "
                "give TEXT or --file, not --fingerprint",
                ExitCode.USAGE,
            )
        matches = index.near(parse_fingerprint(fingerprint, index.f), k)
    elif verified is not None:
        matches = verified.near(read_text(text, file, encoding), k=k)
    else:
        matches = index.near(read_text(text, file, encoding), k)
    _print_matches(matches, index.f, json_out)


def _table_format(path: str, fmt: str | None) -> str | None:
    """The format of a --file read as a table of queries (None: a query text, as ever)."""
    if fmt is not None:
        return fmt
    if path != STDIN and (os.path.isdir(path) or Path(path.lower()).suffix in TABLE_EXTENSIONS):
        return detect_format(path)
    return None


def _near_table(
    index: SimhashIndex,
    verified: VerifiedIndex | None,
    records: Iterable[Record | InputError],
    k: int | None,
    json_out: bool,
) -> None:
    """Print each row's matches after the row's id; bad rows reported on stderr, then exit 3."""
    bad = 0
    for answer in near_records(index, records, verified=verified, k=k):
        if isinstance(answer, InputError):
            bad += 1
            typer.echo(str(answer), err=True)
            continue
        record, matches = answer
        if json_out:
            echo_json({"query": record.id, "matches": [_match_row(m, index.f) for m in matches]})
            continue
        for m in matches:
            typer.echo(tsv_row(record.id, *_tsv_fields(m, index.f)))
    if bad:
        raise fail(f"{bad:,} bad rows skipped", ExitCode.INPUT)


def _match_row(m: Match | VerifiedMatch, f: int) -> dict[str, object]:
    row: dict[str, object] = {
        "id": m.id,
        "distance": m.distance,
        "fingerprint": format_fingerprint(m.fingerprint, f),
    }
    if isinstance(m, VerifiedMatch):
        row["jaccard"] = round(m.jaccard, 4)
    return row


def _print_matches(matches: list[Match] | list[VerifiedMatch], f: int, json_out: bool) -> None:
    if json_out:
        echo_json([_match_row(m, f) for m in matches])
        return
    for m in matches:
        typer.echo(tsv_row(*_tsv_fields(m, f)))


def _tsv_fields(match: Match | VerifiedMatch, f: int) -> list[object]:
    """A match's fields in tab-separated output: id, distance, fingerprint, and Jaccard when verified."""
    similar = [f"{match.jaccard:.3f}"] if isinstance(match, VerifiedMatch) else []
    return [match.id, match.distance, format_fingerprint(match.fingerprint, f), *similar]


def add(
    ctx: typer.Context,
    doc_id: DocId,
    text: TextArg = None,
    file: TextFile = None,
    json_out: JsonOut = False,
    encoding: Encoding = "utf-8",
) -> None:
    """Store one document (replacing the id's previous fingerprint); print added, replaced or unchanged.

    \b
    Example:
      simhash-redis --index news add story-1 "text of the story"

    \f
    Args:
        ctx: the command's context (global settings).
        doc_id: the document id.
        text: the text.
        file: read the text from this file.
        json_out: print JSON.
        encoding: how the file or stdin is encoded.

    Raises:
        typer.Exit: no text, or both TEXT and --file (usage).
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    state = settings(ctx)
    # First: an id or a text refused must not leave a new, empty index behind.
    encode_id(doc_id)
    document = read_text(text, file, encoding)
    index = state.open_index(create=True)
    verified = state.verified_of(index)
    fingerprint = index.fingerprint(document)
    # A verified index stores the text's sketch too, so it takes the text rather than the fingerprint.
    outcome = index.add(doc_id, fingerprint) if verified is None else verified.add(doc_id, document)
    if json_out:
        echo_json(
            {"id": doc_id, "outcome": outcome.value, "fingerprint": format_fingerprint(fingerprint, index.f)}
        )
    else:
        typer.echo(outcome.value)


def get(
    ctx: typer.Context,
    doc_id: DocId,
    json_out: JsonOut = False,
) -> None:
    """Print the fingerprint stored for an id (hex); exit code 1 if the id is not stored.

    \b
    Example:
      simhash-redis --index news get story-1

    \f
    Args:
        ctx: the command's context (global settings).
        doc_id: the document id.
        json_out: print JSON.

    Raises:
        typer.Exit: 1, the id is not stored.
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    index = settings(ctx).open_index(create=False)
    value = index.get(doc_id)
    if json_out:
        echo_json(
            {"id": doc_id, "fingerprint": None if value is None else format_fingerprint(value, index.f)}
        )
    elif value is not None:
        typer.echo(format_fingerprint(value, index.f))
    if value is None:
        raise fail(f"no document with id {doc_id!r} in index {index.name!r}")


def remove(
    ctx: typer.Context,
    ids: Annotated[list[str], typer.Argument(metavar="ID...", help="The document ids.", show_default=False)],
    json_out: JsonOut = False,
) -> None:
    """Remove documents; print how many were stored (unknown ids are not an error).

    \b
    Example:
      simhash-redis --index news remove story-1 story-2

    \f
    Args:
        ctx: the command's context (global settings).
        ids: the document ids.
        json_out: print JSON.

    Raises:
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    state = settings(ctx)
    index = state.open_index(create=False)
    verified = state.verified_of(index)
    removed = index.remove_many(ids) if verified is None else verified.remove_many(ids)
    if json_out:
        echo_json(
            {"removed": sum(removed), "missing": [i for i, r in zip(ids, removed, strict=True) if not r]}
        )
    else:
        typer.echo(f"removed {sum(removed)} of {len(ids)}")


#: Adds this module's commands to the app.
register = registrar({"near": near, "add": add, "get": get, "remove": remove})
