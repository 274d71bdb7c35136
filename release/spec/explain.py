"""`dpbundle spec explain`: every parameter of every criterion and generator, with its default
and meaning, from ONE metadata table (this module), so that a user never has to read the source.

The table (:data:`CRITERIA`, :data:`GENERATORS`, :data:`SECTIONS`) is the single place where the
spec-level meaning and default of a parameter are written down; ``tests/test_spec_docs.py`` checks
it against the JSON Schema, the criterion classes' ``parameters`` and the generators' declared
hyperparameters (and their constructor defaults), so it cannot silently drift.

``explain_spec`` renders a loaded spec: input and released columns (source, derivation,
alternatives, the released number of every bin/category), constraints, group bins, generators,
projection, criteria (value of every parameter, or its default marked as such), faithfulness
rules, face privacy and the privacy budget. ``explain_type`` renders one type without a spec.
Only public spec content is printed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from dpbundle.release.spec.typed import Constraint, Criterion

__all__ = ["Param", "TypeDoc", "CRITERIA", "GENERATORS", "SECTIONS", "COMMON_CRITERION",
           "THRESHOLD_DERIVE", "GENERATOR_KEYS", "known_types", "explain_type", "explain_spec",
           "format_value"]


@dataclass(frozen=True)
class Param:
    """One spec parameter: ``default`` is used when ``required`` is false and the key is absent;
    ``default_text`` replaces the printed default when the default depends on the spec."""

    name: str
    meaning: str
    required: bool = False
    default: Any = None
    default_text: str | None = None

    def default_shown(self) -> str:
        if self.required:
            return "required"
        if self.default_text is not None:
            return self.default_text
        return format_value(self.default)


@dataclass(frozen=True)
class TypeDoc:
    """An acceptance criterion type or a generator type."""

    summary: str
    params: tuple[Param, ...]
    notes: tuple[str, ...] = field(default=())

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


# --------------------------------------------------------------------------- the table

#: keys every acceptance entry has, whatever its type
COMMON_CRITERION: tuple[Param, ...] = (
    Param("id", "unique name of the criterion (metrics.csv row, datasheet, ledger)", required=True),
    Param("type", "the criterion type (one of the types below)", required=True),
    Param("description", "one sentence for the datasheet", default="", default_text="none"),
    Param("threshold", "the candidate passes when the noisy value is < threshold; a number in "
          "the metric's units, or derived: {derive: laplace_false_positive, stakeholder, "
          "false_positive, assumed_min_count}", required=True),
    Param("epsilon", "privacy budget of this criterion's noisy measurement (> 0); spent on "
          "every attempt, doubled by the private selection", required=True),
)

#: keys of a derived threshold ``threshold: {derive: laplace_false_positive, ...}``
THRESHOLD_DERIVE: tuple[Param, ...] = (
    Param("derive", "laplace_false_positive: threshold = stakeholder - F^-1_Laplace(1 - "
          "false_positive; assumed sensitivity / epsilon), so a candidate whose true value is "
          "exactly the stakeholder threshold passes with probability false_positive only",
          required=True),
    Param("stakeholder", "the threshold the stakeholders asked for, on the true metric",
          required=True),
    Param("false_positive", "probability in (0, 0.5) that a candidate at the stakeholder "
          "threshold passes anyway", required=True),
    Param("assumed_min_count", "smoothed_ratio: the smallest smoothed count s+1 assumed when "
          "the sensitivity is computed before any candidate exists", required=True),
)

_FEATURES = Param(
    "features", "released feature columns; unordered categorical columns enter one-hot coded "
    "(first category = reference), ordered ones by their released numbers",
    default_text="every released column except the target")

CRITERIA: dict[str, TypeDoc] = {
    "kway_marginals": TypeDoc(
        "Largest error in the share of any cell of any k-way table (k = 1..max_k) of the "
        "chosen columns, empty cells included. Sensitivity 1/n.",
        (
            Param("columns", "subset of released columns whose k-way tables are compared",
                  default_text="every released column"),
            Param("max_k", "largest table order k (integer >= 1)",
                  default_text="the number of compared columns"),
            Param("special", "include: the cells of special values (not applicable, unknown) are "
                  "compared like the others; exclude: they are not", default="include"),
        )),
    "smoothed_ratio": TypeDoc(
        "Largest ratio max((r+1)/(s+1), (s+1)/(r+1)) between real (r) and synthetic (s) counts "
        "of any single value of any column, clipped at `clip`. Attainable range [1, clip].",
        (
            Param("clip", "ratio clip c (> 1): larger ratios count as c; bounds the sensitivity "
                  "max(1/s', c - 1/(1/c + 1/s'))", required=True),
            Param("smoothing", "k added to every count: (r+k)/(s+k); the sensitivity is then at "
                  "most max(1/k, c^2/(c+k)) for every candidate, which keeps a derived threshold "
                  "meaningful at small epsilon; values with fewer than about k records are "
                  "compared more loosely", default=1),
        )),
    "conditional_means": TypeDoc(
        "Largest error of the mean of `target` (a share for a 0/1 column), overall and within "
        "groups, after resizing each real group to the synthetic group size minus a margin. "
        "Sensitivity (U - L) / smallest resized group.",
        (
            Param("target", "released column whose mean is compared (its released numbers)",
                  required=True),
            Param("by", "list of groupings: null = overall mean; a column = its groups "
                  "(group_bins.<column>, or one group per category/bin); a list of columns = "
                  "their joint groups, e.g. [sex, age]", required=True),
            Param("bounds", "[L, U]: public bounds of the target in its released numbers; "
                  "values are clipped to them", required=True),
            Param("margin_share", "resize margin = ceil(margin_share * n) + margin_plus records",
                  default=0.01),
            Param("margin_plus", "added to ceil(margin_share * n) (integer >= 0)", default=1),
            Param("special", "exclude (needed when the target has special values): the groups of "
                  "special values are not compared, the records whose target is special are in no "
                  "group, and the overall mean is resized like a group", default="include"),
        )),
    "regression_coefficients": TypeDoc(
        "L1 distance between DP linear-regression coefficients of `target` on T and OLS "
        "coefficients on the candidate; the noise is inside the fit.",
        (
            Param("target", "the regressed released column (its released numbers)", required=True),
            Param("bounds", "[L, U]: public bounds of the target; values are clipped to them",
                  required=True),
            _FEATURES,
            Param("fit", "functional_mechanism (Zhang et al. 2012) or sufficient_statistics",
                  default="functional_mechanism"),
            Param("include_intercept", "also count |intercept difference| in the distance",
                  default=False),
        )),
    "regression_mae_difference": TypeDoc(
        "|MAE on T of the DP regression - MAE on T of the candidate's OLS regression|, "
        "predictions clipped to [L, U]. Sensitivity 2(U - L)/n.",
        (
            Param("target", "the regressed released column", required=True),
            Param("bounds", "[L, U]: public bounds of the target", required=True),
            _FEATURES,
            Param("reference", "id of the regression_coefficients criterion whose DP "
                  "coefficients are the real-data model",
                  default_text="the regression_coefficients criterion with the same target"),
        )),
    "classification": TypeDoc(
        "Logistic regression of the one-vs-rest outcome 1[target in positive]: the DP fit on T "
        "(functional mechanism on the second-order Taylor expansion of the logistic loss, "
        "sensitivity (d + 2)^2/8) against the same fit on the candidate, reported as "
        "the L1 distance of the coefficients, or as |accuracy on T of the DP model - accuracy on "
        "T of the candidate's model| (sensitivity 2/n).",
        (
            Param("target", "the classified released column (any: categorical or binned)",
                  required=True),
            Param("positive", "category name or label of the target counted as the positive "
                  "class, or a list of them; every other category is negative", required=True),
            _FEATURES,
            Param("report", "coefficients (L1 distance of the logistic coefficients, noise "
                  "inside the fit) or accuracy (needs an earlier coefficients report: its DP "
                  "model is the real-data model)", default="coefficients"),
            Param("include_intercept", "report coefficients: also count |intercept "
                  "difference| in the distance", default=False),
            Param("reference", "report accuracy: id of the classification criterion (report "
                  "coefficients) whose DP model is the real-data model",
                  default_text="the coefficients criterion with the same target and positive"),
        )),
    "quantile": TypeDoc(
        "Largest error |DP quantile of T - quantile of the candidate| over levels and groups, in "
        "the target's released numbers. Each DP quantile is a report-noisy-max choice among the "
        "target's numbers (score sensitivity 1); a grouping costs twice (a changed record leaves "
        "one group and joins another), so epsilon is split over R = levels x (1 per null + 2 per "
        "grouping) releases.",
        (
            Param("target", "released column with numbers (binned, or categorical with values)",
                  required=True),
            Param("quantiles", "levels in (0, 1), e.g. [0.25, 0.5, 0.75]", default=[0.5]),
            Param("by", "list of groupings: null = all records; a column = its groups "
                  "(group_bins.<column>, or one group per category/bin); a list of columns = "
                  "their joint groups. Only groups with a candidate record are compared",
                  default=[None]),
        )),
    "faithfulness": TypeDoc(
        "Share of real records left without a synthetic partner within cost <= 1 in a maximum "
        "matching (max-flow on record types). Sensitivity 1/n. Its rules are the spec section "
        "`faithfulness` (below).",
        ()),
}

#: keys of a generator entry besides its hyperparameters
GENERATOR_KEYS: tuple[Param, ...] = (
    Param("type", "generator type: privbayes, crosstab, marginals, aim, mst, mst_pure, privsyn, "
          "aim_pure", required=True),
    Param("flavour", "privbayes only: theta (theta-usefulness bounds each table) or degree "
          "(fixed number of parents)", default_text="privbayes: required; others: not used"),
    Param("grid", "hyperparameter -> list of values; the configuration space takes their "
          "Cartesian product; a hyperparameter not in the grid takes its default", default={},
          default_text="{} (every hyperparameter at its default)"),
)

_MAX_CELLS = Param("max_cells", "largest table (cells) the generator may build; refuses larger "
                   "domains (memory guard, not a privacy parameter)", default=10_000_000)
_ITERS = Param("iters", "Private-PGM mirror-descent iterations (post-processing)", default=1000)

GENERATORS: dict[str, TypeDoc] = {
    "privbayes": TypeDoc(
        "PrivBayes (Zhang et al. 2014/2017): a Bayesian network chosen with the exponential "
        "mechanism, then noisy conditional tables; pure DP.",
        (
            Param("epsilon_split", "share in (0, 1) of the generation epsilon spent on the "
                  "network structure; the rest pays the conditional tables", required=True),
            Param("theta", "theta flavour: every table holds at most n * eps_2 / (2 d theta) "
                  "cells (larger theta = smaller tables, less noise per cell)",
                  default_text="required in the theta flavour"),
            Param("degree", "degree flavour: number of parents per attribute (integer >= 1)",
                  default_text="required in the degree flavour"),
            Param("score", "network score: R (TODS 2017) or MI (mutual information)", default="R"),
            Param("oneway", "accurate one-way shares (rare values in proportion): none (as "
                  "published); tables (rake every sample to the one-way marginals of the noisy "
                  "conditional tables, no extra budget); measure (also measure every one-way "
                  "marginal with oneway_split of the epsilon, combine, rake)", default="none"),
            Param("oneway_split", "oneway measure only: share in (0, 1) of the generation "
                  "epsilon spent on the one-way marginals; epsilon_split divides the rest",
                  default=0.2),
        )),
    "crosstab": TypeDoc(
        "Laplace noise on every cell of the full cross-tabulation; only for small domains.",
        (_MAX_CELLS,)),
    "marginals": TypeDoc(
        "Noisy marginals (budget split evenly) made consistent, then IPF on the full domain.",
        (
            Param("marginals", "all-1way, all-2way, all-3way, or a list of column-index lists",
                  default="all-2way"),
            _MAX_CELLS,
            Param("max_iterations", "IPF iterations at most", default=1000),
            Param("tolerance", "IPF convergence tolerance", default=1e-5),
            Param("allow_nonconvergence", "accept an IPF result that did not converge",
                  default=False),
            Param("consistency_rounds", "rounds of making the noisy marginals consistent",
                  default=30),
        )),
    "aim": TypeDoc(
        "AIM (McKenna et al. 2022) through OpenDP's mbi extra (pip install 'dpbundle[mbi]'); "
        "its noise is drawn inside OpenDP and cannot be replayed by the audit.",
        (
            _MAX_CELLS, _ITERS,
            Param("degree", "largest interaction order in the workload", default=3),
            Param("measure_split", "share in (0, 1] of each round spent on measuring",
                  default=0.9),
            Param("max_model_size", "largest model size in MB", default=80.0),
            Param("rounds", "number of rounds", default=None,
                  default_text="OpenDP's default (16 x number of columns)"),
        )),
    "mst": TypeDoc(
        "MST (McKenna et al. 2021) through OpenDP's mbi extra (pip install 'dpbundle[mbi]'); "
        "its noise is drawn inside OpenDP and cannot be replayed by the audit.",
        (
            _MAX_CELLS, _ITERS,
            Param("measure_split", "share in (0, 1] spent on measuring", default=0.9),
            Param("num_selections", "number of 2-way marginals selected", default=None,
                  default_text="number of columns - 1"),
        )),
    "privsyn": TypeDoc(
        "PrivSyn-style (Zhang et al. 2021), pure DP with Laplace noise: noisy InDif scores of all "
        "pairs (one vector draw), DenseMarg selection, noisy 1-way and selected 2-way marginals "
        "(budget split by sqrt(cells)), made consistent (weighted averaging, norm-sub), then "
        "records synthesised by GUM; replayable by the audit.",
        (
            Param("split_select", "share in (0, 1) of the generation epsilon spent on the noisy "
                  "InDif scores; the rest pays the marginals", default=0.1),
            Param("max_pairs", "at most this many 2-way marginals (integer >= 0; null: no cap)",
                  default=None, default_text="no cap"),
            Param("select_rule", "densemarg (keep a pair while its noisy InDif exceeds the noise "
                  "error its measurement adds) or top (the max_pairs largest noisy scores)",
                  default="densemarg"),
            Param("gum_rounds", "GUM rounds over all marginals (post-processing)", default=6),
            Param("gum_alpha", "GUM's first step in (0, 1] (halved every 2 rounds)",
                  default=1.0),
            Param("consistency_rounds", "rounds of consistency and norm-sub", default=10),
            Param("estimator", "consistency (PrivSyn's weighted averaging and norm-sub) or "
                  "hierarchical (pairs scored and measured on merged codes of wide columns, 1-ways "
                  "combined by inverse variance, pairs raked to them; mechanisms/estimation.py)",
                  default="consistency"),
            Param("pair_values", "hierarchical estimator: in 2-way tables a column of k > "
                  "pair_values values is merged ceil(k / pair_values) codes at a time", default=20),
        )),
    "mst_pure": TypeDoc(
        "Native pure-DP MST (McKenna, Miklau & Sheldon 2021, with Laplace noise): noisy 1-way "
        "marginals, a maximum spanning tree of pairs chosen with the exponential mechanism, "
        "their noisy 2-way marginals, made consistent and sampled exactly; replayable by the "
        "audit.",
        (
            Param("split_1way", "share in (0, 1) of the generation epsilon spent on the 1-way "
                  "marginals", default=1 / 3, default_text="1/3"),
            Param("split_select", "share in (0, 1) spent on choosing the tree's pairs; the rest "
                  "(split_1way + split_select < 1) pays the 2-way marginals",
                  default=1 / 3, default_text="1/3"),
        )),
    "aim_pure": TypeDoc(
        "Adaptive workload-aware marginals (AIM, McKenna et al. 2022, re-derived for pure DP "
        "with Laplace noise): noisy 1-way marginals, then rounds that each choose a marginal "
        "of 2..max_size columns of the criteria's workload with the exponential mechanism and "
        "measure it; the measured marginals are made consistent and records synthesised by "
        "GUM; replayable by the audit.",
        (
            Param("rounds_per_column", "T = rounds_per_column x columns sets the first round's "
                  "budget (rest / T); a round whose measurement barely changed the model doubles "
                  "the next one's (integer 1..1000; AIM uses 16)", default=2),
            Param("split_1way", "share in (0, 1) of the generation epsilon spent on the 1-way "
                  "marginals; the rest pays the rounds", default=0.1),
            Param("measure_split", "share in (0, 1) of each round spent on measuring; the rest "
                  "on choosing the marginal", default=0.9),
            Param("max_size", "most columns of a candidate marginal (integer 2..6)", default=3),
            Param("max_cells", "most cells of a candidate marginal (integer 4..2^24)",
                  default=100_000),
            Param("estimate_rows", "records of the working synthetic table whose marginals are "
                  "the rounds' estimates (post-processing; integer 100..10^7, at most n used)",
                  default=50_000),
            Param("gum_rounds", "GUM rounds of the released model's sampling (post-processing)",
                  default=6),
            Param("gum_alpha", "GUM's first step in (0, 1] (halved every 2 rounds)", default=1.0),
            Param("workload", "the column sets whose marginals matter: set by the release from "
                  "the spec's acceptance criteria and faithfulness; a spec must not set it",
                  default=None, default_text="from the spec's criteria (all pairs if none)"),
        )),
}

#: spec sections that carry parameters of criteria or of the whole release
SECTIONS: dict[str, tuple[Param, ...]] = {
    "release": (
        Param("title", "title of the release", required=True),
        Param("publisher", "the publishing organisation", required=True),
        Param("contact", "contact address", required=True),
        Param("licence", "licence of the data, e.g. CC-BY-4.0", required=True),
        Param("period", "{start, end}: the reference period (ISO dates)", default_text="none"),
        Param("description", "what one row is, in plain words", required=True),
        Param("unit_of_privacy", "what DP protects, e.g. one live birth (one record of the registry)",
              required=True),
        Param("feedback", "where readers send questions", default_text="'Contact' + contact"),
        Param("version", "the release's own version (a quoted string, '1.0'): cover and citation",
              default_text="none"),
        Param("source_kind", "what the confidential source is: registry, census, survey, "
              "administrative file or other; the datasheet names it so",
              default_text="neutral words ('confidential source data')"),
        Param("thresholds_set_by", "who set the acceptance thresholds",
              default_text="not stated (the datasheet says the thresholds are fixed in the spec)"),
        Param("motivation", "why the data are released", default_text="none"),
        Param("mandate", "the law or decision under which the data are released", default_text="none"),
        Param("maintenance", "who maintains the release, errata, what a new version means",
              default_text="none (the datasheet says no plan is stated)"),
        Param("citation", "how to cite the release",
              default_text="made from title, publisher, version, date and key"),
        Param("simulated", "true: the records come from a simulated registry, not real persons "
              "(the datasheet and metadata say SIMULATED); `release --example` sets it",
              default=False),
    ),
    "faithfulness": (
        Param("exact", "columns that must be equal (every released column is listed in exact, "
              "adjacent or nominal)",
              required=True),
        Param("adjacent", "ordered (binned) columns that may differ by one adjacent bin",
              required=True),
        Param("max_adjacent", "how many adjacent columns may differ at once", required=True),
        Param("exact_if_contains", "column -> numbers: a bin holding one of them strictly inside "
              "must match exactly", default={}),
        Param("nominal", "categorical columns that may differ to any other category", default=[]),
        Param("max_nominal", "how many nominal columns may differ at once", default=0),
        Param("max_differing", "cap on adjacent + nominal differences together",
              default=None, default_text="no cap"),
    ),
    "projection": (
        Param("min_count", "values to try for the face-privacy projection: every released "
              "record appears at least min_count times", required=True),
    ),
    "privacy": (
        Param("epsilon_generation", "epsilon of one generator fit (pure DP; a zcdp spec gives "
              "rho_generation instead)", required=True),
        Param("epsilon_cap", "the total epsilon may not exceed this (zcdp: the epsilon at delta "
              "that the total rho implies)", required=True),
        Param("definition", "pure (epsilon-DP) or zcdp (zero-concentrated DP in rho, stated as "
              "(epsilon, delta); needs selection.retries: resample and a zCDP generator: privsyn)",
              default="pure"),
        Param("rho_generation", "zcdp: the generator's rho (Gaussian measurements), spent once",
              default=None, default_text="required under zcdp"),
        Param("delta", "zcdp: the delta at which the (epsilon, delta) guarantee is stated",
              default=None, default_text="required under zcdp"),
        Param("records", "{policy, epsilon}: how the number of records is released: dp_count "
              "(a DP count of the plausible records at `epsilon`, default 0.1; the table is "
              "resized to it) or declared_public (published exactly; the guarantee covers "
              "registries with the same number of plausible records)",
              default={"policy": "dp_count", "epsilon": 0.1}),
        Param("pre_selection", "measurements made once before the selection loop "
              "([{purpose, epsilon}])", default=[]),
        Param("selection", "{stop_probability, retries}: chance of stopping after each failed "
              "attempt (0 = run until a candidate passes); retries: refit (every attempt fits the "
              "generator) or resample (fitted once, every attempt samples it again; total = count + "
              "generation + 2 x criteria)", default={"stop_probability": 0.0, "retries": "refit"}),
        Param("private_data_sha256", "SHA-256 of confidential input files, which sweep refuses; "
              "removed from the bundle's public spec", default=[]),
        Param("acknowledge_weak_guarantee", "true: knowingly spend a total epsilon above the "
              "ceiling of 20 (refused otherwise); the datasheet says the protection is weak",
              default=False),
    ),
}


def known_types() -> dict[str, str]:
    """type name -> kind ("acceptance criterion" or "generator")."""
    out = {t: "acceptance criterion" for t in CRITERIA}
    out.update({t: "generator" for t in GENERATORS})
    return out


# --------------------------------------------------------------------------- rendering helpers


def format_value(v: Any) -> str:
    """A spec value as the user would write it in YAML flow style (null, true, [a, b])."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(format_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {format_value(x)}" for k, x in v.items()) + "}"
    return str(v)


