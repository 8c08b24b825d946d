"""Articles cut from the corpus's real text, counted in the library's word tokens, and word edits of them.

A benchmark's "250-400 word article" or "40-100 word text" holds that many tokens of
`simhash_redis.fingerprinting.tokens.tokenize` (English: runs of letters and digits; Chinese: one token a
CJK character, plus the runs of letters and digits between them), with the real text's separators
(spaces, punctuation, markup) kept between them. A word edit replaces one real word, never punctuation
or markup: an English token of ASCII letters only (not a number, not a `|`, not a run like `seahorse(1)`
that is several tokens), or a Chinese character of the CJK Unified Ideographs, by a different word of
the same kind from the set's vocabulary, so the edited text has the same tokens but that one.

Before, a "word" was a run between spaces (`benchmarks.eval_edits._articles`): one can be no token of
the library's (a `|`), or several, so a "40-word" text of a manual could hold 21 tokens and one edit
could change three.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass

from benchmarks import corpus
from simhash_redis.fingerprinting.charclass import CJK_RANGES
from simhash_redis.fingerprinting.tokens import tokenize

__all__ = ["Article", "cut", "edit", "vocabulary"]

_CJK = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_RANGES)
# One CJK letter, or a run of letters and digits (`\w` without `_` and without CJK): the tokenizer's
# tokens, checked against it for every article cut.
_TOKEN = re.compile(f"((?=[^\\W_])[{_CJK}]|[^\\W_{_CJK}]+)")
#: The words an edit replaces and puts in, per language.
_WORD = {"en": re.compile("[A-Za-z]+"), "zh": re.compile("[\u4e00-\u9fff]")}


@dataclass(frozen=True)
class Article:
    """A run of real text: `pieces` alternate tokens and the separators between them, first and last a
    token (so `pieces[0::2]` are its tokens)."""

    lang: str
    pieces: tuple[str, ...]

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    @property
    def words(self) -> list[int]:
        """The indices in `pieces` of the tokens an edit may replace: real words."""
        word = _WORD[self.lang]
        return [i for i in range(0, len(self.pieces), 2) if word.fullmatch(self.pieces[i])]


@functools.cache
def _pieces(lang: str) -> tuple[str, ...]:
    """The corpus's text of one language split into separator, token, separator, ... token, separator."""
    return tuple(_TOKEN.split(corpus.text(lang)))


def cut(lang: str, count: int, low: int, high: int, rng: random.Random) -> list[Article]:
    """`count` articles of `low`..`high` consecutive tokens of the corpus's real text in `lang`.

    Raises:
        RuntimeError: the library's tokenizer does not count an article as cut (a bug of this module).
    """
    pieces = _pieces(lang)
    tokens = len(pieces) // 2
    out: list[Article] = []
    while len(out) < count:
        size = rng.randint(low, high)
        start = rng.randrange(0, tokens - size)
        article = Article(lang, pieces[2 * start + 1 : 2 * (start + size)])
        if not article.words:
            continue
        found = len(tokenize(article.text))
        if found != size:
            raise RuntimeError(f"{size} tokens cut, the tokenizer counts {found}: {article.text[:80]!r}")
        out.append(article)
    return out


def vocabulary(articles: list[Article]) -> list[str]:
    """The words of a set of articles, lower-cased, in a fixed order: what an edit puts in."""
    return sorted({a.pieces[i].lower() for a in articles for i in a.words})


def edit(article: Article, vocab: list[str], rng: random.Random, count: int = 1) -> str:
    """The article's text with `count` different words replaced, each by another word of `vocab`.

    Raises:
        ValueError: `vocab` has fewer than two words (none could differ from every word).
    """
    if len(vocab) < 2:
        raise ValueError(f"a vocabulary of {len(vocab)} word(s) cannot replace a word by another")
    pieces = list(article.pieces)
    for i in rng.sample(article.words, count):
        new = rng.choice(vocab)
        while new == pieces[i].lower():
            new = rng.choice(vocab)
        pieces[i] = new
    return "".join(pieces)
