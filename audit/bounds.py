"""Bounds on every size and count a bundle declares, checked before the number drives any work.

A bundle is untrusted input, and so is every number in it: ``gum_rounds: 10**9`` in model.json
or ``"n": 30000000`` in metrics.json would otherwise keep the public audit (and ``dpbundle
sample``) busy for months or exhaust the memory. Each number that sets how much work or memory
the audit spends is bounded here, before it is used:

* by the **spec**: the model must be the selected configuration's (its ``gum_rounds``, pairs,
  domain and columns are the configuration's and the released columns');
* by the **signed manifest**: n is the manifest's n, which must also be the row count of
  data.csv, whose size the manifest signs (checks that cost more than reading the files run only
  when the integrity check passed: ``runner.py``);
* by the **absolute caps** below (docs/audit.md, "Bounds"), far above any real spec.

A value over its bound fails the named check that needs it, with a message naming the file, the
field, the value and the limit. The caps are also what makes the audit's cost linear in the
bundle's size (docs/audit.md states the multiple; benchmarks/bench_audit_hostile.py measures it).
"""
from __future__ import annotations

import math

__all__ = [
    "MAX_JSON_DEPTH", "MAX_MESSAGE_CHARS", "MAX_COLUMNS", "MAX_BINS_PER_COLUMN", "MAX_LABELS",
    "MAX_CONSTRAINT_CONDITIONS", "MAX_QUASI_IDENTIFIER_SETS", "MAX_CRITERIA", "MAX_DATA_PASSES",
    "MAX_GROUP_CELLS", "MAX_RECORD_CHARS", "DRAWN_FACTOR", "DRAWN_EXTRA", "MAX_ROW_COST",
    "WORK_PER_BYTE", "WORK_FLOOR", "json_depth_over", "clip", "row_cost", "sampling_cost",
    "model_problems", "max_drawn", "work_budget", "first_round_rows", "spec_count_problems",
    "MAX_AIM_WORKLOAD_SETS", "MAX_AIM_CANDIDATES", "aim_candidate_problems",
]

# -- JSON and messages ---------------------------------------------------------------------
MAX_JSON_DEPTH = 64           # nesting levels of any JSON file of the bundle (a bundle needs ~8)
MAX_MESSAGE_CHARS = 1_000     # one problem or warning line in the report (longer: clipped)

# -- the spec (spec.json) -------------------------------------------------------------------
MAX_COLUMNS = 1_000           # released columns
MAX_BINS_PER_COLUMN = 100_000  # bins or categories of one alternative (unit_bins span, edges, categories)
MAX_LABELS = 1_000_000        # labels of the selected alternatives, all columns together
MAX_CONSTRAINT_CONDITIONS = 1_000   # conditions of all synthetic constraints together
MAX_QUASI_IDENTIFIER_SETS = 100     # face_privacy.quasi_identifiers
MAX_CRITERIA = 100            # acceptance criteria
MAX_DATA_PASSES = 1_000       # column passes over data.csv that recomputing the sensitivities takes
MAX_GROUP_CELLS = 2 ** 22     # cells of one grouping (a ``by`` item: the product of its groups)

# -- data.csv --------------------------------------------------------------------------------
MAX_RECORD_CHARS = 1 << 20    # one record of data.csv when the spec cannot give a tighter bound

