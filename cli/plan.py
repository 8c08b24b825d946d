"""`simhash-redis plan`: which table layout to use for N stored fingerprints."""

from __future__ import annotations

import json

import typer

from simhash_redis import defaults
from simhash_redis.errors import InvalidArgument
from simhash_redis.links import doc_url
from simhash_redis.tools import planner

from .common import registrar

__all__ = ["format_bytes", "plan", "register", "render"]

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(value: float) -> str:
    """A byte count with a binary unit, e.g. '1.5 GiB'.

    Args:
        value: bytes.
    """
    unit = 0
    while abs(value) >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{value:.0f} {_UNITS[unit]}" if unit == 0 else f"{value:.1f} {_UNITS[unit]}"


def _count(value: float) -> str:
    # Candidates span 1e-6 .. 1e9: fixed decimals would print 0.0 or overflow the column.
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def render(plans: list[planner.LayoutPlan], n: float, budget: float) -> str:
    """The plans as a plain-text table with the recommendation (`*`) and the refused layouts (`x`) marked.

    Args:
        plans: the planner's rows.
        n: the number of fingerprints they were rated for.
        budget: the candidate budget used for the recommendation.
    """
    headers = ("", "layout", "tables", "key bits", "blocks", "cand/query", "distinct", "memory", "B/fp")
    rows = [
        (
            "*" if p.recommended else "x" if p.refused else "",
            p.label,
            str(p.tables),
            p.key_bits_text,
            ",".join(map(str, p.layout.blocks)),
            _count(p.candidates),
            _count(p.distinct_candidates),
            format_bytes(p.memory_bytes),
            f"{p.memory_bytes / n:.0f}" if n else "-",
        )
        for p in plans
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    left = {0, 1, 4}

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [line(headers), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)]
    best = next((p for p in plans if p.recommended), None)
    out.append("")
    if any(p.refused for p in plans):
        out.append(
            f"x refused: a query would read back {defaults.MAX_READ_FRACTION:.0%} or more of the index "
            "(every fingerprint sharing a short table key), so a new index of it is refused."
        )
    if best is None:
        fewest = min(plans, key=lambda p: p.layout.read_fraction)
        share = fewest.layout.read_fraction
        read = f"{share:.0%} of the index" if share < 1 else f"{share:,.0f} times what the index holds"
        out.append(
            f"No layout recommended for k = {fewest.layout.k}: a query of the best listed one reads back "
            f"{read}. Choose a smaller k, or the verified mode (--verified, at the default k) for "
            f"near-duplicates as people mean them ({doc_url('quality.md')})."
        )
    elif best.candidates <= budget:
        why = f"the fewest tables with at most {budget:g} candidates per query"
    else:
        why = (
            f"no listed layout stays within {budget:g} candidates per query, and this one reads the "
            f"fewest ({_count(best.candidates)}); a smaller k costs far less (for near-duplicates as people "
            "mean them, --verified finds them at the default k with its LSH band tables)"
        )
    if best is not None:
        out.append(
            f"* recommended: {best.label}, {best.layout.describe()}: {why}. A lookup is {best.commands}: "
            "1 round trip, 2 when a match's ids need a command of their own. "
            f"Create it with --k {best.layout.k} --layout {best.label}."
        )
    out.append(
        "Memory is measured Redis used_memory (tables + id/fingerprint maps, short ids) scaled to N; "
        "candidates assume uniformly spread fingerprints."
    )
    return "\n".join(line.rstrip() for line in out)


def plan(
    n: float = typer.Option(..., "--n", help="Expected number of stored fingerprints, e.g. 8e9."),
    k: int = typer.Option(defaults.K, "--k", help="Largest Hamming distance to find."),
    f: int = typer.Option(defaults.F, "--f", help="Fingerprint width in bits: 32, 64 or 128."),
    budget: float = typer.Option(
        planner.DEFAULT_BUDGET, "--budget", help="Most candidates per query for the recommended layout."
    ),
    max_tables: int = typer.Option(
        planner.DEFAULT_MAX_TABLES, "--max-tables", help="List at most this many tables."
    ),
    max_key_bits: int = typer.Option(
        planner.DEFAULT_MAX_KEY_BITS, "--max-key-bits", help="Stop permuted layouts past this key width."
    ),
    id_buckets: int = typer.Option(defaults.ID_BUCKETS, "--id-buckets", help="Buckets of the id map."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for machines."),
) -> None:
    """Compare table layouts for N fingerprints: tables, candidates per query, Redis memory.

    \f
    Args:
        n: expected number of stored fingerprints.
        k: the largest distance to find.
        f: fingerprint width.
        budget: candidates per query the recommendation may read.
        max_tables: most tables a listed layout may have.
        max_key_bits: widest narrowest-key of a listed permuted layout.
        id_buckets: buckets of the id and fingerprint maps.
        as_json: print JSON instead of a table.

    Raises:
        typer.BadParameter: an argument is out of range.
        typer.Exit: code 1 when no listed layout can be recommended (every one is refused).
    """
    try:
        plans = planner.plan(
            f, k, n, budget=budget, max_tables=max_tables, max_key_bits=max_key_bits, id_buckets=id_buckets
        )
    except InvalidArgument as exc:
        raise typer.BadParameter(str(exc)) from None
    best = next((p.label for p in plans if p.recommended), None)
    if as_json:
        payload = {
            "n": n,
            "f": f,
            "k": k,
            "budget": budget,
            "recommended": best,
            "layouts": [p.to_dict() for p in plans],
        }
        typer.echo(json.dumps(payload, indent=2))
    else:
        typer.echo(f"Layouts for N = {n:,.0f} fingerprints, f = {f}, k = {k}\n")
        typer.echo(render(plans, n, budget))
    if best is None:
        raise typer.Exit(1)


#: Adds this module's commands to the app.
register = registrar({"plan": plan})
