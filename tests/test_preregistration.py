"""Pre-registration (`dpbundle preregister`) and `release --preregistration REC --beacon VALUE`:
the record fixes spec, list and key before the run; seeds of the released attempt's
post-processing are derived from the committed secret and the beacon value."""
from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.mechanisms.noise import read_transcript_file  # noqa: E402
from dpbundle.mechanisms.seeds import SeedBinding, commitment, is_bound_purpose  # noqa: E402
from dpbundle.release.bundle import keys# noqa: E402
from dpbundle.release.cli.main import app  # noqa: E402

runner = CliRunner()
# a value that names no time (a drand round or a date would be checked against the record's and
# the bundle's times: tests/test_audit_forgery.py)
BEACON = "drand quicknet randomness 9f3c0d..."


def _invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prereg")
    spec = fx.fast_spec(tmp / "fast.yaml")
    data = fx.example_registry(tmp / "registry.csv", 4000, 5)
    assert _invoke("keygen", "--out", tmp / "k").exit_code == 0
    res = _invoke("preregister", spec, "--key", tmp / "k.key", "--out", tmp / "rec.json",
                  "--beacon-source", "drand quicknet, first round after the record",
                  "--secret-out", tmp / "rec.secret.json")
    assert res.exit_code == 0, res.output
    return {"tmp": tmp, "spec": spec, "data": data, "key": tmp / "k.key", "pub": tmp / "k.pub",
            "rec": tmp / "rec.json", "secret": tmp / "rec.secret.json"}


@pytest.fixture(scope="module")
def released(setup):
    t = setup["tmp"]
    res = _invoke("release", setup["spec"], setup["data"], "--out", t / "B", "--key", setup["key"],
                  "--ledger", t / "ledger.jsonl", "--transcript", t / "t.jsonl",
                  "--preregistration", setup["rec"], "--beacon", BEACON,
                  "--preregistration-secret", setup["secret"])
    assert res.exit_code == 0, res.output
    return setup | {"bundle": t / "B", "transcript": t / "t.jsonl"}


def test_record_is_signed_schema_valid_and_matches_the_audits_spec_hash(setup):
    from dpbundle.audit.preregistration import canonical_sha256
    from dpbundle.release.common.jsonschemas import validate

    raw = setup["rec"].read_bytes()
    doc = json.loads(raw)
    validate(doc, "preregistration")
    sig = setup["rec"].with_name("rec.json.sig").read_bytes()
    assert keys.verify(keys.load_public_key(setup["pub"]), raw, sig)
    assert doc["spec_sha256"] == canonical_sha256(yaml.safe_load(setup["spec"].read_text()))
    assert doc["public_key"]["fingerprint"] == keys.public_key_fingerprint(keys.load_public_key(setup["pub"]))
    assert stat.S_IMODE(setup["secret"].stat().st_mode) == 0o600
    secret = json.loads(setup["secret"].read_text())
    assert commitment(secret["secret"], secret["salt"]) == doc["seed_commitment"]["value"]
    assert secret["secret"] not in raw.decode()


def test_the_bundle_carries_the_record_and_the_opened_commitment(released):
    b = released["bundle"]
    assert (b / "preregistration.json").read_bytes() == released["rec"].read_bytes()
    seeds = json.loads((b / "seeds.json").read_text())
    secret = json.loads(released["secret"].read_text())
    assert seeds["secret"] == secret["secret"] and seeds["salt"] == secret["salt"]
    assert seeds["beacon"]["value"] == BEACON
    assert seeds["commitment"] == json.loads(released["rec"].read_text())["seed_commitment"]["value"]


