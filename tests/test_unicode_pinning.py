"""Scheme 2 pins Unicode 15.1: the same text gives the same fingerprint on every supported Python.

The golden values below were computed once; CI checks them on Python 3.10 and 3.13 (Unicode 13.0 and
15.1; 3.11's 14.0 and 3.12's 15.0 on request), with both engines. The texts hold characters assigned in
each of those Unicode versions (which the interpreter's own data would fingerprint differently from
one Python to the next), unassigned code points, and text that composes under NFKC.
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np
import numpy.typing as npt
import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

import simhash_redis
from simhash_redis.fingerprinting import tokens
from simhash_redis.fingerprinting.minhash import MinHasher
from simhash_redis.fingerprinting.normalize import PINNED, Normalizer
from simhash_redis.fingerprinting.scheme import Scheme
from simhash_redis.fingerprinting.ucd import PinnedUnicode

TEXTS = [
    "The quick brown fox jumps over the lazy dog near the river bank",
    "中文新闻报道今天发布了新的消息",
    "中文新闻 \U00031350\U00031351\U00031352 报道今天发布",
    "古籍 \U0002ebf0\U0002ebf1\U0002ebf2 文字 研究",
    "Balinese \u1b4c\u1b7f script \u1b4c sample",
    "Glagolitic \u2c2f \u2c5f old Polish \ua7c0 \ua7c1 letters",
    "modifier \U0001e030\U0001e031 letters \U0001e030 here",
    "Kawi \U00011f00\U00011f01\U00011f04 text \U00011f41",
    "Toto \U0001e290\U0001e291\U0001e292 words",
    "blueberry \U0001fad0 \u9ffc \U00030000 thirteen",
    "unassigned \u0378 \U00050000 \U000e01f0 \U0010ffff x",
    "Vietnamese Tiê\u0301ng Vie\u0323\u0302t 한\u1161 e\u0301\u0301",
]
SCHEMES = [
    Scheme(),
    Scheme(features="words"),
    Scheme(features="chars", n=2),
    Scheme(f=128, seed=7),
    Scheme(f=32, stopwords=["letters"]),
]
GOLDEN = [
    [
        12907551157314174372,
        13817704907920797753,
        16952628317348651315,
        3299799668071348246,
        17833685034595434156,
        5623483973784772705,
        14453579253848309288,
        5570683762057151217,
        17637799906825683657,
        576698258967052368,
        9908605398862794587,
        9376631382780967306,
    ],
    [
        14632339103429147635,
        517257363643878008,
        6136343352212440632,
        14852339487177371763,
        9670884338231158548,
        6534890267424641572,
        16901605364954080325,
        15523042313757598729,
        10582982926587552668,
        1938440100757946434,
        16744458610859477264,
        4856183406025048082,
    ],
    [
        6409950496289677475,
        6565679122070077485,
        4847552016225779745,
        12158272579308878453,
        15647329773256753864,
        17576904083854457623,
        9034642686178015899,
        1960421126872519187,
        14718983171367517327,
        12720640011333032504,
        1366939105745067019,
        8832585138992489002,
    ],
    [
        106611839302009619067366984063612665665,
        6170012655366328148585025147258629182,
        191513678093853961152161323585120362805,
        338367650936357615952601327971052590291,
        308948593937504397712030243181817992862,
        131671487272559969839098277772327651462,
        158648474802810771671029958434216075588,
        245556197273280864770869736812955069958,
        224218067194223358046516033446937923134,
        155208140785530942517955531133100769285,
        127073558510808210405581507173504735554,
        136301184958930621239378541975935104,
    ],
    [
        4091854244,
        2278191161,
        3234554163,
        2774022166,
        1396883116,
        965423209,
        2126336,
        3916694257,
        4056105673,
        3562094672,
        3132886875,
        678459786,
    ],
]
GOLDEN_SKETCHES = [
    "20cc69ea86cf99473d6741d17fcddfc0",
    "c1203a9577bf2a3b664d1656b442a4b7",
    "37592d3e77bfad98661ff056850602b7",
    "4ba2c81b0d07a104cb769c42305e8f54",
    "8dd9edcc4466e6f79cc15e866cda8c39",
    "8d0123153e8b0544e9f5752e49db45bc",
    "a9a917ebb2c362c4c7c7218340250e50",
    "a47d61f1e06ea68a4c218744b657876a",
    "c3412381bbdae8a48da7ae31e88543a7",
    "f3f84640465810cb92c03df34ed3fd49",
    "e1a0bdeb5fae691aa75f407a5d8d1ddb",
    "e3e567aa8e5a8364a4445dfcb75c66bc",
]
DATA = PinnedUnicode()


@pytest.mark.parametrize("index", range(len(SCHEMES)))
def test_fingerprints_are_the_golden_ones(index: int) -> None:
    scheme = SCHEMES[index]
    assert [simhash_redis.fingerprint(text, scheme=scheme) for text in TEXTS] == GOLDEN[index]
    assert simhash_redis.fingerprint_many(TEXTS, scheme=scheme) == GOLDEN[index]


def test_sketches_are_the_golden_ones() -> None:
    assert [MinHasher(num_perm=16).sketch(text).hex() for text in TEXTS] == GOLDEN_SKETCHES


def test_the_data_file_agrees_with_this_interpreter() -> None:
    here = unicodedata.unidata_version
    if here != DATA._data["version"] and here not in DATA._data["unassigned_in"]:
        pytest.skip(f"Unicode {here} is not among the versions the data file records")
    missing = {cp for lo, hi in DATA._data["unassigned_in"].get(here, []) for cp in range(lo, hi + 1)}
    for cp in range(0x110000):
        char = chr(cp)
        assigned = DATA.kind(cp) != "U" and cp not in missing
        assert (unicodedata.category(char) != "Cn") == assigned, hex(cp)
        if assigned:
            # Assigned in both: the stability rules the fast paths rely on.
            assert char.isspace() == DATA.isspace(cp), hex(cp)
            assert unicodedata.combining(char) == DATA._combining.get(cp, 0), hex(cp)
            if not 0xD800 <= cp <= 0xDFFF:
                assert char.casefold() == DATA._fold.get(cp, char), hex(cp)


def test_the_bmp_images_read_at_once_are_each_code_points_own() -> None:
    # The tables behind the compiled core come from one normalisation of every BMP code point at once,
    # cut at U+0000: each image must be the code point's image alone, as `nfkc_char` gives it.
    images, folds = DATA.bmp_images()
    special = DATA.special_bmp
    for cp in range(0x10000):
        if 0xD800 <= cp <= 0xDFFF:
            image = fold = chr(cp)
        elif special[cp]:
            image, fold = DATA.nfkc_char(cp), DATA._fold.get(cp, chr(cp))
        else:
            image, fold = DATA.nfkc_char(cp), chr(cp).casefold()
        assert (images.first[cp], images.length[cp]) == (ord(image[0]), len(image)), hex(cp)
        assert (folds.first[cp], folds.length[cp]) == (ord(fold[0]), len(fold)), hex(cp)
    assert DATA.bmp_spaces.tolist() == [DATA.isspace(cp) for cp in range(0x10000)]


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(exclude_categories=["Cs"]), max_size=30))
def test_own_nfkc_is_the_interpreters_where_both_assign(text: str) -> None:
    if not DATA.is_special(text):
        assert DATA._nfkc(text) == unicodedata.normalize("NFKC", text)
        assert DATA.is_nfkc(text) == unicodedata.is_normalized("NFKC", text)


def test_tokens_of_recent_characters() -> None:
    assert tokens.tokenize("\u2c2f \ua7c0") == ["\u2c5f", "\ua7c1"]
    assert tokens.tokenize("x\U0001e030y") == ["x\u0430y"]
    assert tokens.tokenize("\U00031350\U0002ebf0") == ["\U00031350", "\U0002ebf0"]


def test_an_index_whose_meta_names_scheme_1_is_refused(redis_client: redis.Redis) -> None:
    # Scheme 1 (the interpreter's Unicode data) was never released: a meta naming it is no index of ours.
    simhash_redis.SimhashIndex(redis_client, "pin-old", k=3).add("a", TEXTS[2])
    old = Scheme().to_meta().replace("simhash-redis/2;", "simhash-redis/1;").replace("unicode=15.1;", "")
    redis_client.hset(b"simhash:pin-old:meta", "scheme", old)
    with pytest.raises(simhash_redis.IndexCorrupted, match="scheme version 1 is not supported"):
        simhash_redis.SimhashIndex(redis_client, "pin-old")


class _MoreSpecial(Normalizer):
    """Pinned data that also answers by its own rules for some common code points, to exercise the cuts."""

    @functools.cached_property
    def special_table(self) -> npt.NDArray[np.bool_]:
        table = super().special_table.copy()
        for cp in (
            *range(ord("a"), ord("f")),
            0x00E9,
            0x0301,
            0x4E2D,
            0xAC00,
            0x1161,
            0x3099,
            0xFF9E,
            0x2460,
        ):
            table[cp] = True
        return table


_MIXED = _MoreSpecial()
_MIXED_TEXT = st.text(
    st.one_of(
        st.sampled_from(
            [
                *"abcdefxyz \u00e9\u0301\u0308\u4e2d\u6587\uac00\u1100\u1161\u11a8",
                *"\u30ab\u3099\uff76\uff9e\u2460\u2026\n.",
                "\U00031350",
            ]
        ),
        st.characters(exclude_categories=["Cs"]),
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(_MIXED_TEXT)
def test_texts_cut_around_special_code_points_normalise_as_a_whole(text: str) -> None:
    assert _MIXED.normalize(text) == _MIXED.own_normalize(text)


def test_a_rare_character_costs_only_its_own_stretch() -> None:
    text = "中文新闻报道。" * 200 + "\U00031350" + "今天发布了新的消息。" * 200
    assert _MIXED.normalize(text) == _MIXED.own_normalize(text)
    assert PINNED.normalize(text) == PINNED.own_normalize(text)
