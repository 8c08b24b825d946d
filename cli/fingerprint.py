"""`fingerprint`: a text's fingerprint in hex, computed locally (no Redis)."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import typer

from simhash_redis import Scheme
from simhash_redis.codec import format_fingerprint
from simhash_redis.fingerprinting.tokens import FEATURE_KINDS

from .common import ExitCode, echo_json, fail, registrar, settings
from .options import Encoding, TextArg, TextFile

__all__ = ["fingerprint", "read_text", "register"]

Features = enum.Enum("Features", {name: name for name in FEATURE_KINDS}, type=str)  # type: ignore[misc]


def read_text(text: str | None, file: Path | None, encoding: str = "utf-8") -> str:
    """The query or document text: the argument, else the file ('-': stdin), else stdin.

    A file and stdin follow one rule: their bytes are decoded with `encoding`, and bytes that do not
    decode are an error naming where, never replaced.

    Args:
        text: the TEXT argument.
        file: the --file option.
        encoding: the --encoding option.

    Raises:
        typer.Exit: both given, neither given while stdin is a terminal, the text is empty or the
            encoding unknown (usage), or bytes that do not decode (bad input).
        OSError: the file cannot be read.
    """
    if text is not None and file is not None:
        raise fail("give TEXT or --file, not both", ExitCode.USAGE)
    if text is None and file is None and sys.stdin.isatty():
        raise fail("give TEXT, --file FILE, or pipe the text into stdin", ExitCode.USAGE)
    if text is None:
        from_file = file is not None and str(file) != "-"
        data = file.read_bytes() if from_file and file is not None else sys.stdin.buffer.read()
        text = _decoded(data, str(file) if from_file else "<stdin>", encoding)
    if not text.strip():
        raise fail("the text is empty", ExitCode.USAGE)
    return text


def _decoded(data: bytes, source: str, encoding: str) -> str:
    try:
        return data.decode(encoding)
    except LookupError:
        raise fail(f"unknown --encoding {encoding!r}", ExitCode.USAGE) from None
    except UnicodeDecodeError as exc:
        raise fail(
            f"{source}: not valid {encoding} (byte {exc.start}); give its encoding with --encoding, "
            "e.g. --encoding latin-1",
            ExitCode.INPUT,
        ) from None


def fingerprint(
    ctx: typer.Context,
    text: TextArg = None,
    file: TextFile = None,
    encoding: Encoding = "utf-8",
    features: Annotated[Features, typer.Option("--features", help="Feature kind.")] = Features.shingles,  # type: ignore[attr-defined]
    n: Annotated[
        int, typer.Option("--n", "-n", min=1, max=16, help="Tokens per shingle, or characters per n-gram.")
    ] = 3,
    bits: Annotated[int, typer.Option("--bits", help="Fingerprint width: 32, 64 or 128.")] = 64,
    json_out: Annotated[
        bool, typer.Option("--json", help='Print {"fingerprint", "scheme"} as JSON.')
    ] = False,
) -> None:
    """Print a text's fingerprint in hex (0x-prefixed, zero-padded), computed locally without Redis.

    The defaults are the default scheme, so the result matches an index created with default
    options; for an index created with --scheme or --f, give them (before or after the command)
    instead of --features, -n and --bits.

    \b
    Examples:
      simhash-redis fingerprint "the text of a document"
      simhash-redis fingerprint --file article.txt --bits 128

    \f
    Args:
        ctx: the command's context (the global --scheme and --f).
        text: the text.
        file: read the text from this file.
        encoding: how the file or stdin is encoded.
        features: the feature kind.
        n: tokens per shingle, or characters per n-gram.
        bits: the fingerprint width.
        json_out: print JSON.

    Raises:
        typer.Exit: no text, both TEXT and --file, --scheme or --f with this command's own scheme
            options, or -n with --features words (usage).
    """
    state = settings(ctx)
    own = [
        name
        for name, given in (
            ("--features", features.value != "shingles"),
            ("-n", n != 3),
            ("--bits", bits != 64),
        )
        if given
    ]
    if (state.scheme is not None or state.f is not None) and own:
        raise fail(f"give --scheme and --f, or {', '.join(own)}, not both", ExitCode.USAGE)
    if features.value == "words" and n not in (1, 3):
        raise fail(
            "-n sets the tokens of a shingle or the characters of an n-gram: a word is one token",
            ExitCode.USAGE,
        )
    scheme = state.configuration()["scheme"] or Scheme(features=features.value, n=n, f=state.f or bits)
    bits = scheme.f
    value = scheme.fingerprint(read_text(text, file, encoding))
    if json_out:
        echo_json({"fingerprint": format_fingerprint(value, bits), "scheme": scheme.to_meta()})
    else:
        typer.echo(format_fingerprint(value, bits))


#: Adds this module's commands to the app.
register = registrar({"fingerprint": fingerprint})
