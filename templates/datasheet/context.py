"""The datasheet's content: the template's context, built from a bundle's public files only.

Modelled on Datasheets for Datasets (Gebru et al.) and the two-part README of Israel's 2024 DP
births release (Hod & Canetti 2024): part 1 for data subjects and users (what the data is and is
not, columns, intended uses, privacy in plain words, feedback); part 2 technical (data quality
with noise, privacy budget, face privacy, faithfulness, production process, verification).

Every sentence is a function of :class:`~.public.PublicFiles` (no private input, no clock, no
randomness but fixed seeds), so that the public audit renders the same bytes again.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from . import charts, value_noise
from .numbers import NUMBER_FORMAT, NUMBER_FORMAT_DOC, format_number
from .public import PublicFiles

__all__ = ["build_context", "query_family", "PUBLISHED_EPSILONS", "epsilon_scale",
           "openssl_verify_command", "publication_facts", "WEAK_GUARANTEE_EPSILON"]

# Above this total epsilon the datasheet says plainly that the protection is weak (the spec
# language's documented threshold; release/spec.py checks the acknowledgement).
WEAK_GUARANTEE_EPSILON = 10


def publication_facts(public: PublicFiles) -> dict:
    """What the datasheet says about pre-registration and a published model, from the optional
    public files."""
    out: dict[str, Any] = {"model": public.has_model}
    seeds, record = public.optional.get("seeds.json"), public.optional.get("preregistration.json")
    if isinstance(seeds, dict) and isinstance(record, dict):
        out.update(beacon=seeds.get("beacon"), record_created=record.get("created"),
                   spec_sha256=record.get("spec_sha256"), commitment=seeds.get("commitment"))
    return out


# Published privacy budgets, for the datasheet's comparison (facts with their sources, printed
# with the source named). The US figure is (epsilon, delta)-DP with delta = 1e-10, converted by the
# Census Bureau from zero-concentrated DP (rho = 2.56 for the persons file; the standard
# conversion rho + 2 sqrt(rho ln(1/delta)) tightened as in Canonne et al. gives 17.16, checked
# here). The housing-units figure is left out until it is checked against the primary source.
PUBLISHED_EPSILONS = (
    {"name": "Israel's 2024 release of its national birth registry", "epsilon": 9.98,
     "kind": "pure differential privacy, as here", "source": "Hod & Canetti 2024, arXiv:2405.00267"},
    {"name": "US 2020 Census redistricting data (P.L. 94-171), persons", "epsilon": 17.14,
     "kind": "with \u03b4 = 10\u207b\u00b9\u2070, converted from zero-concentrated DP (\u03c1 = 2.56)",
     "source": "US Census Bureau production settings, 2021; Abowd et al. 2022, Harvard Data Science Review"},
)
PRIOR_SUSPICION = 0.01  # the 1-in-100 prior of the datasheet's worked example

def openssl_verify_command(pubkey: str = "KEY.pub") -> str:
    return f"openssl pkeyutl -verify -pubin -inkey {pubkey} -rawin -in manifest.json -sigfile manifest.sig"


def _pct(x: float) -> str:
    return format(100 * float(x), ".3g")


def approx_number(x: float) -> str:
    """A large factor in words a reader can take in: 1.6, 12, 21,590, 27.7 million, about 10^40."""
    x = float(x)
    if not math.isfinite(x):
        return "too large to print"
    if x < 10:
        return format(x, ".2g")
    if x < 1e6:
        digits = int(math.floor(math.log10(x))) + 1
        return f"{round(x, -(digits - 4)) if digits > 4 else round(x):,.0f}"
    for word, unit in (("trillion", 1e12), ("billion", 1e9), ("million", 1e6)):
        if x >= unit and (x < unit * 1000 or word == "trillion"):
            if x < 1e15:
                return f"{x / unit:.3g} {word}"
    return f"about 10^{math.log10(x):.0f}"


def _exp(eps: float) -> float:
    return math.exp(eps) if eps < 700 else float("inf")


def _posterior_text(eps: float, prior: float = PRIOR_SUSPICION) -> str:
    """Largest belief, in percent, that a prior ``prior`` can become after the release (pure DP:
    posterior odds <= e^eps x prior odds)."""
    q = _exp(eps)
    post = 1.0 if not math.isfinite(q) else q * prior / (q * prior + 1 - prior)
    pct = 100 * post
    if pct >= 99.95:
        return "more than 99.9%"
    return f"{pct:.3g}%"


def epsilon_scale(total: float) -> dict:
    """Part 1's reading aid: e^epsilon, the 1-in-100 example, and the published releases (with
    this release among them, sorted by epsilon), all computed from ``total``."""
    rows = [{"name": "This release", "epsilon": format_number(total), "factor": approx_number(_exp(total)),
             "posterior": _posterior_text(total), "kind": "pure differential privacy", "source": "",
             "this": True, "value": float(total)}]
    for p in PUBLISHED_EPSILONS:
        rows.append({"name": p["name"], "epsilon": format_number(p["epsilon"]),
                     "factor": approx_number(_exp(p["epsilon"])), "posterior": _posterior_text(p["epsilon"]),
                     "kind": p["kind"], "source": p["source"], "this": False, "value": p["epsilon"]})
    rows.sort(key=lambda r: (r["value"], not r["this"]))
    comparisons = []
    for p in PUBLISHED_EPSILONS:
        diff = float(total) - p["epsilon"]
        if abs(diff) < 0.005:
            word, factor = "the same as", ""
        elif diff < 0:
            word, factor = "smaller than", f"a bound {approx_number(_exp(-diff))} times tighter"
        else:
            word, factor = "larger than", f"a bound {approx_number(_exp(diff))} times looser"
        comparisons.append({"name": p["name"], "epsilon": format_number(p["epsilon"]), "word": word,
                            "factor": factor, "source": p["source"]})
    return {"factor": approx_number(_exp(total)), "prior_pct": format(100 * PRIOR_SUSPICION, "g"),
            "posterior": _posterior_text(total), "rows": rows, "comparisons": comparisons}


def _column_text(col: str | None, spec_columns: dict) -> str:
    if col is None:
        return "overall"
    return col.replace("_", " ")


def _groups_text(col: str | None, spec: dict) -> str:
    if col is None:
        return "all records"
    if isinstance(col, list):  # joint groups
        return " x ".join(_groups_text(c, spec) for c in col)
    labels = (spec.get("group_bins") or {}).get(col, {}).get("labels")
    name = col.replace("_", " ")
    return f"{name} ({', '.join(map(str, labels))})" if labels else name


def _names(names) -> str:
    return ", ".join(str(n).replace("_", " ") for n in names)


def _features_text(entry: dict, spec: dict) -> str:
    """The regression's features as the spec states them (default: every other released column)."""
    feats = entry.get("features")
    if feats:
        return "the columns " + _names(feats)
    others = [c.get("name") for c in spec.get("columns") or [] if c.get("name") != entry.get("target")]
    return "the other columns (" + _names(others) + ")"


