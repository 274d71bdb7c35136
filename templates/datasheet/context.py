"""The datasheet's content: the template's context, built from a bundle's public files only.

Modelled on Datasheets for Datasets (Gebru et al.: motivation, composition, collection,
preprocessing, uses, distribution, maintenance), NIST SP 800-226 (the unit of privacy, the
privacy loss and how it composes, the implementation's hazards) and the two-part README of
Israel's 2024 DP births release (Hod & Canetti 2024): part 1 for data subjects and users (why the
data exist, what they are and are not, columns, intended uses, privacy in plain words,
feedback); part 2 technical (data quality with noise and the strength of each check, privacy
budget, face privacy, faithfulness, production process, distributions, maintenance, citation,
verification).

Every sentence is a function of :class:`~.public.PublicFiles` (no private input, no clock, no
randomness but fixed seeds), so that the public audit renders the same bytes again. Numbers for
people follow :data:`~.numbers.PEOPLE_RULE`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import charts, evidence as ev, value_noise
from .numbers import PEOPLE_RULE, noisy, plain, points, std_text, with_unit
from . import statements
from .edition import edition_of
from .provenance import provenance_text
from dpbundle.mechanisms.cells import RecordTypes

from .public import PublicFiles

__all__ = ["build_context", "query_family", "PUBLISHED_EPSILONS", "epsilon_scale",
           "openssl_verify_command", "STANDARD_TOOL_COMMANDS", "allowed_signers_line", "publication_facts", "verification_claims", "WEAK_GUARANTEE_EPSILON", "source_words",
           "SOURCE_KINDS", "faithfulness_rule_text", "one_category"]

# Above this total epsilon the datasheet says plainly that the protection is weak (the spec
# language's documented threshold; release/spec/load.py checks the acknowledgement).
WEAK_GUARANTEE_EPSILON = 10

#: release.source_kind -> (noun, with the indefinite article); absent or "other": neutral words
SOURCE_KINDS = {
    "registry": ("registry", "a confidential registry"),
    "census": ("census", "a confidential census"),
    "survey": ("survey", "a confidential survey"),
    "administrative file": ("administrative file", "a confidential administrative file"),
    "other": ("source data", "confidential source data"),
}


def source_words(kind: Any, simulated: bool = False) -> dict:
    """How the datasheet names the confidential source (release.source_kind; default: neutral).
    ``simulated`` (edition 2, spec.json's release.simulated): the source is named as a simulated
    one wherever the datasheet names it."""
    noun, a = SOURCE_KINDS.get(str(kind) if kind else "other", SOURCE_KINDS["other"])
    if simulated:
        return {"kind": kind or "", "noun": noun, "a": f"a SIMULATED {noun} (no real person)",
                "the": f"the simulated {noun}", "the_short": f"the simulated {noun}", "simulated": True}
    return {"kind": kind or "", "noun": noun, "a": a, "the": f"the confidential {noun}",
            "the_short": f"the {noun}"}


def publication_facts(public: PublicFiles) -> dict:
    """What the datasheet says about pre-registration and a published model, from the optional
    public files."""
    out: dict[str, Any] = {"model": public.has_model,
                           "configurations": "configurations.yaml" in public.meta.files}
    tables = public.optional.get("dp-tables.json")
    if isinstance(tables, dict):
        out["tables"] = dp_tables_rows(tables)
        out["tables_resize"] = tables.get("resize")
    seeds, record = public.optional.get("seeds.json"), public.optional.get("preregistration.json")
    if isinstance(seeds, dict) and isinstance(record, dict):
        out.update(beacon=seeds.get("beacon"), record_created=record.get("created"),
                   spec_sha256=record.get("spec_sha256"), commitment=seeds.get("commitment"))
    return out


def dp_tables_rows(doc: dict) -> list[dict]:
    """One row per table of dp-tables.json for the datasheet: its id, its columns (a merged one
    says how many values each group holds), cells, epsilon, noise scale and 95% half-width."""
    from .numbers import plain

    rows = []
    for t in doc.get("tables") or []:
        cols = [c if g == 1 else f"{c} (groups of {g} values)" for c, g in zip(t["columns"], t["merge"])]
        rows.append({"id": t["id"], "columns": " × ".join(cols), "cells": f"{len(t['counts']):,}",
                     "epsilon": plain(t["epsilon"], 4), "scale": plain(t["scale"], 4),
                     "half_width": f"{t['half_width']:,}"})
    return rows


def verification_claims(publication: dict, source: dict | None = None, edition: int = 1,
                        ledger: dict | None = None) -> dict[str, list[str]]:
    """The verification section's three lists, from the public files only (the audit renders
    them again): what the public audit proves, what only the enclave audit proves, what needs a
    trusted party (docs/audit.md, "What each audit proves", says the same). ``source``: the
    confidential source's words (:func:`source_words`). ``edition`` 1 keeps the 0.2.0 words;
    edition 2 states the noise test as a test with its false-alarm rate and the ledger's facts
    (``ledger``: :func:`~.statements.ledger_facts`)."""
    prereg, model = bool(publication.get("beacon")), bool(publication.get("model"))
    source = source or source_words(None)
    the, short = source["the"], source["the_short"]
    public = [
        "the files are the ones the publisher's key signed (when you give the audit the "
        "publisher's key, obtained from the publisher)",
        "the privacy budget: every epsilon, noise scale, sensitivity and derived threshold "
        "recomputed from the public files, and the total within the cap",
        "face privacy, the synthetic constraints, every DP value below its threshold, and the "
        "numbers of this datasheet",
    ]
    if prereg:
        public.append("the spec, the configuration list and the key are the ones registered in the "
                      "pre-registration record, and the seeds of the sampling and of the projection "
                      "come from its committed secret and the beacon value (when you give the audit "
                      "the record you archived and the beacon value you looked up)")
    if model:
        public.append("the published model has the structure, table sizes and noise scales that the "
                      "spec and the selected configuration give"
                      + ("; and data.csv is exactly what the model and the seeds produce" if prereg else ""))
    if edition == 1:
        enclave = [
            f"data.csv and every DP value follow, byte for byte, from {the} and the recorded random "
            "draws (the private transcript, whose commitment this bundle publishes)",
            "the recorded noise has the declared distributions: a statistical test over every draw of "
            "the run, with a false-alarm rate of one in a million",
            f"the number of runs on {short} that the bundle states is the private budget ledger's",
        ]
    else:
        enclave = [
            f"that data.csv and every DP value follow, byte for byte, from {the} and the recorded random "
            "draws (the private transcript, whose commitment this bundle publishes)",
            "that the recorded noise is consistent with the declared distributions, by a statistical test "
            "over every draw of the run: noise that is too small, too regular or absent fails it, and "
            "honest noise fails it by chance with probability at most 10⁻⁶ per audit (its "
            "false-alarm rate); passing is strong evidence, not a proof",
            _ledger_claim(short, ledger or {}),
        ]
    if model:
        enclave.append(("that " if edition >= 2 else "") + "the published model is the one the noisy measurements give")
    trusted = [
        "that the noise came from a differentially private mechanism run with fresh randomness, "
        "rather than made to look like it",
        ("that only one run happened: the budget ledger is the publisher's own record, which an "
         "oversight body can keep or inspect") if edition == 1 else
        ("that no run on these people went unrecorded: the budget ledger is the publisher's own record, "
         "which an oversight body can keep or inspect"),
        (f"that the release was made from {short} it names, and from no real person's record"
         if edition >= 2 and source.get("simulated") else f"that {short} fed to the release was the real one"),
    ]
    if prereg:
        trusted.append("that the beacon value was not chosen among several, unless its source "
                       "publishes each value once, at a known time, and the record was archived "
                       "before that time")
    return {"public": public, "enclave": enclave, "trusted": trusted}


def _ledger_claim(short: str, ledger: dict) -> str:
    """Edition 2's enclave claim about the budget ledger (given to the enclave audit with --ledger)."""
    if not ledger.get("known"):
        return (f"nothing about the publisher's budget ledger: this bundle states no number of runs on "
                f"{short} to compare with it")
    runs = "1 recorded run" if ledger["k"] == 1 else f"{ledger['k']} recorded runs"
    eps = " and the earlier runs\u2019 epsilons" if ledger["k"] > 1 and ledger.get("composed") is not None else ""
    return (f"that the publisher's private budget ledger records what this bundle states: {runs} on "
            f"{short}{eps}")