def _short(v: Any, limit: int = 12) -> str:
    """format_value of a long list or mapping cut to its first `limit` items."""
    if isinstance(v, (list, tuple)) and len(v) > limit:
        return format_value(list(v[:limit]))[:-1] + f", ... ({len(v)} in all)]"
    if isinstance(v, dict) and len(v) > limit:
        head = dict(list(v.items())[:limit])
        return format_value(head)[:-1] + f", ... ({len(v)} in all)}}"
    return format_value(v)


def _t(s: Any, style: str = "") -> Text:
    """Plain text (never parsed as Rich markup: spec strings may hold '[')."""
    return Text(s if isinstance(s, str) else format_value(s), style=style)


def _param_table(title: str | None, rows: list[tuple[str, Text, str]],
                 value_header: str = "value") -> Table:
    table = Table(title=title, title_justify="left", show_lines=False, expand=False)
    table.add_column("parameter", style="bold", no_wrap=True, overflow="fold")
    table.add_column(value_header, overflow="fold")
    table.add_column("meaning", overflow="fold")
    for name, value, meaning in rows:
        table.add_row(_t(name, "bold"), value, _t(meaning))
    return table


def _doc_rows(params: tuple[Param, ...]) -> list[tuple[str, Text, str]]:
    return [(p.name, _t(p.default_shown(), "dim" if not p.required else "yellow"), p.meaning)
            for p in params]