def _is_zero_one(entry: dict, spec: dict) -> bool:
    """True when the target's released numbers are all 0 or 1 in every alternative (a share)."""
    col = next((c for c in spec.get("columns") or [] if c.get("name") == entry.get("target")), None)
    if not col:
        return False
    for alt in col.get("alternatives") or []:
        if "categories" not in alt:
            return False
        values = alt.get("values", list(range(len(alt["categories"]))))
        if not set(values) <= {0, 1}:
            return False
    return True


def query_family(criterion: dict, entry: dict | None, spec: dict, d: int) -> str | None:
    """Plain-words description of the family of queries a criterion validates (None: not a query family)."""
    typ = criterion.get("type")
    entry = entry or {}
    t = format_number(criterion["threshold"])
    target = str(entry.get("target", "")).replace("_", " ")
    if typ == "kway_marginals":
        names = entry.get("columns")
        k = int(entry.get("max_k") or (len(names) if names else d))
        over = (f"of the columns {_names(names)}" if names else "of the columns")
        size = "1 column" if k == 1 else f"1 to {k} columns"
        return (f"Counts and shares of records in any cross-tabulation of {size} {over}, every combination of "
                f"values included: the share of each cell differs from the real share by less than {t} "
                f"({_pct(criterion['threshold'])} percentage points).")
    if typ == "smoothed_ratio":
        return (f"The number of records with a given value of one column: the real and synthetic counts differ by "
                f"a factor of less than {t} (after adding 1 to both).")
    if typ == "conditional_means":
        by = entry.get("by") or [None]
        groups = "; ".join(_groups_text(b, spec) for b in by)
        kind = "share of records with" if _is_zero_one(entry, spec) else "mean"
        return f"The {kind} {target} by group: {groups}; within {t} of the real value in every group."
    if typ == "regression_coefficients":
        return (f"A linear regression of {target} on {_features_text(entry, spec)}: the coefficients are within "
                f"an L1 distance of {t} of the real ones.")
    if typ == "regression_mae_difference":
        return (f"Predicting {target} from {_features_text(entry, spec)} with a linear regression fitted on these "
                f"data: its mean absolute error on the real data is within {t} of that of a regression fitted on "
                f"the real data.")
    if typ == "classification":
        pos = entry.get("positive")
        pos_text = " or ".join(str(p) for p in (pos if isinstance(pos, list) else [pos]))
        what = f"whether {target} is {pos_text} from {_features_text(entry, spec)} with a logistic regression"
        if entry.get("report", "coefficients") == "accuracy":
            return (f"Predicting {what} fitted on these data: its accuracy on the real data is within {t} "
                    f"({_pct(criterion['threshold'])} percentage points) of that of the model fitted with "
                    f"differential privacy on the real data.")
        return (f"Predicting {what}: the coefficients fitted on these data are within an L1 distance of {t} "
                f"of those fitted with differential privacy on the real data.")
    if typ == "quantile":
        levels = entry.get("quantiles") or [0.5]
        names = ["median" if q == 0.5 else f"{format_number(100 * q)}th percentile" for q in levels]
        kind = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        groups = "; ".join(_groups_text(b, spec) for b in (entry.get("by") or [None]))
        return f"The {kind} of {target} by group: {groups}; within {t} of the real value in every group."
    if typ == "faithfulness":
        return None
    return f"{criterion.get('description', criterion['id'])} (validated to less than {t})."