def test_bound_seeds_are_derived_from_secret_and_beacon(released):
    """Every sampling and projection seed in the transcript is the derived one; the other
    seeds (resize inside the criteria, ...) are not derivable from public information."""
    _, transcript = read_transcript_file(released["transcript"])
    secret = json.loads(released["secret"].read_text())["secret"]
    binding = SeedBinding(secret, BEACON)
    seen = {}
    bound = other = 0
    for rec in transcript:
        if rec.get("kind") == "mark" and rec.get("mark") == "iteration":
            seen = {}
        if rec.get("kind") != "seed":
            continue
        purpose = rec["purpose"]
        k = seen.get(purpose, 0)
        seen[purpose] = k + 1
        derived = f"{binding.seed(purpose, k):064x}"
        if is_bound_purpose(purpose):
            assert rec["seed"] == derived, purpose
            bound += 1
        else:
            assert rec["seed"] != derived
            other += 1
    assert bound >= 2  # at least one sampling round and the projection


def test_another_beacon_gives_other_seeds():
    secret = "ab" * 32
    a, b = SeedBinding(secret, "round 1"), SeedBinding(secret, "round 2")
    assert a.seed("projection", 0) != b.seed("projection", 0)
    assert a.seed("sample round 0", 0) != a.seed("sample round 0", 1)
    assert a.seed("projection", 0) == SeedBinding(secret, "round 1").seed("projection", 0)


def test_a_spec_edited_after_preregistration_is_refused_before_anything(setup, tmp_path):
    doc = yaml.safe_load(setup["spec"].read_text())
    doc["acceptance"][0]["threshold"] = doc["acceptance"][0]["threshold"] * 2
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = _invoke("release", edited, setup["data"], "--out", tmp_path / "B", "--key", setup["key"],
                  "--ledger", tmp_path / "ledger.jsonl", "--transcript", tmp_path / "t.jsonl",
                  "--preregistration", setup["rec"], "--beacon", BEACON,
                  "--preregistration-secret", setup["secret"])
    assert res.exit_code == 2, res.output
    assert "not the pre-registered one" in res.output and "spec_sha256" in res.output
    assert not (tmp_path / "ledger.jsonl").exists() and not (tmp_path / "B").exists()


def test_another_key_is_refused(setup, tmp_path):
    assert _invoke("keygen", "--out", tmp_path / "other").exit_code == 0
    res = _invoke("release", setup["spec"], setup["data"], "--out", tmp_path / "B",
                  "--key", tmp_path / "other.key", "--ledger", tmp_path / "ledger.jsonl",
                  "--preregistration", setup["rec"], "--beacon", BEACON,
                  "--preregistration-secret", setup["secret"])
    assert res.exit_code == 2 and "signing key differs" in res.output
    assert not (tmp_path / "ledger.jsonl").exists()


def test_a_secret_that_does_not_open_the_commitment_is_refused(setup, tmp_path):
    bad = tmp_path / "bad.secret.json"
    doc = json.loads(setup["secret"].read_text())
    doc["secret"] = "00" * 32
    bad.write_text(json.dumps(doc))
    res = _invoke("release", setup["spec"], setup["data"], "--out", tmp_path / "B", "--key", setup["key"],
                  "--ledger", tmp_path / "ledger.jsonl", "--preregistration", setup["rec"],
                  "--beacon", BEACON, "--preregistration-secret", bad)
    assert res.exit_code == 2 and "does not open the commitment" in res.output
    assert not (tmp_path / "ledger.jsonl").exists()


def test_a_tampered_record_is_refused(setup, tmp_path):
    rec = tmp_path / "rec.json"
    rec.write_bytes(setup["rec"].read_bytes().replace(b'"epsilon_cap": 20', b'"epsilon_cap": 30'))
    (tmp_path / "rec.json.sig").write_bytes(setup["rec"].with_name("rec.json.sig").read_bytes())
    assert rec.read_bytes() != setup["rec"].read_bytes()
    res = _invoke("release", setup["spec"], setup["data"], "--out", tmp_path / "B", "--key", setup["key"],
                  "--ledger", tmp_path / "ledger.jsonl", "--preregistration", rec,
                  "--beacon", BEACON, "--preregistration-secret", setup["secret"])
    assert res.exit_code == 2 and "does not verify" in res.output


def test_preregistration_needs_a_beacon(setup, tmp_path):
    res = _invoke("release", setup["spec"], setup["data"], "--out", tmp_path / "B", "--key", setup["key"],
                  "--preregistration", setup["rec"])
    assert res.exit_code == 2 and "--beacon" in res.output


