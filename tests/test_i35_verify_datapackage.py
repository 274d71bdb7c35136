"""Issue 35: datapackage.json says SIMULATED for simulated data, and ``categoriesOrdered`` is what
the spec declares.

* ``release --example persons`` (whose spec gets ``release.simulated: true``): the package's
  title ends " (SIMULATED data)", its description starts with the SIMULATED sentence, its source
  is the simulated registry; the audit fails a re-signed copy that drops either;
* a release of a spec without ``simulated`` says none of it;
* ``categoriesOrdered`` is true for bins and for categories whose alternative declares
  ``ordered: true`` (the persons example's education and income), false for other categories;
  the audit fails a re-signed copy that states otherwise.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.audit.runner import run_audit  # noqa: E402
from dpbundle.release.bundle import keys  # noqa: E402
from dpbundle.release.cli.main import app  # noqa: E402

SUFFIX = " (SIMULATED data)"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    t = tmp_path_factory.mktemp("i35-datapackage")
    runner = CliRunner()
    res = runner.invoke(app, ["release", "--stop-probability", "0", "--example", "persons", "--out", str(t / "sim"),
                              "--ledger", str(t / "ledger.jsonl"), "--transcript", str(t / "sim.jsonl")])
    assert res.exit_code == 0, res.output
    assert runner.invoke(app, ["keygen", "--out", str(t / "k")]).exit_code == 0
    spec = fx.fast_spec(t / "fast.yaml")
    data = fx.example_registry(t / "registry.csv", 3000, 5)
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(t / "real"), "--key", str(t / "k.key"),
                              "--ledger", str(t / "ledger2.jsonl"), "--transcript", str(t / "real.jsonl")])
    assert res.exit_code == 0, res.output
    return {"sim": t / "sim", "sim_key": t / "sim.demo-key.key", "sim_pub": t / "sim.demo-key.pub",
            "real": t / "real", "real_pub": t / "k.pub"}


def package(bundle: Path) -> dict:
    return json.loads((bundle / "datapackage.json").read_text())


def spec_json(bundle: Path) -> dict:
    return json.loads((bundle / "spec.json").read_text())


def declared_order(bundle: Path) -> dict[str, bool]:
    """Column -> ordered, from spec.json: bins always, categories when their alternative says so."""
    doc = spec_json(bundle)
    chosen = doc["configuration"]["columns"]
    out = {}
    for col in doc["spec"]["columns"]:
        alts = {a["id"]: a for a in col["alternatives"]}
        alt = alts[chosen[col["name"]]] if col["name"] in chosen else next(iter(alts.values()))
        out[col["name"]] = "categories" not in alt or alt.get("ordered") is True
    return out


def resign(bundle: Path, key_path: Path) -> None:
    """What the key's holder does after editing a file: new hashes, new signatures."""
    key = keys.load_private_key(key_path)
    names = [line.split("  ", 1)[1] for line in (bundle / "SHA256SUMS").read_text().splitlines()]
    sums = "".join(f"{hashlib.sha256((bundle / n).read_bytes()).hexdigest()}  {n}\n" for n in names).encode()
    (bundle / "SHA256SUMS").write_bytes(sums)
    for name, sig in keys.sign_checksum_list(key, sums).items():
        (bundle / name).write_bytes(sig)
    manifest = json.loads((bundle / "manifest.json").read_text())
    for f in manifest["files"]:
        raw = (bundle / f["path"]).read_bytes()
        f["sha256"], f["size"] = hashlib.sha256(raw).hexdigest(), len(raw)
    raw = (json.dumps(manifest, indent=2) + "\n").encode()
    (bundle / "manifest.json").write_bytes(raw)
    (bundle / "manifest.sig").write_bytes(keys.sign(key, raw))


def edited(bundles, tmp_path, edit) -> list[str]:
    """The schema check's problems on a re-signed copy of the simulated bundle whose
    datapackage.json ``edit`` changed."""
    copy = tmp_path / "sim"
    shutil.copytree(bundles["sim"], copy)
    doc = package(copy)
    edit(doc)
    (copy / "datapackage.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    resign(copy, bundles["sim_key"])
    rep = run_audit(copy, pubkey=bundles["sim_pub"])
    assert rep.get("integrity").result == "pass", rep.get("integrity").problems
    return rep.get("schema").problems


def test_the_example_package_says_simulated(bundles):
    release = spec_json(bundles["sim"])["spec"]["release"]
    assert release["simulated"] is True
    doc = package(bundles["sim"])
    assert doc["title"] == release["title"] + SUFFIX
    assert doc["description"].startswith("SIMULATED data: the records were generated from a simulated registry")
    assert "no real person" in doc["description"]
    assert doc["sources"][0]["title"].startswith("A simulated registry")
    assert doc["resources"][0]["title"] == doc["title"]
    rep = run_audit(bundles["sim"], pubkey=bundles["sim_pub"])
    assert rep.get("schema").result == "pass" and not rep.get("schema").warnings, rep.get("schema").warnings


def test_a_package_of_real_data_does_not(bundles):
    assert "simulated" not in spec_json(bundles["real"])["spec"]["release"]
    text = (bundles["real"] / "datapackage.json").read_text()
    assert "SIMULATED" not in text and "simulated registry" not in text
    assert package(bundles["real"])["title"] == spec_json(bundles["real"])["spec"]["release"]["title"]


def test_dropping_the_word_fails_the_audit(bundles, tmp_path):
    def plain_title(doc):
        doc["title"] = doc["title"].removesuffix(SUFFIX)
    problems = edited(bundles, tmp_path, plain_title)
    assert any("release.simulated, but the title does not end" in p for p in problems), problems


def test_dropping_the_sentence_fails_the_audit(bundles, tmp_path):
    def plain_description(doc):
        doc["description"] = doc["description"].split(". ", 1)[1]
    problems = edited(bundles, tmp_path, plain_description)
    assert any("the description does not say SIMULATED" in p for p in problems), problems


def test_categories_ordered_is_what_the_spec_declares(bundles):
    for name in ("sim", "real"):
        fields = package(bundles[name])["resources"][0]["schema"]["fields"]
        assert {f["name"]: f["categoriesOrdered"] for f in fields} == declared_order(bundles[name])
    persons = {f["name"]: f["categoriesOrdered"] for f in package(bundles["sim"])["resources"][0]["schema"]["fields"]}
    assert persons["education"] is True and persons["income"] is True     # declared ordered categories
    assert False in persons.values()                                      # and categories that are not
    births = {f["name"]: f["categoriesOrdered"] for f in package(bundles["real"])["resources"][0]["schema"]["fields"]}
    assert births["birth_sex"] is False and births["birth_weight"] is True


@pytest.mark.parametrize("column", ["education", None])
def test_another_order_fails_the_audit(bundles, tmp_path, column):
    """Flipping a declared-ordered category (education) or an unordered one fails."""
    order = declared_order(bundles["sim"])
    column = column or next(c for c, o in order.items() if not o)

    def flip(doc):
        for f in doc["resources"][0]["schema"]["fields"]:
            if f["name"] == column:
                f["categoriesOrdered"] = not f["categoriesOrdered"]
    problems = edited(bundles, tmp_path, flip)
    want = f"field {column} categoriesOrdered is {not order[column]}, but the column is " \
           f"{'ordered' if order[column] else 'not ordered'} in the spec"
    assert any(want in p for p in problems), problems
