"""``dpbundle spec validate``, ``spec space`` and ``spec explain``: check a release spec and
inspect its configuration space, before any data or budget is involved."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dpbundle.release.cli.common import console, fail_input, load_spec_or_exit
from dpbundle.release.cli.style import StyledCommand, add_command

spec_app = typer.Typer(help="Check a release spec and inspect its configuration space.\n\n"
                       "Example:\n\n    dpbundle spec validate examples/births.yaml",
                       no_args_is_help=True)


@spec_app.command("validate", cls=StyledCommand)
def spec_validate(
    spec: Annotated[Path, typer.Argument(help="Release spec (YAML or JSON).")],
    data: Annotated[Optional[Path], typer.Option("--data", help="Also load this CSV/CSV.gz/Parquet file (or a directory of its parts), validate it, apply the raw constraints and count the plausible records each synthetic constraint would remove (run inside the enclave: every count is private).")] = None,
) -> None:
    """Validate a release spec, and optionally prepare a data file with it.

    Checks the spec against its JSON Schema and what a schema cannot check (bin edges, column
    references, the privacy budget against the cap). With --data, reads the file exactly as a
    release would: types, ranges, missing values, then the raw-data constraints, and prints the
    rows read, the rows each raw constraint drops and the resulting n; then evaluates every
    synthetic constraint on the plausible records, binned with each alternative of the columns
    it names, and prints how many (and what share) it would remove: a rule that removes real
    records is probably wrong. These counts are private (the steward's console inside the
    enclave); `release` never prints them.

    Example:

        dpbundle spec validate examples/births.yaml --data registry.csv.gz
    """
    s = load_spec_or_exit(spec)
    total = "total " if s.definition == "zcdp" else "total epsilon "     # zCDP: 'rho = ..., epsilon E at delta D'
    console.print(f"[green]ok[/] {spec}: valid release spec; {total}"
                  f"{s.budget_formula()} <= cap {s.epsilon_cap:g}")
    policy_line = {"dp_count": f"n is released as a DP count (epsilon {s.epsilon_count:g})",
                   "declared_public": "n is declared public: the count of plausible records is "
                                      "published exactly (the guarantee covers registries with the "
                                      "same number of plausible records)"}[s.records_policy]
    console.print(f"records policy {s.records_policy}: {policy_line}", highlight=False)
    from dpbundle.release.spec.criteria_checks import criteria_warnings, open_bin_warnings

    from dpbundle.release.spec.dictionary import placeholder_fields

    unfilled = placeholder_fields(s.document())
    if unfilled:
        console.print(Text("warning ", style="yellow") + Text(
            f"{', '.join(unfilled)} still say \"CHANGE ME\": `release` refuses a spec with "
            "placeholders (the datasheet would print them)"), highlight=False)
    for line in criteria_warnings(s) + open_bin_warnings(s):
        console.print(f"[yellow]warning[/] {line}", markup=True, highlight=False)
    _warn_missing_generators(s)
    from dpbundle.release.scheme.weak_evidence import noise_notes, noise_warnings_on_data

    if data is None:
        notes = noise_notes(s)
        if notes:
            console.print("noise against thresholds: a pass is weak evidence when the noise std is at least "
                          "half the threshold; with this spec's epsilons that happens when", highlight=False)
            for line in notes:
                console.print(Text(f"  {line}"), highlight=False)
        return
    from dpbundle.release.data.parts import prepare_parts
    from dpbundle.release.data.prepare import InputError, prepare

    try:
        prepared = prepare_parts(data, s) if data.is_dir() else prepare(data, s)
    except InputError as exc:
        # the steward's tool: the problems quote cells and counts of the confidential file, each
        # value marked PRIVATE, and the whole message says so
        fail_input(f"{exc}\n  PRIVATE: values from the confidential file; keep inside the enclave")
    table = Table(title=f"Preparation of {data}", show_lines=False)
    table.add_column("step")
    table.add_column("rows", justify="right")
    table.add_row("rows read", f"{prepared.rows_read:,}")
    for name, count in prepared.dropped_by:
        table.add_row(f"  matching raw constraint: {name}", f"{count:,}")
    table.add_row("rows dropped (any constraint)", f"{prepared.dropped_total:,}")
    if s.records_policy == "declared_public":
        table.add_row("[bold]n (plausible records, declared public)[/]", f"[bold]{prepared.n:,}[/]")
    else:
        table.add_row("[bold]plausible records (PRIVATE: a release publishes a DP count)[/]",
                      f"[bold]{prepared.n:,}[/]")
    console.print(table)
    console.print(f"n = {prepared.n:,}" + ("" if s.records_policy == "declared_public" else
                                           " plausible records (private; run inside the enclave)"))
    _print_synthetic_hits(prepared, s)
    for line in noise_warnings_on_data(s, prepared):  # on the registry: private, like the counts above
        console.print(Text("warning ", style="yellow") + Text(line + " (computed on this data: private)"),
                      highlight=False)


def _print_synthetic_hits(prepared, s) -> None:
    """``spec validate --data`` only: the plausible records each synthetic constraint would remove
    under each binning of its columns (private counts; ``release`` never prints them)."""
    from rich.markup import escape

    from dpbundle.release.data.transform import MAX_LISTED_BINNINGS, synthetic_constraint_hits

    hits = synthetic_constraint_hits(prepared, s)
    if not hits:
        return
    table = Table(title="Synthetic constraints on the real plausible records (PRIVATE: steward's "
                  "console only; a release never prints these)", show_lines=False)
    table.add_column("synthetic constraint")
    table.add_column("binning (column: alternative)")
    table.add_column("records it would remove", justify="right")
    table.add_column("share", justify="right")

    def row(h, name: str, binning: str | None = None) -> None:
        text = binning if binning is not None else ", ".join(f"{c}: {a}" for c, a in h.binning)
        table.add_row(escape(name), escape(text), f"{h.removed:,}", f"{h.share:.2%}")

    for index in dict.fromkeys(h.index for h in hits):
        group = [h for h in hits if h.index == index]
        name = f"[{index}] {group[0].name}"
        if len(group) <= MAX_LISTED_BINNINGS:
            for k, h in enumerate(group):
                row(h, name if k == 0 else "")
            continue
        fewest = min(group, key=lambda h: h.removed)
        most = max(group, key=lambda h: h.removed)
        row(fewest, name, "fewest: " + ", ".join(f"{c}: {a}" for c, a in fewest.binning))
        row(most, "", "most: " + ", ".join(f"{c}: {a}" for c, a in most.binning))
        evaluated = (f"{len(group)} binnings in all" if len(group) == group[0].binnings else
                     f"the first {len(group)} of {group[0].binnings:,} binnings")
        table.add_row("", f"({evaluated})", "", "")
    console.print(table)
    if any(h.removed for h in hits):
        console.print("[yellow]note[/] a synthetic constraint should remove only combinations that "
                      "cannot occur; one that matches real plausible records is probably wrong (or "
                      "those records are implausible, and a raw constraint should drop them)",
                      markup=True, highlight=False)


def _warn_missing_generators(s) -> None:
    """A valid spec may name a generator whose optional extra is not installed here: say so now
    (a release on this machine would refuse it before reading the data)."""
    from rich.markup import escape

    from dpbundle.mechanisms.generators import generator_types

    available = generator_types()
    for gtype in sorted(set(s.generator_types)):
        if not available[gtype]["available"]:
            console.print(f"[yellow]warning[/] generator {gtype!r} is not installed here: "
                          f"{escape(available[gtype]['reason'])}; a release on this machine would refuse "
                          "the spec", markup=True, highlight=False)


@spec_app.command("space", cls=StyledCommand)
def spec_space(
    spec: Annotated[Path, typer.Argument(help="Release spec (YAML or JSON).")],
) -> None:
    """Print the size of the configuration space, per dimension and in total.

    The space is the Cartesian product of every column's alternatives, each generator's
    hyperparameter grid and the projection's min_count values. Private selection draws from it
    uniformly (or from a narrowed list produced by `dpbundle sweep`).

    Example:

        dpbundle spec space examples/births.yaml
    """
    from dpbundle.release.scheme.space import dimensions, space_size

    s = load_spec_or_exit(spec)
    table = Table(title=f"Configuration space of {spec}")
    table.add_column("dimension")
    table.add_column("size", justify="right")
    table.add_column("values")
    for name, values in dimensions(s):
        shown = ", ".join(v if isinstance(v, str) else _short(v) for v in values[:6])
        table.add_row(name, str(len(values)), shown + (" ..." if len(values) > 6 else ""))
    total = space_size(s)
    table.add_row("[bold]total[/]", f"[bold]{total:,}[/]", " x ".join(str(len(v)) for _, v in dimensions(s)))
    console.print(table)
    console.print(f"configurations: {total:,}")


def _short(value) -> str:
    if isinstance(value, dict):
        return "/".join(f"{k}={v}" for k, v in value.items() if k != "type") or value.get("type", "")
    return str(value)


def cli_spec_explain(
    spec: Annotated[Optional[Path], typer.Argument(help="Release spec (YAML or JSON). Omit it with --type.")] = None,
    type_: Annotated[Optional[str], typer.Option(
        "--type", help="A criterion type (e.g. conditional_means) or generator type (e.g. privbayes): "
        "print its parameters, defaults and meanings; with SPEC, show only entries of that type.")] = None,
) -> None:
    """Explain a spec or a type: every parameter with its value or default, and its meaning.

    With SPEC: the input and released columns (source, derivation, alternatives and the released
    number of every bin or category), constraints, group bins, every generator and criterion
    parameter with its value (or its default, marked "(default)") and meaning, the faithfulness
    rules, projection and privacy budget. With --type: one criterion or generator type. With
    neither: the list of types. The reference of the spec language is docs/spec.md.

    Examples:

        dpbundle spec explain examples/births.yaml
        dpbundle spec explain --type conditional_means
    """
    from dpbundle.release.spec.explain import explain_overview, explain_spec, explain_type, known_types

    console = Console()
    if type_ is not None and type_ not in known_types():
        from dpbundle.release.cli.common import fail_input

        fail_input(f"--type: unknown type {type_!r}; known: {', '.join(known_types())}")
    if spec is None:
        if type_ is None:
            explain_overview(console)
        else:
            explain_type(type_, console)
        return
    from dpbundle.release.cli.common import load_spec_or_exit

    s = load_spec_or_exit(spec)
    explain_spec(s, console, only=type_)


add_command(spec_app, "explain", cli_spec_explain)


@spec_app.command("from-dictionary", cls=StyledCommand)
def spec_from_dictionary(
    dictionary: Annotated[Path, typer.Argument(help="A data dictionary: a JSON object with, per column, a description and its values (codes with labels, and/or min and max).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The spec to write (YAML; must not exist unless --force).")],
    columns: Annotated[Optional[str], typer.Option("--columns", help="Comma-separated dictionary entries to release, in this order (default: every entry that can be).", show_default=False)] = None,
    bins: Annotated[int, typer.Option("--bins", help="About how many equal-width bins a numeric range gets.")] = 10,
    title: Annotated[Optional[str], typer.Option("--title", help="The release's title (default: a placeholder).", show_default=False)] = None,
    dp_edges: Annotated[Optional[float], typer.Option("--dp-edges", metavar="EPSILON", help="Also give every numeric range an alternative whose --bins bins are DP quantiles of the data, drawn by the release at this epsilon each (added to the cap).", show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite OUT.")] = False,
) -> None:
    """Write a starting spec from a published data dictionary (no data is read).

    Codes become categories (labelled as the dictionary labels them, not-applicable codes such as
    "N" included); a numeric range becomes a clipped column with round equal-width bins, and one
    bin per value when the range has at most 100 integers. Columns the dictionary gives no values
    for, survey weights, and codes beside a wide numeric range are left out, each named with the
    reason. The release metadata are "CHANGE ME" placeholders (`release` refuses them until they
    are replaced); the privacy settings and the criterion are those of the ACS example (total
    epsilon 1). Review them, then validate.

    Example:

        dpbundle spec from-dictionary acs_dictionary.json --out acs.yaml

        dpbundle spec from-dictionary dict.json -o acs.yaml --dp-edges 0.05

        dpbundle spec validate acs.yaml
    """
    from dpbundle.release.common.safe_io import replace_problem
    from dpbundle.release.spec.dictionary import DictionaryError, dictionary_spec, read_dictionary, spec_yaml

    if (out.exists() or out.is_symlink()) and not force:
        fail_input(f"{out}: exists (use --force to overwrite)")
    problem = replace_problem(out, "the spec")
    if problem:
        fail_input(problem)
    try:
        doc, notes = dictionary_spec(read_dictionary(dictionary), bins=bins, title=title, dp_epsilon=dp_edges,
                                     columns=None if columns is None else [c.strip() for c in columns.split(",") if c.strip()])
    except DictionaryError as exc:
        fail_input(str(exc))
    header = [f"# A starting spec written by `dpbundle spec from-dictionary` from {dictionary.name}.",
              "# Review every CHANGE ME, the privacy settings and the acceptance criterion before a release.",
              *(f"# {note}" for note in notes), ""]
    text = "\n".join(header) + "\n" + spec_yaml(doc)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        fail_input(f"{out}: cannot write the spec ({exc.strerror or exc}); nothing was written")
    console.print(f"wrote {out}: {len(doc['columns'])} released columns from {dictionary}", highlight=False)
    for note in notes:
        console.print(Text(f"  {note}"), highlight=False)
    console.print(f"next: edit the CHANGE ME fields, then `dpbundle spec validate {out}`", highlight=False)