def test_preregister_refuses_to_overwrite(setup):
    res = _invoke("preregister", setup["spec"], "--key", setup["key"], "--out", setup["rec"],
                  "--beacon-source", "x", "--secret-out", setup["tmp"] / "other.secret.json")
    assert res.exit_code == 2 and "already exists" in res.output


# ------------------------------------------------------------------------------ the audit


def _audit(bundle, pub, rec=None, beacon=None):
    """The public audit; ``rec`` (the archived record) and ``beacon`` pin what a pre-registered
    bundle can only vouch for itself (without them its verdict is NOT VERIFIED)."""
    from dpbundle.audit.runner import run_audit

    return run_audit(bundle, pubkey=pub, preregistration=rec, beacon=beacon)


def _package_id(bundle, data: bytes) -> str:
    """datapackage.json's id for this data.csv (the audit re-derives the package, id included)."""
    import hashlib

    from dpbundle.audit.preregistration import canonical_sha256
    from dpbundle.templates.metadata.datapackage import datapackage_id

    spec_json = json.loads((bundle / "spec.json").read_text())
    return datapackage_id(canonical_sha256(spec_json["spec"]), spec_json["configuration_id"],
                          hashlib.sha256(data).hexdigest())


def _resign(bundle, key_path):
    """Re-hash every file into the manifest and re-sign it (what a publisher could do)."""
    import hashlib

    data = (bundle / "data.csv").read_bytes()
    package = json.loads((bundle / "datapackage.json").read_text())
    package["resources"][0]["hash"] = "sha256:" + hashlib.sha256(data).hexdigest()
    package["resources"][0]["bytes"] = len(data)
    package["id"] = _package_id(bundle, data)   # the id is derived from data.csv's SHA-256 too
    (bundle / "datapackage.json").write_text(json.dumps(package, indent=2, ensure_ascii=False) + "\n")
    sums = [f"{hashlib.sha256((bundle / name).read_bytes()).hexdigest()}  {name}\n"
            for name in sorted(line.split("  ", 1)[1]
                               for line in (bundle / "SHA256SUMS").read_text().splitlines())]
    (bundle / "SHA256SUMS").write_text("".join(sums))
    for name, sig in keys.sign_checksum_list(keys.load_private_key(key_path), "".join(sums).encode()).items():
        if (bundle / name).exists():   # the checksum list is signed from dpbundle 0.3
            (bundle / name).write_bytes(sig)
    manifest = json.loads((bundle / "manifest.json").read_text())
    for f in manifest["files"]:
        data = (bundle / f["path"]).read_bytes()
        f["sha256"], f["size"] = hashlib.sha256(data).hexdigest(), len(data)
    raw = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    (bundle / "manifest.json").write_bytes(raw)
    (bundle / "manifest.sig").write_bytes(keys.sign(keys.load_private_key(key_path), raw))


def test_the_audit_checks_the_preregistration_and_the_seeds(released):
    rep = _audit(released["bundle"], released["pub"])
    seeds = rep.get("seeds")
    assert seeds.result == "pass", seeds.problems
    assert seeds.facts["beacon_value"] == BEACON
    secret = json.loads(released["secret"].read_text())["secret"]
    assert seeds.facts["projection_seed"] == f"{SeedBinding(secret, BEACON).seed('projection', 0):064x}"
    assert rep.verdict == "not_verified_preregistration_not_pinned"   # record and beacon unpinned
    assert _audit(released["bundle"], released["pub"], released["rec"], BEACON).verdict == "verified"


def test_a_bundle_without_preregistration_skips_the_seeds_check(tmp_path):
    fx.build_bundle(tmp_path / "b")
    from dpbundle.audit.runner import run_audit

    assert run_audit(tmp_path / "b").get("seeds").result == "skipped"


