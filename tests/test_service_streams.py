"""A JSON Lines body read as it arrives (`service.streams.json_lines`): any chunking gives the same
answer, the line-length limit is exact however a line is split, and a line over it ends the stream after
the lines before it are answered, its error naming it."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

pytest.importorskip("msgspec")

from simhash_redis.service import operations
from simhash_redis.service.streams import json_lines


class Body:
    """The part of a `Call` json_lines reads: a body arriving in the chunks given."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self._chunks = chunks
        self.state: dict[str, Any] = {}

    async def chunks(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


def answer(chunks: Sequence[bytes], limit: int, batch: int = 1000) -> list[Any]:
    """The answer's lines, parsed: each line's id, or its error."""

    async def run() -> list[bytes]:
        ids = [part async for part in json_lines(Body(chunks), operations.Id, _ids, batch, limit)]  # type: ignore[arg-type]
        return ids

    return [json.loads(line) for line in b"".join(asyncio.run(run())).splitlines()]


def _ids(items: Sequence[operations.Id]) -> list[operations.Id]:
    return list(items)


def line_of(doc_id: str) -> bytes:
    return json.dumps({"id": doc_id}, separators=(",", ":")).encode()


def split(body: bytes, rnd: random.Random, most: int) -> list[bytes]:
    """The body in chunks of 1..most bytes."""
    chunks, at = [], 0
    while at < len(body):
        step = rnd.randint(1, most)
        chunks.append(body[at : at + step])
        at += step
    return chunks


def test_any_chunking_gives_the_answer_of_one_chunk() -> None:
    rnd = random.Random(7)
    lines = [line_of(f"doc-{i}" * rnd.randint(1, 5)) for i in range(60)]
    lines[10:10] = [b"", b"  ", b'{"id": 3}', b"not json"]
    body = b"\n".join(lines) + b"\r\n" + line_of("last")
    whole = answer([body], limit=100)
    assert whole[0]["id"].startswith("doc-0") and whole[-1] == {"id": "last"} and len(whole) == 63
    assert [w["error"]["line"] for w in whole if "error" in w] == [13, 14]
    for most in (1, 2, 7, 64):
        assert answer(split(body, rnd, most), limit=100, batch=rnd.randint(1, 9)) == whole, most


@pytest.mark.parametrize("piece", [1, 3, 1000])
def test_a_long_line_over_many_chunks_is_read_whole_and_the_limit_is_exact(piece: int) -> None:
    long_id = "x" * 20_000
    line = line_of(long_id)
    body = line_of("a") + b"\n" + line + b"\n" + line_of("c") + b"\n"
    chunks = [body[i : i + piece] for i in range(0, len(body), piece)]
    assert answer(chunks, limit=len(line)) == [{"id": "a"}, {"id": long_id}, {"id": "c"}]
    refused = answer(chunks, limit=len(line) - 1)
    assert refused[0] == {"id": "a"}
    assert refused[1]["error"]["code"] == "body_too_large" and refused[1]["error"]["line"] == 2
    assert len(refused) == 2  # the stream cannot be read past it
    # Without its final line end, the last line is held to the limit alike.
    unended = [*chunks[:-1], chunks[-1][:-1]] if piece > 1 else chunks[:-1]
    assert answer(unended, limit=len(line))[-1] == {"id": "c"}
    last = answer([*chunks, line], limit=len(line) - 1)
    assert last[1]["error"]["line"] == 2


def test_the_lines_before_a_line_over_the_limit_are_answered_first() -> None:
    long = line_of("y" * 60)
    short = [line_of(i) for i in ("a", "b", "c")]
    # In one chunk: the lines before it, then its error, with its number.
    one = answer([b"\n".join([*short, long, line_of("d")]) + b"\n"], limit=40)
    assert one == [
        {"id": "a"},
        {"id": "b"},
        {"id": "c"},
        {
            "error": {
                "code": "body_too_large",
                "message": "line 4 is longer than the limit of 40 bytes",
                "line": 4,
            }
        },
    ]
    # Split over chunks, its start among complete lines: the same.
    start = b"\n".join(short) + b"\n" + long[:30]
    assert answer([start, long[30:], b"\n" + line_of("d") + b"\n"], limit=40) == one
    # Past the limit before its chunk ends, a batch already pending is answered too.
    assert answer([start, long[30:]], limit=40, batch=2) == one
    # A blank line before it still counts in the numbering.
    assert answer([b"\n" + long + b"\n"], limit=40)[0]["error"]["line"] == 2
