"""Issue 21 §4 and §3 on a real release: for data users outside Python and for registries of DP
deployments. datapackage.json is one Frictionless version (v2) declaring data.csv, codebook.csv
and metrics.csv, with `id`, `version` and `sources`, and `frictionless validate` passes; the
codebook agrees with data.csv; registry-entry.yaml validates against its schema and states
budget.json's numbers, and the audit fails a re-signed bundle whose entry says otherwise;
budget.json holds the spec's exact decimals (0.8, not 0.7999999999999999); the R and Stata
programs read the codebook's columns."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from audit_fixtures import example_registry, fast_spec
from dpbundle.templates.metadata.registry_entry import composition_formula
from dpbundle.audit.preregistration import canonical_sha256
from dpbundle.audit.runner import run_audit
from dpbundle.release.common import jsonschemas
from dpbundle.release.bundle import keys
from dpbundle.release.cli.main import app
from dpbundle.templates.datasheet.codebook import CODEBOOK_FIELDS
from dpbundle.templates.datasheet.snippets import CODEBOOK_COLUMNS_USED, reading_snippets

ROOT = Path(__file__).resolve().parents[1]
EPS_GEN = 1.6      # with epsilon_split 0.5, PrivBayes hands OpenDP 0.7999999999999999 + 0.8


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A real release of the fast births spec (one configuration, loose thresholds) with
    generation epsilon 1.6 split 0.5 (the exact shares 0.8 + 0.8), and its key."""
    d = tmp_path_factory.mktemp("dpreg")
    spec_path = fast_spec(d / "spec.yaml")
    spec = yaml.safe_load(spec_path.read_text())
    spec["privacy"]["epsilon_generation"] = EPS_GEN
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    data = example_registry(d / "registry.csv")
    key, pub = keys.write_keypair(d / "publisher")
    res = CliRunner().invoke(app, ["release", str(spec_path), str(data), "--out", str(d / "b"),
                                   "--key", str(key), "--ledger", str(d / "ledger.jsonl"),
                                   "--transcript", str(d / "t.jsonl")])
    assert res.exit_code == 0, res.output
    return d / "b", key, pub


def _json(bundle: Path, name: str):
    return json.loads((bundle / name).read_text("utf-8"))


def _rows(bundle: Path, name: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO((bundle / name).read_text("utf-8"), newline="")))


# ------------------------------------------------------------------------ datapackage.json


def test_frictionless_validate_passes_on_a_real_release(released):
    frictionless = pytest.importorskip("frictionless")
    bundle, _, _ = released
    report = frictionless.validate(str(bundle / "datapackage.json"))
    assert report.valid, report.flatten(["rowNumber", "fieldName", "type", "note"])
    assert [t.name for t in report.tasks] == ["data", "codebook", "metrics"]
    exe = Path(sys.executable).parent / "frictionless"
    if exe.exists():  # the command line too, as a data user runs it
        p = subprocess.run([str(exe), "validate", "datapackage.json"], cwd=bundle, capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]


def test_datapackage_is_one_frictionless_version_with_id_version_sources(released):
    bundle, _, _ = released
    pkg = _json(bundle, "datapackage.json")
    jsonschemas.validate(pkg, "datapackage")
    assert pkg["$schema"] == "https://datapackage.org/profiles/2.0/datapackage.json"
    text = json.dumps(pkg)
    assert '"profile"' not in text and '"role"' not in text     # no v1 property anywhere
    assert [(r["name"], r["path"], r["type"]) for r in pkg["resources"]] == [
        ("data", "data.csv", "table"), ("codebook", "codebook.csv", "table"), ("metrics", "metrics.csv", "table")]
    for r in pkg["resources"]:
        raw = (bundle / r["path"]).read_bytes()
        assert r["bytes"] == len(raw) and r["hash"] == "sha256:" + hashlib.sha256(raw).hexdigest()
    # id: recomputed from the bundle alone (the audit's spec SHA-256, the configuration id, data.csv)
    spec_json = _json(bundle, "spec.json")
    data_sha = hashlib.sha256((bundle / "data.csv").read_bytes()).hexdigest()
    want = uuid.uuid5(uuid.NAMESPACE_URL,
                      f"dpbundle:{canonical_sha256(spec_json['spec'])}:{spec_json['configuration_id']}:{data_sha}")
    assert pkg["id"] == str(want)
    assert pkg["version"] == "1.0.0"
    release = spec_json["spec"]["release"]
    assert pkg["sources"] and release["publisher"] in pkg["sources"][0]["title"]
    assert pkg["contributors"] == [{"title": release["publisher"], "roles": ["publisher"],
                                    "email": release["contact"]}]
    assert pkg["created"] == _json(bundle, "manifest.json")["created"] + "T00:00:00Z"