def _value_cell(p: Param, entry: dict, resolved: Callable[[str], Any] | None = None) -> Text:
    """The entry's value, or its default marked "(default)"."""
    if p.name in entry:
        return _t(format_value(entry[p.name]))
    if p.required:
        return _t("missing (required)", "red")
    r = resolved(p.name) if resolved is not None else None
    if r is not None and p.default_text is not None:
        return _t(f"{format_value(r)} (default: {p.default_text})", "dim")
    return _t(f"{format_value(r) if r is not None else p.default_shown()} (default)", "dim")


# --------------------------------------------------------------------------- one type


def explain_type(type_name: str, console: Console) -> None:
    """Print one criterion or generator type: its parameters, defaults and meanings."""
    if type_name in CRITERIA:
        doc = CRITERIA[type_name]
        console.print(Panel(_t(doc.summary), title=f"acceptance type {type_name}", expand=False))
        console.print(_param_table(f"{type_name}: its own parameters", _doc_rows(doc.params), "default")
                      if doc.params else _t(f"{type_name} has no parameters of its own."))
        console.print(_param_table("every acceptance entry", _doc_rows(COMMON_CRITERION), "default"))
        console.print(_param_table("threshold: {derive: laplace_false_positive, ...}",
                                   _doc_rows(THRESHOLD_DERIVE), "default"))
        if type_name == "faithfulness":
            console.print(_param_table("spec section `faithfulness` (the matching rules)",
                                       _doc_rows(SECTIONS["faithfulness"]), "default"))
        console.print(_example_criterion(type_name))
    elif type_name in GENERATORS:
        doc = GENERATORS[type_name]
        console.print(Panel(_t(doc.summary), title=f"generator type {type_name}", expand=False))
        console.print(_param_table(f"{type_name}: hyperparameters (in `grid`)", _doc_rows(doc.params),
                                   "default"))
        console.print(_param_table("every generator entry", _doc_rows(GENERATOR_KEYS), "default"))
    else:
        raise KeyError(type_name)