def _find_key(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            found = _find_key(v, key)
            if found is not None:
                return found
    elif isinstance(obj, list):
        for v in obj:
            found = _find_key(v, key)
            if found is not None:
                return found
    return None


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list) and any(isinstance(v, (dict, list)) for v in obj):
        for i, v in enumerate(obj):
            out += _flatten(v, f"{prefix}[{i}]")
    else:
        if isinstance(obj, list):
            text = ", ".join(format_number(v) if isinstance(v, float) else str(v) for v in obj)
        elif isinstance(obj, float):
            text = format_number(obj)
        else:
            text = "" if obj is None else str(obj)
        out.append((prefix, text))
    return out


def _min_multiplicity(codes: np.ndarray, cols: Sequence[int] | None = None) -> int:
    sub = codes if cols is None else codes[:, list(cols)]
    if len(sub) == 0:
        return 0
    _, counts = np.unique(sub, axis=0, return_counts=True)
    return int(counts.min())


def _source_text(entry: dict) -> str:
    src = entry.get("source") or {}
    col = src.get("column")
    derive = src.get("derive")
    if not col:
        return ""
    return f"{col} ({derive})" if derive else str(col)


def _label_examples(columns: Sequence[Any]) -> list[dict]:
    """Up to three labels of this bundle's own binned columns: a range, an open bin below, one above."""
    found: dict[str, str] = {}
    for col in columns:
        if not getattr(col, "ordered", False):
            continue
        for label in map(str, col.labels):
            if label.startswith("<"):
                found.setdefault("below", label)
            elif label.endswith("<"):
                found.setdefault("above", label)
            elif "-" in label.lstrip("-"):
                found.setdefault("range", label)
    notes = {"range": "", "below": "below the range", "above": "above it"}
    return [{"label": found[k], "note": notes[k]} for k in ("range", "below", "above") if k in found]