def test_codebook_is_declared_and_agrees_with_data_csv(released):
    bundle, _, _ = released
    pkg = _json(bundle, "datapackage.json")
    data_res, codebook_res, metrics_res = pkg["resources"]
    assert [f["name"] for f in codebook_res["schema"]["fields"]] == list(CODEBOOK_FIELDS)
    assert codebook_res["schema"]["primaryKey"] == ["column", "order"]
    assert [f["name"] for f in metrics_res["schema"]["fields"]] == next(
        csv.reader(io.StringIO((bundle / "metrics.csv").read_text("utf-8"))))
    fields = data_res["schema"]["fields"]
    book = _rows(bundle, "codebook.csv")
    header = next(csv.reader(io.StringIO((bundle / "data.csv").read_text("utf-8"))))
    assert header == [f["name"] for f in fields]
    assert list(dict.fromkeys(r["column"] for r in book)) == header   # the codebook in column order
    for f in fields:
        entries = [r for r in book if r["column"] == f["name"]]
        assert [int(r["order"]) for r in entries] == list(range(1, len(entries) + 1))
        labels = [r["label"] for r in entries]
        assert labels == f["categories"] == f["constraints"]["enum"]
        assert all(r["number"] != "" for r in entries)
        if f["categoriesOrdered"]:   # a bin's bounds grow with its order
            lows = [float(r["lower"]) for r in entries if r["lower"]]
            assert lows == sorted(lows)
    seen = {name: set() for name in header}
    for row in _rows(bundle, "data.csv"):
        for name in header:
            seen[name].add(row[name])
    for f in fields:
        assert seen[f["name"]] <= set(f["categories"])


def test_the_v1_package_of_older_bundles_still_validates():
    from audit_fixtures import datapackage_doc, load_spec

    jsonschemas.validate(datapackage_doc(load_spec()), "datapackage")


# ------------------------------------------------------------------------ budget.json decimals


def test_budget_holds_the_spec_decimals(released):
    bundle, _, _ = released
    text = (bundle / "budget.json").read_text("utf-8")
    budget = json.loads(text)
    gen = budget["generation"]
    assert gen["epsilon"] == EPS_GEN
    assert [p["epsilon"] for p in gen["parts"]] == [0.8, 0.8]
    assert [p["epsilon_opendp"] for p in gen["parts"]] == [0.7999999999999999, 0.8]
    spec = _json(bundle, "spec.json")["spec"]
    assert budget["evaluation"]["epsilon"] == 0.99
    assert [c["epsilon"] for c in budget["evaluation"]["criteria"]] == [e["epsilon"] for e in spec["acceptance"]]
    assert budget["per_iteration_epsilon"] == 2.59 and budget["total_epsilon"] == 5.18
    # no declared number is written as a float's long expansion (the OpenDP floats aside)
    declared = re.sub(r'"(epsilon_opendp|total_epsilon_opendp|noise_scale)": [0-9.e-]+', "", text)
    assert not re.search(r"\d\.\d*(9999999|0000001)", declared), declared