def _example_criterion(type_name: str) -> Text:
    doc = CRITERIA[type_name]
    req = [p for p in doc.params if p.required]
    parts = [f"id: my_{type_name}", f"type: {type_name}"] + [f"{p.name}: ..." for p in req]
    parts += ["threshold: ...", "epsilon: ..."]
    return _t("Minimal entry:  - {" + ", ".join(parts) + "}", "italic")


def explain_overview(console: Console) -> None:
    """Every type with its summary (no spec, no --type)."""
    table = Table(title="Types a spec can use (details: dpbundle spec explain --type TYPE)",
                  title_justify="left")
    table.add_column("type", style="bold", no_wrap=True, overflow="fold")
    table.add_column("kind", no_wrap=True, overflow="fold")
    table.add_column("what", overflow="fold")
    for t, kind in known_types().items():
        doc = CRITERIA.get(t) or GENERATORS[t]
        table.add_row(_t(t, "bold"), _t(kind), _t(doc.summary))
    console.print(table)


# --------------------------------------------------------------------------- a whole spec


def _resolver(spec, crit: Criterion) -> Callable[[str], Any]:
    """Resolve defaults that depend on the spec (features, columns, max_k, reference)."""
    names = spec.model.column_names
    acceptance = spec.model.acceptance

    def resolve(name: str) -> Any:
        if name == "columns":
            return names
        if name == "max_k":
            return len(crit.columns or names)
        if name == "features":
            return [c for c in names if c != crit.target]
        if name == "reference":
            if crit.type == "classification":
                return next((c.id for c in acceptance if c.type == "classification"
                             and (c.report if c.report is not None else "coefficients") == "coefficients"
                             and c.target == crit.target and c.positive == crit.positive), None)
            ref = next((c.id for c in acceptance if c.type == "regression_coefficients"
                        and c.target == crit.target), None)
            return ref
        return None
    return resolve