# Published privacy budgets, for the datasheet's comparison (facts with their sources, printed
# with the source named). The US figure is (epsilon, delta)-DP with delta = 1e-10, converted by the
# Census Bureau from zero-concentrated DP (rho = 2.56 for the persons file; the standard
# conversion rho + 2 sqrt(rho ln(1/delta)) tightened as in Canonne et al. gives 17.16, checked
# here). The housing-units figure is left out until it is checked against the primary source.
PUBLISHED_EPSILONS = (
    {"name": "Israel's 2024 release of its national birth registry", "short": "Israel 2024 registry release",
     "epsilon": 9.98,
     "kind": "pure differential privacy, as here", "source": "Hod & Canetti 2024, arXiv:2405.00267"},
    {"name": "US 2020 Census redistricting data (P.L. 94-171), persons", "short": "US 2020 Census, persons",
     "epsilon": 17.14,
     "kind": "with \u03b4 = 10\u207b\u00b9\u2070, converted from zero-concentrated DP (\u03c1 = 2.56)",
     "source": "US Census Bureau production settings, 2021; Abowd et al. 2022, Harvard Data Science Review"},
)
PRIOR_SUSPICION = 0.01  # the 1-in-100 prior of the datasheet's worked example


def openssl_verify_command(pubkey: str = "KEY.pub") -> str:
    return f"openssl pkeyutl -verify -pubin -inkey {pubkey} -rawin -in manifest.json -sigfile manifest.sig"


#: The standard-tool check of a bundle of dpbundle 0.3 or later, run in the bundle's folder with
#: ``KEY.pub`` and ``allowed_signers`` beside it: the checksum list's two signatures, every listed
#: file's hash, no file missing or added, the manifest's signature. README.md's "Verifying a bundle
#: without dpbundle" shows the same lines (a test compares them and runs them on tampered bundles).
STANDARD_TOOL_COMMANDS = (
    "openssl pkeyutl -verify -pubin -inkey ../KEY.pub -rawin -in SHA256SUMS -sigfile SHA256SUMS.sig",
    "ssh-keygen -Y verify -f ../allowed_signers -I publisher -n dpbundle -s SHA256SUMS.sshsig < SHA256SUMS",
    "sha256sum -c SHA256SUMS",
    "diff <({ cut -c67- SHA256SUMS; printf '%s\\n' SHA256SUMS SHA256SUMS.sig SHA256SUMS.sshsig manifest.json "
    "manifest.sig; } | LC_ALL=C sort) <(ls -A | LC_ALL=C sort)",
    openssl_verify_command("../KEY.pub"),
)


def allowed_signers_line(pem: str) -> str:
    """The OpenSSH ``allowed_signers`` line of an Ed25519 public key (PEM) for the identity
    ``publisher`` and the namespace ``dpbundle``; "" when the PEM is not an Ed25519 key."""
    import base64
    import struct

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(pem.encode("ascii"))
    except (ValueError, UnicodeEncodeError, TypeError):
        return ""
    if not isinstance(key, Ed25519PublicKey):
        return ""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    blob = struct.pack(">I", 11) + b"ssh-ed25519" + struct.pack(">I", 32) + raw
    return f'publisher namespaces="dpbundle" ssh-ed25519 {base64.b64encode(blob).decode()}'


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


def epsilon_scale(total: float, composed: float | None = None, runs: int | None = None,
                  delta: float | None = None) -> dict:
    """Part 1's reading aid: e^epsilon, the 1-in-100 example, and the published releases (with
    this release among them, sorted by epsilon), all computed from ``total``; ``composed``
    (edition 2, more than one recorded run on the registry): a row for the ``runs`` recorded runs
    together."""
    rows = [{"name": "This release", "short": "This release", "epsilon": plain(total),
             "factor": approx_number(_exp(total)), "posterior": _posterior_text(total),
             "kind": ("pure differential privacy" if delta is None else
                      f"(\u03b5, \u03b4)-differential privacy from zCDP, \u03b4 = {delta:g}"),
             "source": "", "this": True, "value": float(total)}]
    if composed is not None:
        every = "Both" if runs == 2 else f"All {runs}"
        rows.append({"name": f"{every} recorded runs on these people", "short": f"{every} recorded runs",
                     "epsilon": plain(composed), "factor": approx_number(_exp(composed)),
                     "posterior": _posterior_text(composed),
                     "kind": ("pure differential privacy, composed" if delta is None else
                              "epsilons composed; each zCDP run's \u03b4 adds"),
                     "source": "", "this": True, "value": float(composed)})
    for p in PUBLISHED_EPSILONS:
        kind = p["kind"].replace(", as here", "") if delta is not None else p["kind"]
        rows.append({"name": p["name"], "short": p["short"], "epsilon": plain(p["epsilon"]),
                     "factor": approx_number(_exp(p["epsilon"])), "posterior": _posterior_text(p["epsilon"]),
                     "kind": kind, "source": p["source"], "this": False, "value": p["epsilon"]})
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
        comparisons.append({"name": p["name"], "epsilon": plain(p["epsilon"]), "word": word,
                            "factor": factor, "source": p["source"]})
    return {"factor": approx_number(_exp(total)), "prior_pct": format(100 * PRIOR_SUSPICION, "g"),
            "posterior": _posterior_text(total), "rows": rows, "comparisons": comparisons}


# --------------------------------------------------------------------------- criteria in words

def _words(name: Any) -> str:
    return str(name).replace("_", " ")


def _groups_text(col: Any, spec: dict) -> str:
    if col is None:
        return "all records"
    if isinstance(col, list):  # joint groups
        return " x ".join(_groups_text(c, spec) for c in col)
    labels = ((spec.get("group_bins") or {}).get(col) or {}).get("labels")
    name = _words(col)
    return f"{name} ({', '.join(map(str, labels))})" if labels else name


def _names(names) -> str:
    return ", ".join(_words(n) for n in names)


def _features_text(entry: dict, spec: dict) -> str:
    """The regression's features as the spec states them (default: every other released column)."""
    feats = entry.get("features")
    if feats:
        return "the columns " + _names(feats)
    others = [c.get("name") for c in spec.get("columns") or [] if c.get("name") != entry.get("target")]
    return "the other columns (" + _names(others) + ")"


def _spec_column(spec: dict, name: Any) -> dict | None:
    return next((c for c in spec.get("columns") or [] if isinstance(c, dict) and c.get("name") == name), None)


def _is_zero_one(entry: dict, spec: dict) -> bool:
    """True when the target's released numbers are all 0 or 1 in every alternative (a share)."""
    col = _spec_column(spec, entry.get("target"))
    if not col:
        return False
    for alt in col.get("alternatives") or []:
        if "categories" not in alt:
            return False
        values = alt.get("values", list(range(len(alt["categories"]))))
        if not set(values) <= {0, 1}:
            return False
    return True


def one_category(entry: dict, spec: dict, columns: Sequence[Any] = ()) -> str:
    """The category (or categories) of a 0/1 target whose number is 1: from the released
    column's coding when the bundle has it (the selected alternative), else from the spec's
    alternatives when they agree; "" when unknown."""
    target = entry.get("target")
    col = next((c for c in columns if getattr(c, "name", None) == target), None)
    if col is not None:
        ones = [str(lab) for lab, v in zip(col.labels, np.asarray(col.values, dtype=float)) if v == 1]
    else:
        found = set()
        for alt in (_spec_column(spec, target) or {}).get("alternatives") or []:
            cats = alt.get("categories") or []
            values = alt.get("values", list(range(len(cats))))
            found.add(tuple(str(c) for c, v in zip(cats, values) if v == 1))
        ones = list(found.pop()) if len(found) == 1 else []
    return " or ".join(ones)


