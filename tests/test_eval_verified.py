"""How `benchmarks.eval_verified` scores the pairs an index finds in the evaluation corpus, and the
articles and one-word edits it queries (`benchmarks.articles`)."""

from __future__ import annotations

import random
import re

import pytest

from benchmarks import articles
from benchmarks.eval_verified import pair_scores
from simhash_redis.fingerprinting.tokens import tokenize
from simhash_redis.tools.evaluation import Doc

_ARTICLE = "the council approved the new budget on tuesday after a long debate about school funding"


def _docs() -> list[Doc]:
    return [
        Doc("0", "    T", "en"),
        Doc("1", "\xa0\xa0\xa0 T", "en"),
        Doc("2", "    t", "zh"),  # the same tokens as 0 and 1: Jaccard 1, across the corpus's languages
        Doc("3", _ARTICLE, "en"),
        Doc("4", _ARTICLE.replace("tuesday", "monday"), "en"),  # Jaccard 10 / 16: not a near-duplicate
        Doc("5", "春眠不觉晓处处闻啼鸟夜来风雨声花落知多少", "zh"),
        Doc("6", "春眠不觉晓处处闻啼鸟夜来风雨声花落知多少", "zh"),
    ]


def test_a_pair_across_languages_is_scored_once_by_its_jaccard() -> None:
    # Each query finds every document of its tokens (itself too, never a pair), and 3 finds 4.
    found = [
        ["0", "1", "2"],
        ["0", "1", "2"],
        ["0", "1", "2"],
        ["3", "4"],
        ["4", "3"],
        ["5", "6"],
        ["6", "5"],
    ]
    scores = pair_scores(_docs(), {"way": found})["way"]
    assert scores["en"] == [1, 1, 0]  # 0-1 found; 3-4 found and below 0.8
    assert scores["zh"] == [1, 0, 0]  # 5-6; 0-2 and 1-2 are no pair of one language
    assert scores["all"] == [4, 1, 0]  # with 0-2 and 1-2, near-duplicates whatever their labels


def test_a_pair_across_languages_missed_is_a_false_negative_overall() -> None:
    found = [["0", "1"], ["0", "1"], ["2"], ["3"], ["4"], ["5", "6"], ["6", "5"]]
    scores = pair_scores(_docs(), {"way": found})["way"]
    assert scores["en"] == [1, 0, 0]
    assert scores["zh"] == [1, 0, 0]
    assert scores["all"] == [2, 0, 2]


@pytest.mark.parametrize(("lang", "low", "high"), [("en", 250, 400), ("zh", 500, 800), ("en", 40, 100)])
def test_an_article_counts_the_library_s_tokens_and_an_edit_replaces_one_word(
    lang: str, low: int, high: int
) -> None:
    rng = random.Random(7)
    cut = articles.cut(lang, 40, low, high, rng)
    vocab = articles.vocabulary(cut)
    word = re.compile("[a-z]+" if lang == "en" else "[\u4e00-\u9fff]")
    for article in cut:
        tokens = tokenize(article.text)
        assert low <= len(tokens) <= high
        for _ in range(3):
            edited = tokenize(articles.edit(article, vocab, rng))
            assert len(edited) == len(tokens)
            changed = [(a, b) for a, b in zip(tokens, edited, strict=True) if a != b]
            assert len(changed) == 1  # one token replaced, by a different one
            assert all(word.fullmatch(t) for t in changed[0])  # real words, not punctuation or markup


def test_a_run_between_spaces_was_not_a_word() -> None:
    # What the benchmark counted before: "|" is no token of the library's, "seahorse(1)" is two.
    assert tokenize("see | seahorse(1)") == ["see", "seahorse", "1"]
    article = articles.Article("en", ("see", " | ", "seahorse", "(", "1", ")\n", "now"))
    assert [article.pieces[i] for i in article.words] == ["see", "seahorse", "now"]


def test_an_edit_needs_a_word_to_put_in_that_differs() -> None:
    article = articles.Article("en", ("same", " ", "same"))
    with pytest.raises(ValueError, match="cannot replace a word by another"):
        articles.edit(article, articles.vocabulary([article]), random.Random(1))
