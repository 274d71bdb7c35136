"""``dpbundle example``: write a built-in simulated registry (births or persons) and its spec."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from dpbundle.release.data.example_errors import ExampleError  # also importable from here


def cli_example(
    name: Annotated[str, typer.Argument(help="Example to write; one of: births, persons.")],
    out: Annotated[Path, typer.Option("--out", help="CSV file to write.")],
    rows: Annotated[Optional[int], typer.Option("--rows", help="Number of simulated rows (default: births 167000, persons 45000; up to 1,000,000,000, written 250,000 at a time: about 30 bytes a row on disk, a few hundred MB of memory).", show_default=False)] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed of the simulation (same seed, same file; default: births 2014, persons 2023).", show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a SIMULATED example registry (no real person) in the input format of the spec.

    The births example is drawn from a small Bayesian network whose parameters are public
    aggregate figures of the US NVSS 2019 natality data; no row describes a real birth. The
    persons example (employed persons: age, sex, education, marital status, occupation, hours,
    income band, country of birth; spec examples/persons.yaml) is drawn from a chain of
    conditional tables built from approximate published BLS/Census aggregates. Like a real
    registry, each has rows outside the clipping ranges and rows that fail the raw constraints.

    Example:

        dpbundle example births --out births.csv --rows 167000 --seed 2014
        dpbundle example births --out national.csv --rows 50000000
    """
    from dpbundle.release.data.example import EXAMPLES, YEAR, example_defaults, write_example

    if name not in EXAMPLES:
        typer.echo(f"example: unknown example {name!r}; choices: {', '.join(EXAMPLES)}", err=True)
        raise typer.Exit(2)
    try:
        default_rows, default_seed = example_defaults(name)
        seed = default_seed if seed is None else seed
        n = write_example(out, rows=default_rows if rows is None else rows, seed=seed, force=force, name=name)
    except ExampleError as exc:
        typer.echo(f"example: {exc}", err=True)
        raise typer.Exit(2)
    except OSError as exc:
        typer.echo(f"example: {out}: cannot write the file ({exc.strerror or exc}); nothing was written",
                   err=True)
        raise typer.Exit(2)
    if name == "persons":
        typer.echo(f"wrote {n} SIMULATED person records (seed {seed}) to {out}")
    else:
        typer.echo(f"wrote {n} SIMULATED birth records (seed {seed}, year {YEAR}) to {out}")
