"""The demo job: load the bundled sample of real documents (``simhash_redis/data/sample.jsonl.gz``, described
in ``data/SOURCES.md``) into an index and report its near-duplicates."""

from __future__ import annotations

import difflib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import redis
from redis.cluster import RedisCluster

from ..errors import InputError
from ..index import SimhashIndex, VerifiedIndex, VerifiedMatch
from ..index.lifecycle import drop_index
from ..index.mode import LIBRARY, Asking, asked_mode, open_in_mode
from ..jobs.dedupe import Pair, groups
from ..jobs.jsonlines import read_json_lines

__all__ = [
    "DEMO_INDEX",
    "MARKER",
    "DemoGroup",
    "DemoReport",
    "SampleDoc",
    "difference",
    "fresh_index",
    "read_sample",
    "report_lines",
    "run",
]

#: The index the demo writes to (and drops first) unless told otherwise.
DEMO_INDEX = "demo"
#: The start of the last line of the report, followed by the number of groups (stable, for scripts).
MARKER = "near-duplicate groups found:"
_SAMPLE = "sample.jsonl.gz"


@dataclass(frozen=True)
class SampleDoc:
    id: str
    text: str


@dataclass(frozen=True)
class DemoGroup:
    """A connected component of near-duplicate pairs: its ids in sample order, and its pairs."""

    ids: tuple[str, ...]
    pairs: tuple[Pair, ...]


@dataclass(frozen=True)
class DemoReport:
    """What the demo found: every pair within k (the later document in sample order first), and their
    connected components (largest first)."""

    documents: int
    pairs: tuple[Pair, ...]
    groups: tuple[DemoGroup, ...]
    load_seconds: float
    query_seconds: float
    texts: dict[str, str]

    @property
    def grouped(self) -> int:
        """Documents that have at least one near-duplicate."""
        return sum(len(g.ids) for g in self.groups)


def read_sample(path: str | Path | None = None) -> list[SampleDoc]:
    """The documents of the bundled sample, or of another JSON Lines file of ``{"id", "text"}`` objects
    (InputError for a line that is not)."""
    with resources.as_file(resources.files("simhash_redis.data").joinpath(_SAMPLE)) as bundled:
        docs = []
        for source, line, value in read_json_lines(path or bundled, None if path else _SAMPLE):
            doc_id, text = value.get("id"), value.get("text")
            if not isinstance(doc_id, str) or not isinstance(text, str):
                raise InputError(source, line, 'expected an object with string "id" and "text" fields')
            docs.append(SampleDoc(doc_id, text))
        return docs


def fresh_index(
    client: redis.Redis | RedisCluster,
    name: str = DEMO_INDEX,
    *,
    verified: bool | None = None,
    threshold: float | None = None,
    band_buckets: int | None = None,
    asking: Asking = LIBRARY,
    **options: Any,
) -> SimhashIndex | VerifiedIndex:
    """Drop the index (every key of its name), then create it empty, as `open_in_mode` (the arguments
    checked before anything is dropped).

    Raises:
        InvalidArgument: threshold or band_buckets out of range, or given with verified=False.
        RedisUnavailable: the server cannot be reached.
    """
    asked_mode(verified, threshold=threshold, band_buckets=band_buckets, asking=asking)
    drop_index(client, name)
    return open_in_mode(
        client,
        name,
        verified=verified,
        threshold=threshold,
        band_buckets=band_buckets,
        asking=asking,
        **options,
    )


def run(index: SimhashIndex | VerifiedIndex, docs: Sequence[SampleDoc]) -> DemoReport:
    """Store the documents (distinct ids), find every near-duplicate pair, and group the pairs."""
    started = time.perf_counter()
    texts = [d.text for d in docs]
    if isinstance(index, VerifiedIndex):
        index.add_many(list(zip((d.id for d in docs), texts, strict=True)))
        loaded = time.perf_counter()
        found: Sequence[Sequence[Any]] = index.near_many(texts)
    else:
        fps = index.fingerprint_many(texts)
        index.add_many([(d.id, fp) for d, fp in zip(docs, fps, strict=True)])
        loaded = time.perf_counter()
        found = index.near_many(fps)
    queried = time.perf_counter()
    position = {d.id: i for i, d in enumerate(docs)}
    pairs = [
        Pair(doc.id, match.id, match.distance, match.jaccard if isinstance(match, VerifiedMatch) else None)
        for doc, matches in zip(docs, found, strict=True)
        for match in matches
        if position.get(match.id, len(docs)) < position[doc.id]
    ]
    components = groups(pairs)
    root_of = {doc_id: g.id for g in components for doc_id in (g.id, *g.copies)}
    of_group: dict[str, list[Pair]] = {}
    for pair in pairs:
        of_group.setdefault(root_of[pair.new_id], []).append(pair)
    demo_groups = tuple(
        DemoGroup(tuple(sorted((g.id, *g.copies), key=position.__getitem__)), tuple(of_group[g.id]))
        for g in components
    )
    by_id = {d.id: d.text for d in docs}
    return DemoReport(len(docs), tuple(pairs), demo_groups, loaded - started, queried - loaded, by_id)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def _id_list(ids: Sequence[str], width: int) -> str:
    """Ids joined by ', ', as many as fit in width, then '+N more'."""
    for i in range(1, len(ids)):
        if len(", ".join(ids[: i + 1]) + (f", +{len(ids) - i - 1} more" if i + 1 < len(ids) else "")) > width:
            return ", ".join(ids[:i]) + f", +{len(ids) - i} more"
    return ", ".join(ids)


