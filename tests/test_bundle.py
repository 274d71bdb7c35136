"""The signed release bundle: files, schemas, signature (real openssl), hashes, PDF numbers,
Frictionless validity, transcript commitment, atomicity, deterministic zip, no attempt count."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import os
import shutil
import stat
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from dpbundle.release.bundle import write as bundle
from dpbundle.release.bundle import datasheet
from dpbundle.release.common import jsonschemas
from dpbundle.release.bundle import keys

ATTEMPTS = 7919  # the (secret) number of selection attempts in the fake transcript

BIRTHS_COLUMNS = {
    "birth_month": ("Month of birth", [str(m) for m in range(1, 13)]),
    "mother_age": ("Age of the mother in full years at birth",
                   ["<18", "18-19", "20-24", "25-29", "30-34", "35-39", "40-42", "43-44", "44<"]),
    "parity": ("Live births of the mother so far, this one included", ["1", "2-3", "4-6", "7-10", "10<"]),
    "gestation_week": ("Completed week of pregnancy at birth", ["<29", "29-31", "32-33", "34-36", "37-41", "41<"]),
    "birth_sex": ("Sex assigned at birth", ["M", "F"]),
    "birth_weight": ("Newborn weight at birth in grams",
                     ["<1500"] + [f"{w}-{w + 99}" for w in range(1500, 4500, 100)] + ["4499<"]),
}


@dataclass(frozen=True)
class FakeColumn:  # duck-typed ColumnCoding: name + labels
    name: str
    labels: tuple


SPEC_PATH = Path(__file__).resolve().parents[1] / "examples" / "births.yaml"


def fake_spec() -> dict:
    """The flagship births spec (as a dict), with a private-data fingerprint that must not be published."""
    import yaml

    spec = yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))
    spec["privacy"]["private_data_sha256"] = ["ab" * 32]
    return spec


def _criterion(cid, typ, desc, threshold, dp_value, epsilon, sensitivity, stakeholder=None, tinputs=None):
    scale = sensitivity / epsilon
    return {"id": cid, "type": typ, "description": desc, "threshold": threshold,
            "stakeholder_threshold": stakeholder, "threshold_inputs": tinputs, "dp_value": dp_value,
            "passed": dp_value < threshold, "epsilon": epsilon, "sensitivity": sensitivity,
            "sensitivity_inputs": {"n": 200}, "mechanism": "laplace", "noise_scale": scale,
            "noise_std": 2 ** 0.5 * scale}


def fake_release(n: int = 200, seed: int = 3) -> dict:
    from dpbundle.templates.metadata.budget_words import budget_words_of_spec

    rng = np.random.default_rng(seed)
    columns = [FakeColumn(name, tuple(labels)) for name, (_, labels) in BIRTHS_COLUMNS.items()]
    # 50 distinct records, each repeated 4 times (face privacy: min count 4 >= 2), shuffled
    base = np.stack([rng.integers(0, len(c.labels), size=50) for c in columns], axis=1)
    codes = np.repeat(base, n // 50, axis=0).astype(np.int64)
    codes = codes[rng.permutation(len(codes))]
    metrics = [
        _criterion("kway", "kway_marginals", "Largest k-way marginal error", 0.01, 0.00734519, 0.01, 1 / n),
        _criterion("ratio", "smoothed_ratio", "Largest smoothed count ratio", 1.41321786, 1.2876543, 0.3, 0.0396,
                   stakeholder=2.0, tinputs={"false_positive": 0.05, "assumed_min_count": 50, "clip": 2.0}),
        _criterion("mean_parity", "conditional_means", "Mean parity by mother's age group", 0.3, -0.0123457, 0.01,
                   10 / 180),
        _criterion("mean_weight", "conditional_means", "Mean birth weight by group", 100, 61.2345678, 0.17,
                   3200 / 17),
        _criterion("mean_gestation", "conditional_means", "Mean gestation week by group", 1, 0.487654321, 0.02,
                   15 / 40),
        _criterion("regression", "regression_coefficients", "L1 distance of coefficients", 30, 21.4398765, 0.43,
                   (1 + 7) ** 2),
        _criterion("mae", "regression_mae_difference", "MAE difference", 5, 3.14159265, 0.04, 2 * 3200 / n),
        _criterion("faithfulness", "faithfulness", "Share of unmatched real records", 0.05, 0.0312358, 0.01, 1 / n),
    ]
    eval_criteria = [{"id": m["id"], "epsilon": m["epsilon"]} for m in metrics]
    eps_eval = sum(m["epsilon"] for m in metrics)
    # the statements are the spec's (write_bundle refuses others: the audit re-derives them)
    words = budget_words_of_spec(fake_spec())
    budget = {
        "unit_of_privacy": words["unit_of_privacy"],
        "neighbouring": words["neighbouring"],
        "input_metric": "change_one_distance",
        "records": {"policy": "declared_public", "epsilon": 0.0, "released_n": n,
                    "statement": words["records.statement"]},
        "generation": {"type": "privbayes", "epsilon": 4.0,
                       "parts": [{"purpose": "structure", "epsilon": 0.4}, {"purpose": "conditionals", "epsilon": 3.6}]},
        "evaluation": {"epsilon": eps_eval, "criteria": eval_criteria},
        "pre_selection": [],
        "per_iteration_epsilon": 4.0 + eps_eval,
        "selection": {"method": words["selection.method"], "factor": 2,
                      "stop_probability": 0.0, "threshold": 1.0},
        "total_epsilon": 2 * (4.0 + eps_eval),
        "total_epsilon_opendp": 2 * (4.0 + eps_eval) + 1e-12,
        "epsilon_cap": 10.0,
        "opendp_version": "0.16.0",
    }
    configuration = {"columns": {"birth_month": "month", "mother_age": "coarse", "parity": "coarse",
                                 "gestation_week": "coarse", "birth_sex": "sex", "birth_weight": "100g"},
                     "generator": {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.1, "theta": 4},
                     "projection": {"min_count": 2}}
    records = []
    for i in range(ATTEMPTS):
        if i % 1000 == 0 or i == ATTEMPTS - 1:
            records.append({"kind": "mark", "mark": "iteration", "index": i, "config": configuration,
                            "config_id": "c0ffee00c0ffee00"})
    records.append({"kind": "laplace", "purpose": "kway", "mechanism": "opendp.make_laplace", "sensitivity": 0.005,
                    "epsilon": 0.01, "scale": 0.5, "true": 0.0051, "noisy": 0.00734519})
    records.append({"kind": "mark", "mark": "selected", "index": ATTEMPTS - 1})
    jsonl = "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in records).encode()
    return {"spec": fake_spec(), "configuration": configuration, "configuration_id": "0123456789abcdef",
            "columns": columns, "codes": codes, "metrics": metrics, "budget": budget,
            "transcript_records_jsonl": jsonl}


@pytest.fixture(scope="module")
def signing_key(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    key_path, pub_path = keys.write_keypair(d / "release")
    return keys.load_private_key(key_path), pub_path


@pytest.fixture(scope="module")
def built(tmp_path_factory, signing_key):
    d = tmp_path_factory.mktemp("bundle")
    rel = fake_release()
    (d / "private").mkdir()
    out = bundle.write_bundle(d / "births-dp", **rel, transcript_path=d / "private" / "transcript.jsonl",
                              private_key=signing_key[0], make_zip=True)
    from pypdf import PdfReader

    pdf_text = "\n".join(page.extract_text() for page in PdfReader(str(out / "README.pdf")).pages)
    return {"dir": d, "out": out, "release": rel, "pub": signing_key[1],
            "transcript": d / "private" / "transcript.jsonl", "pdf_text": pdf_text}


@pytest.fixture
def fast_pdf(monkeypatch):
    """Skip the (slow) WeasyPrint rendering in tests that do not look at the PDF."""
    monkeypatch.setattr(datasheet, "render_pdf", lambda html, path: Path(path).write_bytes(b"%PDF-1.7 stub"))


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_bytes())


FILES = ["data.csv", "codebook.csv", "metrics.csv", "metrics.json", "budget.json", "spec.json",
         "datapackage.json", "registry-entry.yaml", "README.html", "README.pdf", "SHA256SUMS",
         "SHA256SUMS.sig", "SHA256SUMS.sshsig"]   # the checksum list signed (dpbundle 0.3)


def test_every_file_exists_and_nothing_else(built):
    out = built["out"]
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES + ["manifest.json", "manifest.sig"])
    assert [f["path"] for f in _manifest(out)["files"]] == FILES
    assert (out.parent / "births-dp.zip").is_file()
    leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []


@pytest.mark.parametrize("name,schema", [("metrics.json", "metrics"), ("budget.json", "budget"),
                                         ("spec.json", "spec-json"), ("datapackage.json", "datapackage"),
                                         ("manifest.json", "manifest")])
def test_every_json_validates(built, name, schema):
    doc = json.loads((built["out"] / name).read_text(encoding="utf-8"))
    jsonschemas.validate(doc, schema)
    assert jsonschemas.load_schema(schema)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_schema_error_names_json_path(built):
    doc = _manifest(built["out"])
    doc["files"][1]["sha256"] = "XYZ"
    with pytest.raises(jsonschemas.SchemaValidationError) as exc:
        jsonschemas.validate(doc, "manifest", document="manifest.json")
    assert "$.files[1].sha256" in str(exc.value)
    assert exc.value.errors[0][0] == "$.files[1].sha256"


def test_spec_json_is_public_and_has_configuration(built):
    doc = json.loads((built["out"] / "spec.json").read_text())
    assert "private_data_sha256" not in doc["spec"]["privacy"]
    assert "ab" * 32 not in (built["out"] / "spec.json").read_text()
    assert doc["configuration"] == built["release"]["configuration"]
    assert doc["configuration_id"] == "0123456789abcdef"
    # the caller's spec is not modified
    assert built["release"]["spec"]["privacy"]["private_data_sha256"] == ["ab" * 32]


def test_openssl_verifies_signature(built):
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl binary not available")
    res = subprocess.run([openssl, "pkeyutl", "-verify", "-pubin", "-inkey", str(built["pub"]), "-rawin",
                          "-in", "manifest.json", "-sigfile", "manifest.sig"],
                         cwd=built["out"], capture_output=True, text=True)
    assert "Signature Verified Successfully" in res.stdout, res.stdout + res.stderr
    assert res.returncode == 0
    # and it fails on a modified manifest
    tampered = built["dir"] / "tampered-manifest.json"
    tampered.write_bytes((built["out"] / "manifest.json").read_bytes().replace(b'"n": 200', b'"n": 201'))
    res = subprocess.run([openssl, "pkeyutl", "-verify", "-pubin", "-inkey", str(built["pub"]), "-rawin",
                          "-in", str(tampered), "-sigfile", "manifest.sig"],
                         cwd=built["out"], capture_output=True, text=True)
    assert "Signature Verified Successfully" not in res.stdout
    assert res.returncode != 0


def test_manifest_key_and_signature(built):
    m = _manifest(built["out"])
    pub = keys.load_public_key(built["pub"])
    assert m["public_key"]["pem"] == built["pub"].read_text()
    raw = pub.public_bytes(keys.serialization.Encoding.Raw, keys.serialization.PublicFormat.Raw)
    assert m["public_key"]["fingerprint"] == hashlib.sha256(raw).hexdigest()
    sig = (built["out"] / "manifest.sig").read_bytes()
    assert len(sig) == 64
    assert keys.verify(pub, (built["out"] / "manifest.json").read_bytes(), sig)
    assert m["format"] == "dpbundle-bundle/1" and m["n"] == 200
    # the day only: a time of day would give the run time against a known start (issue 22)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", m["created"])


def test_manifest_hashes_match_and_one_byte_change_is_detected(built, tmp_path):
    out = built["out"]
    m = _manifest(out)
    for entry in m["files"]:
        data = (out / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["path"]
        assert len(data) == entry["size"]
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    for entry in m["files"]:
        p = copy / entry["path"]
        original = p.read_bytes()
        i = len(original) // 2
        p.write_bytes(original[:i] + bytes([original[i] ^ 0x01]) + original[i + 1:])
        assert hashlib.sha256(p.read_bytes()).hexdigest() != entry["sha256"], entry["path"]
        p.write_bytes(original)


def test_data_csv(built):
    rel = built["release"]
    text = (built["out"] / "data.csv").read_bytes().decode("utf-8")
    assert "\r" not in text
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == [c.name for c in rel["columns"]]
    assert len(rows) == 201
    expected = [[c.labels[k] for c, k in zip(rel["columns"], row)] for row in rel["codes"]]
    assert rows[1:] == expected  # given order, labels as in the spec


def test_metrics_csv_and_json(built):
    rel = built["release"]
    doc = json.loads((built["out"] / "metrics.json").read_text())
    assert doc["n"] == 200
    assert [c["id"] for c in doc["criteria"]] == [m["id"] for m in rel["metrics"]]
    for c, m in zip(doc["criteria"], rel["metrics"]):
        assert c["dp_value"] == m["dp_value"]  # full precision
        assert c["noise_std"] == m["noise_std"]
    rows = list(csv.DictReader(io.StringIO((built["out"] / "metrics.csv").read_text())))
    for r, m in zip(rows, rel["metrics"]):
        assert r["dp_value"] == format(m["dp_value"], ".6g")
        assert r["threshold"] == datasheet.format_number(m["threshold"])
        assert r["passed"] == "true"
    assert rows[1]["stakeholder_threshold"] == "2"
    assert rows[0]["stakeholder_threshold"] == ""


def test_budget_json(built):
    b = json.loads((built["out"] / "budget.json").read_text())
    assert b["total_epsilon"] == pytest.approx(9.98)
    assert b["selection"]["factor"] == 2
    assert b["unit_of_privacy"].startswith("one live birth")


def test_pdf_contains_total_epsilon_and_every_dp_value(built):
    from pypdf import PdfReader

    reader = PdfReader(str(built["out"] / "README.pdf"))
    assert len(reader.pages) >= 4
    for page in reader.pages:  # A4 portrait, in points
        assert abs(float(page.mediabox.width) - 595.28) < 1 and abs(float(page.mediabox.height) - 841.89) < 1
    assert f"Page 2 of {len(reader.pages)}" in reader.pages[1].extract_text()
    text = built["pdf_text"]
    total = json.loads((built["out"] / "budget.json").read_text())["total_epsilon"]
    assert datasheet.format_number(total) == "9.98"
    assert "9.98" in text
    from dpbundle.templates.datasheet.numbers import noisy

    flat = "".join(text.split())
    for m in built["release"]["metrics"]:
        # rounded to the second significant digit of its noise (issue 21); metrics.csv keeps .6g
        assert noisy(m["dp_value"], m["noise_std"]).replace("\u2212", "-") in flat.replace("\u2212", "-"), m["id"]
    assert "synthetic" in text.lower()
    assert "openssl pkeyutl -verify -pubin -inkey ../KEY.pub -rawin -in manifest.json -sigfile manifest.sig" in \
        " ".join(text.split())
    assert _manifest(built["out"])["public_key"]["fingerprint"] in text.replace("\n", "")


def test_frictionless_validates_the_package(built):
    frictionless = pytest.importorskip("frictionless")
    report = frictionless.validate(str(built["out"] / "datapackage.json"))
    assert report.valid, report.flatten(["rowNumber", "fieldName", "type", "note"])
    pkg = json.loads((built["out"] / "datapackage.json").read_text())
    fields = pkg["resources"][0]["schema"]["fields"]
    assert [f["name"] for f in fields] == list(BIRTHS_COLUMNS)
    assert fields[1]["constraints"]["enum"] == BIRTHS_COLUMNS["mother_age"][1]
    assert all(f["type"] == "string" and f.get("description") for f in fields)


def test_frictionless_detects_a_label_outside_the_enum(built, tmp_path):
    frictionless = pytest.importorskip("frictionless")
    copy = tmp_path / "b"
    shutil.copytree(built["out"], copy)
    pkg = json.loads((copy / "datapackage.json").read_text())
    del pkg["resources"][0]["hash"], pkg["resources"][0]["bytes"]
    (copy / "datapackage.json").write_text(json.dumps(pkg))
    lines = (copy / "data.csv").read_text().split("\n")
    lines[1] = "13," + lines[1].split(",", 1)[1]
    (copy / "data.csv").write_text("\n".join(lines))
    assert not frictionless.validate(str(copy / "datapackage.json")).valid


def test_transcript_private_and_committed(built):
    out, tpath = built["out"], built["transcript"]
    assert tpath.is_file() and not bundle._is_within(tpath, out)
    assert stat.S_IMODE(tpath.stat().st_mode) == 0o600
    raw = tpath.read_bytes()
    header_line, records = raw.split(b"\n", 1)
    header = json.loads(header_line)
    jsonschemas.validate(header, "transcript-header")
    assert header["kind"] == "header" and header["format"] == "dpbundle-transcript/1"
    assert records == built["release"]["transcript_records_jsonl"]
    commitment = hashlib.sha256(bytes.fromhex(header["salt"]) + records).hexdigest()
    assert _manifest(out)["transcript_commitment"] == {
        "algorithm": "sha256", "construction": "sha256(salt || transcript.jsonl)", "value": commitment}
    # nothing of the transcript is in the bundle
    for p in out.iterdir():
        data = p.read_bytes()
        assert header["salt"].encode() not in data
        assert b'"mark":"selected"' not in data and b'"true":0.0051' not in data


def test_number_of_attempts_appears_nowhere(built):
    # as a number, not as four digits inside a hex digest or a signature (random keys and salts
    # can put "7919" inside one: a full run failed on that once); the zip's members decompressed
    import re
    import zipfile

    needle = re.compile(rb"(?<![0-9A-Za-z])" + str(ATTEMPTS).encode() + rb"(?![0-9A-Za-z])")
    for p in built["out"].iterdir():
        assert not needle.search(p.read_bytes()), p.name
    with zipfile.ZipFile(built["dir"] / "births-dp.zip") as z:
        for name in z.namelist():
            assert not needle.search(z.read(name)), name
    text = built["pdf_text"]
    assert not needle.search(text.encode("utf-8")), "README.pdf"   # a key fingerprint can hold "7919"
    for word in ("attempt", "tries", "iterations"):
        assert word not in text.lower()
        assert word not in (built["out"] / "README.html").read_text().lower()


@pytest.mark.parametrize("where", ["budget", "extra", "configuration"])
def test_attempt_count_is_refused(tmp_path, signing_key, where):
    rel = fake_release()
    if where == "budget":
        rel["budget"]["selection"]["attempts"] = 12
    elif where == "configuration":
        rel["configuration"]["iterations"] = 12
    kwargs = {"extra": {"n_iterations": 12}} if where == "extra" else {}
    with pytest.raises(bundle.BundleError, match="never"):
        bundle.write_bundle(tmp_path / "b", **rel, transcript_path=tmp_path / "t.jsonl",
                            private_key=signing_key[0], **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_transcript_inside_bundle_is_refused(tmp_path, signing_key):
    rel = fake_release()
    for bad in (tmp_path / "b" / "transcript.jsonl", tmp_path / "b" / "sub" / "t.jsonl"):
        with pytest.raises(bundle.BundleError, match="inside the bundle"):
            bundle.write_bundle(tmp_path / "b", **rel, transcript_path=bad, private_key=signing_key[0])
    assert list(tmp_path.iterdir()) == []
    # the default is in the private directory, never beside the bundle (tests/test_enclave_private.py)
    default = bundle.default_transcript_path(tmp_path / "b")
    assert default.parent != tmp_path and not default.is_relative_to(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_existing_directory_not_overwritten_without_force(tmp_path, signing_key):
    rel = fake_release()
    out = tmp_path / "b"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(bundle.BundleError, match="refusing"):
        bundle.write_bundle(out, **rel, transcript_path=tmp_path / "t.jsonl", private_key=signing_key[0])
    assert (out / "keep.txt").read_text() == "mine"
    # --force never wipes a directory that is not a bundle
    with pytest.raises(bundle.BundleError, match="not a dpbundle bundle"):
        bundle.write_bundle(out, **rel, transcript_path=tmp_path / "t.jsonl", private_key=signing_key[0], force=True)
    assert (out / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_force_replaces_an_existing_bundle(built, tmp_path, signing_key, fast_pdf):
    out = tmp_path / "b"
    shutil.copytree(built["out"], out)
    old_manifest = (out / "manifest.json").read_bytes()
    (tmp_path / "t.jsonl").write_text("old")
    rel = fake_release(seed=5)
    with pytest.raises(bundle.BundleError):
        bundle.write_bundle(out, **rel, transcript_path=tmp_path / "t.jsonl", private_key=signing_key[0])
    assert (out / "manifest.json").read_bytes() == old_manifest
    bundle.write_bundle(out, **rel, transcript_path=tmp_path / "t.jsonl", private_key=signing_key[0], force=True)
    assert (out / "manifest.json").read_bytes() != old_manifest
    assert (tmp_path / "t.jsonl").read_bytes() != b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "t.jsonl"]


def test_failure_while_writing_leaves_nothing(tmp_path, signing_key, monkeypatch):
    def boom(html, path):
        Path(path).write_bytes(b"%PDF-partial")
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(datasheet, "render_pdf", boom)
    rel = fake_release()
    with pytest.raises(RuntimeError, match="renderer crashed"):
        bundle.write_bundle(tmp_path / "b", **rel, transcript_path=tmp_path / "t.jsonl",
                            private_key=signing_key[0], make_zip=True)
    assert list(tmp_path.iterdir()) == []  # no bundle, no temp dir, no zip, no transcript


def test_failure_in_signing_leaves_nothing(tmp_path, signing_key, monkeypatch, fast_pdf):
    def boom(key, data):
        raise KeyboardInterrupt

    monkeypatch.setattr(keys, "sign", boom)
    with pytest.raises(KeyboardInterrupt):
        bundle.write_bundle(tmp_path / "b", **fake_release(), transcript_path=tmp_path / "t.jsonl",
                            private_key=signing_key[0])
    assert list(tmp_path.iterdir()) == []


def test_zip_is_deterministic(built, tmp_path):
    a, b = tmp_path / "a.zip", tmp_path / "b.zip"
    bundle.write_zip(built["out"], a)
    os.utime(built["out"] / "data.csv", (0, 0))  # mtimes must not matter
    bundle.write_zip(built["out"], b)
    assert a.read_bytes() == b.read_bytes()
    assert (built["dir"] / "births-dp.zip").read_bytes() == a.read_bytes()
    with zipfile.ZipFile(a) as zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        assert names == sorted(names)
        assert set(names) == {f"births-dp/{f}" for f in FILES + ["manifest.json", "manifest.sig"]}
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in infos)
        data = next(i for i in infos if i.filename.endswith("/data.csv"))
        assert data.compress_size < data.file_size / 3, "data.csv must be compressed in the zip"
        for i in infos:
            assert i.date_time == (1980, 1, 1, 0, 0, 0)
            assert i.external_attr >> 16 == 0o100644
            assert i.extra == b""
            assert zf.read(i) == (built["out"] / i.filename.split("/", 1)[1]).read_bytes()


def test_inconsistent_budget_is_refused(tmp_path, signing_key):
    rel = fake_release()
    rel["budget"]["total_epsilon"] = 9.0
    with pytest.raises(bundle.BundleError, match="total_epsilon"):
        bundle.write_bundle(tmp_path / "b", **rel, transcript_path=tmp_path / "t.jsonl", private_key=signing_key[0])
    rel = fake_release()
    rel["metrics"][0]["passed"] = False
    with pytest.raises(bundle.BundleError, match="passed"):
        bundle.write_bundle(tmp_path / "b", **rel, transcript_path=tmp_path / "t.jsonl", private_key=signing_key[0])
    rel = fake_release()
    rel["codes"][0, 0] = 12
    with pytest.raises(bundle.BundleError, match="birth_month"):
        bundle.write_bundle(tmp_path / "b", **rel, transcript_path=tmp_path / "t.jsonl", private_key=signing_key[0])
    rel = fake_release()
    rel["metrics"][2]["dp_value"] = float("nan")
    with pytest.raises(bundle.BundleError, match="finite"):
        bundle.write_bundle(tmp_path / "b", **rel, transcript_path=tmp_path / "t.jsonl", private_key=signing_key[0])
    assert list(tmp_path.iterdir()) == []


def test_validate_file(built, tmp_path):
    assert jsonschemas.validate_file(built["out"] / "manifest.json", "manifest")["n"] == 200
    bad = tmp_path / "m.json"
    bad.write_text("{not json")
    with pytest.raises(jsonschemas.SchemaValidationError, match="not valid JSON"):
        jsonschemas.validate_file(bad, "manifest")


def test_with_the_real_column_codings(tmp_path, signing_key, fast_pdf):
    """The writer works with dpbundle's own ColumnCoding objects and spec loader (duck typing)."""
    transform = pytest.importorskip("dpbundle.release.data.transform")
    spec_mod = pytest.importorskip("dpbundle.release.spec.load")
    rel = fake_release()
    spec = spec_mod.load_spec(SPEC_PATH)
    rel["columns"] = list(transform.codings(spec, rel["configuration"]))
    assert [list(c.labels) for c in rel["columns"]] == [v[1] for v in BIRTHS_COLUMNS.values()]
    out = bundle.write_bundle(tmp_path / "b", **rel, transcript_path=tmp_path / "t.jsonl",
                              private_key=signing_key[0])
    rows = list(csv.reader(io.StringIO((out / "data.csv").read_text())))
    assert rows[1:] == [[c.labels[k] for c, k in zip(rel["columns"], r)] for r in rel["codes"]]


def test_sha256sums_is_accepted_by_sha256sum(built):
    """SHA256SUMS lets anyone check every file with coreutils (`sha256sum -c`), and it fails
    when a file changes."""
    import shutil
    import subprocess

    exe = shutil.which("sha256sum")
    if exe is None:
        pytest.skip("sha256sum is not installed")
    out = built["out"]
    names = [line.split("  ", 1)[1] for line in (out / "SHA256SUMS").read_text().splitlines()]
    assert sorted(names) == sorted(FILES[:-3])  # every file but itself, its signatures and the manifest pair
    ok = subprocess.run([exe, "-c", "SHA256SUMS"], cwd=out, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_sha256sums_fails_on_a_changed_file(built, tmp_path):
    import shutil
    import subprocess

    exe = shutil.which("sha256sum")
    if exe is None:
        pytest.skip("sha256sum is not installed")
    copy = tmp_path / "b"
    shutil.copytree(built["out"], copy)
    (copy / "data.csv").write_bytes((copy / "data.csv").read_bytes() + b"x")
    bad = subprocess.run([exe, "-c", "SHA256SUMS"], cwd=copy, capture_output=True, text=True)
    assert bad.returncode != 0 and "data.csv: FAILED" in bad.stdout