def test_build_budget_parts_are_decimal_shares(births_spec):
    """PrivBayes with one-way marginals on 4.0: the floats 1.5999999999999999, 1.6 and
    0.7999999999999999 are published as 1.6, 1.6 and 0.8 beside the floats."""
    from dpbundle.mechanisms.privbayes import PrivBayes
    from dpbundle.release.scheme.budget import build_budget

    g = PrivBayes(4.0, epsilon_split=0.5, theta=4, oneway="measure", oneway_split=0.2)
    b = build_budget(births_spec, g, 9.98, 1000)
    assert [p["epsilon"] for p in b["generation"]["parts"]] == [1.6, 1.6, 0.8]
    assert [p["epsilon_opendp"] for p in b["generation"]["parts"]] == [1.5999999999999999, 1.6,
                                                                         0.7999999999999999]
    jsonschemas.validate(b, "budget")


@pytest.mark.parametrize("parts, problem", [
    ([{"purpose": "a", "epsilon": 0.8, "epsilon_opendp": 0.7999999999999999},
      {"purpose": "b", "epsilon": 0.9, "epsilon_opendp": 0.9}], "not the generation epsilon"),
    ([{"purpose": "a", "epsilon": 0.8, "epsilon_opendp": 0.8},
      {"purpose": "b", "epsilon": 0.8, "epsilon_opendp": 0.8}], "above the generation epsilon"),
    ([{"purpose": "a", "epsilon": 0.8, "epsilon_opendp": 0.7},
      {"purpose": "b", "epsilon": 0.8, "epsilon_opendp": 0.8}], "is not its share"),
    ([{"purpose": "a", "epsilon": 0.8, "epsilon_opendp": 0.7999999999999999},
      {"purpose": "b", "epsilon": 0.8}], "every part needs a numeric epsilon_opendp"),
])
def test_the_audit_checks_the_decimal_shares(parts, problem):
    from dpbundle.audit.checks_budget import _generation_parts
    from dpbundle.audit.report import CheckResult
    from dpbundle.mechanisms import exact

    r = CheckResult("budget")
    _generation_parts(parts, exact.dec(1.6), r)
    assert any(problem in p for p in r.problems), r.problems
    ok = CheckResult("budget")
    _generation_parts([{"purpose": "a", "epsilon": 0.8, "epsilon_opendp": 0.7999999999999999},
                       {"purpose": "b", "epsilon": 0.8, "epsilon_opendp": 0.8}], exact.dec(1.6), ok)
    assert not ok.problems


_decimal = st.decimals(min_value="0.001", max_value="50", places=3).map(lambda d: float(str(d)))
_split = st.decimals(min_value="0.05", max_value="0.95", places=2).map(lambda d: float(str(d)))


@settings(max_examples=300, deadline=None)
@given(_decimal, _split, _split, st.sampled_from(["privbayes", "privbayes-oneway", "crosstab", "marginals",
                                                  "mst_pure", "privsyn"]))
@example(1.6, 0.5, 0.2, "privbayes")
@example(4.0, 0.5, 0.2, "privbayes-oneway")
@example(0.8, 0.5, 0.5, "crosstab")
def test_published_parts_always_pass_the_audit(eps, split, split2, kind):
    """Whatever the generator and its decimals, the parts budget.json publishes are either exact
    decimal shares beside the OpenDP floats or the floats alone, and the audit accepts them."""
    from dpbundle.audit.checks_budget import _generation_parts
    from dpbundle.audit.report import CheckResult
    from dpbundle.mechanisms import exact
    from dpbundle.mechanisms.marginals import NoisyCrossTab, NoisyMarginals
    from dpbundle.mechanisms.mst import PureMST
    from dpbundle.mechanisms.privbayes import PrivBayes
    from dpbundle.mechanisms.privsyn import PrivSyn
    from dpbundle.release.scheme.budget import generation_parts

    g = {"privbayes": lambda: PrivBayes(eps, epsilon_split=split, theta=4),
         "privbayes-oneway": lambda: PrivBayes(eps, epsilon_split=split, theta=4, oneway="measure",
                                               oneway_split=split2),
         "crosstab": lambda: NoisyCrossTab(eps),
         "marginals": lambda: NoisyMarginals(eps, marginals=[[0, 1], [1, 2], [0, 2]]),
         "mst_pure": lambda: PureMST(eps, split_1way=split / 2, split_select=split2 / 2),
         "privsyn": lambda: PrivSyn(eps, split_select=split)}[kind]()
    parts = generation_parts(g.budget_parts(), eps)
    floats = [p.get("epsilon_opendp", p["epsilon"]) for p in parts]
    assert floats == [float(p["epsilon"]) for p in g.budget_parts()]      # OpenDP's floats, unchanged
    assert sum(exact.binary(f) for f in floats) <= exact.dec(eps)
    if "epsilon_opendp" in parts[0]:
        assert exact.total(p["epsilon"] for p in parts) == exact.dec(eps)
    r = CheckResult("budget")
    _generation_parts(parts, exact.dec(eps), r)
    assert not r.problems, (parts, r.problems)