def _share_of(entry: dict, spec: dict, columns: Sequence[Any]) -> str:
    """"the share of records whose sex is female" (the category numbered 1 named)."""
    target = _words(entry.get("target", ""))
    one = one_category(entry, spec, columns)
    return f"the share of records whose {target} is {one}" if one else \
        f"the share of records whose {target} has the number 1"


def _unit_of(units: dict | None, col: Any) -> str:
    return str((units or {}).get(col) or "") if col else ""


def value_kind(criterion: dict, entry: dict | None, spec: dict) -> str:
    """How a criterion's values read: ``share`` (a share of records: percentage points),
    ``ratio``, ``target`` (the target column's unit) or ``number`` (no unit)."""
    typ = criterion.get("type")
    entry = entry or {}
    if typ in ("kway_marginals", "faithfulness"):
        return "share"
    if typ == "classification":
        return "share" if entry.get("report", "coefficients") == "accuracy" else "number"
    if typ == "smoothed_ratio":
        return "ratio"
    if typ == "conditional_means":
        return "share" if _is_zero_one(entry, spec) else "target"
    if typ in ("quantile", "regression_mae_difference"):
        return "target"
    return "number"


def _people(x: Any, std: Any, kind: str, unit: str, exact: bool = False) -> str:
    """A criterion's number for part 1: shares in percentage points, others in their unit."""
    if x is None:
        return ""
    if kind == "share":
        text = plain(100 * float(x)) if exact else noisy(100 * float(x), None if std is None else 100 * float(std))
        return points(text)
    text = plain(x) if exact else noisy(x, std)
    return with_unit(text, unit) if kind == "target" else text


@dataclass(frozen=True)
class _Family:
    """What the words of a criterion's query family are made of."""

    entry: dict             # the spec's acceptance entry
    spec: dict
    d: int                  # the number of released columns
    columns: Sequence[Any]  # the released columns' codings (the 0/1 target's category)
    kind: str               # value_kind
    target: str             # the target column in words
    t: str                  # the threshold for people (with its unit or in percentage points)
    tn: str                 # the threshold as a bare number
    measured: str = ""      # edition 2: what the target's numbers are (statements.measured_numbers_text)
    derived: str = ""       # edition 2: a derived threshold's note ("derived from the stakeholders' 2")


def _family_kway(q: _Family) -> str:
    names = q.entry.get("columns")
    k = int(q.entry.get("max_k") or (len(names) if names else q.d))
    size = "1 column" if k == 1 else f"1 to {k} columns"
    over = f"of the columns {_names(names)}" if names else "of the released columns"
    return (f"Counts and shares of records in any cross-tabulation of {size} {over}, every combination of "
            f"values included: the check asks that the share of each cell differ from the real share by "
            f"less than {q.tn} ({q.t}).{_special_note(q, 'cells')}")


def _special_note(q: _Family, what: str) -> str:
    """With ``special: exclude``: which special values of the criterion's own columns the check
    leaves out ("" otherwise, and when none of its columns has one)."""
    if q.entry.get("special") != "exclude":
        return ""
    if what == "cells":
        names = set(q.entry.get("columns") or [c.name for c in q.columns])
    else:
        by = [b for item in q.entry.get("by") or [] if item is not None
              for b in ([item] if isinstance(item, str) else item)]
        names = {q.entry.get("target"), *by}
    def listed(cols) -> str:
        return ", ".join(f"\u201c{lab}\u201d" for c in q.columns if c.name in cols
                         for lab, k in zip(c.labels, getattr(c, "special", None) or ()) if k)
    if not listed(names):
        return ""
    if what == "cells":
        return f" The cells of special values ({listed(names)}) are not compared."
    target = q.entry.get("target")
    parts = []
    if listed({target}):
        parts.append(f"the records whose {str(target).replace('_', ' ')} is a special value ({listed({target})})")
    if listed(names - {target}):
        parts.append(f"the groups of a special value ({listed(names - {target})})")
    return f" Left out: {' and '.join(parts)}."


def _family_ratio(q: _Family) -> str:
    k = plain(q.entry.get("smoothing", 1))
    return (f"The number of records with a given value of one column: the check asks that the real and "
            f"synthetic counts differ by a factor of less than {q.tn} (after adding {k} to both{q.derived}).")


def _family_conditional_means(q: _Family) -> str:
    groups = "; ".join(_groups_text(b, q.spec) for b in q.entry.get("by") or [None])
    if q.kind == "share":
        share = _share_of(q.entry, q.spec, q.columns)
        return (f"{share[0].upper()}{share[1:]}, "
                f"by group: {groups}; the check asks for an error below {q.tn} ({q.t}) in every group."
                f"{_special_note(q, 'records')}")
    if q.measured:
        return (f"The mean {q.target} by group: {groups}. The mean is of numbers: {q.measured}. The check "
                f"asks for an error below {q.t} in every group.{_special_note(q, 'records')}")
    return (f"The mean {q.target} by group: {groups}; the check asks for an error below {q.t} in every "
            f"group.{_special_note(q, 'records')}")


def _family_regression_coefficients(q: _Family) -> str:
    return (f"A linear regression of {q.target} on {_features_text(q.entry, q.spec)}: the check asks that the "
            f"coefficients be within an L1 distance of {q.tn} of the real ones.")


def _family_regression_mae(q: _Family) -> str:
    return (f"Predicting {q.target} from {_features_text(q.entry, q.spec)} with a linear regression fitted on these "
            f"data: the check asks that its mean absolute error on the real data be within {q.t} of that of "
            f"a regression fitted on the real data.")


def _family_classification(q: _Family) -> str:
    pos = q.entry.get("positive")
    pos_text = " or ".join(str(p) for p in (pos if isinstance(pos, list) else [pos]))
    what = f"whether {q.target} is {pos_text} from {_features_text(q.entry, q.spec)} with a logistic regression"
    if q.entry.get("report", "coefficients") == "accuracy":
        return (f"Predicting {what} fitted on these data: the check asks that its accuracy on the real data be "
                f"within {q.tn} ({q.t}) of that of the model fitted with differential privacy on the real data.")
    return (f"Predicting {what}: the check asks that the coefficients fitted on these data be within an L1 "
            f"distance of {q.tn} of those fitted with differential privacy on the real data.")


def _family_quantile(q: _Family) -> str:
    levels = q.entry.get("quantiles") or [0.5]
    names = ["median" if x == 0.5 else f"{plain(100 * x)}th percentile" for x in levels]
    qkind = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    groups = "; ".join(_groups_text(b, q.spec) for b in (q.entry.get("by") or [None]))
    if q.measured:
        return (f"The {qkind} of {q.target} by group: {groups}. It is taken over numbers: {q.measured}. "
                f"The check asks for an error below {q.t} in every group.")
    return (f"The {qkind} of {q.target} by group: {groups}; the check asks for an error below {q.t} "
            f"in every group.")


_FAMILIES = {
    "kway_marginals": _family_kway, "smoothed_ratio": _family_ratio,
    "conditional_means": _family_conditional_means, "regression_coefficients": _family_regression_coefficients,
    "regression_mae_difference": _family_regression_mae, "classification": _family_classification,
    "quantile": _family_quantile,
}


