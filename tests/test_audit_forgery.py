"""Faults and forgeries (issue 27, section 1: verdicts that claim no more than was checked).

Each test makes a real release (or a forged copy of one: files edited, the datasheet rendered
again, every hash recomputed and the manifest re-signed with the publisher's own key, as a
publisher could) and requires the audit to say what it checked and no more:

* zero noise and halved noise pass the byte-for-byte replay but fail its noise test; honest
  noise passes it (and the test's false-alarm rate is measured on simulated OpenDP draws);
* a bundle whose spec says ``publish: model`` fails without its model.json;
* a bundle whose pre-registration files were deleted (and a row edited) fails against the
  auditor's archived record; a pre-registered bundle without ``--preregistration`` and
  ``--beacon`` is NOT VERIFIED (exit code 3), with them VERIFIED;
* a beacon value naming a time before the record or after the bundle fails;
* a bundle selected with PrivBayes fails against a record that registered a PrivSyn-only list,
  whichever list it publishes;
* a published model whose structure, sizes, distributions or declared noise differ from what
  the spec and the configuration give fails;
* the number of spends on the registry that the bundle states is checked against the ledger;
* the numpy and opendp versions are in the manifest, and a difference is warned about;
* docs/audit.md's table and verdict words are the ones the audit prints.

The release side of configurations.yaml and the ledger count is wired here through
``write_bundle`` (``release_cmd.py`` passes them once the lead wires it).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.audit.runner import AuditInputError, run_audit  # noqa: E402
from dpbundle.release.bundle import keys# noqa: E402
from dpbundle.release.cli.main import app  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
BEACON = "national lottery draw: 4 8 15 16 23 42"     # names no time
SOURCE = "the national lottery's first draw after the record"


def invoke(*args, ok: bool = True):
    res = runner.invoke(app, [str(a) for a in args])
    if ok:
        assert res.exit_code == 0, res.output
    return res


# ----------------------------------------------------------------------------- the wiring


@contextlib.contextmanager
def wired(configs: Path | None, ledger: Path):
    """Releases inside write the configuration list and the ledger's spends into the bundle, as
    release_cmd.py will: ``public_files |= configurations_file(configs)`` and ``ledger={...}``
    (the earlier spends' epsilons as the ledger records them)."""
    from dpbundle.release.bundle import write as bundle_mod
    from dpbundle.release.scheme.ledger import Ledger, _same_data

    original = bundle_mod.write_bundle

    def write_bundle(out, content=None, **kw):
        spends = Ledger(ledger)._merge(Ledger(ledger)._read())
        me = spends[-1]                                   # this run's reservation
        same = _same_data(spends, me["data_fingerprint"], me.get("table_fingerprint"))
        files = kw.get("public_files", content.public_files if content is not None else None)
        kw["public_files"] = dict(files or {}) | bundle_mod.configurations_file(configs)
        at = [e["id"] for e in same].index(me["id"])
        kw["ledger"] = {"spends_on_registry": at + 1, "spend_id": me["id"],
                        "earlier_epsilons": [e["epsilon"] for e in same[:at]]}
        return original(out, content, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bundle_mod, "write_bundle", write_bundle)
        yield


@contextlib.contextmanager
def noise_times(factor: float):
    """Every Laplace draw of the runs inside returns true + factor x (OpenDP's noise): 0 is the
    issue's patched sampler (noisy == true)."""
    from dpbundle.mechanisms import noise

    original = noise._calibrated_laplace

    def patched(s, e, vector, integer):
        scale, meas = original(s, e, vector, integer)

        def scaled(x):
            y = meas(x)
            if isinstance(x, list):
                return [t + (int((n - t) * factor) if integer else (n - t) * factor) for t, n in zip(x, y)]
            return x + (int((y - x) * factor) if integer else (y - x) * factor)
        return scale, scaled

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(noise, "_calibrated_laplace", patched)
        yield


def narrowed(path: Path, configs: list[dict]) -> Path:
    from dpbundle.release.scheme.space import config_id

    doc = {"format": "dpbundle-narrowed/1",
           "configurations": [{"id": config_id(c), "config": c, "acceptance": 1.0, "wilson_low": 0.9,
                               "wilson_high": 1.0, "runs": 10} for c in configs]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def space(spec: Path) -> list[dict]:
    from dpbundle.release.scheme.space import enumerate_configs
    from dpbundle.release.spec.load import load_spec

    return list(enumerate_configs(load_spec(spec)))


# ----------------------------------------------------------------------------- forging


def forge(bundle: Path, key: Path, **manifest_fields) -> None:
    """What a publisher can do after editing files: datasheet rendered again from the edited
    public files, every hash recomputed (datapackage.json, SHA256SUMS, manifest.json listing
    exactly the files present) and SHA256SUMS and the manifest re-signed with its own key."""
    from dpbundle.release.bundle.datasheet import render_pdf_bytes
    from dpbundle.templates.datasheet import datasheet_html, meta_from_manifest, read_public_files

    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest.update(manifest_fields)
    present = sorted(p.name for p in bundle.iterdir() if p.name not in ("manifest.json", "manifest.sig"))
    order = [f["path"] for f in manifest["files"] if f["path"] in present]
    order += [n for n in present if n not in order]
    manifest["files"] = [{"path": n, "sha256": "0" * 64, "size": 0} for n in order]
    package = json.loads((bundle / "datapackage.json").read_text())
    for res in package["resources"]:
        data = (bundle / res["path"]).read_bytes()
        res["hash"], res["bytes"] = "sha256:" + hashlib.sha256(data).hexdigest(), len(data)
    (bundle / "datapackage.json").write_text(json.dumps(package, indent=2, ensure_ascii=False) + "\n")
    meta = meta_from_manifest(manifest)
    public = read_public_files(lambda n: (bundle / n).read_bytes(), lambda n: (bundle / n).is_file(), meta)
    html = datasheet_html(public)
    (bundle / "README.html").write_bytes(html.encode("utf-8"))
    (bundle / "README.pdf").write_bytes(render_pdf_bytes(html))
    checksum_files = ("SHA256SUMS", "SHA256SUMS.sig", "SHA256SUMS.sshsig")
    sums = "".join(f"{hashlib.sha256((bundle / n).read_bytes()).hexdigest()}  {n}\n"
                   for n in sorted(order) if n not in checksum_files).encode()
    (bundle / "SHA256SUMS").write_bytes(sums)
    private_key = keys.load_private_key(key)
    if (bundle / "SHA256SUMS.sig").exists():
        (bundle / "SHA256SUMS.sig").write_bytes(keys.sign(private_key, sums))
    if (bundle / "SHA256SUMS.sshsig").exists():
        (bundle / "SHA256SUMS.sshsig").write_bytes(keys.sshsig_sign(private_key, sums))
    for f in manifest["files"]:
        data = (bundle / f["path"]).read_bytes()
        f["sha256"], f["size"] = hashlib.sha256(data).hexdigest(), len(data)
    raw = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    (bundle / "manifest.json").write_bytes(raw)
    (bundle / "manifest.sig").write_bytes(keys.sign(keys.load_private_key(key), raw))


def failed(rep) -> dict:
    return {c.check: c.problems for c in rep.checks if c.failed}


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    t = tmp_path_factory.mktemp("forgery")
    invoke("keygen", "--out", t / "k")
    spec = fx.fast_spec(t / "fast.yaml")
    doc = yaml.safe_load(spec.read_text())
    doc["publish"] = "model"
    model_spec = t / "model.yaml"
    model_spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    data = fx.example_registry(t / "registry.csv", 4000, 5)
    return {"t": t, "key": t / "k.key", "pub": t / "k.pub", "spec": spec, "model_spec": model_spec,
            "data": data}


@pytest.fixture(scope="module")
def released(base):
    """A pre-registered `publish: model` release with its configuration list and ledger count."""
    t = base["t"] / "released"
    t.mkdir()
    configs = narrowed(t / "list.yaml", space(base["model_spec"]))
    invoke("preregister", base["model_spec"], "--key", base["key"], "--out", t / "rec.json",
           "--configs", configs, "--beacon-source", SOURCE, "--secret-out", t / "s.json")
    with wired(configs, t / "ledger.jsonl"):
        invoke("release", base["model_spec"], base["data"], "--out", t / "B", "--key", base["key"],
               "--ledger", t / "ledger.jsonl", "--transcript", t / "t.jsonl", "--configs", configs,
               "--preregistration", t / "rec.json", "--beacon", BEACON,
               "--preregistration-secret", t / "s.json")
    return base | {"bundle": t / "B", "rec": t / "rec.json", "transcript": t / "t.jsonl",
                   "ledger": t / "ledger.jsonl", "list": configs}


def pinned(r, bundle=None, **kw):
    return run_audit(bundle or r["bundle"], pubkey=r["pub"], preregistration=r["rec"], beacon=BEACON, **kw)


def plain_release(base, name: str, factor: float | None = None) -> dict:
    t = base["t"] / name
    t.mkdir()
    ctx = noise_times(factor) if factor is not None else contextlib.nullcontext()
    with ctx:
        invoke("release", base["spec"], base["data"], "--out", t / "B", "--key", base["key"],
               "--ledger", t / "ledger.jsonl", "--transcript", t / "t.jsonl")
    return base | {"bundle": t / "B", "transcript": t / "t.jsonl", "ledger": t / "ledger.jsonl"}


# ------------------------------------------------------------------- 1. the recorded noise


@pytest.mark.parametrize("factor, how", [(0.0, "smaller"), (0.5, "smaller")])
def test_zero_or_halved_noise_replays_but_fails_the_noise_test(base, factor, how):
    r = plain_release(base, f"noise-{factor}", factor)
    transcript = [json.loads(x) for x in r["transcript"].read_text().splitlines()[1:]]
    lap = [x for x in transcript if x["kind"] == "laplace"]
    if factor == 0:
        assert all(x["noisy"] == x["true"] for x in lap)          # the zero-noise run
    public = run_audit(r["bundle"], pubkey=r["pub"])
    assert public.verdict == "verified", failed(public)          # nobody outside can tell
    rep = run_audit(r["bundle"], pubkey=r["pub"], transcript=r["transcript"], data=r["data"])
    replay = rep.get("replay")
    assert replay.failed and rep.verdict == "failed" and rep.exit_code == 1
    text = " ".join(replay.problems)
    assert f"is {how} than its declared scales" in text, replay.problems
    # nothing else of the replay failed: data.csv and every DP value replay byte for byte
    assert all("noise" in p for p in replay.problems), replay.problems
    for p in replay.problems:                                    # no private number
        assert not re.search(r"\btrue value\b|\bn = \d", p)


def test_honest_noise_passes_the_replay_and_states_its_power(released):
    rep = pinned(released, transcript=released["transcript"], data=released["data"],
                 ledger=released["ledger"])
    replay = rep.get("replay")
    assert replay.result == "pass", replay.problems
    noise = replay.facts["noise"]
    assert noise["laplace_coordinates"] > 500 and noise["noisy_max_draws"] >= 1
    assert noise["power_noise_halved"] > 0.99 and noise["power_no_noise"] > 0.99
    assert "Laplace coordinates" in replay.detail and "power against noise halved" in replay.detail
    assert rep.verdict == "verified" and rep.private


def _simulated_transcript(rand_factor: float = 1.0) -> list[dict]:
    """A transcript of real OpenDP draws of several kinds and scales (honest when 1)."""
    from dpbundle.mechanisms.noise import Randomness, Transcript

    t = Transcript()
    rand = Randomness(t)
    rand.laplace(np.arange(150, dtype=np.int64), sensitivity=2, epsilon=1 / 3, integer=True, purpose="t6")
    rand.laplace(np.zeros(40, dtype=np.int64), sensitivity=1, epsilon=1.5, integer=True, purpose="t07")
    rand.laplace(np.linspace(0, 1, 50), sensitivity=0.3, epsilon=0.43, purpose="f")
    for i in range(5):
        rand.laplace(0.25 * i, sensitivity=0.01, epsilon=0.01, purpose=f"s{i}")
    for i in range(4):
        rand.exponential(np.array([0.0, -0.5, -1.0, -3.0, -0.2]), sensitivity=0.25, epsilon=1.0,
                         purpose=f"max{i}")
    if rand_factor != 1.0:
        for rec in t.records:
            if rec["kind"] == "laplace":
                tr, nz = rec["true"], rec["noisy"]
                integer = rec["mechanism"].endswith("integer")
                f = (lambda a, b: a + int((b - a) * rand_factor)) if integer else (lambda a, b: a + (b - a) * rand_factor)
                rec["noisy"] = [f(a, b) for a, b in zip(tr, nz)] if isinstance(tr, list) else f(tr, nz)
    return t.records


def test_the_false_alarm_rate_is_as_stated_on_simulated_opendp_draws():
    """300 honest transcripts of real OpenDP draws: each test's p-values are uniform (about 5%
    below 0.05) and none is below the stated level; halved and zero noise always fail."""
    from dpbundle.audit.noise_check import ALPHA, ALPHA_EACH, check_noise

    assert ALPHA == 1e-6 and ALPHA_EACH == pytest.approx(ALPHA / 3)
    ks, scale, nmax = [], [], []
    for _ in range(300):
        res = check_noise(_simulated_transcript())
        assert res.ok, res.problems
        ks.append(res.facts["ks_p"])
        scale.append(res.facts["scale_p"])
        nmax.append(res.facts["noisy_max_p"])
    # bounds at about 4.5 binomial standard deviations: an honest run fails one of them with
    # probability about 5e-5 (binomial tails; the earlier 3-sigma bounds: about 3e-3)
    for name, ps in (("ks", ks), ("scale", scale)):
        low = float(np.mean(np.asarray(ps) < 0.05))
        assert 2 / 300 <= low <= 0.11, (name, low)
        assert float(np.mean(np.asarray(ps) < 0.5)) == pytest.approx(0.5, abs=0.13), name
    assert float(np.mean(np.asarray(nmax) < 0.05)) <= 0.11        # discrete: conservative
    for factor in (0.5, 0.0):
        for _ in range(20):
            assert not check_noise(_simulated_transcript(factor)).ok, factor


def test_the_randomized_pit_of_discrete_laplace_is_uniform():
    from scipy import stats

    from dpbundle.audit.noise_check import laplace_pit
    from dpbundle.mechanisms.noise import laplace_measurement

    for scale in (0.7, 3.0):
        z = np.asarray(laplace_measurement(scale, True, True)([0] * 20000), dtype=np.float64)
        u, e = laplace_pit(z, scale, True, np.random.default_rng(5).random(z.size))
        assert stats.kstest(u, "uniform").pvalue > 1e-6
        assert stats.kstest(e, "expon").pvalue > 1e-6


def test_a_record_with_a_made_up_scale_cannot_be_tested():
    from dpbundle.audit.noise_check import check_noise

    recs = _simulated_transcript()
    recs[0]["scale"] = recs[0]["scale"] * 10              # noise "honest" for a larger scale
    res = check_noise(recs)
    assert not res.ok and "OpenDP's calibration" in res.problems[0]


def test_noisy_max_choices_that_are_always_the_top_score_fail():
    from dpbundle.audit.noise_check import check_noise
    from dpbundle.mechanisms.noise import Randomness, Transcript

    t = Transcript()
    rand = Randomness(t)
    for i in range(60):        # nearly tied scores: honest noise often picks another candidate
        rand.exponential(np.array([0.0, -0.05, -0.1]), sensitivity=0.25, epsilon=1.0, purpose=f"m{i}")
    for rec in t.records:
        rec["noisy"] = 0        # zero noise: always the top score
    res = check_noise(t.records)
    assert not res.ok and "report-noisy-max" in res.problems[0]


# ------------------------------------------------------------------- 2. required files, pins


def test_a_pre_registered_bundle_is_verified_only_with_its_record_and_beacon(released):
    rep = pinned(released)
    assert rep.verdict == "verified" and rep.exit_code == 0, failed(rep)
    assert "pinned record" in rep.verdict_text()
    rep = run_audit(released["bundle"], pubkey=released["pub"])
    assert rep.passed and rep.verdict == "not_verified_preregistration_not_pinned"
    assert rep.not_checked == ["preregistration_not_pinned", "beacon_not_checked"]
    assert rep.exit_code == 3
    assert "pre-registration not pinned; beacon not checked" in rep.verdict_text()
    rep = run_audit(released["bundle"], pubkey=released["pub"], preregistration=released["rec"])
    assert rep.verdict == "not_verified_beacon_not_checked" and rep.exit_code == 3
    rep = run_audit(released["bundle"], preregistration=released["rec"], beacon=BEACON)
    assert rep.verdict == "not_verified_key_not_pinned" and rep.not_checked == ["key_not_pinned"]


def test_the_cli_says_not_verified_and_exits_3(released, tmp_path):
    from dpbundle.audit.report import VERDICT_TEXT

    out = tmp_path / "r.json"
    res = invoke("audit", released["bundle"], "--pubkey", released["pub"], "--json", out, ok=False)
    assert res.exit_code == 3 and "Traceback" not in res.output
    assert "NOT VERIFIED (pre-registration not pinned; beacon not checked)" in " ".join(res.output.split())
    doc = json.loads(out.read_text())
    from dpbundle.release.common.jsonschemas import iter_errors

    assert iter_errors(doc, "audit-report") == []
    assert doc["verdict"] == "not_verified_preregistration_not_pinned"
    assert doc["not_checked"] == ["preregistration_not_pinned", "beacon_not_checked"]
    res = invoke("audit", released["bundle"], "--pubkey", released["pub"], "--preregistration",
                 released["rec"], "--beacon", BEACON, ok=False)
    assert res.exit_code == 0, res.output
    res = invoke("audit", released["bundle"], "--pubkey", released["pub"], "--preregistration",
                 released["rec"], ok=False)
    assert res.exit_code == 3 and VERDICT_TEXT["not_verified_beacon_not_checked"] in " ".join(res.output.split())


def test_a_record_without_its_signature_is_unusable_input(released, tmp_path):
    rec = tmp_path / "rec.json"
    shutil.copy(released["rec"], rec)
    with pytest.raises(AuditInputError, match="REC.sig"):
        run_audit(released["bundle"], pubkey=released["pub"], preregistration=rec)
    res = invoke("audit", released["bundle"], "--pubkey", released["pub"], "--preregistration", rec, ok=False)
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_another_record_or_beacon_fails(released, base, tmp_path):
    other = tmp_path / "other.json"
    invoke("preregister", base["model_spec"], "--key", base["key"], "--out", other,
           "--beacon-source", SOURCE, "--secret-out", tmp_path / "s.json")
    rep = run_audit(released["bundle"], pubkey=released["pub"], preregistration=other, beacon=BEACON)
    assert rep.verdict == "failed"
    assert any("not the pre-registration record you archived" in p for p in failed(rep)["seeds"])
    rep = run_audit(released["bundle"], pubkey=released["pub"], preregistration=released["rec"],
                    beacon="national lottery draw: 1 2 3 4 5 6")
    assert any("is not the one given with --beacon" in p for p in failed(rep)["seeds"])
    bad = tmp_path / "bad.json"              # the archived copy itself was altered
    shutil.copy(released["rec"], bad)
    (tmp_path / "bad.json.sig").write_bytes(b"\x00" * 64)
    rep = run_audit(released["bundle"], pubkey=released["pub"], preregistration=bad, beacon=BEACON)
    assert any("does not verify" in p for p in failed(rep)["seeds"])


def test_a_dropped_model_fails(released, tmp_path):
    copy = tmp_path / "B"
    shutil.copytree(released["bundle"], copy)
    (copy / "model.json").unlink()
    forge(copy, released["key"])
    rep = pinned(released, copy)
    assert rep.get("integrity").result == "pass"               # re-signed: a careful forger
    bad = failed(rep)
    # budget: registry-entry.yaml, rendered again from the public files (the closure rule), no
    # longer says what the bundle's entry says about model.json
    assert rep.verdict == "failed" and set(bad) == {"schema", "rederivation", "budget"}, bad
    assert any("spec.json says publish: model" in p for p in bad["schema"])
    assert "spec.json says publish: model" in bad["rederivation"][0]
    assert all(p.startswith("registry-entry.yaml: not the entry rendered from") for p in bad["budget"]), bad


def test_dropped_preregistration_files_and_an_edited_row_fail_against_the_archived_record(released, tmp_path):
    copy = tmp_path / "B"
    shutil.copytree(released["bundle"], copy)
    for name in ("preregistration.json", "preregistration.json.sig", "seeds.json"):
        (copy / name).unlink()
    lines = (copy / "data.csv").read_text().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]                    # an edit (rows swapped)
    (copy / "data.csv").write_text("".join(lines))
    forge(copy, released["key"])
    rep = run_audit(copy, pubkey=released["pub"], preregistration=released["rec"], beacon=BEACON)
    bad = failed(rep)
    assert rep.verdict == "failed" and "seeds" in bad, bad
    assert any("carries no preregistration.json" in p for p in bad["seeds"])
    assert any("--beacon" in p for p in bad["seeds"])
    # without the archived record nobody can tell: such a bundle claims no pre-registration
    rep = run_audit(copy, pubkey=released["pub"])
    assert rep.get("seeds").result == "skipped"
    # one file of three removed: the bundle's own promise is broken
    copy2 = tmp_path / "B2"
    shutil.copytree(released["bundle"], copy2)
    (copy2 / "seeds.json").unlink()
    forge(copy2, released["key"])
    bad = failed(run_audit(copy2, pubkey=released["pub"]))
    assert any("missing: seeds.json" in p for p in bad["schema"]), bad


# ------------------------------------------------------------------- 3. the beacon's time


@pytest.mark.parametrize("value, message", [
    ("drand quicknet round 123456: 9f3c0d", "before the pre-registration record"),
    ("drand default round 1000: 9f3c", "before the pre-registration record"),
    ("NIST beacon pulse 2099-01-01T00:00:00Z: 9f3c", "after the bundle was made"),
    ("lottery 2001-02-03: 1 2 3", "before the pre-registration record"),
])
def test_a_beacon_named_at_an_impossible_time_fails(released, tmp_path, value, message):
    copy = tmp_path / "B"
    shutil.copytree(released["bundle"], copy)
    seeds = json.loads((copy / "seeds.json").read_text())
    seeds["beacon"]["value"] = value
    (copy / "seeds.json").write_text(json.dumps(seeds, indent=2) + "\n")
    forge(copy, released["key"])
    rep = run_audit(copy, pubkey=released["pub"], preregistration=released["rec"], beacon=value)
    assert any(message in p for p in failed(rep).get("seeds", [])), failed(rep)


def test_beacon_times():
    from dpbundle.audit.beacon import beacon_time, beacon_time_problems

    when, _ = beacon_time("drand quicknet round 1", "")
    assert when.when.timestamp() == 1692803367
    when, _ = beacon_time("round 3", "drand mainnet, first round after the record")
    assert when.when.timestamp() == 1595431050 + 60
    ok = beacon_time_problems("draw of 2027-01-15 12:00 UTC", "first draw after 2027-01-15 11:00 UTC",
                              "2027-01-15T10:00:00Z", "2027-01-15")
    assert ok[0] == [] and ok[2] == "2027-01-15T12:00:00Z"
    early = beacon_time_problems("draw of 2027-01-15 10:30 UTC", "first draw after 2027-01-15 11:00 UTC",
                                 "2027-01-15T10:00:00Z", "2027-01-15")
    assert len(early[0]) == 1 and "beacon source names" in early[0][0]
    late = beacon_time_problems("2027-01-16T00:00:01+00:00 x", "", "2027-01-15T10:00:00Z", "2027-01-15")
    assert "after the bundle" in late[0][0]
    none = beacon_time_problems("4 8 15 16 23 42", "", "2027-01-15T10:00:00Z", "2027-01-15")
    assert none[0] == [] and "names no time" in none[1][0]
    unknown = beacon_time_problems("drand round 5", "", "2027-01-15T10:00:00Z", "2027-01-15")
    assert "which chain" in " ".join(unknown[1])


# ------------------------------------------------------------------- 4. the configuration list


def test_the_bundle_publishes_its_configuration_list(released):
    assert (released["bundle"] / "configurations.yaml").read_bytes() == released["list"].read_bytes()
    record = json.loads(released["rec"].read_text())
    assert record["configs_sha256"] == hashlib.sha256(released["list"].read_bytes()).hexdigest()
    rep = pinned(released)
    assert rep.get("schema").facts["configurations"] == len(space(released["model_spec"]))
    html = (released["bundle"] / "README.html").read_text()
    assert "configurations.yaml" in html


@pytest.fixture(scope="module")
def two_generators(base):
    """A record that registered a PrivSyn-only list, and a bundle selected with PrivBayes (its
    release tool patched to skip the list check: what a cheating publisher runs)."""
    t = base["t"] / "two"
    t.mkdir()
    doc = yaml.safe_load(base["spec"].read_text())
    doc["generators"] = [doc["generators"][0], {"type": "privsyn"}]
    spec = t / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    configs = space(spec)
    pb = narrowed(t / "privbayes.yaml", [c for c in configs if c["generator"]["type"] == "privbayes"])
    ps = narrowed(t / "privsyn.yaml", [c for c in configs if c["generator"]["type"] == "privsyn"])
    invoke("preregister", spec, "--key", base["key"], "--out", t / "rec.json", "--configs", ps,
           "--beacon-source", SOURCE, "--secret-out", t / "s.json")
    from dpbundle.release import preregistration as preregister

    with wired(pb, t / "ledger.jsonl"), pytest.MonkeyPatch.context() as mp:
        mp.setattr(preregister, "check_against", lambda *a, **k: [])
        invoke("release", spec, base["data"], "--out", t / "B", "--key", base["key"],
               "--ledger", t / "ledger.jsonl", "--transcript", t / "t.jsonl", "--configs", pb,
               "--preregistration", t / "rec.json", "--beacon", BEACON,
               "--preregistration-secret", t / "s.json")
    return base | {"bundle": t / "B", "rec": t / "rec.json", "privbayes": pb, "privsyn": ps}


@pytest.mark.parametrize("publish", ["privbayes", "privsyn", None])
def test_a_privbayes_bundle_fails_against_a_privsyn_only_record(two_generators, tmp_path, publish):
    r = two_generators
    assert json.loads((r["bundle"] / "spec.json").read_text())["configuration"]["generator"]["type"] == "privbayes"
    copy = tmp_path / "B"
    shutil.copytree(r["bundle"], copy)
    (copy / "configurations.yaml").unlink()
    if publish:
        shutil.copy(r[publish], copy / "configurations.yaml")
    forge(copy, r["key"])
    rep = pinned(r, copy)
    bad = failed(rep)
    assert rep.verdict == "failed", bad
    text = " ".join(p for ps in bad.values() for p in ps)
    if publish == "privsyn":      # the registered list: the selected configuration is not in it
        assert "the selected configuration is not in configurations.yaml" in text
    elif publish == "privbayes":  # the list it drew from: not the registered one
        assert "the record registered" in text and "another list" in text
    else:
        assert "which the bundle does not publish" in text


# ------------------------------------------------------------------- 5. the published model


def _model_copy(released, tmp_path, edit) -> dict:
    copy = tmp_path / "B"
    shutil.copytree(released["bundle"], copy)
    doc = json.loads((copy / "model.json").read_text())
    edit(doc)
    (copy / "model.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    forge(copy, released["key"])
    return failed(pinned(released, copy))


def test_the_model_declares_nothing_but_its_noise_is_recomputed(released):
    red = pinned(released).get("rederivation")
    assert red.result == "pass"
    plan = red.facts["model_noise"]
    doc = json.loads((released["bundle"] / "model.json").read_text())
    assert len(plan) == len(doc["network"])
    assert {p["scale"] for p in plan} == {6.000000000000002}     # 2 d / eps_2 for d = 6, eps_2 = 2


def test_a_model_declaring_other_noise_scales_fails(released, tmp_path):
    red = pinned(released).get("rederivation")
    plan = red.facts["model_noise"]

    def edit(doc):
        doc["noise"] = [dict(p, scale=p["scale"] / 2) for p in plan]
    bad = _model_copy(released, tmp_path, edit)
    # dpbundle never writes a "noise" field: the closure rule's schema refuses it before the
    # model check compares it with the noise plan
    assert any("declared noise" in p or "'noise' was unexpected" in p for p in bad["rederivation"]), bad
    assert any("'noise' was unexpected" in p for p in bad["schema"]), bad


def test_a_model_with_a_parent_set_privbayes_never_chooses_fails(released, tmp_path):
    def edit(doc):
        node = next(i for i, n in enumerate(doc["network"]) if n["parents"])
        doc["network"][node]["parents"] = []
        table = np.asarray(doc["conditionals"][node])
        doc["conditionals"][node] = [list(table.mean(axis=0))]
    bad = _model_copy(released, tmp_path, edit)
    assert any("not maximal under the theta cap" in p for p in bad["rederivation"]), bad


def test_a_model_whose_table_is_not_a_distribution_fails(released, tmp_path):
    def edit(doc):
        doc["conditionals"][0][0] = [2 * x for x in doc["conditionals"][0][0]]
    bad = _model_copy(released, tmp_path, edit)
    assert any("not a probability distribution" in p for p in bad["rederivation"]), bad


def test_a_raked_model_for_a_configuration_without_oneway_fails(released, tmp_path):
    def edit(doc):
        base = {k: doc.pop(k) for k in ("domain", "network", "conditionals")}
        doc.update(kind="raked", method="rake", rounds=25, base={"kind": "bayesian_network", **base},
                   shares=[[1 / k] * k for k in base["domain"]])
    bad = _model_copy(released, tmp_path, edit)
    assert any("raked exactly when" in p for p in bad["rederivation"]), bad


def test_a_model_with_other_numbers_passes_its_structure_check_but_fails_the_replay(released, tmp_path):
    """Same structure, sizes and scales, other numbers (the public audit cannot tell the
    numbers of a model from noisy ones): only the enclave replay, which fits the model again
    from the recorded draws, sees that model.json is not its fit."""
    copy = tmp_path / "B"
    shutil.copytree(released["bundle"], copy)
    doc = json.loads((copy / "model.json").read_text())
    row = doc["conditionals"][0][0]
    doc["conditionals"][0][0] = row[::-1]                  # still a distribution
    (copy / "model.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    forge(copy, released["key"])
    rep = pinned(released, copy, transcript=released["transcript"], data=released["data"])
    red, replay = rep.get("rederivation"), rep.get("replay")
    assert not any("structure" in p or "distribution" in p for p in red.problems), red.problems
    assert any("not the model the replayed noisy measurements give" in p for p in replay.problems), \
        replay.problems


# ------------------------------------------------------------------- 6. the spend count


def test_the_spend_count_is_signed_and_checked_against_the_ledger(released, base, tmp_path):
    manifest = json.loads((released["bundle"] / "manifest.json").read_text())
    assert manifest["ledger"]["spends_on_registry"] == 1
    rep = pinned(released, ledger=released["ledger"], data=base["data"],
                 transcript=released["transcript"])
    led = rep.get("ledger")
    assert led.result == "pass", led.problems
    assert rep.private and json.loads(rep.to_json())["PRIVATE"]
    # a second run on the same data, same ledger: it says 2, and the first bundle still says 1
    t = tmp_path / "second"
    t.mkdir()
    with wired(None, released["ledger"]):
        invoke("release", base["model_spec"], base["data"], "--out", t / "B", "--key", base["key"],
               "--ledger", released["ledger"], "--transcript", t / "t.jsonl", "--allow-additional-spend")
    second = json.loads((t / "B" / "manifest.json").read_text())["ledger"]
    assert second["spends_on_registry"] == 2
    rep2 = run_audit(t / "B", pubkey=base["pub"], ledger=released["ledger"], data=base["data"],
                     transcript=t / "t.jsonl")
    assert rep2.get("ledger").result == "pass", rep2.get("ledger").problems
    led = pinned(released, ledger=released["ledger"]).get("ledger")
    assert led.result == "pass" and any("came after this release" in w for w in led.warnings)
    # a forged count (one run admitted instead of two) fails against the ledger
    copy = tmp_path / "B2"
    shutil.copytree(t / "B", copy)
    forge(copy, base["key"], ledger={**second, "spends_on_registry": 1})
    led = run_audit(copy, pubkey=base["pub"], ledger=released["ledger"]).get("ledger")
    assert led.failed and "states 1 spend(s)" in led.problems[0]
    # another ledger (the run kept out of it) does not know this release's spend
    other = plain_release(base, "other-ledger")
    led = run_audit(t / "B", pubkey=base["pub"], ledger=other["ledger"]).get("ledger")
    assert led.failed and "not in the ledger" in led.problems[0]


def test_a_bundle_stating_no_spends_fails_the_ledger_check(base, tmp_path):
    """A publisher who drops the signed spend count (and re-signs) fails the enclave's check."""
    r = plain_release(base, "unwired")
    assert "ledger" in json.loads((r["bundle"] / "manifest.json").read_text())
    copy = tmp_path / "B"
    shutil.copytree(r["bundle"], copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["ledger"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    forge(copy, r["key"])
    led = run_audit(copy, pubkey=r["pub"], ledger=r["ledger"]).get("ledger")
    assert led.failed and "states no ledger spends" in led.problems[0]


# ------------------------------------------------------------------- 7. library versions


def test_the_manifest_records_numpy_and_opendp_and_a_difference_is_warned(released, tmp_path):
    from importlib.metadata import version

    manifest = json.loads((released["bundle"] / "manifest.json").read_text())
    assert manifest["versions"] == {"numpy": version("numpy"), "opendp": version("opendp")}
    copy = tmp_path / "B"
    shutil.copytree(released["bundle"], copy)
    forge(copy, released["key"], versions={"numpy": "0.0.1", "opendp": version("opendp")})
    rep = pinned(released, copy, transcript=released["transcript"], data=released["data"])
    for check in ("rederivation", "replay"):
        c = rep.get(check)
        assert c.result == "pass" and any("numpy 0.0.1" in w for w in c.warnings), (check, c.warnings)


# ------------------------------------------------------------------- 8. the documentation


def test_docs_state_the_table_and_every_verdict_word():
    from dpbundle.audit.report import EXIT_CODES, VERDICT_TEXT

    text = (ROOT / "docs" / "audit.md").read_text()
    flat = " ".join(text.split())
    assert ("| what the public audit proves" in text and "what the enclave replay proves" in text
            and "what needs a trusted party" in text)
    for verdict, words in VERDICT_TEXT.items():
        assert f"`{verdict}`" in text, verdict
        assert words in flat, verdict
        row = next(line for line in text.splitlines() if line.startswith("|") and f"`{verdict}`" in line)
        assert row.startswith(f"| {EXIT_CODES[verdict]} |"), (verdict, row)
    schema = json.loads((ROOT / "schemas" / "audit-report.schema.json").read_text())
    assert set(schema["properties"]["verdict"]["enum"]) == set(VERDICT_TEXT)


def test_the_datasheet_says_what_each_audit_proves(released):
    html = (released["bundle"] / "README.html").read_text()
    for words in ("What the checks prove, and what they cannot", "The public audit (anyone) proves",
                  "Only the enclave audit checks", "Nobody can prove, without a trusted party",
                  "--preregistration REC --beacon VALUE", "false-alarm rate", "not a proof"):
        assert words in html, words


def test_a_release_publishes_its_list_and_its_spend_count(tmp_path):
    """The release itself (not a monkeypatched writer) publishes the --configs list verbatim and
    states the ledger's count of spends on these data, which the enclave audit checks."""
    from importlib.resources import files

    from typer.testing import CliRunner

    from dpbundle.audit.runner import run_audit
    from dpbundle.release.cli.main import app

    ledger = tmp_path / "ledger.jsonl"
    res = CliRunner().invoke(app, ["release", "--stop-probability", "0", "--example", "persons", "--out", str(tmp_path / "b"),
                                   "--ledger", str(ledger), "--transcript", str(tmp_path / "t.jsonl")])
    assert res.exit_code == 0, res.output
    listed = files("dpbundle.examples").joinpath("persons-recommended-narrowed.yaml").read_bytes()
    assert (tmp_path / "b" / "configurations.yaml").read_bytes() == listed
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["ledger"]["spends_on_registry"] == 1
    rep = run_audit(tmp_path / "b", pubkey=tmp_path / "b.demo-key.pub", ledger=ledger)
    assert rep.get("ledger").result == "pass" and rep.verdict == "verified"
