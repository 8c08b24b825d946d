"""The fingerprint settings an evaluation compares: the library's schemes, on its own tokens or on others'."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ...errors import InvalidArgument
from ...fingerprinting import Scheme

__all__ = ["Setting", "jieba_settings", "scheme_named", "scheme_setting", "standard_settings"]

# Small function-word lists for the "with stopwords" settings; Chinese in single characters, as the
# library makes each Han character a token.
_ENGLISH_WORDS = (
    "a about above after again all also am an and any are as at be because been before being below "
    "between both but by can could did do does doing down during each few for from further had has have "
    "having he her here hers him his how i if in into is it its itself just me more most my no nor not "
    "now of off on once only or other our ours out over own same she should so some such than that the "
    "their theirs them then there these they this those through to too under until up very was we were "
    "what when where which while who whom why will with would you your yours"
)
_ENGLISH = tuple(_ENGLISH_WORDS.split())
_CHINESE_WORDS = "的 了 是 在 和 与 及 或 也 就 都 而 之 其 这 那 个 为 以 于 被 把 对 从 中 上 下"
_CHINESE = tuple(_CHINESE_WORDS.split())


@dataclasses.dataclass(frozen=True)
class Setting:
    """A way to fingerprint texts: a name, a batch function texts -> fingerprints, and its width."""

    name: str
    fingerprint_many: Callable[[Sequence[str]], Sequence[int]]
    f: int = 64


def scheme_setting(name: str, scheme: Scheme, tokenizer: Callable[[str], list[str]] | None = None) -> Setting:
    """A setting named `name` fingerprinting with a library scheme, on `tokenizer`'s tokens if given."""

    def run(texts: Sequence[str]) -> list[int]:
        return scheme.fingerprint_many(texts if tokenizer is None else [tokenizer(text) for text in texts])

    return Setting(name, run, scheme.f)


def scheme_named(label: str, f: int = 64) -> Scheme:
    """The scheme of f bits an `eval` setting names: "shingles-N/W", "words/W" or "chars-N/W" (W: tf or
    binary; settings with stopwords or jieba excepted); InvalidArgument for any other label."""
    kind, _, weighting = label.partition("/")
    features, _, n_text = kind.partition("-")
    n = 1
    if features in ("shingles", "chars") and n_text.isascii() and n_text.isdigit():
        n = int(n_text)
    elif not (features == "words" and not n_text):
        raise InvalidArgument(
            f"scheme must be 'shingles-N/W', 'words/W' or 'chars-N/W' (W: tf or binary), as eval names "
            f"its settings; got {label!r}"
        )
    return Scheme(features, n, f, weighting)


def standard_settings(lang: str, f: int = 64) -> list[Setting]:
    """The settings compared for one language ("zh" uses Chinese stopwords, any other English ones): chars
    n=2..5, words and shingles n=2..4, each tf and binary, plus words and 3-shingles without stopwords."""
    stop = _CHINESE if lang == "zh" else _ENGLISH
    kinds = ["shingles-2", "shingles-3", "shingles-4", "words", "chars-2", "chars-3", "chars-4", "chars-5"]
    labels = [f"{kind}/{weighting}" for weighting in ("tf", "binary") for kind in kinds]
    out = [scheme_setting(label, scheme_named(label, f)) for label in labels]
    out.append(scheme_setting("shingles-3/tf+stop", Scheme("shingles", 3, f, "tf", stopwords=stop)))
    out.append(scheme_setting("words/tf+stop", Scheme("words", 1, f, "tf", stopwords=stop)))
    return out


def jieba_settings() -> list[Setting]:
    """jieba's words and word 2- and 3-shingles (tf), passed to the library as tokens (ImportError
    without jieba)."""
    import jieba  # type: ignore[import-not-found, import-untyped, unused-ignore]

    jieba.setLogLevel(60)

    def cut(text: str) -> list[str]:
        # Given tokens are hashed as they are: drop jieba's space and punctuation tokens.
        return [t for t in jieba.lcut(text) if any(c.isalnum() for c in t)]

    return [
        scheme_setting("jieba-words/tf", Scheme("words", 1), cut),
        scheme_setting("jieba-shingles-2/tf", Scheme("shingles", 2), cut),
        scheme_setting("jieba-shingles-3/tf", Scheme("shingles", 3), cut),
    ]
