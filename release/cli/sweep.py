"""``dpbundle sweep``: the command line of the feasibility sweep.

The command builds a :class:`~dpbundle.release.sweep.request.SweepRequest` from its options,
runs it (:func:`dpbundle.release.sweep.run.run_sweep`) and prints the result: the acceptance
table, the narrowed list's expected private run, or, when no configuration reached the cut-off,
the criteria that fail most. Exit codes: 0 a narrowed list was written, 1 none, 2 unusable
input, 130 interrupted (the finished runs are kept for resume).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

if TYPE_CHECKING:  # the sweep's modules are imported when the command runs
    from dpbundle.release.sweep.request import SweepRequest, SweepResult

__all__ = ["cli_sweep"]


def _iters_text(lo: float | None, mid: float | None, hi: float | None) -> str:
    """'2.6 [1.4,7.1]'; an unbounded end prints as 'inf'."""
    f = lambda x: "inf" if x is None else f"{x:.1f}"  # noqa: E731
    return "" if mid is None else f"{f(mid)} [{f(lo)},{f(hi)}]"


def _print_result(res: SweepResult, console) -> None:
    """The session's speed, the acceptance table, and what the summary says."""
    from dpbundle.release.sweep.store import RUNS

    if res.new_runs:
        console.print(f"{res.new_runs} run(s) in {res.seconds:.1f} s on {res.backend} "
                      f"({res.workers} worker(s)): [bold]{res.runs_per_minute:.1f} runs/min[/]")
    else:
        console.print("Nothing to run: every configuration of this sweep is already decided or at its cap "
                      f"(runs in {res.out / RUNS}; resumed).")
    console.print(_acceptance_table(res.summary))
    _print_notes(res.summary, console)
    for key, path in res.files.items():
        if key in ("narrowed", "summary_csv", "report_html", "report_pdf") and Path(path).exists():
            console.print(f"  {key}: {path}")


def _acceptance_table(s: dict):
    """The 15 configurations with the highest acceptance: interval, decision, expected iterations."""
    from rich import box
    from rich.table import Table

    from dpbundle.release.sweep.execute import UNDECIDED

    ad = s["adaptive"]
    table = Table(title=f"Acceptance on public data ({s['configurations_swept']} configuration(s), "
                        f"{ad['first_batch']} to {ad['max_reps']} rep(s) each, cut-off {s['min_acceptance']:g})")
    table.box, table.pad_edge = box.SIMPLE_HEAD, False
    table.add_column("configuration", no_wrap=True)
    table.add_column("acceptance\npassed/runs\n[Wilson 95%]", justify="right", no_wrap=True)
    table.add_column("decision", no_wrap=True)
    table.add_column("expected\niterations\n[95%]", justify="right", no_wrap=True)
    table.add_column("listed", no_wrap=True)
    rows = sorted(s["configurations"], key=lambda r: -(r["acceptance"] or 0))
    for r in rows[:15]:
        acc = f"{r['accepted']}/{r['runs']}" + ("" if r["acceptance"] is None
                                                else f" [{r['wilson_low']:.2f},{r['wilson_high']:.2f}]")
        table.add_row(r["config_id"], acc,
                      r["decision"] if r["decision"] != UNDECIDED else "[yellow]undecided[/]",
                      _iters_text(r["expected_iterations_low"], r["expected_iterations"], r["expected_iterations_high"]),
                      "yes" if r["narrowed"] else "")
    if len(rows) > 15:
        table.caption = f"... {len(rows) - 15} more in summary.csv"
    return table