def query_family(criterion: dict, entry: dict | None, spec: dict, d: int, units: dict | None = None,
                 columns: Sequence[Any] = (), edition: int = 1, value_std: float | None = None) -> str | None:
    """Plain-words description of the family of queries a criterion checks, and what the check
    asks (None: not a query family). It describes the check, not its result: the result and the
    strength of the evidence are stated beside it. Edition 2 (``edition``) also says what a
    mean or quantile of a binned column is computed from (codebook.csv's numbers, open bins
    named), and rounds a derived threshold like the value it is compared with (``value_std``:
    that value's noise)."""
    typ = criterion.get("type")
    entry = entry or {}
    target = _words(entry.get("target", ""))
    unit = _unit_of(units, entry.get("target"))
    kind = value_kind(criterion, entry, spec)
    t = _people(criterion["threshold"], None, kind, unit, exact=True)
    tn = plain(criterion["threshold"])
    measured = derived = ""
    if edition >= 2:
        if kind == "target" and typ in ("conditional_means", "quantile"):
            measured = statements.measured_numbers_text(entry.get("target"), columns)
        if criterion.get("stakeholder_threshold") is not None:
            tn = statements.derived_threshold_text(float(criterion["threshold"]), value_std)
            t = _people(criterion["threshold"], value_std, kind, unit) if value_std else t
            fp = (criterion.get("threshold_inputs") or {}).get("false_positive")
            derived = (f"; the threshold is derived from the stakeholders\u2019 "
                       f"{plain(criterion['stakeholder_threshold'])}"
                       + (f", so that a true value of {plain(criterion['stakeholder_threshold'])} passes by the "
                          f"noise alone with probability at most {plain(100 * float(fp))}%"
                          if isinstance(fp, (int, float)) else ""))
    if typ == "faithfulness":
        return None
    describe = _FAMILIES.get(typ)
    if describe is None:
        return f"{criterion.get('description', criterion['id'])} (the check asks for a value below {t})."
    return describe(_Family(entry=entry, spec=spec, d=d, columns=columns, kind=kind, target=target, t=t, tn=tn,
                            measured=measured, derived=derived))


def faithfulness_rule_text(fspec: dict) -> str:
    """The whole cost-<=1 rule of the spec's faithfulness section, in words."""
    exact = list(fspec.get("exact") or [])
    adjacent = list(fspec.get("adjacent") or [])
    nominal = list(fspec.get("nominal") or [])
    max_adj = int(fspec.get("max_adjacent") or 0)
    max_nom = int(fspec.get("max_nominal") or 0)
    max_diff = fspec.get("max_differing")
    parts = []
    if exact:
        parts.append(f"they are equal in {_names(exact)}")
    if adjacent:
        if max_adj > 0:
            parts.append(f"at most {max_adj} of {_names(adjacent)} "
                         f"{'differs' if max_adj == 1 else 'differ'}, each by one adjacent bin "
                         f"(the others are equal)")
        else:
            parts.append(f"they are equal in {_names(adjacent)}")
    if nominal:
        if max_nom > 0:
            parts.append(f"at most {max_nom} of {_names(nominal)} "
                         f"{'differs' if max_nom == 1 else 'differ'}, to any other category (the others are equal)")
        else:
            parts.append(f"they are equal in {_names(nominal)}")
    text = "; ".join(parts)
    if max_diff is not None and (adjacent and max_adj > 0) and (nominal and max_nom > 0):
        text += (f"; and at most {int(max_diff)} {'column differs' if int(max_diff) == 1 else 'columns differ'} "
                 f"in all")
    eic = fspec.get("exact_if_contains") or {}
    if eic:
        listed = "; ".join(f"{_words(k)}: {', '.join(plain(v) for v in vals)}" for k, vals in eic.items())
        text += (f". A bin that holds one of these values strictly inside must match exactly ({listed})")
    return text


# --------------------------------------------------------------------------- other helpers

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
            text = ", ".join(plain(v) if isinstance(v, float) else str(v) for v in obj)
        elif isinstance(obj, bool):
            text = "true" if obj else "false"
        elif isinstance(obj, float):
            text = plain(obj)
        else:
            text = "" if obj is None else str(obj)
        out.append((prefix, text))
    return out


def _min_multiplicity(types: RecordTypes, cols: Sequence[int] | None = None) -> int:
    """The fewest records sharing one combination of the columns ``cols`` (all by default)."""
    if not len(types.counts):
        return 0
    sub = types.table.codes if cols is None else types.table.codes[:, list(cols)]
    keys = _row_keys(sub)
    if keys is None:
        _, inverse = np.unique(sub, axis=0, return_inverse=True)
    else:   # one integer per distinct row: the same groups, without sorting rows
        _, inverse = np.unique(keys, return_inverse=True)
    return int(np.bincount(inverse.reshape(-1), weights=types.weights).min())


def _row_keys(sub: np.ndarray) -> np.ndarray | None:
    """One int64 per row, equal for equal rows only (the codes read as digits of a mixed-radix
    number), or None when the codes are not non-negative integers or the keys would not fit."""
    if sub.ndim != 2 or sub.shape[1] == 0 or not np.issubdtype(sub.dtype, np.integer):
        return None
    if int(sub.min()) < 0:
        return None
    radices = [int(m) + 1 for m in sub.max(axis=0)]
    if math.prod(radices) >= 2 ** 62:
        return None
    keys = np.zeros(len(sub), dtype=np.int64)
    for j, radix in enumerate(radices):
        keys *= radix
        keys += sub[:, j].astype(np.int64, copy=False)
    return keys


def _label_examples(columns: Sequence[Any], edition: int = 1) -> list[dict]:
    """Up to three labels of this bundle's own binned columns: a range, an open bin below, one above.
    Edition 2 says what an open bin holds, from its codebook bound ("<20" every value below 20,
    "39<" every value of 40 or more), rather than "below the range" (it is the range's lowest bin)."""
    found: dict[str, str] = {}
    edges: dict[str, float] = {}
    for col in columns:
        if not getattr(col, "ordered", False):
            continue
        lower = np.asarray(getattr(col, "lower", []), dtype=float)
        upper = np.asarray(getattr(col, "upper", []), dtype=float)
        for i, label in enumerate(map(str, col.labels)):
            lo = lower[i] if i < lower.size else math.nan
            up = upper[i] if i < upper.size else math.nan
            if lo == -math.inf:
                found.setdefault("below", label)
                edges.setdefault("below", up)
            elif up == math.inf:
                found.setdefault("above", label)
                edges.setdefault("above", lo)
            elif math.isfinite(lo) and math.isfinite(up) and up - lo > 1:
                found.setdefault("range", label)
    notes = {"range": "", "below": "below the range", "above": "above it"}
    if edition >= 2:
        notes = {"range": "",
                 "below": f"for every value below {plain(edges['below'])}" if "below" in edges else "",
                 "above": f"for every value of {plain(edges['above'])} or more" if "above" in edges else ""}
    return [{"label": found[k], "note": notes[k]} for k in ("range", "below", "above") if k in found]


def _pattern_example(spec: dict, columns: Sequence[Any]) -> str:
    """A statistical pattern this release shows, named from the spec's own criteria."""
    for entry in spec.get("acceptance") or []:
        if entry.get("type") == "conditional_means" and entry.get("target"):
            if _is_zero_one(entry, spec):
                return _share_of(entry, spec, columns)
            return f"the average {_words(entry['target'])}"
    cols = [c.get("name") for c in spec.get("columns") or []]
    return f"how often each value of {_words(cols[0])} occurs" if cols else ""


