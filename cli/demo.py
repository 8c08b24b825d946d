"""`demo`: load the bundled sample of real documents and show the near-duplicates it holds (`make demo`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from simhash_redis import SimhashIndex
from simhash_redis.store import validate_name
from simhash_redis.tools import demo as demo_job

from .common import CLI_ASKING, fail, registrar, settings

__all__ = ["demo", "register"]


def demo(
    ctx: typer.Context,
    sample: Annotated[
        Path | None,
        typer.Option(
            "--sample",
            exists=True,
            dir_okay=False,
            help='JSON Lines file (gzipped or not) of {"id", "text"} objects to use instead of the '
            "bundled sample.",
        ),
    ] = None,
    max_groups: Annotated[int, typer.Option("--groups", min=0, help="Groups to list at most.")] = 8,
    max_examples: Annotated[
        int, typer.Option("--examples", min=0, help="Near-duplicate pairs to show the differences of.")
    ] = 3,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace", help=f"Allow dropping an existing index not named {demo_job.DEMO_INDEX!r}."
        ),
    ] = False,
) -> None:
    """Load the bundled sample of real documents into the index 'demo' and show the near-duplicates found.

    The sample holds licence texts (many MIT, BSD and Apache copies with other copyright lines) and
    successive releases of PyPI projects' READMEs. The index (--index, default 'demo') is dropped first,
    so every run starts clean, and created verified unless --plain is given (as a new index made from
    texts is), with the global options given (--k, --scheme, --layout, ...). With neither --redis-url
    nor SIMHASH_REDIS_URL, the embedded server is started (or reused). The last line is
    'near-duplicate groups found: N'.

    \b
    Examples:
      simhash-redis demo
      simhash-redis --k 5 demo --groups 20
      simhash-redis --plain demo
      simhash-redis --redis-url redis://localhost:6379/0 demo

    \f
    Args:
        ctx: the command's context (global settings).
        sample: a JSON Lines file to use instead of the bundled sample.
        max_groups: groups to list at most.
        max_examples: pairs whose differences are shown.
        replace: allow dropping an existing index not named 'demo'.

    Raises:
        typer.Exit: another index of that name exists and --replace is not given.
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    started = time.perf_counter()
    state = settings(ctx)
    name = validate_name(demo_job.DEMO_INDEX if state.index is None else state.index, "--index")
    docs = demo_job.read_sample(sample)
    url = state.url()
    where = state.shown_url() if state.redis_url else f"embedded server {url}"
    if not state.redis_url:
        from simhash_redis.tools.server import EmbeddedServer

        where += f" (data in {EmbeddedServer().data_dir})"
    client = state.client()
    try:
        if name != demo_job.DEMO_INDEX and not replace and SimhashIndex.exists(client, name):
            raise fail(
                f"the demo drops its index first, and index {name!r} exists: pass --replace to drop it, "
                f"or leave out --index to use {demo_job.DEMO_INDEX!r}"
            )
        index = demo_job.fresh_index(
            client,
            name,
            verified=state.asked_mode(),
            threshold=state.threshold,
            band_buckets=state.band_buckets,
            asking=CLI_ASKING,
            **state.configuration(),
        )
        report = demo_job.run(index, docs)
        lines = demo_job.report_lines(
            report,
            index=index,
            where=where,
            elapsed=time.perf_counter() - started,
            max_groups=max_groups,
            max_examples=max_examples,
        )
    finally:
        client.close()
    for line in lines:
        typer.echo(line)


#: Adds this module's commands to the app.
register = registrar({"demo": demo})
