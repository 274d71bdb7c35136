"""The summary printed after a complete release: the criteria's DP values, n and the epsilon
spent, where the bundle and the private transcript are, and how to audit it."""
from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text

from dpbundle.release.errors import literal
from dpbundle.release.pipeline import output
from dpbundle.release.pipeline.output import say, warn

__all__ = ["summary", "summary_safely"]


def summary_safely(out: Path, result, budget: dict, transcript_path: Path, key_path: Path) -> None:
    """The summary after a complete release; a failure to print it is only a warning."""
    try:
        summary(out, result, budget, transcript_path, key_path)
    except Exception as exc:  # noqa: BLE001 - the bundle is written and the ledger marked
        warn(f"the summary could not be printed ({type(exc).__name__}); the bundle {out} is "
             "written and the ledger records it as released")


def _value_noise_stds(metrics_csv: Path) -> dict[str, float]:
    """Each criterion's noise std on its DP value, from metrics.csv (``value_noise_std``; empty
    where it is not known, e.g. a choice's score noise): the datasheet's rounding rule."""
    import csv

    out: dict[str, float] = {}
    try:
        with open(metrics_csv, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                try:
                    out[row["id"]] = float(row.get("value_noise_std") or "nan")
                except (TypeError, ValueError, KeyError):
                    continue
    except OSError:
        pass
    return {k: v for k, v in out.items() if v == v}


def summary(bundle: Path, result, budget: dict, transcript_path: Path, key_path: Path | None = None) -> None:
    """Print the criteria table, n and the epsilon, the bundle's and the transcript's places."""
    from dpbundle.templates.datasheet.numbers import noisy
    from dpbundle.templates.datasheet.value_noise import value_noise_text

    table = Table(title="Acceptance criteria (DP values, rounded to the precision their noise supports)")
    for col in ("criterion", "DP value", "threshold", "epsilon", "noise std of the value", "pass"):
        table.add_column(col, justify="right" if col not in ("criterion",) else "left")
    noise_text = value_noise_text(bundle / "metrics.csv")
    stds = _value_noise_stds(bundle / "metrics.csv")
    for r in result.results:
        table.add_row(Text(literal(r.id)), noisy(r.dp_value, stds.get(r.id)), f"{r.threshold:.6g}", f"{r.epsilon:g}",
                      noise_text.get(r.id, f"{r.noise_std:.3g}"), "[green]yes[/]" if r.passed else "[red]no[/]")
    output.console.print(table)
    if any("fit" in t or "choice" in t for t in noise_text.values()):
        output.console.print("fit: the noise was added inside a model fit, not to the value (≈: its estimated "
                             "effect on the value); choice: added to the scores of a choice. See README.pdf, "
                             "section 6.", highlight=False)
    at = (f" at delta {budget['zcdp']['delta']:g} (zero-concentrated DP, total rho "
          f"{budget['zcdp']['total_rho']:.6g})" if budget.get("definition") == "zcdp" else "")
    say(f"n = {result.candidate.n:,} records; total epsilon {budget['total_epsilon']:.6g}{at} "
        f"(OpenDP: {budget['total_epsilon_opendp']:.6g}; cap {budget['epsilon_cap']:g})")
    say(str(bundle), "bundle written: ", "bold green")
    say(f"{transcript_path} — keep it inside the enclave; only its salted commitment is in the bundle.",
        "private transcript: ", "bold yellow")
    pub = key_path.with_name(key_path.name[:-len(".key")] + ".pub") if key_path and key_path.name.endswith(".key") else None
    say(f"verify with: dpbundle audit {bundle} --pubkey {pub if pub and pub.is_file() else 'PUBLISHER.pub'}")