def _pattern_example(spec: dict) -> str:
    """A statistical pattern this release shows, named from the spec's own criteria."""
    for entry in spec.get("acceptance") or []:
        if entry.get("type") == "conditional_means" and entry.get("target"):
            kind = "the share of records with" if _is_zero_one(entry, spec) else "the average"
            return f"{kind} {str(entry['target']).replace('_', ' ')}"
    cols = [c.get("name") for c in spec.get("columns") or []]
    return f"how often each value of {str(cols[0]).replace('_', ' ')} occurs" if cols else ""


def build_context(public: PublicFiles) -> dict:
    """Everything the template needs, as plain strings/lists (numbers already formatted), from
    the bundle's public files only (:class:`PublicFiles`)."""
    spec, configuration, configuration_id = public.spec, public.configuration, public.configuration_id
    columns, codes, metrics, budget = public.columns, public.codes, public.metrics, public.budget
    meta = public.meta
    created, dpbundle_version, fingerprint = meta.created, meta.dpbundle_version, meta.fingerprint
    public_key_pem, commitment, files, extra = meta.public_key_pem, meta.commitment, meta.files, meta.extra
    publication = publication_facts(public)
    noise_estimates = value_noise.estimate(spec, columns, codes, metrics)
    release = spec.get("release") or {}
    n, d = codes.shape
    spec_cols = {c.get("name"): c for c in spec.get("columns") or []}
    acceptance = {a.get("id"): a for a in spec.get("acceptance") or []}
    fmt = format_number

    cols = []
    for j, col in enumerate(columns):
        entry = spec_cols.get(col.name, {})
        labels = [str(x) for x in col.labels]
        counts = np.bincount(codes[:, j], minlength=len(labels))[: len(labels)].tolist()
        description = public.descriptions.get(col.name) or entry.get("description") or ""
        alt = None
        cfg_cols = configuration.get("columns") if isinstance(configuration.get("columns"), dict) else None
        if cfg_cols and col.name in cfg_cols:
            alt = cfg_cols[col.name]
        elif isinstance(configuration.get(col.name), (str, dict)):
            alt = configuration[col.name]
        if isinstance(alt, dict):
            alt = alt.get("id") or ", ".join(f"{k}={v}" for k, v in alt.items())
        cols.append({
            "name": col.name,
            "description": description,
            "labels": labels,
            "n_values": len(labels),
            "source": _source_text(entry),
            "alternative": alt,
            "chart": charts.distribution_chart(labels, counts, title=f"{col.name}: records per value"),
        })

    vnoise = value_noise.value_noise_rows(metrics, noise_estimates)
    crit_rows, uses = [], []
    for m in metrics:
        entry = acceptance.get(m["id"])
        fam = query_family(m, entry, spec, d)
        vn = vnoise[m["id"]]
        vstd = vn["value_noise_std"]
        margin = float(m["threshold"]) - float(m["dp_value"])
        # a DP value within 2 noise standard deviations of its threshold: the real value may lie on the other side
        close = vstd is not None and vstd > 0 and abs(margin) < 2 * vstd
        if fam:
            vmean = vn["value_noise_mean"]
            uses.append({"id": m["id"], "text": fam, "dp_value": fmt(m["dp_value"]), "threshold": fmt(m["threshold"]),
                         "value_noise_std": format(vstd, ".3g") if vstd is not None else "",
                         "value_noise_mean": format(vmean, ".3g") if vmean else "",
                         "noise_on": vn["noise_on"], "close": close, "passed": bool(m["passed"])})
        crit_rows.append({
            "id": m["id"],
            "type": m["type"],
            "description": m.get("description", ""),
            "threshold": fmt(m["threshold"]),
            "stakeholder_threshold": fmt(m.get("stakeholder_threshold")),
            "threshold_inputs": _flatten(m.get("threshold_inputs")) if m.get("threshold_inputs") else [],
            "dp_value": fmt(m["dp_value"]),
            "noise_std": fmt(m["noise_std"]),
            "noise_scale": fmt(m["noise_scale"]),
            "epsilon": fmt(m["epsilon"]),
            "sensitivity": fmt(m["sensitivity"]),
            "mechanism": m["mechanism"],
            "passed": bool(m["passed"]),
            "noise_on": vn["noise_on"],
            "value_noise_std": fmt(vstd) if vstd is not None else "",
            "value_noise_mean": fmt(vn["value_noise_mean"]) if vn["value_noise_mean"] is not None else "",
            "noise_draws": (noise_estimates.get(m["id"]) or {}).get("draws"),
            "close": close,
        })
    chart_rows = [dict(m, value_noise_std=vnoise[m["id"]]["value_noise_std"]) for m in metrics]
    all_passed = all(m["passed"] for m in metrics)
    faith = [m for m in metrics if m["type"] == "faithfulness"]
    faithfulness = None
    if faith:
        f = faith[0]
        faithfulness = {"dp_value": fmt(f["dp_value"]), "threshold": fmt(f["threshold"]),
                        "noise_std": fmt(f["noise_std"]), "passed": bool(f["passed"]),
                        "share_pct": _pct(1 - float(f["dp_value"]))}
    fspec = spec.get("faithfulness") or {}

    # Face privacy, from the released data itself (public) and the configuration.
    min_count = _find_key(configuration, "min_count")
    name_index = {c.name: j for j, c in enumerate(columns)}
    qi_rows = [{"columns": ", ".join(c.name for c in columns), "min": _min_multiplicity(codes)}]
    for qi in ((spec.get("face_privacy") or {}).get("quasi_identifiers") or []):
        if all(q in name_index for q in qi):
            qi_rows.append({"columns": ", ".join(qi), "min": _min_multiplicity(codes, [name_index[q] for q in qi])})

    gen = budget["generation"]
    sel = budget["selection"]
    budget_rows = []
    for p in gen.get("parts") or []:
        budget_rows.append({"step": f"Generator ({gen['type']}): {p['purpose']}", "epsilon": fmt(p["epsilon"]), "kind": "part"})
    budget_rows.append({"step": f"Generator ({gen['type']}) total", "epsilon": fmt(gen["epsilon"]), "kind": "subtotal"})
    for c in budget["evaluation"]["criteria"]:
        budget_rows.append({"step": f"Acceptance criterion {c['id']}", "epsilon": fmt(c["epsilon"]), "kind": "part"})
    budget_rows.append({"step": "Acceptance criteria total", "epsilon": fmt(budget["evaluation"]["epsilon"]), "kind": "subtotal"})
    budget_rows.append({"step": "Per candidate (generator + criteria)", "epsilon": fmt(budget["per_iteration_epsilon"]), "kind": "subtotal"})
    budget_rows.append({"step": f"Private selection: factor {fmt(sel['factor'])} \u00d7 per candidate",
                        "epsilon": fmt(float(sel["factor"]) * float(budget["per_iteration_epsilon"])), "kind": "subtotal"})
    for p in budget.get("pre_selection") or []:
        budget_rows.append({"step": f"Measured once before selection: {p['purpose']}", "epsilon": fmt(p["epsilon"]), "kind": "part"})
    records = budget.get("records") or {"policy": "declared_public", "epsilon": 0,
                                        "statement": "the number of records is published exactly"}
    if records["policy"] == "dp_count":
        budget_rows.append({"step": "Number of records (DP count, once, before selection)",
                            "epsilon": fmt(records["epsilon"]), "kind": "part"})
    budget_rows.append({"step": "Total", "epsilon": fmt(budget["total_epsilon"]), "kind": "total"})

    total = float(budget["total_epsilon"])
    exp_total = math.exp(total) if total < 700 else float("inf")
    hyper = gen.get("hyperparameters") or {}

    n_fmt = f"{n:,}"
    period = release.get("period") or {}
    context = {
        # the document language (HTML lang, PDF /Lang): the spec's release.language when it has one
        "lang": str(release.get("language") or "en"),
        "title": release.get("title") or "Differentially private synthetic data",
        "publisher": release.get("publisher") or "",
        "contact": release.get("contact") or "",
        "licence": release.get("licence") or "",
        "period_start": period.get("start", ""),
        "period_end": period.get("end", ""),
        "description": release.get("description") or "",
        "unit_of_privacy": budget.get("unit_of_privacy") or release.get("unit_of_privacy") or "one record",
        "feedback": release.get("feedback") or (f"Contact {release.get('contact')}." if release.get("contact") else ""),
        "n": n,
        "n_fmt": n_fmt,
        "d": d,
        "columns": cols,
        "label_examples": _label_examples(columns),
        "pattern_example": _pattern_example(spec),
        "criteria": crit_rows,
        "all_passed": all_passed,
        "uses": uses,
        "criteria_chart": charts.criteria_chart(chart_rows),
        "fit_criteria": [c for c in crit_rows if c["noise_on"] == value_noise.ON_FIT],
        "selection_criteria": [c for c in crit_rows if c["noise_on"] == value_noise.ON_SCORES],
        "any_close": any(u["close"] for u in uses),
        "noise_z": fmt(charts.NOISE_Z),
        "faithfulness": faithfulness,
        "faithfulness_rules": {
            "exact": ", ".join(fspec.get("exact") or []),
            "adjacent": ", ".join(fspec.get("adjacent") or []),
            "max_adjacent": fspec.get("max_adjacent"),
            "exact_if_contains": ", ".join(f"{k} ({', '.join(map(str, v))})" for k, v in (fspec.get("exact_if_contains") or {}).items()),
        },
        "min_count": min_count,
        "qi_rows": qi_rows,
        "budget_rows": budget_rows,
        "total_epsilon": fmt(total),
        "exp_total_epsilon": fmt(exp_total) if math.isfinite(exp_total) else "very large",
        "epsilon_scale": epsilon_scale(total),
        # above WEAK_GUARANTEE_EPSILON the datasheet says plainly that the protection is weak
        "weak_guarantee": total > WEAK_GUARANTEE_EPSILON,
        "weak_guarantee_epsilon": fmt(WEAK_GUARANTEE_EPSILON),
        "weak_guarantee_acknowledged": (spec.get("privacy") or {}).get("acknowledge_weak_guarantee") is True,
        "epsilon_cap": fmt(budget["epsilon_cap"]),
        "total_epsilon_opendp": fmt(budget.get("total_epsilon_opendp")),
        "neighbouring": budget["neighbouring"],
        "records_policy": records["policy"],
        "records_statement": records["statement"],
        "records_epsilon": fmt(records["epsilon"]),
        # the count's noise: discrete Laplace of scale 1/eps, std sqrt(2)/eps (mean absolute error 1/eps)
        "records_error": (f"{round(math.sqrt(2) * float(records['noise_scale'])):,}"
                          if records.get("noise_scale") else ""),
        "input_metric": budget["input_metric"],
        "opendp_version": budget["opendp_version"],
        "selection_method": sel["method"],
        "selection_factor": fmt(sel["factor"]),
        "stop_probability": fmt(sel["stop_probability"]),
        "generator_type": gen["type"],
        "generator_epsilon": fmt(gen["epsilon"]),
        "generator_hyperparameters": _flatten(hyper) if hyper else [],
        "evaluation_epsilon": fmt(budget["evaluation"]["epsilon"]),
        "per_iteration_epsilon": fmt(budget["per_iteration_epsilon"]),
        "pre_selection": [{"purpose": p["purpose"], "epsilon": fmt(p["epsilon"])} for p in budget.get("pre_selection") or []],
        "configuration_id": configuration_id,
        "configuration_rows": _flatten(configuration),
        "raw_constraints": [c.get("name", "") for c in spec.get("raw_constraints") or []],
        "synthetic_constraints": [c.get("name", "") for c in spec.get("synthetic_constraints") or []],
        "created": created,
        "dpbundle_version": dpbundle_version,
        "fingerprint": fingerprint,
        "public_key_pem": public_key_pem.strip(),
        "commitment": commitment,
        "openssl_command": openssl_verify_command("KEY.pub"),
        "audit_command": "dpbundle audit BUNDLE --pubkey KEY.pub",
        "files": list(files),
        # pre-registration and published model (section 12): {"model": bool, "beacon": {...},
        # "record_created": str, "spec_sha256": str} or None
        "publication": publication or {},
        "number_format": NUMBER_FORMAT_DOC,
        "extra_rows": _flatten(extra) if extra else [],
    }
    return context