# -- re-derivation and `dpbundle sample` ----------------------------------------------------
DRAWN_FACTOR = 4              # rows drawn from the model over all sampling rounds <= 4 n + DRAWN_EXTRA
DRAWN_EXTRA = 16 * 8          # (the rounds' minimum of 16 rows, 8 rounds)
MAX_ROW_COST = 20_000         # work units per sampled row (row_cost below)
WORK_PER_BYTE = 64            # re-derivation: rows drawn x row cost <= 64 x bundle bytes + WORK_FLOOR
WORK_FLOOR = 10 ** 8          # (one work unit is 3-35 ns on the benchmark machine)


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def json_depth_over(obj, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``obj`` (parsed JSON) nests deeper than ``limit`` levels; iterative, any depth."""
    stack = [(obj, 1)]
    while stack:
        x, depth = stack.pop()
        if isinstance(x, dict):
            children = x.values()
        elif isinstance(x, list):
            children = x
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def spec_count_problems(spec) -> list[str]:
    """The spec's lists over their caps (columns, synthetic-constraint conditions,
    quasi-identifier sets, acceptance criteria): counted before anything iterates over them."""
    if not isinstance(spec, dict):
        return []
    out = []

    def count(value) -> int:
        return len(value) if isinstance(value, list) else 0

    cons = spec.get("synthetic_constraints")
    conditions = sum(count(c.get("when")) if isinstance(c, dict) else 1
                     for c in cons) if isinstance(cons, list) else 0
    fp = spec.get("face_privacy")
    for what, n, cap in (("columns", count(spec.get("columns")), MAX_COLUMNS),
                         ("synthetic_constraints conditions", conditions, MAX_CONSTRAINT_CONDITIONS),
                         ("face_privacy.quasi_identifiers",
                          count(fp.get("quasi_identifiers")) if isinstance(fp, dict) else 0,
                          MAX_QUASI_IDENTIFIER_SETS),
                         ("acceptance criteria", count(spec.get("acceptance")), MAX_CRITERIA)):
        if n > cap:
            out.append(f"spec: {n:,} {what}, more than the limit of {cap:,}")
    return out


# -- the published model ---------------------------------------------------------------------

# The model kinds each generator publishes (mechanisms/published.py).
_KINDS_OF = {"privsyn": {"marginals_gum"}, "privbayes": {"bayesian_network", "raked"},
             "mst_pure": {"bayesian_network"}, "aim_pure": {"adaptive_gum"}}

# aim_pure (adaptive_gum): the audit re-derives the candidate marginals from the spec's criteria
# (audit/model_check.py); both counts are bounded first, without enumerating anything.
MAX_AIM_WORKLOAD_SETS = 1_000_000   # column sets the spec's criteria give (mechanisms/aim.py criteria_workload)
MAX_AIM_CANDIDATES = 1_000_000      # candidate marginals (the release measures a true table for each)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _gum_default_rounds(gen_type: str = "privsyn") -> int:
    """The generator's default gum_rounds (the value of a configuration that does not set it):
    PrivSyn's, or aim_pure's."""
    if gen_type == "aim_pure":
        from dpbundle.mechanisms.aim import DEFAULTS

        return int(DEFAULTS["gum_rounds"])
    import inspect

    from dpbundle.mechanisms.privsyn import PrivSyn

    return int(inspect.signature(PrivSyn.__init__).parameters["gum_rounds"].default)


def _aim_setting(gen: dict, key: str):
    """An aim_pure hyperparameter of the configuration, else the generator's default."""
    from dpbundle.mechanisms.aim import DEFAULTS

    return gen.get(key, DEFAULTS[key])


