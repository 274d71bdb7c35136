"""The closure rule (docs/audit.md, "The closure rule"): every file and every field of a bundle is
either re-derived by the audit from a few source files, or a source bound to the run (by the
transcript commitment, the pre-registration record or the ledger, checked inside the enclave or
with the auditor's pins), or bound by the signature alone, which the report names. Anything else
fails.

:data:`RULES` is the machine-readable classification: one row per file or field pattern, with its
binding and the check that enforces it. docs/audit.md's section is generated from it
(:func:`markdown_table`), and tests/test_i36_closure_walk.py walks every file and field of real
bundles and fails on one no row classifies. ``closure_fields.check_closure`` (run by the ``schema`` check)
enforces the file-level rules, the version rules and the fields no other check re-derives, and
lists what only the signature vouches for in this bundle.

Patterns: a file name, then a field path (empty: the whole file). ``a.b`` is a key path, ``[]``
any list item, ``*`` any one key, ``**`` any subtree; CSV files have ``column:NAME`` fields.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator


__all__ = ["Rule", "RULES", "BINDINGS", "classify", "field_paths", "markdown_table",
           "FILES_0_2", "FILES_0_3", "OPTIONAL", "SIGNATURE_ONLY", "files_of_version", "KNOWN_FILES"]

REDERIVED, TRANSCRIPT, PREREG, LEDGER = "rederived", "bound:transcript", "bound:preregistration", "bound:ledger"
SIGNATURE_ONLY, SIGNATURE = "signature-only", "signature"
BINDINGS = {
    REDERIVED: "re-derived by the public audit from the source files (byte for byte, or the same value)",
    TRANSCRIPT: "a source bound to the run by the transcript commitment: the enclave replay checks it",
    PREREG: "a source bound by the pre-registration record (pinned with --preregistration / --beacon)",
    LEDGER: "a source the enclave ledger check (--ledger) compares with the private budget ledger",
    SIGNATURE: "a signature, verified with the pinned key",
    SIGNATURE_ONLY: "bound by the signature alone: the publisher's word, named in the report",
}


@dataclass(frozen=True)
class Rule:
    """One row of the classification: ``file`` and ``field`` patterns, the ``binding`` (a key of
    :data:`BINDINGS`), ``how`` (the check and what it compares) and, for a binding that holds
    only for some bundles, ``otherwise``: the binding when it does not (a spec that was not
    pre-registered is bound by the signature alone)."""

    file: str
    field: str
    binding: str
    how: str
    otherwise: str | None = None
    run_bound: bool = False     # from dpbundle 0.3 also bound:transcript (the run record, audit/run_binding.py)


def _r(file: str, field: str, binding: str, how: str, otherwise: str | None = None,
       run_bound: bool = False) -> Rule:
    return Rule(file, field, binding, how, otherwise, run_bound)


_RUN = "; from dpbundle 0.3 the transcript's run record binds it (replay, audit/run_binding.py)"


_DOC = "documentation: rendered again from the public files, byte for byte"
_BUDGET = "budget: recomputed from spec.json (and data.csv, n)"
_WORDS = "budget: the statement the spec gives (templates/metadata/budget_words.py)"
RULES: tuple[Rule, ...] = (
    # -- whole files ------------------------------------------------------------------------------
    _r("data.csv", "", TRANSCRIPT, "replay: byte for byte from the registry and the recorded draws; with a "
       "published model and a pre-registration also rederivation (public)"),
    _r("data.csv", "column:*", REDERIVED, "schema: the spec's released columns, in order, only declared labels"),
    _r("codebook.csv", "", REDERIVED, _DOC),
    _r("codebook.csv", "column:*", REDERIVED, _DOC),
    _r("metrics.csv", "", REDERIVED, _DOC),
    _r("metrics.csv", "column:*", REDERIVED, _DOC),
    _r("README.html", "", REDERIVED, _DOC),
    _r("README.pdf", "", REDERIVED, "documentation: its text in order and metadata from the rendered datasheet"),
    _r("datapackage.json", "**", REDERIVED, "schema: rendered from the public files (templates/metadata), byte for byte"),
    _r("registry-entry.yaml", "**", REDERIVED, "budget: rendered from the public files (templates/metadata), byte for byte"),
    _r("SHA256SUMS", "", REDERIVED, "integrity: exactly the manifest's other files with the manifest's SHA-256"),
    _r("SHA256SUMS.sig", "", SIGNATURE, "integrity: raw Ed25519 signature of SHA256SUMS"),
    _r("SHA256SUMS.sshsig", "", SIGNATURE, "integrity: SSHSIG signature of SHA256SUMS"),
    _r("manifest.sig", "", SIGNATURE, "integrity: Ed25519 signature of manifest.json"),
    _r("preregistration.json.sig", "", SIGNATURE, "seeds: the record's signature, by the bundle's key"),
    # -- manifest.json ----------------------------------------------------------------------------
    _r("manifest.json", "format", REDERIVED, "schema: a constant"),
    _r("manifest.json", "dpbundle_version", SIGNATURE_ONLY, "schema: the version rules (the files and fields "
       "that version writes); which version ran is the publisher's word" + _RUN, run_bound=True),
    _r("manifest.json", "created", SIGNATURE_ONLY, "seeds: a beacon's time must not be after it; otherwise the "
       "publisher's word"),
    _r("manifest.json", "n", REDERIVED, "size: the rows of data.csv"),
    _r("manifest.json", "title", REDERIVED, "schema: spec.json's release.title"),
    _r("manifest.json", "configuration_id", REDERIVED, "schema: spec.json's configuration_id"),
    _r("manifest.json", "sampler.*", REDERIVED, "schema: sampler version 3 exactly when the configuration's "
       "generator makes records one by one and n is above the base (mechanisms/sampling.py); replay: the "
       "selected attempt's sampler mark"),
    _r("manifest.json", "number_format", REDERIVED, "schema: the datasheet's number format (a constant)"),
    _r("manifest.json", "files[].*", REDERIVED, "integrity: every file's path, SHA-256 and size"),
    _r("manifest.json", "public_key.algorithm", REDERIVED, "schema: a constant"),
    _r("manifest.json", "public_key.pem", SIGNATURE, "integrity: the key, pinned with --pubkey"),
    _r("manifest.json", "public_key.fingerprint", REDERIVED, "integrity: the SHA-256 of the key"),
    _r("manifest.json", "transcript_commitment.algorithm", REDERIVED, "schema: a constant"),
    _r("manifest.json", "transcript_commitment.construction", REDERIVED, "schema: a constant"),
    _r("manifest.json", "transcript_commitment.value", TRANSCRIPT, "replay: the salted SHA-256 of the transcript"),
    _r("manifest.json", "versions.*", SIGNATURE_ONLY, "replay and rederivation warn when theirs differ"),
    _r("manifest.json", "ledger.spends_on_registry", LEDGER, "ledger: the spends on the registry"),
    _r("manifest.json", "ledger.spend_id", LEDGER, "ledger: this release's entry"),
    _r("manifest.json", "ledger.earlier_epsilons", LEDGER, "ledger: the earlier spends' epsilons"),
    _r("manifest.json", "ledger.earlier_epsilons[]", LEDGER, "ledger: the earlier spends' epsilons"),
    _r("manifest.json", "ledger.composed_epsilon", REDERIVED, "budget: the total plus the earlier epsilons"),
    _r("manifest.json", "extra.**", SIGNATURE_ONLY, "the publisher's free-form information"),
    # -- spec.json --------------------------------------------------------------------------------
    _r("spec.json", "spec.columns[].alternatives[].edges[]", PREREG, "preregistration / seeds: the spec's "
       "edges; the edges a dp_edges alternative drew: budget (k - 1 increasing candidates, audit/edges_check.py) "
       "and replay (the recorded draws, recomputed from the registry)" + _RUN, otherwise=TRANSCRIPT,
       run_bound=True),
    _r("spec.json", "spec.**", PREREG, "preregistration / seeds: the record's spec SHA-256 (and --spec)" + _RUN,
       otherwise=SIGNATURE_ONLY, run_bound=True),
    _r("spec.json", "configuration.**", TRANSCRIPT, "replay: the selected iteration's configuration; schema: "
       "in configurations.yaml when published"),
    _r("spec.json", "configuration_id", REDERIVED, "schema: the configuration's id"),
    # -- metrics.json -----------------------------------------------------------------------------
    _r("metrics.json", "n", REDERIVED, "size: the rows of data.csv"),
    _r("metrics.json", "number_format", REDERIVED, "schema: the datasheet's number format (a constant)"),
    _r("metrics.json", "criteria[].id", REDERIVED, "budget: the spec's acceptance ids, in order"),
    _r("metrics.json", "criteria[].type", REDERIVED, "budget: the spec's type"),
    _r("metrics.json", "criteria[].description", REDERIVED, "schema: the spec's description"),
    _r("metrics.json", "criteria[].epsilon", REDERIVED, _BUDGET),
    _r("metrics.json", "criteria[].threshold", REDERIVED, _BUDGET + " (derived thresholds recomputed)"),
    _r("metrics.json", "criteria[].stakeholder_threshold", REDERIVED, "schema: the spec's threshold.stakeholder"),
    _r("metrics.json", "criteria[].threshold_inputs", REDERIVED, "budget: recomputed from the spec"),
    _r("metrics.json", "criteria[].threshold_inputs.*", REDERIVED, "budget: recomputed from the spec"),
    _r("metrics.json", "criteria[].sensitivity", REDERIVED, _BUDGET),
    _r("metrics.json", "criteria[].mechanism", REDERIVED, "schema: the criterion's mechanism (dpbundle.mechanisms)"),
    _r("metrics.json", "criteria[].noise_scale", REDERIVED, _BUDGET),
    _r("metrics.json", "criteria[].noise_std", REDERIVED, _BUDGET),
    _r("metrics.json", "criteria[].dp_value", TRANSCRIPT, "replay: the recorded draws give it"),
    _r("metrics.json", "criteria[].passed", REDERIVED, "acceptance: dp_value below the threshold"),
    _r("metrics.json", "criteria[].sensitivity_inputs.**", SIGNATURE_ONLY, "informative: the audit recomputes "
       "each sensitivity from the spec and data.csv itself (budget) and requires every declared input it "
       "also derives to be its own; the other inputs are the publisher's word"),
    # -- budget.json ------------------------------------------------------------------------------
    _r("budget.json", "unit_of_privacy", REDERIVED, _WORDS),
    _r("budget.json", "neighbouring", REDERIVED, _WORDS),
    _r("budget.json", "input_metric", REDERIVED, _WORDS),
    _r("budget.json", "records.policy", REDERIVED, _WORDS),
    _r("budget.json", "records.statement", REDERIVED, _WORDS),
    _r("budget.json", "records.mechanism", REDERIVED, _WORDS),
    _r("budget.json", "records.resize", REDERIVED, _WORDS),
    _r("budget.json", "records.epsilon", REDERIVED, _BUDGET),
    _r("budget.json", "records.released_n", REDERIVED, "budget: the rows of data.csv"),
    _r("budget.json", "records.sensitivity", REDERIVED, "budget: 1"),
    _r("budget.json", "records.noise_scale", REDERIVED, "budget: 1 / epsilon"),
    _r("budget.json", "generation.type", REDERIVED, "schema: the configuration's generator"),
    _r("budget.json", "generation.epsilon", REDERIVED, _BUDGET),
    _r("budget.json", "generation.rho", REDERIVED, "budget: the spec's rho_generation (zCDP)"),
    _r("budget.json", "definition", REDERIVED, "budget: the spec's privacy.definition (zCDP)"),
    _r("budget.json", "zcdp.delta", REDERIVED, "budget: the spec's privacy.delta"),
    _r("budget.json", "zcdp.rho_*", REDERIVED, "budget: each rho part recomputed exactly (pure parts as "
       "epsilon^2/2; dpbundle.mechanisms.zcdp)"),
    _r("budget.json", "zcdp.total_rho", REDERIVED, "budget: the sum of the rho parts"),
    _r("budget.json", "zcdp.conversion", REDERIVED, "budget: the stated conversion (a constant)"),
    _r("budget.json", "generation.parts[].*", REDERIVED, "schema: the generator's budget parts "
       "(dpbundle.mechanisms), their decimal shares and the floats handed to OpenDP"),
    _r("budget.json", "evaluation.epsilon", REDERIVED, _BUDGET),
    _r("budget.json", "evaluation.criteria[].*", REDERIVED, _BUDGET),
    _r("budget.json", "edges.mechanism", REDERIVED, "budget: the statement of dpbundle's dp_edges draws (a constant)"),
    _r("budget.json", "edges.epsilon", REDERIVED, _BUDGET),
    _r("budget.json", "edges.alternatives[].edges[]", REDERIVED, "budget: spec.json's drawn edges"),
    _r("budget.json", "edges.alternatives[].draws[].*", REDERIVED, "budget: each draw's quantile j/k, "
       "sensitivity den, epsilon and OpenDP's noise scale recomputed (audit/edges_check.py)"),
    _r("budget.json", "edges.alternatives[].draws[].quantile[]", REDERIVED, "budget: j/k as OpenDP reads it"),
    _r("budget.json", "edges.alternatives[].*", REDERIVED, "budget: the spec's dp_edges (column, "
       "alternative, bins, epsilon, step) and the number of candidates recomputed"),
    _r("budget.json", "pre_selection", REDERIVED, _BUDGET),
    _r("budget.json", "pre_selection[].*", REDERIVED, _BUDGET),
    _r("budget.json", "per_iteration_epsilon", REDERIVED, _BUDGET),
    _r("budget.json", "selection.method", REDERIVED, _WORDS),
    _r("budget.json", "selection.factor", REDERIVED, "budget: 2"),
    _r("budget.json", "selection.threshold", REDERIVED, "schema: 1.0"),
    _r("budget.json", "selection.stop_probability", TRANSCRIPT, "replay: the recorded stop draws; budget: the "
       "spec's when the source is the spec"),
    _r("budget.json", "selection.stop_probability_source", TRANSCRIPT, "replay: the recorded stop draws"),
    _r("budget.json", "selection.retries", REDERIVED, "budget: the spec's privacy.selection.retries (and the "
       "total it implies); replay: the transcript's selection and its one fit"),
    _r("budget.json", "total_epsilon", REDERIVED, _BUDGET),
    _r("budget.json", "total_epsilon_opendp", SIGNATURE_ONLY, "budget: at least the exact total, at most the cap; "
       "OpenDP's own float is the publisher's word"),
    _r("budget.json", "epsilon_cap", REDERIVED, _BUDGET),
    _r("budget.json", "opendp_version", SIGNATURE_ONLY, "the OpenDP the release ran (the replay warns when "
       "the auditor's differs)"),
    _r("budget.json", "published_model.*", REDERIVED, _WORDS),
    # -- optional files ---------------------------------------------------------------------------
    _r("configurations.yaml", "**", PREREG, "seeds: the record's configs_sha256; schema: holds the selected "
       "configuration" + _RUN, otherwise=SIGNATURE_ONLY, run_bound=True),
    _r("preregistration.json", "**", PREREG, "seeds: signature, key, spec and list; --preregistration pins it"),
    _r("seeds.json", "**", PREREG, "seeds: the commitment opened, the seeds derived; --beacon pins the value"),
    _r("model.json", "**", TRANSCRIPT, "replay: the fit again, every number; rederivation (public): its "
       "structure, sizes and noise scales"),
    _r("dp-tables.json", "tables[].counts", TRANSCRIPT, "replay: the fit again, every noisy count"),
    _r("dp-tables.json", "tables[].measurement", REDERIVED, "tables: the generator's purpose of the draw; "
       "replay: the transcript's"),
    _r("dp-tables.json", "**", REDERIVED, "tables: structure, epsilons, noise scales and 95% half-widths "
       "recomputed from the spec and the configuration (the structure itself: replay)"),
    _r("dp-tables.csv", "", REDERIVED, "tables: rendered again from dp-tables.json and the labels, byte for byte"),
    _r("dp-tables.csv", "column:*", REDERIVED, "tables: rendered again from dp-tables.json and the labels"),
)

KNOWN_FILES = frozenset(rule.file for rule in RULES)
# The files each version writes (manifest.json and manifest.sig included): dpbundle 0.2.0 as
# released (tests/data/prechange), 0.3 adds the checksum list's signatures.
FILES_0_2 = ("data.csv", "codebook.csv", "metrics.csv", "metrics.json", "budget.json", "spec.json",
             "datapackage.json", "registry-entry.yaml", "README.html", "README.pdf", "SHA256SUMS",
             "manifest.json", "manifest.sig")
FILES_0_3 = FILES_0_2 + ("SHA256SUMS.sig", "SHA256SUMS.sshsig")
OPTIONAL = ("preregistration.json", "preregistration.json.sig", "seeds.json", "model.json", "configurations.yaml",
            "dp-tables.json", "dp-tables.csv")
# fields only dpbundle 0.3 writes (a bundle claiming 0.2 holds none)
FIELDS_SINCE_0_3 = (("manifest.json", "ledger.earlier_epsilons"), ("manifest.json", "ledger.composed_epsilon"))


def files_of_version(made_since_0_3: bool) -> tuple[str, ...]:
    """The files a bundle of that version always has."""
    return FILES_0_3 if made_since_0_3 else FILES_0_2


# ------------------------------------------------------------------------------ classification

def _regex(pattern: str) -> re.Pattern:
    out = ""
    for part in re.split(r"(\*\*|\*)", pattern):
        out += {"**": ".*", "*": r"[^.\[\]]+"}.get(part, re.escape(part))
    return re.compile(out)


_COMPILED = [(_regex(rule.file), _regex(rule.field), rule) for rule in RULES]


def classify(file: str, field: str = "") -> Rule | None:
    """The first rule whose file and field patterns match (None: outside the rule)."""
    for file_re, field_re, rule in _COMPILED:
        if file_re.fullmatch(file) and field_re.fullmatch(field):
            return rule
    return None


def field_paths(doc: Any, path: str = "") -> Iterator[str]:
    """Every leaf of a JSON/YAML document as a path (``a.b[].c``; an empty object or list is a
    leaf)."""
    if isinstance(doc, dict) and doc:
        for key, value in doc.items():
            yield from field_paths(value, f"{path}.{key}" if path else str(key))
    elif isinstance(doc, list) and doc:
        seen: set = set()
        for value in doc:
            for p in field_paths(value, f"{path}[]"):
                if p not in seen:
                    seen.add(p)
                    yield p
    else:
        yield path


def markdown_table() -> str:
    """docs/audit.md's classification table, from :data:`RULES`."""
    lines = ["| file | field | binding | how |", "|---|---|---|---|"]
    for rule in RULES:
        binding = rule.binding + (f" (else {rule.otherwise})" if rule.otherwise else "") \
            + ("; since 0.3 also bound:transcript" if rule.run_bound else "")
        field = f"`{rule.field}`" if rule.field else "(the file)"
        lines.append(f"| `{rule.file}` | {field} | {binding} | {rule.how} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - prints docs/audit.md's table
    print(markdown_table(), end="")