@pytest.mark.parametrize("field, value, message", [
    ("secret", "11" * 32, "do not open the registered commitment"),
    ("beacon", {"value": BEACON, "source": "another beacon"}, "is not the registered"),
])
def test_a_tampered_seed_file_fails_the_audit(released, tmp_path, field, value, message):
    import shutil

    copy = tmp_path / "B"
    shutil.copytree(released["bundle"], copy)
    doc = json.loads((copy / "seeds.json").read_text())
    doc[field] = value
    (copy / "seeds.json").write_text(json.dumps(doc, indent=2) + "\n")
    _resign(copy, released["key"])
    rep = _audit(copy, released["pub"])
    assert rep.get("integrity").result == "pass"  # re-signed: only the seeds check can tell
    seeds = rep.get("seeds")
    assert seeds.failed and any(message in p for p in seeds.problems), seeds.problems
    assert rep.verdict == "failed"


def test_a_record_for_another_spec_fails_the_audit(released, tmp_path):
    """A publisher who swaps in a record it made for another spec (and re-signs everything)
    is caught: the record's spec hash is not the bundle's."""
    import shutil

    other = tmp_path / "other.yaml"
    doc = yaml.safe_load(released["spec"].read_text())
    doc["privacy"]["epsilon_cap"] = 19.0
    other.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert _invoke("preregister", other, "--key", released["key"], "--out", tmp_path / "rec.json",
                   "--beacon-source", "drand quicknet, first round after the record",
                   "--secret-out", tmp_path / "s.json").exit_code == 0
    copy = tmp_path / "B"
    shutil.copytree(released["bundle"], copy)
    shutil.copy(tmp_path / "rec.json", copy / "preregistration.json")
    shutil.copy(tmp_path / "rec.json.sig", copy / "preregistration.json.sig")
    _resign(copy, released["key"])
    seeds = _audit(copy, released["pub"]).get("seeds")
    assert seeds.failed and any("spec SHA-256" in p for p in seeds.problems), seeds.problems


# ------------------------------------------------------------------ publish: model


@pytest.fixture(scope="module", params=["privbayes", "privbayes-oneway", "mst_pure", "privsyn"])
def published(request, setup, tmp_path_factory):
    """A pre-registered release with `publish: model`, for each publishable generator."""
    t = tmp_path_factory.mktemp(f"pub-{request.param}")
    doc = yaml.safe_load(setup["spec"].read_text())
    doc["publish"] = "model"
    gen = {"privbayes": {"type": "privbayes", "flavour": "theta",
                         "grid": {"epsilon_split": [0.5], "theta": [4]}},
           "privbayes-oneway": {"type": "privbayes", "flavour": "theta",
                                "grid": {"epsilon_split": [0.5], "theta": [4], "oneway": ["measure"]}},
           "mst_pure": {"type": "mst_pure"}, "privsyn": {"type": "privsyn"}}[request.param]
    doc["generators"] = [gen]
    spec = t / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = _invoke("preregister", spec, "--key", setup["key"], "--out", t / "rec.json",
                  "--beacon-source", "drand quicknet, first round after the record",
                  "--secret-out", t / "s.json")
    assert res.exit_code == 0, res.output
    res = _invoke("release", spec, setup["data"], "--out", t / "B", "--key", setup["key"],
                  "--ledger", t / "ledger.jsonl", "--transcript", t / "t.jsonl",
                  "--preregistration", t / "rec.json", "--beacon", BEACON,
                  "--preregistration-secret", t / "s.json")
    assert res.exit_code == 0, res.output
    return setup | {"bundle": t / "B", "generator": request.param, "rec": t / "rec.json"}


def test_the_public_audit_rederives_data_csv_byte_for_byte(published):
    rep = _audit(published["bundle"], published["pub"], published["rec"], BEACON)
    red = rep.get("rederivation")
    assert red.result == "pass", (red.problems, red.detail)
    assert rep.verdict == "verified"
    budget = json.loads((published["bundle"] / "budget.json").read_text())
    assert budget["published_model"]["extra_epsilon"] == 0