def difference(a: str, b: str, width: int = 90, context: int = 6) -> tuple[str, str, int]:
    """Where two texts first differ, word by word: a line for each (`context` common words, then its
    differing words in [brackets], at most `width` long) and the number of places where they differ."""
    wa, wb = a.split(), b.split()
    changes = [
        op for op in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes() if op[0] != "equal"
    ]
    if not changes:
        return "(identical text)", "(identical text)", 0
    _, i1, i2, j1, j2 = changes[0]
    lead = ("... " if i1 > context else "") + " ".join(wa[max(i1 - context, 0) : i1])

    def side(changed: list[str], after: list[str]) -> str:
        shown = " ".join(changed[:16]) + (" ..." if len(changed) > 16 else "")
        return _clip(f"{lead} [{shown}] {' '.join(after)}".strip(), width)

    return side(wa[i1:i2], wa[i2 : i2 + context]), side(wb[j1:j2], wb[j2 : j2 + context]), len(changes)


def _remoteness(pair: Pair) -> float:
    """How far apart a pair is: its distance, or on a verified index how far its Jaccard is below 1."""
    return pair.distance if pair.jaccard is None else 1 - pair.jaccard


def _span(group: DemoGroup) -> str:
    """The range of a group's Jaccard estimates (a verified index's), else of its distances."""
    estimates = [f"{p.jaccard:.2f}" for p in group.pairs if p.jaccard is not None]
    name, values = ("Jaccard", estimates) if estimates else ("distance", [p.distance for p in group.pairs])
    low, high = min(values), max(values)
    return f" ({name} {low}{f'-{high}' if high != low else ''})"


def report_lines(
    report: DemoReport,
    *,
    index: SimhashIndex | VerifiedIndex,
    where: str,
    elapsed: float,
    max_groups: int = 8,
    max_examples: int = 3,
    width: int = 100,
) -> list[str]:
    """The demo's printed lines: the setup, the largest groups, a few examples, totals, and last `MARKER`.

    Args:
        where: a description of the server, e.g. "embedded server redis://127.0.0.1:6390".
        elapsed: seconds since the demo started, server start included.
        width: the longest line (ids are elided to fit).
    """
    plain = index.index if isinstance(index, VerifiedIndex) else index
    verified = isinstance(index, VerifiedIndex)
    lines = [
        f"simhash-redis demo: {report.documents} documents (licence texts and successive PyPI READMEs)",
        f"Redis: {where}",
        f"index {plain.name!r}: f={plain.f}, k={plain.k}, {plain.layout.describe()}",
        f"stored {report.documents} documents in {report.load_seconds:.2f} s; "
        f"{report.documents} near() queries in {report.query_seconds:.2f} s",
        "",
    ]
    if report.groups:
        criterion = (
            f", verified (estimated Jaccard >= {index.threshold:g})"
            if isinstance(index, VerifiedIndex)
            else f" (distance <= {plain.k})"
        )
        lines.append(f"Near-duplicate groups{criterion}, largest first:")
        for group in report.groups[:max_groups]:
            head = f"  {len(group.ids)} copies: "
            span = _span(group)
            lines.append(head + _id_list(group.ids, width - len(head) - len(span)) + span)
        hidden = report.groups[max_groups:]
        if hidden:
            sizes = sorted({len(g.ids) for g in hidden})
            size_text = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
            lines.append(f"  ... and {len(hidden)} more groups of {size_text}")
        # One pair per group, the most distant (ties: the first found), the most distant groups first.
        best = [max(g.pairs, key=_remoteness) for g in report.groups]
        examples = sorted(best, key=lambda pair: -_remoteness(pair))[:max_examples]
        if examples:
            lines += ["", "What differs between near-duplicates ([...] marks the first change):"]
        for pair in examples:
            old, new, places = difference(
                report.texts[pair.existing_id], report.texts[pair.new_id], width - 6
            )
            differ = "s differ" if places > 1 else " differs"
            where_ = f"{places} place{differ}" if places else "identical words"
            similar = f"Jaccard {pair.jaccard:.2f}, " if pair.jaccard is not None else ""
            line = f"  {pair.existing_id} ~ {pair.new_id}: {similar}distance {pair.distance}, {where_}"
            lines += [_clip(line, width), f"    - {old}", f"    + {new}"]
    elif verified:
        lines.append("No two documents are near-duplicates.")
    else:
        lines.append(f"No two documents are within distance {plain.k}.")
    lines += [
        "",
        f"documents: {report.documents}, with a near-duplicate: {report.grouped}, "
        f"without: {report.documents - report.grouped}; elapsed {elapsed:.1f} s",
        f"{MARKER} {len(report.groups)}",
    ]
    return lines