def _budget_rows(budget: dict, spec: dict, edition: int = 1) -> tuple[list[dict], list[dict]]:
    """The budget table's rows and the stacked bar's segments (how the total composes); edition 2
    names the generator as people know it (PrivBayes, not privbayes)."""
    gen, sel = budget["generation"], budget["selection"]
    if edition >= 2:
        gen = dict(gen, type=statements.generator_name(gen["type"]))
    factor = float(sel["factor"])
    rows = []
    if budget.get("definition") == "zcdp":
        return _zcdp_budget_rows(budget, gen)
    for p in gen.get("parts") or []:
        rows.append({"step": f"Generator ({gen['type']}): {p['purpose']}", "epsilon": plain(p["epsilon"]), "kind": "part"})
    rows.append({"step": f"Generator ({gen['type']}) total", "epsilon": plain(gen["epsilon"]), "kind": "subtotal"})
    for c in budget["evaluation"]["criteria"]:
        rows.append({"step": f"Acceptance criterion {c['id']}", "epsilon": plain(c["epsilon"]), "kind": "part"})
    rows.append({"step": "Acceptance criteria total", "epsilon": plain(budget["evaluation"]["epsilon"]), "kind": "subtotal"})
    once = sel.get("retries") == "resample"    # the generator fitted once, before the selection
    per = "criteria; the generator is fitted once" if once else "generator + criteria"
    rows.append({"step": f"Per candidate ({per})", "epsilon": plain(budget["per_iteration_epsilon"]), "kind": "subtotal"})
    rows.append({"step": f"Private selection: factor {plain(sel['factor'])} \u00d7 per candidate",
                 "epsilon": plain(factor * float(budget["per_iteration_epsilon"])), "kind": "subtotal"})
    if once:
        rows.append({"step": f"Generator ({gen['type']}), fitted once before the selection",
                     "epsilon": plain(gen["epsilon"]), "kind": "part"})
    segments = [{"label": (f"generator ({gen['type']}), fitted once, {plain(gen['epsilon'])}" if once else
                           f"generator ({gen['type']}), {plain(sel['factor'])} \u00d7 {plain(gen['epsilon'])}"),
                 "value": (1.0 if once else factor) * float(gen["epsilon"])},
                {"label": f"acceptance criteria, {plain(sel['factor'])} \u00d7 {plain(budget['evaluation']['epsilon'])}",
                 "value": factor * float(budget["evaluation"]["epsilon"])}]
    for p in budget.get("pre_selection") or []:
        rows.append({"step": f"Measured once before selection: {p['purpose']}", "epsilon": plain(p["epsilon"]), "kind": "part"})
        segments.append({"label": f"{p['purpose']} (once)", "value": float(p["epsilon"])})
    for a in (budget.get("edges") or {}).get("alternatives") or []:
        rows.append({"step": f"Bin edges of {a['column']} ({a['alternative']}): {a['bins'] - 1} DP quantiles, "
                             "once, before selection", "epsilon": plain(a["epsilon"]), "kind": "part"})
        segments.append({"label": f"bin edges of {a['column']} ({a['alternative']}), once",
                         "value": float(a["epsilon"])})
    records = budget.get("records") or {}
    if records.get("policy") == "dp_count":
        rows.append({"step": "Number of records (DP count, once, before selection)",
                     "epsilon": plain(records["epsilon"]), "kind": "part"})
        segments.append({"label": "number of records (once)", "value": float(records["epsilon"])})
    rows.append({"step": "Total", "epsilon": plain(budget["total_epsilon"]), "kind": "total"})
    return rows, segments


def _zcdp_budget_rows(budget: dict, gen: dict) -> tuple[list[dict], list[dict]]:
    """A zCDP release's budget table (the column holds rho, or epsilon where a row says so) and
    its bar's segments, in rho: each pure-DP part (count, the selection over the criteria) as
    epsilon^2/2, the generator's rho, the total, and the epsilon at delta it implies."""
    z, sel = budget["zcdp"], budget["selection"]
    rows = [{"step": f"Generator ({gen['type']}): {p['purpose']} (rho)", "epsilon": plain(p["rho"]), "kind": "part"}
            for p in gen.get("parts") or []]
    rows.append({"step": f"Generator ({gen['type']}), fitted once (rho)", "epsilon": plain(gen["rho"]),
                 "kind": "subtotal"})
    for c in budget["evaluation"]["criteria"]:
        rows.append({"step": f"Acceptance criterion {c['id']} (epsilon, pure DP)", "epsilon": plain(c["epsilon"]),
                     "kind": "part"})
    rows.append({"step": f"Private selection over the criteria: ({plain(sel['factor'])} \u00d7 "
                         f"{plain(budget['evaluation']['epsilon'])})\u00b2/2 (rho)",
                 "epsilon": plain(z["rho_selection"]), "kind": "subtotal"})
    segments = [{"label": f"generator ({gen['type']}), fitted once, rho {plain(gen['rho'])}",
                 "value": float(gen["rho"])},
                {"label": f"acceptance criteria and selection, rho {plain(z['rho_selection'])}",
                 "value": float(z["rho_selection"])}]
    for p in budget.get("pre_selection") or []:
        rows.append({"step": f"Measured once before selection: {p['purpose']} (epsilon)", "epsilon": plain(p["epsilon"]),
                     "kind": "part"})
    if z["rho_pre_selection"]:
        segments.append({"label": f"pre-selection, rho {plain(z['rho_pre_selection'])}",
                         "value": float(z["rho_pre_selection"])})
    records = budget.get("records") or {}
    if records.get("policy") == "dp_count":
        rows.append({"step": f"Number of records (DP count, epsilon {plain(records['epsilon'])}): epsilon\u00b2/2 (rho)",
                     "epsilon": plain(z["rho_count"]), "kind": "part"})
        segments.append({"label": f"number of records, rho {plain(z['rho_count'])}", "value": float(z["rho_count"])})
    rows.append({"step": "Total rho (zero-concentrated DP)", "epsilon": plain(z["total_rho"]), "kind": "total"})
    rows.append({"step": f"Epsilon at delta {z['delta']:g} that the total rho implies",
                 "epsilon": plain(budget["total_epsilon"]), "kind": "total"})
    return rows, segments


def _criterion_numbers(m: dict, entry: dict | None, spec: dict, public: PublicFiles, vn: dict,
                       est: dict | None) -> dict:
    """A criterion's numbers, rounded to what its noise supports, with units; and the strength
    of its check (evidence.py)."""
    kind = value_kind(m, entry, spec)
    unit = _unit_of(public.units, (entry or {}).get("target"))
    vstd = vn["value_noise_std"]
    evi = ev.evidence(m, est)
    # the quality table prints bare numbers (its unit once, under the criterion's name); part 1's
    # sentences print each number with its unit
    table_unit = unit if kind == "target" else ""
    ruled = evi.ruled_out  # rounded like the DP value (a fit's: to the estimated noise of its value)
    out = {
        "kind": kind, "unit": unit, "table_unit": table_unit,
        "error_word": "largest ratio" if m.get("type") == "smoothed_ratio" else "error",
        "dp_value": noisy(m["dp_value"], vstd),
        "dp_value_people": _people(m["dp_value"], vstd, kind, unit),
        "threshold": plain(m["threshold"]),
        "threshold_people": _people(m["threshold"], None, kind, unit, exact=True),
        "value_noise_std": std_text(vstd) if vstd is not None else "",
        "value_noise_std_people": ("" if vstd is None else points(std_text(100 * vstd)) if kind == "share"
                                   else with_unit(std_text(vstd), table_unit)),
        "value_noise_mean": std_text(vn["value_noise_mean"]) if vn["value_noise_mean"] else "",
        "ruled_out": "" if ruled is None else noisy(ruled, vstd),
        "ruled_out_people": "" if ruled is None else _people(ruled, vstd, kind, unit),
        "weak": bool(evi.weak),
        "evidence_method": evi.method or "",
        "evidence_reason": evi.reason,
        "factor": "" if evi.factor is None else plain(evi.factor, sig=2),
        "negative": float(m["dp_value"]) < evi.floor,
        # a negative value, in the note that explains it: three significant digits (rounded to its
        # noise it may read 0.0, which is no explanation)
        "dp_value_3": with_unit(plain(m["dp_value"], sig=3), table_unit),
        # edition 2: the same value as the table's (rounded to its noise), or one significant digit
        # where that rounding reads 0 and would hide that the value lies below the smallest
        "dp_value_below": with_unit(_below_text(m["dp_value"], vstd), table_unit),
    }
    return out


def _below_text(value: float, std: float | None) -> str:
    """A DP value below its metric's smallest value, as the quality table prints it (rounded to
    its noise), or with one significant digit where that rounding shows no nonzero digit."""
    text = noisy(value, std)
    return text if any(ch in "123456789" for ch in text) else plain(value, sig=1)