def _print_notes(s: dict, console) -> None:
    """The narrowed list's expected private run, the undecided configurations, why nothing
    passes (if so), and the runs that failed with an error."""
    ad, nar = s["adaptive"], s["narrowed"]
    if nar["count"]:
        iters = _iters_text(nar["expected_private_iterations_low"], nar["expected_private_iterations"],
                            nar["expected_private_iterations_high"])
        console.print(f"Narrowed: {nar['count']} configuration(s) with acceptance >= {s['min_acceptance']:g}; "
                      f"expected private iterations {iters}, "
                      f"expected run time {nar['expected_private_seconds']:.1f} s "
                      f"(median iteration {nar['median_iteration_seconds']:.2f} s on the public data).")
    if ad["undecided"]:
        console.print(f"[yellow]{ad['undecided']} configuration(s) undecided[/]: their Wilson interval still "
                      f"straddles {s['min_acceptance']:g} after the runs they had (cap --max-reps {ad['max_reps']}); "
                      f"decided by the point estimate ({nar['undecided']} of them narrowed). Resume with a larger "
                      "--max-reps to decide them.")
    if not nar["count"]:
        _print_nothing_passes(s, console)
    if s["errors"]:
        console.print(f"[yellow]{s['errors']} run(s) failed with an error (see runs.jsonl); they are retried on resume.[/]")


def _print_nothing_passes(s: dict, console) -> None:
    """Why no configuration reached the cut-off: the criteria that fail most, and by how much."""
    from rich.table import Table

    console.print(f"[bold red]No configuration reached acceptance {s['min_acceptance']:g}[/]: the private run "
                  "would almost never stop. No narrowed.yaml was written. Widen the space, relax the "
                  "criteria below, or lower --min-acceptance.")
    fails = s["failing_criteria"]
    if not fails:
        console.print("No run produced criterion values (every run failed with an error or none ran).")
        return
    table = Table(title="Criteria that fail most (all runs of the swept configurations)")
    for col in ("criterion", "runs failing", "median DP value", "threshold", "median / threshold"):
        table.add_column(col)
    for f in fails:
        g = lambda x: "" if x is None else f"{x:.4g}"  # noqa: E731
        table.add_row(f["id"], f"{f['fail_share']:.0%} ({f['failed']}/{f['runs']})", g(f["median_dp_value"]),
                      g(f["threshold"]), g(f["median_ratio_to_threshold"]))
    console.print(table)