def _rerender_datasheet(bundle: Path) -> None:
    """README.html and README.pdf rendered again from the bundle's (edited) public files."""
    from dpbundle.release.bundle.datasheet import render_pdf_bytes
    from dpbundle.templates.datasheet import datasheet_html, meta_from_manifest, read_public_files

    meta = meta_from_manifest(json.loads((bundle / "manifest.json").read_text()))
    public = read_public_files(lambda n: (bundle / n).read_bytes(), lambda n: (bundle / n).is_file(), meta)
    html = datasheet_html(public)
    (bundle / "README.html").write_bytes(html.encode("utf-8"))
    (bundle / "README.pdf").write_bytes(render_pdf_bytes(html))


def test_swapping_a_row_for_another_existing_row_fails_the_public_audit(published, tmp_path):
    """Replace one record by another record that already occurs (every count stays >= the
    minimum count, every constraint holds), re-hash and re-sign: only the re-derivation sees it."""
    import shutil
    from collections import Counter

    copy = tmp_path / "B"
    shutil.copytree(published["bundle"], copy)
    lines = (copy / "data.csv").read_text().splitlines(keepends=True)
    month = lines[0].rstrip("\n").split(",").index("birth_month")
    counts = Counter(lines[1:])
    month_counts = Counter(line.split(",")[month] for line in lines[1:])
    rarest = min(month_counts, key=month_counts.get)

    def rest(line):  # the record without its month (no group-by or bound depends on the month)
        cells = line.split(",")
        return tuple(cells[:month] + cells[month + 1:])

    by_rest = {}
    for line, c in counts.items():
        if c > 3 and line.split(",")[month] != rarest:
            by_rest.setdefault(rest(line), []).append(line)
    victim_line, donor = next(v[:2] for v in by_rest.values() if len(v) >= 2)
    i = lines.index(victim_line)
    lines[i] = donor
    (copy / "data.csv").write_text("".join(lines))
    _rerender_datasheet(copy)       # a careful forger renders the datasheet of the forged data
    _resign(copy, published["key"])
    rep = _audit(copy, published["pub"])
    for c in rep.checks:   # a careful forger: every other check passes
        assert c.result != "fail" or c.check == "rederivation", (c.check, c.problems)
    red = rep.get("rederivation")
    assert red.failed and "not what the published model" in red.problems[0]
    assert rep.verdict == "failed"


def test_without_publish_model_there_is_no_model_file(released):
    assert not (released["bundle"] / "model.json").exists()
    rep = _audit(released["bundle"], released["pub"])
    assert rep.get("rederivation").result == "skipped"
    assert rep.get("seeds").result == "pass"


def test_sample_draws_more_rows_reproducibly(published, tmp_path):
    import csv

    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    for out, seed in ((a, 3), (b, 3), (c, 4)):
        res = _invoke("sample", published["bundle"], "--rows", 5000, "--seed", seed, "--out", out)
        assert res.exit_code == 0, res.output
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    rows = list(csv.reader(a.open()))
    header = (published["bundle"] / "data.csv").read_text().splitlines()[0].split(",")
    assert rows[0] == header and len(rows) == 5001
    labels = json.loads((published["bundle"] / "datapackage.json").read_text())
    fields = labels["resources"][0]["schema"]["fields"]
    for j, f in enumerate(fields):
        assert {r[j] for r in rows[1:]} <= set(f["categories"])


def test_sample_refuses_a_bundle_without_a_model(released, tmp_path):
    res = _invoke("sample", released["bundle"], "--rows", 10, "--out", tmp_path / "x.csv")
    assert res.exit_code == 2 and "publishes no model" in res.output
    assert not (tmp_path / "x.csv").exists()


def test_the_datasheet_explains_the_preregistration_and_the_published_model(published):
    html = (published["bundle"] / "README.html").read_text()
    assert "Pre-registration and the seeds" in html and BEACON in html
    assert "The published model" in html and "spends no extra budget" in html


def test_a_plain_release_datasheet_says_neither(released):
    html = (released["bundle"] / "README.html").read_text()
    assert "Pre-registration and the seeds" in html   # pre-registered, no model
    assert "The published model" not in html