def _threshold_cell(entry: dict) -> Text:
    t = entry.get("threshold")
    if not isinstance(t, dict):
        return _t(format_value(t))
    try:
        from dpbundle.mechanisms.criteria import make_criterion

        value, _, _ = make_criterion(entry).threshold()
        return _t(f"{value:.6g} (derived from {format_value(t)})")
    except Exception:  # noqa: BLE001 - display only; `spec validate` reports the problem
        return _t(f"derived from {format_value(t)}")


def _criteria_section(spec, console: Console, only: str | None) -> None:
    for i, crit in enumerate(spec.model.acceptance):
        entry = crit.to_document()
        ctype = crit.type
        if only is not None and ctype != only:
            continue
        doc = CRITERIA.get(ctype)
        title = f"acceptance[{i}] {crit.id} ({ctype})"
        rows: list[tuple[str, Text, str]] = []
        for p in COMMON_CRITERION:
            if p.name in ("id", "type"):
                continue
            cell = _threshold_cell(entry) if p.name == "threshold" else _value_cell(p, entry)
            rows.append((p.name, cell, p.meaning))
        resolve = _resolver(spec, crit)
        for p in (doc.params if doc else ()):
            rows.append((p.name, _value_cell(p, entry, resolve), p.meaning))
        known = {p.name for p in COMMON_CRITERION} | {p.name for p in (doc.params if doc else ())}
        for k in entry:
            if k not in known:
                rows.append((k, _t(format_value(entry[k])), "(not documented for this type)"))
        console.print(_param_table(title, rows))
        if doc:
            console.print(_t("  " + doc.summary, "italic"))
    if only in (None, "faithfulness") and any(c.type == "faithfulness" for c in spec.model.acceptance):
        faith = spec.model.faithfulness
        rules = faith.to_document() if faith is not None else {}
        console.print(_param_table("faithfulness (matching rules of the faithfulness criterion)",
                                   [(p.name, _value_cell(p, rules), p.meaning)
                                    for p in SECTIONS["faithfulness"]]))