def _sections(has_motivation: bool) -> list[dict]:
    """The datasheet's sections in order, numbered (part, id, title)."""
    part1 = ([("motivation", "Why this release exists")] if has_motivation else []) + [
        ("what", "What the data is, and what it is not"), ("columns", "Columns and their possible values"),
        ("uses", "Intended uses"), ("not-uses", "Uses that are not guaranteed"),
        ("privacy", "Privacy protection in plain words")]
    part2 = [("quality", "Data quality: the acceptance criteria"), ("budget", "Privacy budget"),
             ("face", "Face privacy"), ("faithfulness", "Faithfulness"), ("process", "Production process"),
             ("distributions", "Distributions of the released columns"),
             ("reading", "Reading the data in R and Stata"),
             ("maintenance", "Maintenance, versions and errata"), ("cite", "How to cite"),
             ("verify", "How to verify this release")]
    out, k = [], 0
    for part, items in ((1, part1), (2, part2)):
        for sid, title in items:
            k += 1
            out.append({"part": part, "id": sid, "num": str(k), "title": title})
    return out


# --------------------------------------------------------------------------- the context, by section
#
# build_context composes one function per part of the datasheet; each key of the template's
# context (each statement of the datasheet) is computed in exactly one of them.

@dataclass(frozen=True)
class _Facts:
    """What several sections use, read or estimated once from the public files."""

    public: PublicFiles
    release: dict               # spec.release
    source: dict                # source_words(release.source_kind)
    acceptance: dict            # spec.acceptance's entries by id
    records: dict               # budget.json's records (default: the count published exactly)
    publication: dict           # publication_facts(public)
    noise_estimates: dict       # value_noise.estimate: the noise of fitted values
    evidence_estimates: dict    # and of choices: the evidence of every check (evidence.py)
    edition: int                # the datasheet edition (edition.py): 1 = the frozen 0.2.0 wording
    simulated: bool             # edition 2: spec.json's release.simulated (always False in edition 1)
    ledger: dict                # edition 2: statements.ledger_facts of manifest.json's ledger


def _facts(public: PublicFiles) -> _Facts:
    spec, columns, metrics = public.spec, public.columns, public.metrics
    publication = publication_facts(public)
    edition = edition_of(public.meta.dpbundle_version)
    # edition 1 (dpbundle 0.2) simulated the fits with BLAS; edition 2 with the fixed-order arithmetic
    noise_estimates = value_noise.estimate(spec, columns, public.table, metrics, arithmetic=1 if edition == 1 else 2)
    # the evidence of every check (evidence.py): fits' and choices' noise simulated on the released data
    evidence_estimates = dict(noise_estimates, **value_noise.choice_estimates(spec, public.configuration, columns,
                                                                              public.table, metrics))
    release = spec.get("release") or {}
    simulated = edition >= 2 and statements.simulated(spec)
    acceptance = {a.get("id"): a for a in spec.get("acceptance") or [] if isinstance(a, dict)}
    records = public.budget.get("records") or {"policy": "declared_public", "epsilon": 0,
                                               "statement": "the number of records is published exactly"}
    return _Facts(public=public, release=release, source=source_words(release.get("source_kind"), simulated),
                  acceptance=acceptance, records=records, publication=publication,
                  noise_estimates=noise_estimates, evidence_estimates=evidence_estimates,
                  edition=edition, simulated=simulated,
                  ledger=statements.ledger_facts(public.meta.ledger, float(public.budget["total_epsilon"])))


def _section_about(f: _Facts) -> dict:
    """The release as its spec describes it: title block, numbered sections, part 1's words
    (motivation, maintenance, citation, feedback), the document language."""
    release, budget = f.release, f.public.budget
    period = release.get("period") or {}
    sections = _sections(bool(release.get("motivation") or release.get("mandate")))
    return {
        # the datasheet edition (edition.py): which template renders the context
        "edition": f.edition,
        # the document language (HTML lang, PDF /Lang): the spec's release.language when it has one
        "lang": str(release.get("language") or "en"),
        "title": release.get("title") or "Differentially private synthetic data",
        "publisher": release.get("publisher") or "",
        "contact": release.get("contact") or "",
        "licence": release.get("licence") or "",
        "period_start": period.get("start", ""),
        "period_end": period.get("end", ""),
        "description": release.get("description") or "",
        "release_version": str(release.get("version") or ""),
        "motivation": str(release.get("motivation") or ""),
        "mandate": str(release.get("mandate") or ""),
        "maintenance": str(release.get("maintenance") or ""),
        "citation": str(release.get("citation") or ""),
        "thresholds_set_by": str(release.get("thresholds_set_by") or ""),
        "source": f.source,
        # edition 2: spec.json's release.simulated (page 1 says SIMULATED; the source is named simulated)
        "simulated": f.simulated,
        "sections": sections,
        "num": {s["id"]: s["num"] for s in sections},
        "unit_of_privacy": budget.get("unit_of_privacy") or release.get("unit_of_privacy") or "one record",
        "feedback": release.get("feedback") or (f"Contact {release.get('contact')}." if release.get("contact") else ""),
        "number_rule": PEOPLE_RULE,
    }


def _base_sample(sampler: dict | None, n: int) -> dict | None:
    """Step 5's account of sampler version 3 (manifest.json's ``sampler``): the base's size B,
    and how often each base record is repeated (q = n // B times, r = n - q B of them once more)."""
    base = sampler.get("base_records") if isinstance(sampler, dict) and sampler.get("version") == 3 else None
    if not isinstance(base, int) or isinstance(base, bool) or base <= 0 or n < base:
        return None
    q, r = divmod(n, base)
    return {"base_fmt": f"{base:,}", "q": q, "q1": q + 1, "r_fmt": f"{r:,}", "r": r,
            "q_times": _times(q), "q1_times": _times(q + 1)}


def _times(k: int) -> str:
    """How often, in words: once, twice, 3 times."""
    return {1: "once", 2: "twice"}.get(k, f"{k:,} times")


def _edges_of(f: _Facts) -> dict:
    """budget.json's ``edges`` (bins drawn under DP), or an empty one."""
    return f.public.budget.get("edges") or {"epsilon": 0, "alternatives": []}


def _section_records(f: _Facts) -> dict:
    """What the data is: the number of records and columns, and how the count was released."""
    n, d = f.public.n, len(f.public.columns)
    records = f.records
    return {
        "n": n,
        "n_fmt": f"{n:,}",
        "base_sample": _base_sample(f.public.meta.sampler, n),
        "d": d,
        "records_policy": records["policy"],
        "records_statement": records["statement"],
        "records_epsilon": plain(records["epsilon"]),
        "edges_drawn": [f"{a['column']} ({a['alternative']})" for a in _edges_of(f)["alternatives"]],
        "edges_epsilon": plain(_edges_of(f)["epsilon"]),
        # the count's noise: discrete Laplace of scale 1/eps, std sqrt(2)/eps (mean absolute error 1/eps)
        "records_error": (f"{round(math.sqrt(2) * float(records['noise_scale'])):,}"
                          if records.get("noise_scale") else ""),
    }


def _ratio(f: _Facts) -> dict | None:
    """The first smoothed-ratio criterion (its band is drawn on the distributions), or None."""
    ratio_rows = [m for m in f.public.metrics if m.get("type") == "smoothed_ratio"]
    if not ratio_rows:
        return None
    r0 = ratio_rows[0]
    r_entry = f.acceptance.get(r0["id"]) or {}
    return {"id": r0["id"], "threshold": float(r0["threshold"]), "smoothing": float(r_entry.get("smoothing", 1) or 1)}