def row_cost(doc: dict) -> int:
    """Work units per sampled row of a (schema-valid, bounds-checked) model document.

    ``bayesian_network``: one per column and one per parent reference (a uniform, a parent
    index, a binary search per row); ``marginals_gum`` and ``adaptive_gum`` (the same
    sampling): one per column (the initial draws),
    then per GUM round one per step (each marginal, each column of size > 1 in no marginal),
    times ``1 + d // 8`` (a step may copy whole records); ``raked``: the base model's, plus per
    raking round one per raked column, ``4 d`` (the sort of the systematic resampling) and the
    raked columns' sizes (the final reassignment visits each value). Measured: 3-35 ns a unit.
    """
    kind = doc.get("kind")
    if kind == "raked":
        base = doc["base"]
        shares = [s for s in doc["shares"] if s is not None]
        d = len(base["domain"])
        return row_cost(base) + int(doc["rounds"]) * len(shares) + 4 * d + sum(len(s) for s in shares)
    domain = doc["domain"]
    d = len(domain)
    if kind == "bayesian_network":
        return d + sum(len(node["parents"]) for node in doc["network"])
    covered = {c for mg in doc["marginals"] for c in mg["columns"]}
    alone = sum(1 for j, k in enumerate(domain) if k > 1 and j not in covered)
    steps = len(doc["marginals"]) + alone
    return d + int(doc["gum_rounds"]) * steps * (1 + d // 8)


def sampling_cost(doc: dict, view) -> int:
    """Work units per sampled row: the model's (:func:`row_cost`) plus one per condition of the
    spec's synthetic constraints (each is evaluated on every sampled row)."""
    cons = view.spec.get("synthetic_constraints") or []
    conditions = sum(len(c["when"]) if isinstance(c, dict) and isinstance(c.get("when"), list) else 1
                     for c in cons) if isinstance(cons, list) else 0
    return row_cost(doc) + conditions


def model_problems(doc, view, config: dict) -> list[str]:
    """Why ``doc`` (model.json) cannot be the selected configuration's model, or is over a
    bound; [] if it is fine. Nothing here costs more than reading the document."""
    from .schema_util import validate

    where = "model.json"
    errors = validate(doc, "model")
    if errors:
        return [f"{where}: {e}" for e in errors[:5]]
    out: list[str] = []
    gen = config.get("generator") if isinstance(config, dict) else None
    gen = gen if isinstance(gen, dict) else {}
    if doc["generator"] != gen:
        out.append(f"{where}: generator {doc['generator']} is not the selected configuration's {gen}")
    kinds = _KINDS_OF.get(gen.get("type"), set())
    if doc["kind"] not in kinds:
        out.append(f"{where}: kind {doc['kind']!r} is not a model of the generator "
                   f"{gen.get('type')!r} (expected {' or '.join(sorted(kinds)) or 'none'})")
    names = list(view.names)
    if doc["columns"] != names:
        out.append(f"{where}: columns {doc['columns']} are not the released columns {names}")
    domain = [len(c.labels) for c in view.columns]
    parts = [doc] if doc["kind"] != "raked" else [doc["base"]]
    if doc["kind"] == "raked":
        base = doc["base"]
        if base.get("kind") not in ("bayesian_network", "marginals_gum"):
            out.append(f"{where}: base model kind {base.get('kind')!r} is not bayesian_network or marginals_gum")
            return out
        base_errors = validate(dict(base, format=doc["format"], generator=doc["generator"],
                                    epsilon_generation=doc["epsilon_generation"],
                                    columns=doc["columns"]), "model")
        if base_errors:
            return out + [f"{where}: base: {e}" for e in base_errors[:5]]
        shares = doc["shares"]
        if len(shares) != len(domain) or any(s is not None and len(s) != k for s, k in zip(shares, domain)):
            out.append(f"{where}: shares must give one list per released column, of its number of "
                       f"labels {domain} (or null)")
    for part in parts:
        if list(part["domain"]) != domain:
            out.append(f"{where}: domain {part['domain']} is not the released columns' numbers of "
                       f"labels {domain}")
    if out:
        return out
    top = parts[0]
    if top["kind"] == "bayesian_network":
        if len(top["network"]) != len(domain) or len(top["conditionals"]) != len(domain):
            out.append(f"{where}: a Bayesian network needs one node and one table per released "
                       f"column ({len(domain)}), got {len(top['network'])} and {len(top['conditionals'])}")
    elif top["kind"] == "adaptive_gum":
        out += _adaptive_problems(where, top, gen, domain, view)
    else:
        out += _gum_problems(where, top, gen, len(domain))
    if out:
        return out
    cost = sampling_cost(doc, view)
    if cost > MAX_ROW_COST:
        out.append(f"{where}: sampling one row takes {cost:,} work units, more than the limit of "
                   f"{MAX_ROW_COST:,} (docs/audit.md, \"Bounds\")")
    return out


def _gum_problems(where: str, doc: dict, gen: dict, d: int) -> list[str]:
    """marginals_gum: gum_rounds is the configuration's; the marginals are distinct pairs of
    columns, at most the configuration's max_pairs."""
    out = []
    want = gen.get("gum_rounds", _gum_default_rounds())
    if doc["gum_rounds"] != want:
        out.append(f"{where}: gum_rounds {doc['gum_rounds']} is not the selected configuration's "
                   f"{want}{'' if 'gum_rounds' in gen else ' (the generator default)'}")
    pairs = set()
    for i, mg in enumerate(doc["marginals"]):
        cols = mg["columns"]
        if len(cols) != 2 or cols[0] == cols[1] or any(not 0 <= c < d for c in cols):
            out.append(f"{where}: marginals[{i}].columns must be two distinct columns of 0..{d - 1}")
            break
        pairs.add(tuple(sorted(cols)))
    if not out and len(pairs) != len(doc["marginals"]):
        out.append(f"{where}: a pair of columns has more than one marginal")
    cap = gen.get("max_pairs")
    if not out and _int(cap) and len(doc["marginals"]) > cap:
        out.append(f"{where}: {len(doc['marginals'])} marginals, more than the configuration's "
                   f"max_pairs {cap}")
    if len(doc["selected"]) > d * (d - 1) // 2:
        out.append(f"{where}: {len(doc['selected'])} selected pairs, more than the "
                   f"{d * (d - 1) // 2} pairs of {d} columns")
    return out


def _adaptive_problems(where: str, doc: dict, gen: dict, domain: list[int], view) -> list[str]:
    """adaptive_gum: gum_rounds is the configuration's; at most ``rounds_per_column`` x d
    rounds (the budget rule never makes more), each over 2..``max_size`` distinct released
    columns; every marginal over 2..``max_size`` distinct columns, each column set once, no more
    marginals than rounds; and the candidates the audit re-derives from the spec's criteria
    within :data:`MAX_AIM_WORKLOAD_SETS` and :data:`MAX_AIM_CANDIDATES`."""
    d = len(domain)
    out = []
    want = gen.get("gum_rounds", _gum_default_rounds("aim_pure"))
    if doc["gum_rounds"] != want:
        out.append(f"{where}: gum_rounds {doc['gum_rounds']} is not the selected configuration's "
                   f"{want}{'' if 'gum_rounds' in gen else ' (the generator default)'}")
    per_column, max_size = _aim_setting(gen, "rounds_per_column"), _aim_setting(gen, "max_size")
    if not (_int(per_column) and per_column >= 1 and _int(max_size) and 2 <= max_size <= 6):
        return out + [f"spec.json: the configuration's rounds_per_column {per_column!r} or max_size "
                      f"{max_size!r} is not one aim_pure accepts"]
    if len(doc["rounds"]) > per_column * d:
        out.append(f"{where}: {len(doc['rounds']):,} rounds, more than the {per_column * d:,} "
                   f"(rounds_per_column {per_column} x {d} columns) the budget rule allows")
    for what, items in (("marginals", doc["marginals"]), ("rounds", doc["rounds"])):
        for i, item in enumerate(items):
            cols = item["columns"]
            if not 2 <= len(cols) <= max_size or len(set(cols)) != len(cols) \
                    or any(not 0 <= c < d for c in cols):
                out.append(f"{where}: {what}[{i}].columns must be 2..{max_size} (max_size) distinct "
                           f"columns of 0..{d - 1}")
                break
    if not out:
        sets = {frozenset(mg["columns"]) for mg in doc["marginals"]}
        if len(sets) != len(doc["marginals"]):
            out.append(f"{where}: a set of columns has more than one marginal")
        elif len(sets) > len(doc["rounds"]):
            out.append(f"{where}: {len(sets)} marginals, more than its {len(doc['rounds'])} rounds "
                       "measured")
    return out + aim_candidate_problems(view.spec, list(view.names), domain, max_size)


def aim_candidate_problems(spec: dict, names: list[str], domain: list[int], max_size: int) -> list[str]:
    """The work of re-deriving aim_pure's candidates, bounded before it is done: the column sets
    the spec's criteria give (:func:`mechanisms.aim.criteria_workload`, counted from the spec,
    all pairs when they give none) and the candidate marginals they make (at most, over the
    sets, C(s, 2) + ... + C(s, max_size) with s the set's columns of two values or more; a
    ``kway_marginals`` criterion's sets are all the subsets of its columns, so its candidates are
    counted once, as those subsets of 2..min(max_k, max_size) columns)."""
    idx = {n: j for j, n in enumerate(names)}
    d = len(names)
    binary = sum(1 for k in domain if k >= 2)

    def size(xs) -> int:
        """Released columns among ``xs`` (what criteria_workload keeps of it)."""
        if not isinstance(xs, (list, str, dict)):
            return 0
        return len({x for x in xs if isinstance(x, str) and x in idx})

    def cands(s: int) -> int:
        return sum(math.comb(min(s, binary), j) for j in range(2, max_size + 1))

    crit = spec.get("acceptance") if isinstance(spec, dict) else None
    n_sets, bound = d * (d - 1) // 2, cands(2) * (d * (d - 1) // 2)   # the all-pairs default
    for c in crit if isinstance(crit, list) else []:
        if n_sets > MAX_AIM_WORKLOAD_SETS or not isinstance(c, dict):
            break
        t, target = c.get("type"), 1 if isinstance(c.get("target"), str) else 0
        if t == "kway_marginals":
            use = size(c["columns"]) if c.get("columns") else d
            k = c.get("max_k")
            top = min(k if _int(k) and k >= 1 else use, use, 3)
            count = sum(math.comb(use, j) for j in range(1, top + 1))
            # its candidates are the subsets of its columns with 2..min(top, max_size) columns
            kway = sum(math.comb(min(use, binary), j) for j in range(2, min(top, max_size) + 1))
            n_sets, bound = n_sets + count, bound + kway
        elif t == "smoothed_ratio":
            n_sets += size(c["columns"]) if c.get("columns") else d
        elif t in ("conditional_means", "quantile"):
            by = c.get("by") if isinstance(c.get("by"), list) and c.get("by") else [None]
            for b in by:
                n_sets, bound = n_sets + 1, bound + cands(target + (1 if isinstance(b, str) else size(b)))
        elif t in ("regression_coefficients", "regression_mae_difference", "classification"):
            feats = size(c["features"]) if c.get("features") else d
            # one set per feature: the target with it (criteria_workload)
            n_sets, bound = n_sets + feats, bound + feats * cands(target + 1)
    faith = spec.get("faithfulness") if isinstance(spec, dict) else None
    if isinstance(faith, dict):
        n_sets, bound = n_sets + 1, bound + cands(sum(size(faith.get(k)) for k in ("exact", "adjacent", "nominal")))
    if n_sets > MAX_AIM_WORKLOAD_SETS:
        return [f"spec.json: the acceptance criteria give aim_pure more than {MAX_AIM_WORKLOAD_SETS:,} "
                "column sets to re-derive its candidate marginals from (docs/audit.md, \"Bounds\")"]
    if bound > MAX_AIM_CANDIDATES:
        return [f"spec.json: the acceptance criteria and max_size {max_size} give aim_pure up to "
                f"{bound:,} candidate marginals, more than the limit of {MAX_AIM_CANDIDATES:,} "
                "(docs/audit.md, \"Bounds\")"]
    return []


def max_drawn(n: int) -> int:
    """The most rows the sampling rounds may draw in all to keep ``n`` rows."""
    return DRAWN_FACTOR * int(n) + DRAWN_EXTRA


def work_budget(bundle_bytes: int) -> int:
    """Work units the re-derivation may spend on sampling: WORK_PER_BYTE x bundle bytes + WORK_FLOOR."""
    return WORK_PER_BYTE * int(bundle_bytes) + WORK_FLOOR


def first_round_rows(n: int) -> int:
    """Rows of the first sampling round (replay.sample_and_project): max(ceil(1.1 n), 16)."""
    return max(int(math.ceil(1.1 * int(n))), 16)