def _generators_section(spec, console: Console, only: str | None) -> None:
    for i, gen in enumerate(spec.model.generators):
        gtype = gen.type
        if only is not None and gtype != only:
            continue
        doc = GENERATORS.get(gtype)
        grid = gen.grid_lists()
        rows: list[tuple[str, Text, str]] = []
        if gen.flavour is not None:
            rows.append(("flavour", _t(gen.flavour), GENERATOR_KEYS[1].meaning))
        for p in (doc.params if doc else ()):
            if p.name in grid:
                cell = _t(f"{format_value(grid[p.name])} (grid: {len(grid[p.name])} value(s))")
            elif gtype == "privbayes" and p.name in ("theta", "degree"):
                cell = _t("not used by the " + str(gen.flavour) + " flavour", "dim")
            else:
                cell = _value_cell(p, {})
            rows.append((p.name, cell, p.meaning))
        console.print(_param_table(f"generators[{i}] {gtype}", rows))
        if doc:
            console.print(_t("  " + doc.summary, "italic"))


def _input_section(spec, console: Console) -> None:
    inputs = spec.model.input
    table = Table(title="Input columns (the CSV)", title_justify="left")
    for c in ("name", "CSV header", "type", "allowed values", "missing markers", "description"):
        table.add_column(c, overflow="fold")
    common = list(inputs.missing_values or [])
    for c in inputs.columns:
        if c.type == "category":
            allowed = _short(list(c.categories or []))
        elif c.type == "boolean":
            allowed = "true, false"
        else:
            lo, hi = (c.min if c.min is not None else "-inf"), (c.max if c.max is not None else "inf")
            allowed = f"{format_value(lo)} .. {format_value(hi)}" \
                if (c.min is not None or c.max is not None) else f"any {c.type}"
        table.add_row(_t(c.name, "bold"), _t(c.header if c.header is not None else c.name), _t(c.type),
                      _t(allowed), _t(format_value(common + list(c.missing or []))),
                      _t(c.description if c.description is not None else ""))
    console.print(table)