def cli_sweep(
    spec: Annotated[Path, typer.Argument(help="The release spec (YAML or JSON).", show_default=False)],
    public_data: Annotated[Path, typer.Argument(help="PUBLIC data in the spec's input format (CSV, .csv.gz or .parquet). Never the confidential file.", show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory; the same directory resumes the sweep.", show_default=False)],
    reps: Annotated[Optional[int], typer.Option("--reps", "-r", min=1, help="First batch: runs every configuration gets (default 3; when resuming, the recorded value).", show_default=False)] = None,
    max_reps: Annotated[Optional[int], typer.Option("--max-reps", min=1, help="Cap of the adaptive repetitions per configuration (default 40; when resuming, the recorded value). Equal to --reps: a fixed design.", show_default=False)] = None,
    batch: Annotated[Optional[int], typer.Option("--batch", min=1, help="Runs added per later batch to an undecided configuration (default: --reps; enlarged when fewer configurations than workers remain open).", show_default=False)] = None,
    configs: Annotated[Optional[Path], typer.Option("--configs", help="Re-measure the configurations of this list (a narrowed.yaml) instead of drawing from the space. Ids must belong to the spec's space; a list written for another spec (spec_sha256) is refused unless --allow-other-spec.", show_default=False)] = None,
    allow_other_spec: Annotated[bool, typer.Option("--allow-other-spec", help="Accept a --configs list whose spec_sha256 differs from the spec's (e.g. after editing thresholds).")] = False,
    sample: Annotated[Optional[int], typer.Option("--sample", "-k", min=1, help="Sweep K configurations drawn at random (seeded; recorded in DIR) instead of the whole space. When resuming, defaults to the recorded K; a larger K extends the same sample.", show_default=False)] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed of the --sample draw (default: random, recorded in DIR/sweep.json).")] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", "-w", min=1, help="Local worker processes (default: every core).")] = None,
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (runs on the cluster instead of locally).")] = None,
    min_acceptance: Annotated[Optional[float], typer.Option("--min-acceptance", min=0.0, max=1.0, help="Cut-off: acceptance probability a configuration needs to enter narrowed.yaml, and the point the adaptive repetitions decide against (default 0.10; when resuming, the recorded value).", show_default=False)] = None,
    utility: Annotated[str, typer.Option("--utility", help="Granular utility of accepted candidates: 'first' accepted run per configuration, 'all', or 'none'.")] = "first",
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip report.html / report.pdf.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    ledger: Annotated[Optional[Path], typer.Option("--ledger", help="The private budget ledger: the sweep refuses data on which it records a spend (the same records, by the prepared table's fingerprint, whatever the file's bytes or compression). Default: the release's default ledger.", show_default=False)] = None,
) -> None:
    """Estimate each configuration's acceptance probability on PUBLIC data (feasibility sweep).

    Runs configurations of the spec's space (all, --sample K of them, or the list given with
    --configs) through the real iteration, with the same DP noise as the private run. Repetitions
    are adaptive: each configuration first gets --reps runs, then batches of --batch more until the
    Wilson 95% interval of its acceptance lies above (low end >= --min-acceptance) or below (high
    end < --min-acceptance) the cut-off, or it has --max-reps runs. A configuration still
    straddling the cut-off at the cap is decided by its point estimate and flagged 'undecided'
    (--max-reps equal to --reps gives a fixed design). A configuration that never passes needs 35
    runs to be decided below 0.10.

    Writes runs.jsonl/runs.csv, summary.csv/summary.json (acceptance, Wilson interval, decision,
    expected private iterations 1/p with the interval [1/high, 1/low]), narrowed.yaml (the
    configurations with acceptance >= --min-acceptance, for `dpbundle release --configs`) and
    report.html/report.pdf. Spends no privacy budget; refuses files listed in the spec's
    privacy.private_data_sha256. Re-running with the same --out resumes (the runs are kept, the
    adaptive decisions continue; a larger --max-reps decides undecided configurations).

    Exit codes: 0 at least one configuration reached the cut-off; 1 none did: narrowed.yaml is then
    NOT written (an old one in DIR is removed) and the criteria that fail most are printed, with
    the share of runs failing each and its median DP value against the threshold; 2 unusable input.

    Examples (the third resumes a sweep and decides its undecided configurations):

        dpbundle sweep examples/births.yaml public.csv --sample 8 --out sweep
        dpbundle sweep examples/births.yaml public.csv --out remeasure \\
            --configs examples/births-narrowed-nvss160k.yaml
        dpbundle sweep spec.yaml public.csv --out sweep --max-reps 80
        dpbundle sweep spec.yaml public.csv --sample 64 --out sweep \\
            --scheduler tcp://10.0.0.5:8786
    """
    from rich.console import Console

    from dpbundle.release.sweep.request import SweepRequest

    console = Console(stderr=True)
    request = SweepRequest(spec, public_data, out, reps=reps, max_reps=max_reps, batch=batch, sample=sample,
                           seed=seed, configs=configs, allow_other_spec=allow_other_spec,
                           min_acceptance=min_acceptance, workers=workers, scheduler=scheduler,
                           utility=utility, progress=not quiet, report=not no_report, console=console,
                           ledger=ledger)
    res = _run_or_exit(request, console)
    _print_result(res, Console())
    if not res.summary["narrowed"]["count"]:
        raise typer.Exit(code=1)


def _run_or_exit(request: SweepRequest, console) -> SweepResult:
    """Run the request (through ``sweep.run.run_sweep``, looked up at call time); an unusable
    input prints its message and exits 2, an interrupt says where the finished runs are (130)."""
    from dpbundle.release.sweep import run as sweep_run
    from dpbundle.release.sweep.request import SweepError
    from dpbundle.release.sweep.store import RUNS

    try:
        return sweep_run.run_sweep(request)
    except SweepError as exc:
        from rich.text import Text

        console.print(Text("error: ", style="bold red") + Text(str(exc)), highlight=False, soft_wrap=True)
        raise typer.Exit(code=exc.exit_code) from None
    except KeyboardInterrupt:
        console.print(f"Interrupted. Finished runs are saved in {request.out / RUNS}; run the same command to resume.")
        raise typer.Exit(code=130) from None
