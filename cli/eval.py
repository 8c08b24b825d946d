"""`simhash-redis eval`: precision, recall and F1 of fingerprint settings against exact Jaccard truth."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .common import echo_json, registrar
from .options import JsonOut, Quiet

# The evaluation package is imported by this command only, where it runs: every other command would
# pay its import (15 ms) at each start.
if TYPE_CHECKING:
    from simhash_redis.tools.evaluation import Setting

__all__ = ["eval_command", "register"]


def _jieba_settings() -> list[Setting]:
    from simhash_redis.tools.evaluation import jieba_settings

    try:
        return jieba_settings()
    except ImportError:
        raise typer.BadParameter("--jieba needs the jieba package: `pip install jieba`") from None


def _chooser(names: Sequence[str], jieba: bool) -> Callable[[str], list[Setting]]:
    from simhash_redis.tools.evaluation import standard_settings

    extra = _jieba_settings() if jieba else []

    def choose(lang: str) -> list[Setting]:
        found = standard_settings(lang) + (extra if lang == "zh" else [])
        if names:
            unknown = set(names) - {s.name for s in found}
            if unknown:
                known = ", ".join(s.name for s in found)
                raise typer.BadParameter(f"unknown setting(s) {', '.join(sorted(unknown))}; known: {known}")
            found = [s for s in found if s.name in names]
        return found

    return choose


def eval_command(
    corpus: Annotated[
        Path, typer.Argument(help="JSON Lines corpus (optionally .gz): id, text, optional lang.")
    ],
    pairs: Annotated[
        Path | None,
        typer.Option(help="Labelled pairs (JSONL or CSV id_a,id_b[,label]) instead of a Jaccard threshold."),
    ] = None,
    threshold: Annotated[float, typer.Option(help="Near-duplicate = Jaccard of shingle sets >= this.")] = 0.8,
    max_k: Annotated[int, typer.Option(help="Score k = 0..max_k.")] = 8,
    truth_n: Annotated[int, typer.Option(help="Tokens per ground-truth shingle.")] = 3,
    lang: Annotated[list[str] | None, typer.Option(help="Only these language groups (repeatable).")] = None,
    setting: Annotated[
        list[str] | None, typer.Option(help="Only these settings, e.g. shingles-3/tf (repeatable).")
    ] = None,
    k: Annotated[
        list[int] | None, typer.Option("--k", min=0, help="Columns shown, up to --max-k (default: all k).")
    ] = None,
    jieba: Annotated[bool, typer.Option(help="Also score jieba-segmented settings on Chinese.")] = False,
    json_out: JsonOut = False,
    report_file: Annotated[
        Path | None, typer.Option("--report", help="Also write the full report as JSON to this file.")
    ] = None,
    quiet: Quiet = False,
) -> None:
    """Measure how well "distance <= k" finds near-duplicates, per setting and k, against exact truth.

    \f
    Args:
        corpus: the JSON Lines corpus.
        pairs: labelled pairs instead of a Jaccard threshold.
        threshold: the Jaccard threshold of a near-duplicate.
        max_k: scores are given for k = 0..max_k.
        truth_n: tokens per ground-truth shingle.
        lang: only these language groups.
        setting: only these settings.
        k: the k columns shown.
        jieba: also score jieba-segmented settings on Chinese.
        json_out: print the full report as JSON instead of the tables.
        report_file: also write the full report as JSON to this file.
        quiet: no progress messages.

    Raises:
        OSError: the corpus or the pairs cannot be read.
        SimhashRedisError: a malformed record (InputError), a value out of range or a --lang without
            documents (InvalidArgument).
        typer.BadParameter: an unknown setting, --jieba without jieba, or a --k past --max-k.
    """
    from simhash_redis.tools.evaluation import evaluate, format_report, load_corpus, load_pairs

    if k and max(k) > max_k:
        raise typer.BadParameter(f"--k {max(k)} is past --max-k {max_k}: give --max-k {max(k)} too")
    # The command line's handler maps what is raised (docs/cli.md): an unreadable file exits 1, a
    # malformed record 3, a value out of range or a --lang without documents 2.
    report = evaluate(
        load_corpus(corpus),
        _chooser(setting or [], jieba),
        threshold=threshold,
        pairs=load_pairs(pairs) if pairs is not None else None,
        max_k=max_k,
        truth_n=truth_n,
        langs=lang or None,
        progress=None if quiet else (lambda message: typer.echo(message, err=True)),
    )
    if report_file is not None:
        report_file.write_text(json.dumps(report.to_dict(), indent=1))
    if json_out:
        echo_json(report.to_dict())
    else:
        typer.echo(format_report(report, ks=k or None), nl=False)


#: Adds this module's commands to the app.
register = registrar({"eval": eval_command})