def _source_text(src: dict) -> str:
    out = src["column"]
    if "derive" in src:
        out += f", derive {src['derive']}"
    extra = {k: v for k, v in src.items() if k not in ("column", "derive")}
    if extra:
        out += ", " + ", ".join(f"{k} {format_value(v)}" for k, v in extra.items())
    return out


def _numbers_text(spec, name: str, alt_id: str, limit: int = 8) -> str:
    """'label = number' of every released bin/category (first `limit`)."""
    try:
        from dpbundle.release.spec.coding import column_coding

        cc = column_coding(spec, name, alt_id)
    except Exception:  # noqa: BLE001 - display only
        return "(numbers not available)"
    pairs = [f"{lab} = {v:g}" if i not in cc.special_codes else f"{lab} (special: {cc.special[i].replace('_', ' ')})"
             for i, (lab, v) in enumerate(zip(cc.labels, cc.values))]
    more = f", ... ({len(pairs)} in all)" if len(pairs) > limit else ""
    return ", ".join(pairs[:limit]) + more


def _alternative_text(alt: dict) -> str:
    parts = [alt["id"] + ":"]
    if "categories" in alt:
        parts.append(f"{len(alt['categories'])} categories")
        if "map" in alt:
            parts.append(f"map {_short(alt['map'], 8)}")
        if "default" in alt:
            parts.append(f"default {format_value(alt['default'])}")
    else:
        if "clip" in alt:
            parts.append(f"clip {format_value(alt['clip'])},")
        if "dp_edges" in alt:
            d = alt["dp_edges"]
            parts.append(f"{d['bins']} bins, edges drawn under DP (quantiles; epsilon {format_value(d['epsilon'])}, "
                         f"candidates every {format_value(d.get('step', 1))})")
        elif "edges" in alt:
            parts.append(f"{len(alt['edges']) - 1} bins, edges {format_value(alt['edges'])}")
        else:
            a, b = alt["unit_bins"]
            parts.append(f"{b - a + 1} unit bins {a}..{b}")
    for k in ("labels", "values"):
        if k in alt:
            parts.append(f"({k} overridden)")
    if alt.get("ordered") is True:
        parts.append("(ordered categories)")
    return " ".join(parts)


