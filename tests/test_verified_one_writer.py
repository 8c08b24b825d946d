"""A verified index fed by one writer, on a real server: pages of one template (manual pages, a site's
articles) share band values, and the documents of one batch must not keep each other out."""

from __future__ import annotations

import random
import string

import redis

from simhash_redis import SimhashIndex, VerifiedIndex, VerifiedMatch

_RNG = random.Random(1)
# Words of letters: the fingerprints' features are character shingles.
_VOCAB = ["".join(_RNG.choices(string.ascii_lowercase, k=_RNG.randint(3, 9))) for _ in range(5000)]
_TEMPLATE = " ".join(_RNG.choices(_VOCAB, k=700))


def page(i: int) -> str:
    """A page of the template: 700 shared words, 150 of its own (Jaccard ~0.7 with the others: shared
    band values, below the threshold)."""
    rng = random.Random(i)
    return _TEMPLATE + " " + " ".join(rng.choice(_VOCAB) for _ in range(150))


def one_word_edit(text: str, seed: int) -> str:
    """The text with one of its own words replaced (near the end: among the page's own words)."""
    words = text.split()
    rng = random.Random(seed)
    words[-rng.randrange(1, 100)] = rng.choice(_VOCAB)
    return " ".join(words)


def templated(pages: int, every: int) -> list[tuple[str, str]]:
    """The pages, then a one-word edit of every `every`-th one (all in one batch)."""
    docs = [(f"p{i}", page(i)) for i in range(pages)]
    return docs + [(f"e{i}", one_word_edit(page(i), i)) for i in range(0, pages, every)]


def test_pages_of_one_template_in_one_batch(redis_client: redis.Redis) -> None:
    verified = VerifiedIndex(SimhashIndex(redis_client, "man"))
    docs = templated(400, 40)
    results = verified.add_if_new_many(docs)  # one batch of 410 (the default batch is 1,000)
    stored = [doc_id for (doc_id, _), found in zip(docs, results, strict=True) if found is None]
    assert len(verified.index) == len(stored)
    # Every edit is dropped as a copy of its page, earlier in the same batch; no page is an edit's.
    for (doc_id, _), found in zip(docs, results, strict=True):
        if doc_id.startswith("e"):
            assert isinstance(found, VerifiedMatch) and found.id == "p" + doc_id[1:], (doc_id, found)
        elif found is not None:
            assert found.jaccard >= verified.threshold and int(found.id[1:]) < int(doc_id[1:])
    assert all(doc_id.startswith("p") for doc_id in stored)
    # Stored pages are not near-duplicates of each other: each finds only itself.
    texts = dict(docs)
    for doc_id, matches in zip(stored, verified.near_many([texts[i] for i in stored]), strict=True):
        assert [m.id for m in matches] == [doc_id]


def test_a_rerun_over_changed_pages_of_one_template(redis_client: redis.Redis) -> None:
    """A re-crawl: half the pages were stored before with other texts (changed beyond k, below the
    threshold). Each such page is written in the write's second script call; the pages after it in the
    first must not fail their guards for it (one page per round, until WriteContention)."""
    verified = VerifiedIndex(SimhashIndex(redis_client, "recrawl"))
    docs = templated(200, 40)
    before = [(f"p{i}", page(10_000 + i)) for i in range(1, 200, 2)]
    assert verified.add_if_new_many(before) == [None] * len(before)  # every one stored (none confirmed)
    results = verified.add_if_new_many(docs)
    for (doc_id, _), found in zip(docs, results, strict=True):
        if doc_id.startswith("e"):
            assert isinstance(found, VerifiedMatch) and found.id == "p" + doc_id[1:], (doc_id, found)
        elif found is not None:
            assert found.jaccard >= verified.threshold and found.id != doc_id, (doc_id, found)
    stored = [doc_id for (doc_id, _), found in zip(docs, results, strict=True) if found is None]
    assert len(stored) > 150  # pages of one template: few are confirmed copies of an earlier one
    kept = {doc_id for doc_id, _ in before} - set(stored)  # rewritten pages found as copies keep their old
    assert len(verified.index) == len(stored) + len(kept)
    texts = dict(docs)
    for doc_id, matches in zip(stored, verified.near_many([texts[i] for i in stored]), strict=True):
        assert [m.id for m in matches] == [doc_id]
