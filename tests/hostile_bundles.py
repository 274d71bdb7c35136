"""Bundles with hostile sizes, made from a real pre-registered `publish: model` release and
re-signed with the publisher's key (so that only the size is hostile: the publisher holds the
key). Shared by tests/test_audit_hostile_sizes.py and benchmarks/bench_audit_hostile.py.

Each case copies a base bundle (``privsyn``: a marginals_gum model; ``oneway``: PrivBayes raked
to measured one-way shares), changes one number or one file, re-hashes every file into the
manifest and re-signs it (``sign=False``: left unsigned, the integrity check fails).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

BEACON = "drand quicknet randomness 5c1e..."   # names no time (a 2023 round would fail the seeds check)
GENERATORS = {"privsyn": {"type": "privsyn"},
              "oneway": {"type": "privbayes", "flavour": "theta",
                         "grid": {"epsilon_split": [0.5], "theta": [4], "oneway": ["measure"]}}}


def release_base(where: Path, kind: str, rows: int = 4000) -> dict:
    """A pre-registered release with ``publish: model`` of the example registry: {bundle, key, pub}."""
    from typer.testing import CliRunner

    from dpbundle.release.cli.main import app

    runner = CliRunner()

    def run(*args):
        res = runner.invoke(app, [str(a) for a in args])
        assert res.exit_code == 0, res.output
        return res

    where.mkdir(parents=True, exist_ok=True)
    spec = fx.fast_spec(where / "fast.yaml")
    doc = yaml.safe_load(spec.read_text())
    doc["publish"] = "model"
    doc["generators"] = [GENERATORS[kind]]
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    data = fx.example_registry(where / "registry.csv", rows, 5)
    run("keygen", "--out", where / "k")
    run("preregister", spec, "--key", where / "k.key", "--out", where / "rec.json",
        "--beacon-source", "drand quicknet, first round after the record",
        "--secret-out", where / "rec.secret.json")
    run("release", spec, data, "--out", where / "B", "--key", where / "k.key",
        "--ledger", where / "ledger.jsonl", "--transcript", where / "t.jsonl",
        "--preregistration", where / "rec.json", "--beacon", BEACON,
        "--preregistration-secret", where / "rec.secret.json")
    return {"bundle": where / "B", "key": where / "k.key", "pub": where / "k.pub",
            "rec": where / "rec.json"}


def resign(bundle: Path, key_path: Path, **manifest_fields) -> None:
    """Re-hash every file into datapackage.json, SHA256SUMS and manifest.json (with
    ``manifest_fields`` set) and sign the manifest with ``key_path``: what a publisher can do."""
    from dpbundle.release.bundle import keys

    data = (bundle / "data.csv").read_bytes()
    package = json.loads((bundle / "datapackage.json").read_text())
    package["resources"][0]["hash"] = "sha256:" + hashlib.sha256(data).hexdigest()
    package["resources"][0]["bytes"] = len(data)
    (bundle / "datapackage.json").write_text(json.dumps(package, indent=2, ensure_ascii=False) + "\n")
    if (bundle / "SHA256SUMS").exists():
        names = sorted(line.split("  ", 1)[1] for line in (bundle / "SHA256SUMS").read_text().splitlines())
        sums = "".join(f"{hashlib.sha256((bundle / name).read_bytes()).hexdigest()}  {name}\n" for name in names)
        (bundle / "SHA256SUMS").write_text(sums)
        for name, sig in keys.sign_checksum_list(keys.load_private_key(key_path), sums.encode()).items():
            if (bundle / name).exists():   # the checksum list is signed from dpbundle 0.3
                (bundle / name).write_bytes(sig)
    manifest = json.loads((bundle / "manifest.json").read_text())
    for f in manifest["files"]:
        raw = (bundle / f["path"]).read_bytes()
        f["sha256"], f["size"] = hashlib.sha256(raw).hexdigest(), len(raw)
    manifest.update(manifest_fields)
    out = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    (bundle / "manifest.json").write_bytes(out)
    (bundle / "manifest.sig").write_bytes(keys.sign(keys.load_private_key(key_path), out))


# ------------------------------------------------------------------ the hostile changes


def _edit(bundle: Path, name: str, fn: Callable[[dict], object]) -> None:
    doc = json.loads((bundle / name).read_text())
    out = fn(doc)
    (bundle / name).write_text(json.dumps(doc if out is None else out))


def _set_config(bundle: Path, change: Callable[[dict], None]) -> dict:
    """Change spec.json's configuration (and its id); returns {"configuration_id": new id} for
    the manifest."""
    from dpbundle.audit.replay import config_id

    doc = json.loads((bundle / "spec.json").read_text())
    change(doc["configuration"])
    doc["configuration_id"] = config_id(doc["configuration"])
    (bundle / "spec.json").write_text(json.dumps(doc, indent=2))
    return {"configuration_id": doc["configuration_id"]}


def gum_rounds(b: Path) -> dict:
    _edit(b, "model.json", lambda m: m.update(gum_rounds=10 ** 9))
    return {}


def gum_rounds_in_config_too(b: Path) -> dict:
    fields = _set_config(b, lambda c: c["generator"].update(gum_rounds=10 ** 9))
    _edit(b, "model.json", lambda m: m.update(gum_rounds=10 ** 9, generator=dict(m["generator"], gum_rounds=10 ** 9)))
    return fields


def raked_rounds(b: Path) -> dict:
    _edit(b, "model.json", lambda m: m.update(rounds=10 ** 9))
    return {}


def n_in_metrics(b: Path) -> dict:
    _edit(b, "metrics.json", lambda m: m.update(n=30_000_000))
    return {}


def n_everywhere(b: Path) -> dict:
    _edit(b, "metrics.json", lambda m: m.update(n=30_000_000))
    _edit(b, "budget.json", lambda m: m["records"].update(released_n=30_000_000))
    return {"n": 30_000_000}


def huge_domain(b: Path) -> dict:
    def change(doc):
        col = next(c for c in doc["spec"]["columns"] if c["name"] == "birth_month")
        col["alternatives"][0]["unit_bins"] = [1, 10 ** 12]
    _edit(b, "spec.json", change)
    return {}


def wide_data_csv(b: Path) -> dict:
    text = (b / "data.csv").read_text()
    header = ",".join(f"c{j}" for j in range(2_000_000))
    (b / "data.csv").write_text(header + "\n" + text.split("\n", 1)[1])
    return {}


def long_row(b: Path) -> dict:
    lines = (b / "data.csv").read_text().split("\n")
    lines[1] = "," * 10_000_000
    (b / "data.csv").write_text("\n".join(lines))
    return {}


def deep_json(b: Path) -> dict:
    _edit(b, "model.json", lambda m: m.update(note=json.loads("[" * 500 + "]" * 500)))
    (b / "metrics.json").write_text("[" * 100_000 + "]" * 100_000)
    return {}


def long_strings(b: Path) -> dict:
    _edit(b, "seeds.json", lambda s: s["beacon"].update(value="x" * 5_000_000))
    _edit(b, "spec.json", lambda s: s["configuration"].update(note="y" * 3_000_000))
    return {}


def many_constraints(b: Path) -> dict:
    def change(doc):
        doc["spec"]["synthetic_constraints"] = [
            {"name": f"c{i}", "when": [["mother_age", "<", 18], ["parity", ">", 3]]} for i in range(50_000)]
    _edit(b, "spec.json", change)
    return {}


def many_quasi_identifiers(b: Path) -> dict:
    def change(doc):
        cols = [c["name"] for c in doc["spec"]["columns"]]
        doc["spec"]["face_privacy"]["quasi_identifiers"] = [cols] * 2_000
    _edit(b, "spec.json", change)
    return {}


def many_criteria(b: Path) -> dict:
    def change(doc):
        acc = doc["spec"]["acceptance"]
        doc["spec"]["acceptance"] = [dict(acc[i % len(acc)], id=f"k{i}") for i in range(2_000)]
    _edit(b, "spec.json", change)
    return {}


def huge_groups(b: Path) -> dict:
    def change(doc):
        cols = [c["name"] for c in doc["spec"]["columns"]]
        entry = next(e for e in doc["spec"]["acceptance"] if e["type"] == "conditional_means")
        entry["by"] = [cols * 3]
    _edit(b, "spec.json", change)
    return {}


def unsigned_n(b: Path) -> dict:
    _edit(b, "metrics.json", lambda m: m.update(n=30_000_000))
    return {}


@dataclass(frozen=True)
class Case:
    name: str
    base: str                      # "privsyn" or "oneway"
    change: Callable[[Path], dict]
    what: str                      # for the benchmark's table
    check: str                     # a named check that must fail
    message: str                   # ... with a problem containing this text
    sample_code: int               # `dpbundle sample`'s exit code
    sign: bool = True


CASES = [
    Case("gum_rounds", "privsyn", gum_rounds, "model.json gum_rounds 10^9",
         "rederivation", "gum_rounds 1000000000 is not the selected configuration's 6", 2),
    Case("gum_rounds_config", "privsyn", gum_rounds_in_config_too,
         "gum_rounds 10^9 in model.json and the configuration", "rederivation", "work units", 2),
    Case("raked_rounds", "oneway", raked_rounds, "model.json (raked) rounds 10^9",
         "rederivation", "work units", 2),
    Case("n_metrics", "privsyn", n_in_metrics, "metrics.json n = 3 x 10^7",
         "rederivation", "is not the manifest's n", 0),
    Case("n_everywhere", "privsyn", n_everywhere, "n = 3 x 10^7 in manifest, metrics and budget",
         "rederivation", "rows data.csv can hold", 0),
    Case("huge_domain", "privsyn", huge_domain, "spec.json unit_bins [1, 10^12]",
         "schema", "more than the limit of 100,000 per column", 2),
    Case("wide_data_csv", "privsyn", wide_data_csv, "data.csv header of 2,000,000 columns",
         "schema", "data.csv: the header is a record longer than", 0),
    Case("long_row", "privsyn", long_row, "data.csv row of 10^7 commas",
         "schema", "a record longer than", 0),
    Case("deep_json", "privsyn", deep_json, "JSON nested 500 and 100,000 levels deep",
         "schema", "nested deeper than 64 levels", 2),
    Case("long_strings", "privsyn", long_strings, "a 5 MB beacon value, a 3 MB string in the configuration",
         "seeds", "seeds.json: beacon/value", 0),
    Case("many_constraints", "privsyn", many_constraints, "100,000 constraint conditions",
         "constraints", "more than the limit of 1,000", 2),
    Case("many_quasi_identifiers", "privsyn", many_quasi_identifiers, "2,000 quasi-identifier sets",
         "face_privacy", "more than the limit of 100", 0),
    Case("many_criteria", "privsyn", many_criteria, "2,000 acceptance criteria",
         "budget", "more than the limit of 100", 0),
    Case("huge_groups", "privsyn", huge_groups, "a by item of 18 columns (10^16 groups)",
         "budget", "groups (the limit)", 0),
    Case("unsigned_n", "privsyn", unsigned_n, "metrics.json n = 3 x 10^7, not re-signed",
         "integrity", "the manifest says", 2, sign=False),
]
BY_NAME = {c.name: c for c in CASES}


def make_case(case: Case, base: dict, out: Path) -> Path:
    """A copy of ``base["bundle"]`` at ``out`` with ``case`` applied (and re-signed)."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(base["bundle"], out)
    fields = case.change(out)
    if case.sign:
        resign(out, base["key"], **fields)
    return out