def _columns_section(spec, console: Console) -> None:
    table = Table(title="Released columns (numbers = what constraints, group bins, means, "
                  "regressions and faithfulness compare)", title_justify="left",
                  show_lines=True)
    table.add_column("column", style="bold", no_wrap=True, overflow="fold")
    table.add_column("source", overflow="fold")
    table.add_column("alternative", overflow="fold")
    table.add_column("released labels = numbers", overflow="fold")
    removed = spec.model.removed_categories
    for col in spec.model.columns:
        source = _source_text(col.source.to_document())
        gone = removed.get(col.source.column)
        if gone and any(alt.categorical for alt in col.alternatives):
            source += (f"; input categories {format_value(sorted(gone))} are removed by raw "
                       "constraints and need no map")
        name = col.name + (f" (unit: {col.unit})" if col.unit else "")
        for j, alt in enumerate(col.alternatives):
            table.add_row(_t(name if j == 0 else "", "bold"),
                          _t(source if j == 0 else ""),
                          _t(_alternative_text(alt.to_document())), _t(_numbers_text(spec, col.name, alt.id)))
    console.print(table)


def _condition_text(c: Constraint) -> str:
    if c.any_missing:
        return "any cell is missing"
    return " and ".join(f"{a} {op} {format_value(v)}" for a, op, v in c.conditions)


def _constraints_section(spec, console: Console) -> None:
    for key, what in (("raw_constraints", "dropped from the input before anything else"),
                      ("synthetic_constraints", "dropped from synthetic rows (on released numbers)")):
        items = getattr(spec.model, key) or ()
        if not items:
            continue
        table = Table(title=f"{key}: rows matching any of these are {what}", title_justify="left")
        table.add_column("name", overflow="fold")
        table.add_column("matches when", overflow="fold")
        for c in items:
            table.add_row(_t(c.name), _t(_condition_text(c)))
        console.print(table)


def _group_bins_section(spec, console: Console) -> None:
    gb = spec.model.group_bins or {}
    if not gb:
        return
    table = Table(title="group_bins: coarse groups cut on the released numbers (a number v "
                  "falls in the first group whose upper edge is > v)", title_justify="left")
    table.add_column("column", style="bold", overflow="fold")
    table.add_column("edges", overflow="fold")
    table.add_column("labels", overflow="fold")
    for col, g in gb.items():
        if g.per_alternative is not None:
            for alt, sub in g.per_alternative.items():
                table.add_row(_t(f"{col} (alternative {alt})"), _t(format_value(sub.edges)),
                              _t(format_value(sub.labels)))
        else:
            table.add_row(_t(col), _t(format_value(g.edges)), _t(format_value(g.labels)))
    console.print(table)


def _privacy_section(spec, console: Console) -> None:
    model = spec.model
    rows: list[tuple[str, Text, str]] = []
    rows.append(("projection.min_count", _t(format_value(model.projection.min_count)),
                 SECTIONS["projection"][0].meaning))
    qi = model.face_privacy.quasi_identifiers if model.face_privacy is not None else None
    if qi:
        rows.append(("face_privacy.quasi_identifiers", _t(format_value(qi)),
                     "column sets checked for k-anonymity (k = min_count) by the audit"))
    priv = model.privacy.to_document()
    unused = ("epsilon_generation",) if spec.definition == "zcdp" else ("rho_generation", "delta")
    for p in SECTIONS["privacy"]:
        if p.name == "private_data_sha256":
            cell = _t(f"{len(priv.get(p.name, []))} fingerprint(s)")
        elif p.name in unused and p.name not in priv:
            cell = _t("not used (privacy.definition: " + spec.definition + ")", "dim")
        else:
            cell = _value_cell(p, priv)
        rows.append((f"privacy.{p.name}", cell, p.meaning))
    rows.append(("total rho" if spec.definition == "zcdp" else "total epsilon",
                 _t(f"{spec.budget_formula()} (cap {spec.epsilon_cap:g})", "bold"),
                 "what the release spends (the DP count of records, if any, once; private "
                 "selection doubles one attempt's cost, or only the criteria's when the generator "
                 "is fitted once)"))
    console.print(_param_table("Projection, face privacy and privacy", rows))


def _release_section(spec, console: Console) -> None:
    """The datasheet's metadata: every release field, its value or its default."""
    rel = spec.model.release.to_document()
    rows = [(p.name, _value_cell(p, rel), p.meaning) for p in SECTIONS["release"]]
    console.print(_param_table("release: the datasheet's metadata", rows))


def explain_spec(spec, console: Console, only: str | None = None) -> None:
    """Print a loaded :class:`~dpbundle.release.spec.load.Spec` section by section (public content)."""
    title = spec.model.release.title
    console.rule(Text(f"{spec.source}: {title}"))
    if only is None:
        _release_section(spec, console)
        _input_section(spec, console)
        _columns_section(spec, console)
        _constraints_section(spec, console)
        _group_bins_section(spec, console)
    if only is None or only in GENERATORS:
        console.rule("Generators")
        _generators_section(spec, console, only)
    if only is None or only in CRITERIA:
        console.rule("Acceptance criteria")
        _criteria_section(spec, console, only)
    if only is None:
        console.rule("Projection and privacy")
        _privacy_section(spec, console)


# --------------------------------------------------------------------------- the command