def _column_row(public: PublicFiles, j: int, col: Any, ratio: dict | None, edition: int = 1) -> dict:
    """One released column: its description, unit, values, provenance and distribution chart."""
    spec, configuration = public.spec, public.configuration
    labels = [str(x) for x in col.labels]
    counts = public.types.column_counts(j)[: len(labels)].tolist()
    entry = _spec_column(spec, col.name) or {}
    unit = public.units.get(col.name) or ""
    alt = None
    cfg_cols = configuration.get("columns") if isinstance(configuration.get("columns"), dict) else None
    if cfg_cols and col.name in cfg_cols:
        alt = cfg_cols[col.name]
    if isinstance(alt, dict):
        alt = alt.get("id") or ", ".join(f"{k}={v}" for k, v in alt.items())
    title = f"{col.name}: records per value" + (f" ({unit})" if unit else "")
    return {
        "name": col.name,
        "description": public.descriptions.get(col.name) or entry.get("description") or "",
        "unit": unit,
        "labels": labels,
        "n_values": len(labels),
        "source": provenance_text(spec, configuration, col.name, unit),
        "alternative": alt,
        "chart": charts.distribution_chart(labels, counts, title=title, ratio_band=ratio, edition=edition),
    }


def _section_columns(f: _Facts) -> dict:
    """The columns and their values (part 1) and their distributions (part 2)."""
    public = f.public
    ratio = _ratio(f)
    cols = [_column_row(public, j, col, ratio, f.edition) for j, col in enumerate(public.columns)]
    return {
        "columns": cols,
        "any_unit": any(c["unit"] for c in cols),
        "label_examples": _label_examples(public.columns, f.edition),
        "pattern_example": _pattern_example(public.spec, public.columns),
        "ratio": ({"id": ratio["id"], "threshold": plain(ratio["threshold"]), "smoothing": plain(ratio["smoothing"])}
                  if ratio else None),
    }


def _criterion_row(f: _Facts, m: dict, vn: dict) -> dict:
    """A criterion's row of the quality table (also a use of part 1 when it checks a query family)."""
    public = f.public
    entry = f.acceptance.get(m["id"])
    vstd = vn["value_noise_std"]
    fam = query_family(m, entry, public.spec, len(public.columns), public.units, public.columns,
                       edition=f.edition, value_std=vstd)
    margin = float(m["threshold"]) - float(m["dp_value"])
    # a DP value within 2 noise standard deviations of its threshold: the real value may lie on the other side
    close = vstd is not None and vstd > 0 and abs(margin) < 2 * vstd
    nums = _criterion_numbers(m, entry, public.spec, public, vn, f.evidence_estimates.get(m["id"]))
    derivation = ""
    if f.edition >= 2 and isinstance(m.get("threshold_inputs"), dict):
        derivation = statements.derivation_text(m["threshold_inputs"], float(m["threshold"]))
    if f.edition >= 2 and m.get("stakeholder_threshold") is not None:
        # a derived threshold is rounded like the value it is compared with (metrics.json has it in full)
        nums = dict(nums, threshold=statements.derived_threshold_text(float(m["threshold"]), vstd),
                    threshold_people=(_people(m["threshold"], vstd, nums["kind"], nums["unit"]) if vstd
                                      else nums["threshold_people"]))
    return dict(nums, id=m["id"], type=m["type"], description=m.get("description", ""),
                stakeholder_threshold=plain(m.get("stakeholder_threshold")),
                threshold_inputs=_flatten(m.get("threshold_inputs")) if m.get("threshold_inputs") else [],
                threshold_derivation=derivation, mechanism_name=statements.mechanism_name(m["mechanism"]),
                noise_std=std_text(m["noise_std"]), noise_scale=plain(m["noise_scale"], sig=3),
                epsilon=plain(m["epsilon"]), sensitivity=plain(m["sensitivity"], sig=3),
                mechanism=m["mechanism"], passed=bool(m["passed"]), noise_on=vn["noise_on"],
                noise_draws=(f.noise_estimates.get(m["id"]) or {}).get("draws"), close=close,
                text=fam or "")


def _section_quality(f: _Facts) -> dict:
    """The acceptance criteria: the quality table and charts (part 2), the intended uses (part 1)."""
    metrics = f.public.metrics
    vnoise = value_noise.value_noise_rows(metrics, f.noise_estimates)
    crit_rows = [_criterion_row(f, m, vnoise[m["id"]]) for m in metrics]
    uses = [row for row in crit_rows if row["text"]]
    chart_rows = [dict(m, value_noise_std=vnoise[m["id"]]["value_noise_std"]) for m in metrics]
    if f.edition >= 2:  # the same quantity as the glance chart's: measured from the metric's smallest value
        chart_rows = [dict(r, floor=ev.metric_floor(r["type"])) for r in chart_rows]
    glance_rows = [dict(id=m["id"], passed=bool(m["passed"]), dp_value=float(m["dp_value"]),
                        threshold=float(m["threshold"]), floor=ev.metric_floor(m["type"]),
                        ruled_out=ev.evidence(m, f.evidence_estimates.get(m["id"])).ruled_out, weak=r["weak"])
                   for m, r in zip(metrics, crit_rows)]
    return {
        "criteria": crit_rows,
        "all_passed": all(m["passed"] for m in metrics),
        "weak_criteria": [r for r in crit_rows if r["weak"]],
        "negative_criteria": [r for r in crit_rows if r["negative"]],
        "uses": uses,
        "criteria_chart": charts.criteria_chart(chart_rows, edition=f.edition),
        "glance_chart": charts.glance_chart(glance_rows, edition=f.edition),
        "fit_criteria": [c for c in crit_rows if c["noise_on"] == value_noise.ON_FIT],
        "selection_criteria": [c for c in crit_rows if c["noise_on"] == value_noise.ON_SCORES],
        "any_close": any(u["close"] for u in uses),
        "noise_z": plain(charts.NOISE_Z),
        "power_pct": plain(100 * ev.POWER),
        "weak_share": "half",
    }


def _section_faithfulness(f: _Facts, crit_rows: list[dict]) -> dict:
    """The faithfulness criterion (its row with the share of faithful records) and the rule in words."""
    faith = [r for r in crit_rows if r["type"] == "faithfulness"]
    faithfulness = None
    if faith:
        row = faith[0]
        fm = next(m for m in f.public.metrics if m["id"] == row["id"])
        faithfulness = dict(row, share_pct=noisy(100 * (1 - float(fm["dp_value"])), 100 * float(fm["noise_std"])),
                            share_std=std_text(100 * float(fm["noise_std"])))
    return {"faithfulness": faithfulness, "faithfulness_rule": faithfulness_rule_text(f.public.spec.get("faithfulness") or {})}


def _section_face(f: _Facts) -> dict:
    """Face privacy, from the released data itself (public) and the configuration."""
    public = f.public
    columns, types = public.columns, public.types
    name_index = {c.name: j for j, c in enumerate(columns)}
    qi_rows = [{"columns": ", ".join(c.name for c in columns), "min": _min_multiplicity(types)}]
    for qi in ((public.spec.get("face_privacy") or {}).get("quasi_identifiers") or []):
        if all(q in name_index for q in qi):
            qi_rows.append({"columns": ", ".join(qi), "min": _min_multiplicity(types, [name_index[q] for q in qi])})
    return {"min_count": _find_key(public.configuration, "min_count"), "qi_rows": qi_rows}