# ------------------------------------------------------------------------ registry-entry.yaml


def test_registry_entry_validates_and_states_the_budget(released):
    bundle, _, _ = released
    entry = yaml.safe_load((bundle / "registry-entry.yaml").read_text("utf-8"))
    jsonschemas.validate(entry, "registry-entry")
    budget = _json(bundle, "budget.json")
    dep = entry["deployment"]
    assert entry["tier"] == 3 and entry["status"] == "Draft"
    assert dep["basic"]["data_product_type"] == "Synthetic data"
    assert dep["basic"]["publication_date"] == _json(bundle, "manifest.json")["created"]
    assert dep["dp_variant"]["variant_name"] == "Pure DP"
    assert dep["privacy_loss"]["privacy_parameters"] == {"epsilon": budget["total_epsilon"]}
    formula = composition_formula(budget)
    assert formula == "total epsilon = 2 x (generation 1.6 + acceptance criteria 0.99) = 5.18"
    assert formula in dep["accounting"]["composition"]
    assert formula in dep["privacy_loss"]["privacy_parameters_details"]
    # the fields Israel's 2024 entry left blank are filled
    for path in ("privacy_loss.privacy_unit_details", "implementation.preprocessing_and_hyperparameter_tuning",
                 "implementation.justification", "implementation.mechanisms", "dp_variant.data_domain",
                 "dp_variant.unprotected_quantities", "deployment_model.actors", "accounting.post_processing",
                 "deployment_model.model_name_details"):
        a, b = path.split(".")
        assert len(dep[a][b]) > 40, path
    tuning = dep["implementation"]["preprocessing_and_hyperparameter_tuning"]
    assert "private selection" in tuning and "accounted" in tuning and "public data" in tuning
    assert "OpenDP " + budget["opendp_version"] in dep["implementation"]["mechanisms"]
    assert "released exactly" not in dep["dp_variant"]["unprotected_quantities"]
    assert str(budget["records"]["released_n"]) in dep["dp_variant"]["unprotected_quantities"].replace(",", "")


def test_registry_entry_is_signed_and_follows_the_registry_file_rules(released):
    bundle, _, _ = released
    manifest = _json(bundle, "manifest.json")
    raw = (bundle / "registry-entry.yaml").read_bytes()
    listed = {f["path"]: f["sha256"] for f in manifest["files"]}
    assert listed["registry-entry.yaml"] == hashlib.sha256(raw).hexdigest()
    assert f"{hashlib.sha256(raw).hexdigest()}  registry-entry.yaml\n" in (bundle / "SHA256SUMS").read_text()
    # the registry's own file checks: no folded ('>') style, no LaTeX double backslash
    styles = {t.style for t in yaml.scan(raw.decode()) if hasattr(t, "style")}
    assert styles <= {None, "|", '"', "'"}
    assert not re.search(r"\\\\[^()]", raw.decode())


def test_the_real_release_verifies(released):
    bundle, _, pub = released
    rep = run_audit(bundle, pubkey=pub)
    assert [(c.check, c.problems[:3]) for c in rep.checks if c.failed] == []
    assert rep.passed


