"""``dpbundle selftest``: the command line of the record/replay self-audit
(:mod:`dpbundle.release.selftest`, imported when the command runs)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

__all__ = ["DEFAULT_PAIRS", "cli_selftest"]

DEFAULT_PAIRS = 24


def cli_selftest(
    spec: Annotated[Optional[Path], typer.Argument(help="Release spec (YAML or JSON).", show_default=False)] = None,
    data: Annotated[Optional[Path], typer.Argument(help="PUBLIC or simulated data in the spec's input format (CSV or CSV.gz); never the confidential registry.", show_default=False)] = None,
    example: Annotated[Optional[str], typer.Option("--example", help="Use a built-in example (spec, its narrowed list and a simulated registry) instead of SPEC and DATA: 'births' or 'persons'.", show_default=False)] = None,
    example_rows: Annotated[int, typer.Option("--example-rows", help="Rows of the simulated registry for --example.", min=100)] = 3000,
    pairs: Annotated[int, typer.Option("--pairs", help="Neighbouring datasets per configuration (worst cases first: domain edges, moves across a raw constraint, then random records).", min=1)] = DEFAULT_PAIRS,
    configs: Annotated[Optional[Path], typer.Option("--configs", help="Draw the configurations from this list (narrowed.yaml from `dpbundle sweep`); default: the example's narrowed list, else the spec's whole space.", show_default=False)] = None,
    draws: Annotated[int, typer.Option("--draws", help="Configurations drawn from the list or the space.", min=0)] = 2,
    drawn_only: Annotated[bool, typer.Option("--drawn-only", help="Test only the drawn configurations. Default: also one configuration of every generator variant of the spec's space (type, flavour and other non-numeric settings), so that every generator's DP calls are covered.")] = False,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed of the neighbour and configuration draws (the DP noise is never seeded). Default: random, printed.", min=0, show_default=False)] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Also write the machine-readable report (every paired call) to this file.", show_default=False)] = None,
) -> None:
    """Self-audit every declared sensitivity by record and replay, on public data.

    Records one attempt per configuration on DATA, then runs the same attempt (same
    configuration, same noisy outputs, same post-processing seeds) on neighbouring datasets
    (one record changed: values at the domain's edges, a record moved across a raw
    constraint, random records), and compares every DP call of the two runs: the distance of
    their true values (L1, absolute, or L-infinity for report-noisy-max) against the declared
    sensitivity, and the sequence of calls (data-dependent control flow). Spends no budget and
    touches no ledger. It is a test on these data, not a proof of the guarantee: see
    docs/selftest.md for what it can and cannot find.

    Exit codes: 0 no finding; 1 a distance above a declared sensitivity, a sensitivity that
    differs between neighbours, a control-flow difference or an error; 2 unusable input.

    Examples:

        dpbundle selftest --example births
        dpbundle selftest --example persons --pairs 48 --json selftest.json
        dpbundle selftest spec.yaml public.csv --configs sweep/narrowed.yaml
    """
    import json
    import secrets

    import numpy as np
    from rich.console import Console
    from rich.markup import escape

    from dpbundle.release.cli.common import EXIT_FAILED, EXIT_INPUT, EXIT_OK
    from dpbundle.release.selftest import (_InputProblem, _inputs, _jsonable, _listed, _prepare_public,
                                           choose_configs, render, run_selftest)

    console, err = Console(), Console(stderr=True)
    seed = secrets.randbits(63) if seed is None else seed
    try:
        with _inputs(spec, data, example, example_rows) as (s, d, narrowed):
            prepared = _prepare_public(s, d)
            listed = _listed(s, configs or narrowed)
            chosen, skipped = choose_configs(s, listed, draws, not drawn_only,
                                             np.random.Generator(np.random.PCG64([seed, 1])))
            if not chosen:
                raise _InputProblem("no configuration to test (every chosen generator is unavailable)")
            report = run_selftest(s, prepared, chosen, pairs, seed)
            report.not_covered[:0] = skipped
    except _InputProblem as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_INPUT)
    render(report, console)
    if json_out is not None:
        try:
            json_out.write_text(json.dumps(report.to_json(), indent=1, default=_jsonable) + "\n",
                                "utf-8")
        except OSError as exc:
            err.print(f"[bold red]error:[/] --json {escape(str(json_out))}: {escape(str(exc))}",
                      highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_INPUT)
    raise typer.Exit(EXIT_OK if report.passed else EXIT_FAILED)

