"""Issue 38: sampler version 3, a bounded base of records scaled to n, for the models that make
records one by one (GUM, raking, private-pgm). Its distribution (the scaling draw's law, the base
equal to version 2's sample of B records), the public rule against every generator's model, and a
release walked through the public audit, the enclave replay and the public re-derivation, with
BASE_RECORDS lowered so that a few thousand records exceed it; a key holder's edit of the claim
fails."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml

import audit_fixtures as fx
from i36_closure_util import edit_json, resign
from dpbundle.mechanisms import sampling
from dpbundle.mechanisms.generators import make_generator
from dpbundle.mechanisms.noise import Randomness

BASE = 1000


def _rng_for(seed: int, asked: list | None = None):
    def rng_for(purpose: str) -> np.random.Generator:
        if asked is not None:
            asked.append(purpose)
        return np.random.default_rng([seed, abs(hash(purpose)) % (2**32)])
    return rng_for


# ----------------------------------------------------------------------------- the scaling draw


def test_scale_counts_keeps_every_base_record_q_or_q_plus_one_times():
    counts = np.array([5, 3, 0, 2, 40], dtype=np.int64)          # B = 50
    for n in (50, 51, 99, 100, 137, 5000):
        out = sampling.scale_counts(counts, n, np.random.default_rng(n))
        q = n // 50
        assert out.sum() == n
        assert (out >= q * counts).all() and (out <= (q + 1) * counts).all()
        assert out[2] == 0                                      # a type not in the base never appears
    with pytest.raises(ValueError, match="no records"):
        sampling.scale_counts(np.zeros(3, np.int64), 10, np.random.default_rng(0))


def test_the_extra_records_are_a_uniform_subset_of_the_base():
    """Over many draws each base type gets r c_t / B of the r extra records on average and the
    variance of a hypergeometric draw: a draw biased to large (or first) types fails this."""
    counts = np.array([1, 4, 10, 25, 60], dtype=np.int64)         # B = 100
    n, B = 1037, 100
    q, r = divmod(n, B)
    rng = np.random.default_rng(7)
    extra = np.array([sampling.scale_counts(counts, n, rng) - q * counts for _ in range(4000)])
    mean, want = extra.mean(axis=0), r * counts / B
    var = r * (counts / B) * (1 - counts / B) * (B - r) / (B - 1)
    assert np.all(np.abs(mean - want) <= 5 * np.sqrt(var / 4000) + 1e-9), (mean, want)
    assert np.allclose(extra.var(axis=0), var, rtol=0.15, atol=0.02)


# ----------------------------------------------------------------------------- which version


def _small_codes(n: int = 3000, seed: int = 3):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(0, 2, n)) % 5
    c = rng.integers(0, 3, n)
    return np.stack([a, b, c], axis=1).astype(np.int64), (4, 5, 3)


GENERATORS = [
    {"type": "privbayes", "epsilon_split": 0.5, "theta": 4},
    {"type": "privbayes", "epsilon_split": 0.5, "theta": 4, "oneway": "tables"},
    {"type": "privbayes", "epsilon_split": 0.5, "theta": 4, "oneway": "measure"},
    {"type": "privsyn"},
    {"type": "privsyn", "estimator": "hierarchical"},
    {"type": "mst_pure"},
    {"type": "aim_pure"},
    {"type": "crosstab"},
    {"type": "marginals"},
]


@pytest.mark.parametrize("generator", GENERATORS, ids=lambda g: "-".join(str(v) for v in g.values()))
def test_the_public_rule_is_the_fitted_models_own(generator):
    """manifest.json's claim (public_sampler, from the configuration) agrees with what the
    fitted model's class says (no ``sample_counts``: version 3 above the base), on both sides of
    the base."""
    codes, domain = _small_codes()
    hyper = {k: v for k, v in generator.items() if k != "type"}
    model = make_generator(generator["type"], 2.0, **hyper).fit(codes, domain, Randomness())
    for n in (10, sampling.BASE_RECORDS, sampling.BASE_RECORDS + 1, 10**9):
        by_class = 3 if (not sampling.counts_capable(model) and n > sampling.BASE_RECORDS) else 2
        assert sampling.public_sampler(generator, n) == by_class, (generator, n)
    assert sampling.public_sampler(generator, sampling.BASE_RECORDS) == 2   # never 3 at or below the base


def test_the_private_pgm_model_samples_rows():
    from dpbundle.mechanisms.mbi import MbiModel

    assert not sampling.counts_capable(MbiModel((2, 2), []))
    assert sampling.samples_rows({"type": "aim"}) and sampling.samples_rows({"type": "mst"})
    assert not sampling.samples_rows(None) and not sampling.samples_rows({"type": "privbayes"})


# ----------------------------------------------------------------------------- version 3's draws


@pytest.fixture
def small_base(monkeypatch):
    monkeypatch.setattr(sampling, "BASE_RECORDS", BASE)
    return BASE


def _privsyn_model():
    codes, domain = _small_codes()
    return make_generator("privsyn", 2.0).fit(codes, domain, Randomness()), domain


def test_version_3_is_version_2s_base_scaled(small_base):
    model, domain = _privsyn_model()
    implausible = lambda rows, cells: rows[:, 0] == 3                          # noqa: E731
    asked: list = []
    rows, counts, cells = sampling.sample_types(model, 3 * BASE + 123, domain, implausible,
                                                _rng_for(1, asked), version=3)
    assert asked[-1] == "sample scale" and asked[0] == "sample round 0"
    base_rows, base_counts, base_cells = sampling.sample_types(model, BASE, domain, implausible, _rng_for(1))
    assert np.array_equal(cells, base_cells) and np.array_equal(rows, base_rows)
    assert counts.sum() == 3 * BASE + 123
    assert (counts >= 3 * base_counts).all() and (counts <= 4 * base_counts).all()
    assert not (rows[:, 0] == 3).any()                                          # constraints hold
    # at or below the base, and for a counts model, version 3 draws exactly as version 2
    for n in (BASE, BASE - 7):
        a = sampling.sample_types(model, n, domain, implausible, _rng_for(2), version=3)
        b = sampling.sample_types(model, n, domain, implausible, _rng_for(2), version=2)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    # a counts model: version 3 scales too (what the mark says is what is drawn), but a release
    # asks for it only where the public rule says so, never for PrivBayes without raking
    codes, _ = _small_codes()
    pb = make_generator("privbayes", 2.0, epsilon_split=0.5, theta=4).fit(codes, domain, Randomness())
    asked = []
    _, counts, cells = sampling.sample_types(pb, 5 * BASE, domain, None, _rng_for(3, asked), version=3)
    _, base_counts, base_cells = sampling.sample_types(pb, BASE, domain, None, _rng_for(3))
    assert "sample scale" in asked and np.array_equal(cells, base_cells)
    assert (counts >= 5 * base_counts).all() and counts.sum() == 5 * BASE
    assert sampling.public_sampler({"type": "privbayes", "theta": 4}, 5 * BASE, domain) == 2


def test_version_3_draws_a_bounded_number_of_records(small_base):
    """The model is asked for about 1.1 B records, not n (what bounds an attempt's memory)."""
    model, domain = _privsyn_model()
    asked = []
    real_sample = model.sample

    def counting(m, rng):
        asked.append(m)
        return real_sample(m, rng)

    object.__setattr__(model, "sample", counting)
    sampling.sample_types(model, 200 * BASE, domain, None, _rng_for(4), version=3)
    assert sum(asked) <= sampling.max_drawn(BASE) and max(asked) < 2 * BASE


# ----------------------------------------------------------------------------- end to end


def _privsyn_spec(path, *, publish: bool = False):
    fx.fast_spec(path)
    spec = yaml.safe_load(path.read_text())
    spec["generators"] = [{"type": "privsyn"}]
    if publish:
        spec["publish"] = "model"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    from dpbundle.release.api import release
    from dpbundle.release.bundle import keys

    mp = pytest.MonkeyPatch()
    mp.setattr(sampling, "BASE_RECORDS", BASE)
    tmp = tmp_path_factory.mktemp("i38base")
    keys.write_keypair(tmp / "k")
    spec = _privsyn_spec(tmp / "spec.yaml")
    data = fx.example_registry(tmp / "births.csv", 3000, 5)
    with release(spec, data, out=tmp / "b", key=tmp / "k.key", ledger=tmp / "ledger.jsonl",
                 transcript=tmp / "t.jsonl"):
        pass
    yield {"bundle": tmp / "b", "pub": tmp / "k.pub", "key": tmp / "k.key", "transcript": tmp / "t.jsonl",
           "data": data}
    mp.undo()


@pytest.fixture
def base_lowered(made, monkeypatch):
    monkeypatch.setattr(sampling, "BASE_RECORDS", BASE)
    return made


def _records(path):
    return [json.loads(x) for x in path.read_text().splitlines()[1:] if x.strip()]


def test_the_release_records_version_3_and_says_so(base_lowered):
    made = base_lowered
    manifest = json.loads((made["bundle"] / "manifest.json").read_text())
    n = manifest["n"]
    assert n > BASE and manifest["sampler"] == {"version": 3, "base_records": BASE}
    recs = _records(made["transcript"])
    marks = [r for r in recs if r.get("kind") == "mark" and r.get("mark") == "sampler"]
    assert marks and all(m["version"] == 3 for m in marks)
    assert any(r.get("kind") == "seed" and r.get("purpose") == "sample scale" for r in recs)
    html = (made["bundle"] / "README.html").read_text()
    q, r = divmod(n, BASE)
    times = {1: "once", 2: "twice"}
    assert f"keeping {BASE:,} records" in html
    assert f"holds each of them {times.get(q, f'{q} times')}, and {r:,} of them" in html
    # data.csv: every record type occurs q or q + 1 times a base count, i.e. at least q times
    rows = (made["bundle"] / "data.csv").read_text().splitlines()[1:]
    _, counts = np.unique(np.array(rows), return_counts=True)
    assert counts.sum() == n and counts.min() >= q


def test_the_public_audit_and_the_enclave_replay_verify_it(base_lowered):
    from dpbundle.audit.runner import run_audit

    made = base_lowered
    rep = run_audit(str(made["bundle"]), pubkey=str(made["pub"]), transcript=str(made["transcript"]),
                    data=str(made["data"]))
    assert rep.verdict == "verified", [(c.check, c.problems) for c in rep.checks if c.failed]
    assert rep.get("replay").result == "pass"


@pytest.mark.parametrize("edit", ["drop", "other base"])
def test_a_key_holders_edit_of_the_claim_fails_the_public_audit(base_lowered, tmp_path, edit):
    from dpbundle.audit.runner import run_audit

    made = base_lowered
    b = tmp_path / "b"
    shutil.copytree(made["bundle"], b)

    def change(doc):
        if edit == "drop":
            doc.pop("sampler")
        else:
            doc["sampler"]["base_records"] = 2 * BASE
    edit_json(b / "manifest.json", change)
    resign(b, made["key"])
    rep = run_audit(str(b), pubkey=str(made["pub"]))
    assert rep.verdict != "verified"
    assert any("manifest.json: sampler" in p for c in rep.checks for p in c.problems), \
        [(c.check, c.problems) for c in rep.checks if c.failed]


def test_the_claim_on_a_counts_model_fails(tmp_path, monkeypatch):
    """A PrivBayes bundle (counts: version 2) that claims version 3 fails the public audit."""
    from dpbundle.audit.runner import run_audit
    from dpbundle.release.api import release
    from dpbundle.release.bundle import keys

    monkeypatch.setattr(sampling, "BASE_RECORDS", BASE)
    keys.write_keypair(tmp_path / "k")
    spec = fx.fast_spec(tmp_path / "spec.yaml")
    data = fx.example_registry(tmp_path / "births.csv", 2500, 9)
    with release(spec, data, out=tmp_path / "b", key=tmp_path / "k.key", ledger=tmp_path / "l.jsonl",
                 transcript=tmp_path / "t.jsonl"):
        pass
    b = tmp_path / "b"
    assert "sampler" not in json.loads((b / "manifest.json").read_text())
    assert run_audit(str(b), pubkey=str(tmp_path / "k.pub")).verdict == "verified"
    edit_json(b / "manifest.json", lambda d: d.__setitem__("sampler", {"version": 3, "base_records": BASE}))
    resign(b, tmp_path / "k.key")
    rep = run_audit(str(b), pubkey=str(tmp_path / "k.pub"))
    assert any("manifest.json: sampler" in p for c in rep.checks for p in c.problems)


def test_a_published_model_of_version_3_is_rederived_by_the_public(tmp_path, monkeypatch):
    """Pre-registered, ``publish: model``: model.json says sampler 3, the seeds json binds the
    scaling draw ("sample scale"), and the public re-derivation makes data.csv byte for byte."""
    from typer.testing import CliRunner

    from dpbundle.audit.runner import run_audit
    from dpbundle.release.cli.main import app

    monkeypatch.setattr(sampling, "BASE_RECORDS", BASE)
    run = CliRunner()

    def invoke(*args):
        res = run.invoke(app, [str(a) for a in args])
        assert res.exit_code == 0, res.output

    spec = _privsyn_spec(tmp_path / "spec.yaml", publish=True)
    data = fx.example_registry(tmp_path / "births.csv", 3000, 5)
    invoke("keygen", "--out", tmp_path / "k")
    invoke("preregister", spec, "--key", tmp_path / "k.key", "--out", tmp_path / "rec.json",
           "--beacon-source", "drand quicknet, first round after the record", "--secret-out", tmp_path / "s.json")
    beacon = "drand quicknet randomness 9f3c0d..."
    invoke("release", spec, data, "--out", tmp_path / "B", "--key", tmp_path / "k.key", "--ledger",
           tmp_path / "l.jsonl", "--transcript", tmp_path / "t.jsonl", "--preregistration", tmp_path / "rec.json",
           "--beacon", beacon, "--preregistration-secret", tmp_path / "s.json")
    model = json.loads((tmp_path / "B" / "model.json").read_text())
    assert model["sampler"] == 3
    assert "sample scale" in json.loads((tmp_path / "B" / "seeds.json").read_text())["bound_purposes"]
    rep = run_audit(tmp_path / "B", pubkey=tmp_path / "k.pub", preregistration=tmp_path / "rec.json", beacon=beacon)
    assert rep.get("rederivation").result == "pass", rep.get("rederivation").problems
    assert rep.verdict == "verified"
    # a key holder's model.json that says version 2 does not re-derive this data.csv
    edit_json(tmp_path / "B" / "model.json", lambda d: d.__setitem__("sampler", 2))
    resign(tmp_path / "B", tmp_path / "k.key")
    rep = run_audit(tmp_path / "B", pubkey=tmp_path / "k.pub", preregistration=tmp_path / "rec.json", beacon=beacon)
    assert rep.get("rederivation").result == "fail" and rep.verdict != "verified"

