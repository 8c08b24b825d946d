"""`verify`: check an index's internal consistency, and optionally repair it."""

from __future__ import annotations

from typing import Annotated

import typer

from simhash_redis.index.consistency import NO_SKETCH, WRONG_TYPE

from .common import ExitCode, echo_json, fail, plural, registrar, settings

__all__ = ["register", "verify"]


def verify(
    ctx: typer.Context,
    repair: Annotated[
        bool,
        typer.Option("--repair", help="Fix what is found, following the id map, then check again."),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check that the id map, the fingerprint map, the tables and the counts of an index agree.

    Exits 0 when the index is consistent (after --repair: when it is consistent now), 1 when problems
    remain. On a standalone server the maps, tables, counts and sketches may be checked and repaired
    beside writers; for verified mode's documents without a sketch and bands, a retention window's
    expiries and a cluster's index, run it while no worker writes (a write in flight can look like a
    problem).
    A crash of the server (kill -9, power loss) cannot half-write a document, so verify after a crash
    should find nothing; --repair is for damage from outside (a partial restore, a hand edit).

    \b
    Examples:
      simhash-redis --index news verify
      simhash-redis --index news verify --repair --json

    \f
    Args:
        ctx: the command's context (global settings).
        repair: fix what is found, then check again.
        json_out: print the report as JSON.

    Raises:
        typer.Exit: 1, problems remain.
        SimhashRedisError: passed on, for the app to print and turn into an exit code.
    """
    index = settings(ctx).open_index(create=False)
    report = index.verify(repair=repair)
    after = index.verify() if repair and not report.ok else report
    if json_out:
        result = report.as_dict()
        if repair:
            result["ok_after_repair"] = after.ok
        echo_json(result)
    else:
        if report.wrong_type:  # nothing else was checked: say so rather than print counts of nothing
            typer.echo(
                f"index {index.name!r}: {plural(len(report.wrong_type), 'key')} of the wrong type "
                "(the rest is checked once they are deleted)"
            )
        else:
            state = "consistent" if report.ok else plural(sum(report.problems.values()), "problem")
            typer.echo(
                f"index {index.name!r}: {plural(report.docs, 'document')}, "
                f"{plural(report.fingerprints, 'fingerprint')}: {state}"
            )
        for kind, count in sorted(report.problems.items()):
            typer.echo(f"  {kind}: {count:,}")
        for key in report.wrong_type:  # every one: each must be deleted by hand
            typer.echo(f"    {key}")
        for example in report.examples if not report.wrong_type else ():
            typer.echo(f"    e.g. {example}")
        if repair and not report.ok:
            typer.echo("repaired: the index is consistent now" if after.ok else "repaired; problems remain")
    if not after.ok:
        raise fail(
            f"index {index.name!r} is inconsistent: {_hint(index.name, after.problems, repair)}",
            ExitCode.ERROR,
        )


def _hint(name: str, problems: dict[str, int], repaired: bool) -> str:
    """What to do about the problems left: keys of the wrong type by hand first, then a repair; documents
    without a sketch alone, writing them again."""
    repair = f"simhash-redis --index {name} verify --repair (while no worker writes to the index)"
    if WRONG_TYPE in problems:  # no repair can help before they are gone, so none is suggested alone
        return f"delete the keys of the wrong type listed above (redis-cli DEL KEY), then run: {repair}"
    if set(problems) == {NO_SKETCH}:  # nor with them, but the same writes again (load, add) do
        return "add the documents without a sketch again with their texts (the load or add that stored them)"
    return f"run again: {repair}" if repaired else f"run: {repair}"


#: Adds this module's commands to the app.
register = registrar({"verify": verify})