def _section_budget(f: _Facts) -> dict:
    """The privacy budget: how the total composes, the cap, the weak-guarantee warning and the
    reading aid of part 1 (e^epsilon, published releases)."""
    spec, budget = f.public.spec, f.public.budget
    budget_rows, budget_segments = _budget_rows(budget, spec, f.edition)
    total = float(budget["total_epsilon"])
    cap = float(budget["epsilon_cap"])
    zcdp = budget.get("definition") == "zcdp"
    ledger = f.ledger if f.edition >= 2 else {"known": False, "composed": None}
    several = bool(ledger.get("known")) and ledger["k"] > 1 and ledger.get("composed") is not None
    delta = float(budget["zcdp"]["delta"]) if zcdp else None
    scale = (epsilon_scale(total, ledger["composed"], ledger.get("k"), delta=delta) if several
             else epsilon_scale(total, delta=delta))
    if f.edition >= 2:
        bands = statements.suspicion_bands(PRIOR_SUSPICION)
        epsilon_chart = charts.epsilon_chart([(r["short"], r["value"], r["this"]) for r in scale["rows"]],
                                             bands=bands, prior_pct=scale["prior_pct"])
    else:
        epsilon_chart = charts.epsilon_chart([(r["short"], r["value"], r["this"]) for r in scale["rows"]],
                                             weak=float(WEAK_GUARANTEE_EPSILON))
    return {
        "budget_rows": budget_rows,
        "budget_chart": (charts.budget_chart(budget_segments, total=float(budget["zcdp"]["total_rho"]), cap=None,
                                             edition=f.edition, unit="\u03c1") if zcdp else
                         charts.budget_chart(budget_segments, total=total, cap=cap,
                                             weak=float(WEAK_GUARANTEE_EPSILON), edition=f.edition)),
        "zcdp": _zcdp_words(budget) if zcdp else None,
        "epsilon_chart": epsilon_chart,
        # edition 2: the runs the publisher's budget ledger recorded on these people (manifest.json)
        "ledger": _ledger_words(ledger, total),
        "total_epsilon": plain(total),
        "epsilon_scale": scale,
        # above WEAK_GUARANTEE_EPSILON the datasheet says plainly that the protection is weak
        "weak_guarantee": total > WEAK_GUARANTEE_EPSILON,
        "weak_guarantee_epsilon": plain(WEAK_GUARANTEE_EPSILON),
        "weak_guarantee_acknowledged": (spec.get("privacy") or {}).get("acknowledge_weak_guarantee") is True,
        "epsilon_cap": plain(cap),
        "total_epsilon_opendp": plain(budget.get("total_epsilon_opendp")),
        "neighbouring": budget["neighbouring"],
        "input_metric": budget["input_metric"],
        "opendp_version": budget["opendp_version"],
    }


def _zcdp_words(budget: dict) -> dict:
    """A zCDP release's numbers for the budget section's sentences (budget.json's zcdp block)."""
    from dpbundle.mechanisms import zcdp
    from dpbundle.templates.metadata.budget_words import ZCDP_PLAIN

    z = budget["zcdp"]
    return {"total_rho": plain(z["total_rho"]), "delta": f"{z['delta']:g}",
            "epsilon": zcdp.shown_epsilon(budget["total_epsilon"]), "conversion": z["conversion"],
            "plain": ZCDP_PLAIN}


def _ledger_words(ledger: dict, total: float) -> dict:
    """The ledger's facts for the template: whether they are stated, the run's rank, the number of
    earlier runs, the composed epsilon and its reading (e^epsilon, the 1% example)."""
    out = dict(ledger)
    composed = ledger.get("composed")
    several = bool(ledger.get("known")) and ledger["k"] > 1 and composed is not None
    out.update(several=several,
               earlier_text=("" if not ledger.get("known") else
                             "1 earlier run" if ledger["k"] == 2 else f"{ledger['k'] - 1} earlier runs"),
               composed_text=plain(composed) if composed is not None else "",
               earlier_sum_text=plain(ledger["earlier_sum"]) if ledger.get("earlier_sum") is not None else "",
               composed_factor=approx_number(_exp(composed)) if composed is not None else "",
               composed_posterior=_posterior_text(composed) if composed is not None else "",
               loss_text=plain(composed) if several else plain(total),
               weak=several and composed > WEAK_GUARANTEE_EPSILON,
               earlier_list=", ".join(plain(e) for e in ledger.get("earlier_epsilons_values") or []))
    return out


def _stop_words(p: Any) -> str:
    """Edition 2: what budget.json's selection.stop_probability means for this run, in a clause."""
    if p is None:
        return ""
    if float(p) == 0:
        return ("the stop probability is 0: the selection ran until a candidate passed every criterion "
                "(budget.json, selection)")
    return (f"the stop probability is {plain(p)}: after each candidate that failed, the selection would end "
            f"there, releasing nothing, with probability {plain(p)} (budget.json, selection)")


def _section_process(f: _Facts) -> dict:
    """The production process: selection, generator, the selected configuration, the constraints."""
    public = f.public
    spec, budget = public.spec, public.budget
    gen, sel = budget["generation"], budget["selection"]
    hyper = gen.get("hyperparameters") or {}
    configuration_rows = _flatten(public.configuration)
    if f.edition >= 2:  # the generator's type as people know it (PrivSyn, not privsyn)
        configuration_rows = [(k, statements.generator_name(v) if k == "generator.type" else v)
                              for k, v in configuration_rows]
    return {
        "selection_method": sel["method"],
        "stop_words": _stop_words(sel.get("stop_probability")),
        "selection_factor": plain(sel["factor"]),
        "resample": sel.get("retries") == "resample",
        "stop_probability": plain(sel["stop_probability"]),
        "generator_type": gen["type"],
        "generator_name": statements.generator_name(gen["type"]),
        "generator_epsilon": plain(gen["epsilon"]) if "epsilon" in gen else plain(gen["rho"]),
        "generator_hyperparameters": _flatten(hyper) if hyper else [],
        "evaluation_epsilon": plain(budget["evaluation"]["epsilon"]),
        "per_iteration_epsilon": plain(budget["per_iteration_epsilon"]),
        "pre_selection": [{"purpose": p["purpose"], "epsilon": plain(p["epsilon"])} for p in budget.get("pre_selection") or []],
        "configuration_id": public.configuration_id,
        "configuration_rows": configuration_rows,
        "raw_constraints": [c.get("name", "") for c in spec.get("raw_constraints") or []],
        "synthetic_constraints": [c.get("name", "") for c in spec.get("synthetic_constraints") or []],
    }


def _section_reading(f: _Facts) -> dict:
    """Reading the data in R and Stata."""
    from .snippets import reading_snippets

    snippets = reading_snippets(f.public.columns)
    return {"reading_r": snippets["r"], "reading_stata": snippets["stata"]}


def _section_verify(f: _Facts) -> dict:
    """How to verify the release: the manifest's facts, the commands, what each audit proves,
    pre-registration and the published model."""
    meta, publication = f.public.meta, f.publication
    return {
        "created": meta.created,
        "created_year": str(meta.created)[:4],
        "dpbundle_version": meta.dpbundle_version,
        "fingerprint": meta.fingerprint,
        "public_key_pem": meta.public_key_pem.strip(),
        "commitment": meta.commitment,
        "openssl_command": openssl_verify_command("KEY.pub"),
        "verify_commands": list(STANDARD_TOOL_COMMANDS),
        "allowed_signers": allowed_signers_line(meta.public_key_pem) if f.edition >= 2 else "",
        "audit_command": ("dpbundle audit BUNDLE --pubkey KEY.pub"
                          + (" --preregistration REC --beacon VALUE" if publication.get("beacon") else "")),
        "verification": verification_claims(publication, f.source, f.edition, f.ledger),
        "files": list(meta.files),
        # pre-registration and published model: {"model": bool, "beacon": {...},
        # "record_created": str, "spec_sha256": str} or None
        "publication": publication or {},
        "extra_rows": _flatten(meta.extra) if meta.extra else [],
    }


def build_context(public: PublicFiles) -> dict:
    """Everything the template needs, as plain strings/lists (numbers already formatted), from
    the bundle's public files only (:class:`PublicFiles`): the parts of the datasheet, each
    built by its own function."""
    f = _facts(public)
    quality = _section_quality(f)
    return {
        **_section_about(f),
        **_section_records(f),
        **_section_columns(f),
        **quality,
        **_section_faithfulness(f, quality["criteria"]),
        **_section_face(f),
        **_section_budget(f),
        **_section_process(f),
        **_section_reading(f),
        **_section_verify(f),
    }