# --------------------------------------------------------------- the audit, on re-signed bundles


def _resign(bundle: Path, key_path: Path) -> None:
    """What a publisher holding the key does after an edit: new hashes, a new signature."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    names = [f["path"] for f in manifest["files"]]
    sums = "".join(f"{hashlib.sha256((bundle / f).read_bytes()).hexdigest()}  {f}\n"
                   for f in sorted(n for n in names if not n.startswith("SHA256SUMS"))).encode()
    (bundle / "SHA256SUMS").write_bytes(sums)
    for name, sig in keys.sign_checksum_list(keys.load_private_key(key_path), sums).items():
        if name in names:       # the checksum list is signed from dpbundle 0.3
            (bundle / name).write_bytes(sig)
    for f in manifest["files"]:
        data = (bundle / f["path"]).read_bytes()
        f["sha256"], f["size"] = hashlib.sha256(data).hexdigest(), len(data)
    raw = (json.dumps(manifest, indent=2) + "\n").encode()
    (bundle / "manifest.json").write_bytes(raw)
    (bundle / "manifest.sig").write_bytes(keys.sign(keys.load_private_key(key_path), raw))


@pytest.fixture
def copy(released, tmp_path):
    bundle, key, pub = released
    d = tmp_path / "b"
    shutil.copytree(bundle, d)
    return d, key, pub


def _failed(d: Path, pub: Path) -> dict[str, list[str]]:
    return {c.check: c.problems for c in run_audit(d, pubkey=pub).checks if c.failed}


def _entry_failures(failed: dict[str, list[str]]) -> list[str]:
    """The checks that fail on registry-entry.yaml."""
    return sorted(check for check, problems in failed.items()
                  if any("registry-entry.yaml" in p for p in problems))


def _edit_entry(d: Path, edit) -> None:
    """Parse registry-entry.yaml, apply ``edit`` to its deployment, write it back as YAML."""
    entry = yaml.safe_load((d / "registry-entry.yaml").read_text("utf-8"))
    edit(entry["deployment"])
    (d / "registry-entry.yaml").write_text(yaml.safe_dump(entry, sort_keys=False, allow_unicode=True), "utf-8")


def test_resigning_alone_changes_nothing(copy):
    d, key, pub = copy
    _resign(d, key)
    assert _failed(d, pub) == {}


def test_another_epsilon_in_the_entry_fails_the_budget_check(copy):
    d, key, pub = copy
    _edit_entry(d, lambda dep: dep["privacy_loss"]["privacy_parameters"].update(epsilon=1.0))
    _resign(d, key)
    failed = _failed(d, pub)
    assert _entry_failures(failed) == ["budget"], failed
    assert any("registry-entry.yaml: privacy_parameters.epsilon 1 differs from budget.json's total "
               "epsilon 5.18" in p for p in failed["budget"]), failed


def test_another_composition_in_the_entry_fails_the_budget_check(copy):
    d, key, pub = copy
    def edit(dep):
        acc = dep["accounting"]
        assert "acceptance criteria 0.99) = 5.18" in acc["composition"]
        acc["composition"] = acc["composition"].replace("criteria 0.99) = 5.18", "criteria 0.5) = 4.2")
    _edit_entry(d, edit)
    _resign(d, key)
    failed = _failed(d, pub)
    assert _entry_failures(failed) == ["budget"], failed
    assert any("accounting.composition does not state the composition of budget.json" in p
               for p in failed["budget"]), failed


def test_an_entry_outside_its_schema_fails_the_schema_check(copy):
    d, key, pub = copy
    _edit_entry(d, lambda dep: dep["dp_variant"].update(variant_name="Approximate DP"))
    _resign(d, key)
    failed = _failed(d, pub)
    # the schema check names the rule; the budget check (from dpbundle 0.2, the closure rule)
    # renders the entry again from the public files and names the first differing field
    assert _entry_failures(failed) == ["budget", "schema"], failed
    assert any(p.startswith("registry-entry.yaml: deployment/dp_variant/variant_name") for p in failed["schema"])
    assert any("first difference at deployment.dp_variant.variant_name: 'Approximate DP' where the "
               "re-derivation gives 'Pure DP'" in p for p in failed["budget"]), failed["budget"]


def test_another_publication_date_fails_the_schema_check(copy):
    d, key, pub = copy
    _edit_entry(d, lambda dep: dep["basic"].update(publication_date="2001-01-01"))
    _resign(d, key)
    assert any("publication_date '2001-01-01' is not the bundle's creation day" in p
               for p in _failed(d, pub).get("schema", []))


@pytest.mark.parametrize("text, words", [
    ("a: &x 1\nb: *x\n", "anchor"),
    ("a: 1\na: 2\n", "appears twice"),
    ("url_slug: [unclosed\n", "not valid YAML"),
    ("- just\n- a list\n", "not a mapping"),
])
def test_a_hostile_entry_fails_with_a_message(copy, text, words):
    d, key, pub = copy
    (d / "registry-entry.yaml").write_text(text)
    _resign(d, key)
    failed = _failed(d, pub)
    assert any(words in p for p in failed.get("schema", [])), failed


def test_an_oversized_entry_is_not_parsed(copy):
    d, key, pub = copy
    (d / "registry-entry.yaml").write_text("notes: '" + "x" * (1024 * 1024) + "'\n")
    _resign(d, key)
    assert any("more than the limit" in p for p in _failed(d, pub).get("schema", []))


# ------------------------------------------------------------------------ R and Stata


def _columns(bundle: Path):
    from types import SimpleNamespace

    fields = _json(bundle, "datapackage.json")["resources"][0]["schema"]["fields"]
    return [SimpleNamespace(name=f["name"], ordered=f["categoriesOrdered"]) for f in fields]


def _balanced(code: str) -> bool:
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for ch in re.sub(r'"[^"\n]*"', '""', code):   # brackets inside strings do not count
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack


def test_reading_snippets_use_the_codebook_and_the_datapackage(released):
    bundle, _, _ = released
    cols = _columns(bundle)
    snippets = reading_snippets(cols)
    assert set(CODEBOOK_COLUMNS_USED) <= set(CODEBOOK_FIELDS)
    header = next(csv.reader(io.StringIO((bundle / "codebook.csv").read_text("utf-8"))))
    assert tuple(header) == CODEBOOK_FIELDS
    r, stata = snippets["r"], snippets["stata"]
    # R: readr, every cell text, ordered factors for the columns datapackage.json orders
    assert 'read_csv("codebook.csv"' in r and 'read_csv("data.csv"' in r and "library(readr)" in r
    for used in CODEBOOK_COLUMNS_USED:
        assert f"codebook${used}" in r or f"column_rows${used}" in r, used
    ordered = re.search(r"ordered_columns <- c\((.*?)\)\n", r, re.S).group(1)
    assert re.findall(r'"([^"]+)"', ordered) == [c.name for c in cols if c.ordered]
    assert "factor(data[[column]], levels = column_rows$label" in r and "ordered = column %in% ordered_columns" in r
    assert _balanced(r)
    # Stata: import delimited + label define + encode
    assert 'import delimited using "codebook.csv"' in stata and 'import delimited using "data.csv"' in stata
    assert "label define" in stata and "encode" in stata and "noextend" in stata
    for used in ("column", "order", "label"):
        assert re.search(rf"\b{used}\b", stata)
    assert stata.count("{") == stata.count("}") and _balanced(stata.replace("`", "").replace("'", ""))
    assert " ".join(c.name for c in cols) in stata


def test_the_docs_show_the_snippets_of_the_births_columns(released):
    """docs/reading-the-data.md shows what reading_snippets gives for the births columns."""
    bundle, _, _ = released
    doc = (ROOT / "docs" / "reading-the-data.md").read_text("utf-8")
    snippets = reading_snippets(_columns(bundle))
    assert f"```r\n{snippets['r']}```" in doc
    assert f"```stata\n{snippets['stata']}```" in doc
