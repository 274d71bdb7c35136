"""Review of sampler version 3 (issue 38): a bounded base of B records scaled to n.

Adversarial tests of the claim chain (transcript mark, model.json, manifest.json, the datasheet's
step 5, the "sample scale" seed) and of the scaling's law. Releases are made with BASE_RECORDS
lowered to 1,000 so that a few thousand records exceed it (as tests/test_i38_base_sampler.py does).

Each finding of the review (a float in the manifest's claim, model.json's sampler unchecked by
the public audit, a relabelled 0.3 bundle, a domain of 2^62 cells, step 5's "1 times", the
documented standard error) has a test here that failed before its fix.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

import audit_fixtures as fx
from i36_closure_util import edit_json, rerender_datasheet, resign
from dpbundle.mechanisms import sampling
from dpbundle.mechanisms.noise import Randomness, Transcript

BASE = 1000
BEACON = "drand quicknet randomness 9f3c0d..."


def _problems(rep) -> list:
    return [(c.check, c.problems) for c in rep.checks if c.failed]


def _records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()[1:] if x.strip()]


def _step5(html: str) -> str:
    """The datasheet's step 5, as text on one line."""
    i = html.index("Synthetic records were sampled from the model")
    j = html.index("</li>", i)
    return re.sub(r"\s+", " ", html[i:j]).strip()


def _lowered():
    mp = pytest.MonkeyPatch()
    mp.setattr(sampling, "BASE_RECORDS", BASE)
    return mp


@pytest.fixture
def base_lowered(monkeypatch):
    monkeypatch.setattr(sampling, "BASE_RECORDS", BASE)
    return BASE


# ----------------------------------------------------------------------------- releases


def _spec(path: Path, generator: dict, *, publish: bool = False) -> Path:
    fx.fast_spec(path)
    spec = yaml.safe_load(path.read_text())
    spec["generators"] = [generator]
    if publish:
        spec["publish"] = "model"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _release(tmp: Path, spec: Path, data: Path) -> dict:
    from dpbundle.release.api import release
    from dpbundle.release.bundle import keys

    keys.write_keypair(tmp / "k")
    with release(spec, data, out=tmp / "b", key=tmp / "k.key", ledger=tmp / "l.jsonl",
                 transcript=tmp / "t.jsonl"):
        pass
    return {"tmp": tmp, "bundle": tmp / "b", "key": tmp / "k.key", "pub": tmp / "k.pub",
            "transcript": tmp / "t.jsonl", "data": data}


@pytest.fixture(scope="module")
def privsyn(tmp_path_factory):
    """PrivSyn (GUM: no sample_counts) at n ~ 3,000 > BASE: sampler version 3."""
    mp = _lowered()
    tmp = tmp_path_factory.mktemp("rev38privsyn")
    made = _release(tmp, _spec(tmp / "spec.yaml", {"type": "privsyn"}),
                    fx.example_registry(tmp / "births.csv", 3000, 5))
    mp.undo()
    return made


@pytest.fixture(scope="module")
def privbayes(tmp_path_factory):
    """PrivBayes without raking (sample_counts) at n > BASE: sampler version 2."""
    mp = _lowered()
    tmp = tmp_path_factory.mktemp("rev38privbayes")
    made = _release(tmp, fx.fast_spec(tmp / "spec.yaml"), fx.example_registry(tmp / "births.csv", 2500, 9))
    mp.undo()
    return made


def _preregistered(tmp: Path) -> dict:
    """``publish: model``, pre-registered, beacon-bound seeds: the CLI's commands."""
    from typer.testing import CliRunner

    from dpbundle.release.cli.main import app

    def invoke(*args):
        res = CliRunner().invoke(app, [str(a) for a in args])
        assert res.exit_code == 0, res.output

    spec = _spec(tmp / "spec.yaml", {"type": "privsyn"}, publish=True)
    data = fx.example_registry(tmp / "births.csv", 3000, 5)
    invoke("keygen", "--out", tmp / "k")
    invoke("preregister", spec, "--key", tmp / "k.key", "--out", tmp / "rec.json",
           "--beacon-source", "drand quicknet, first round after the record", "--secret-out", tmp / "s.json")
    invoke("release", spec, data, "--out", tmp / "b", "--key", tmp / "k.key", "--ledger", tmp / "l.jsonl",
           "--transcript", tmp / "t.jsonl", "--preregistration", tmp / "rec.json", "--beacon", BEACON,
           "--preregistration-secret", tmp / "s.json")
    return {"tmp": tmp, "bundle": tmp / "b", "key": tmp / "k.key", "pub": tmp / "k.pub", "rec": tmp / "rec.json",
            "transcript": tmp / "t.jsonl", "data": data}


@pytest.fixture(scope="module")
def prereg_scaled(tmp_path_factory):
    """Pre-registered PrivSyn with a published model, n > BASE: sampler version 3."""
    mp = _lowered()
    made = _preregistered(tmp_path_factory.mktemp("rev38prereg3"))
    mp.undo()
    return made


@pytest.fixture(scope="module")
def prereg_small(tmp_path_factory):
    """Pre-registered PrivSyn with a published model, n below the real base: sampler version 2."""
    return _preregistered(tmp_path_factory.mktemp("rev38prereg2"))


def _audit(made: dict, bundle: Path | None = None, *, replay: bool = False, transcript: Path | None = None):
    from dpbundle.audit.runner import run_audit

    kw: dict = {}
    if replay:
        kw = {"transcript": str(transcript or made["transcript"]), "data": str(made["data"])}
    if "rec" in made:
        kw.update(preregistration=str(made["rec"]), beacon=BEACON)
    return run_audit(str(bundle or made["bundle"]), pubkey=str(made["pub"]), **kw)


def _copy(made: dict, tmp_path: Path) -> Path:
    b = tmp_path / "b"
    shutil.copytree(made["bundle"], b)
    return b


def _forged_transcript(made: dict, tmp_path: Path, edit) -> tuple[Path, Path]:
    """What a key holder can do: edit the transcript, commit to it again in the manifest, render
    the datasheet (it shows the commitment) and sign everything again. (bundle, transcript)."""
    from dpbundle.audit.replay import commitment_of, read_transcript

    b = _copy(made, tmp_path)
    salt, _raw, recs = read_transcript(made["transcript"])
    recs = edit(recs)
    header = made["transcript"].read_text().splitlines()[0]
    body = "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in recs)
    t = tmp_path / "t.jsonl"
    t.write_text(header + "\n" + body)
    value = commitment_of(salt, recs)
    resign(b, made["key"], edit_manifest=lambda m: m["transcript_commitment"].__setitem__("value", value))
    rerender_datasheet(b)
    resign(b, made["key"])
    return b, t


def _sampler_marks(recs: list[dict]) -> list[dict]:
    return [r for r in recs if r.get("kind") == "mark" and r.get("mark") == "sampler"]


# ----------------------------------------------------------------------------- 1. soundness


def test_the_honest_bundles_verify_with_the_replay(privsyn, privbayes, base_lowered):
    for made in (privsyn, privbayes):
        rep = _audit(made, replay=True)
        assert rep.verdict == "verified", _problems(rep)
    assert json.loads((privsyn["bundle"] / "manifest.json").read_text())["sampler"] == \
        {"version": 3, "base_records": BASE}
    assert "sampler" not in json.loads((privbayes["bundle"] / "manifest.json").read_text())
    assert {m["version"] for m in _sampler_marks(_records(privbayes["transcript"]))} == {2}


def test_step_5_shows_only_public_numbers(privsyn):
    """Nothing private in the claim: step 5's numbers are B, q, r and n (public: the base is a
    constant, n is data.csv's rows) and those of the constraints' names, nothing else (no count
    of drawn or dropped records, no round)."""
    n = json.loads((privsyn["bundle"] / "manifest.json").read_text())["n"]
    step5 = _step5((privsyn["bundle"] / "README.html").read_text())
    q, r = divmod(n, BASE)
    numbers = {int(x.replace(",", "")) for x in re.findall(r"\d[\d,]*", step5)}
    assert numbers <= {BASE, q, r, n, 3, 6, 20, 23, 29, 34, 2999, 3999}, numbers


def test_the_scaling_seed_is_bound_in_a_preregistered_release(prereg_scaled, tmp_path, base_lowered):
    """The "sample scale" seed is derived from the published secret and the beacon: a transcript
    whose scaling seed is another (a publisher re-drawing the scaling) fails the replay's check of
    the bound seeds."""
    made = prereg_scaled
    recs = _records(made["transcript"])
    scale = [r for r in recs if r.get("kind") == "seed" and r.get("purpose") == "sample scale"]
    assert scale, "a version 3 attempt records its scaling seed"
    assert "sample scale" in json.loads((made["bundle"] / "seeds.json").read_text())["bound_purposes"]

    def other_seed(recs):
        for r in recs:
            if r.get("kind") == "seed" and r.get("purpose") == "sample scale":
                r["seed"] = f"{(int(r['seed'], 16) + 1) % 2**256:064x}"
        return recs

    b, t = _forged_transcript(made, tmp_path, other_seed)
    rep = _audit(made, b, replay=True, transcript=t)
    assert rep.verdict != "verified"
    assert any("bound purposes" in p for p in rep.get("replay").problems), _problems(rep)


# ----------------------------------------------------------------------------- 2. forgery


def _mark_version(version):
    def edit(recs):
        for r in _sampler_marks(recs):
            r["version"] = version
        return recs
    return edit


def _drop_marks(recs):
    return [r for r in recs if not (r.get("kind") == "mark" and r.get("mark") == "sampler")]


def _drop_scale_seed(recs):
    return [r for r in recs if not (r.get("kind") == "seed" and r.get("purpose") == "sample scale")]


@pytest.mark.parametrize("edit", [_mark_version(2), _drop_marks, _drop_scale_seed],
                         ids=["mark-2-where-the-rule-says-3", "no-mark", "no-scale-seed"])
def test_a_forged_transcript_of_a_scaled_release_fails_the_replay(privsyn, tmp_path, base_lowered, edit):
    b, t = _forged_transcript(privsyn, tmp_path, edit)
    assert _audit(privsyn, b).verdict == "verified"       # the public audit cannot see the transcript
    rep = _audit(privsyn, b, replay=True, transcript=t)
    assert rep.verdict != "verified" and rep.get("replay").failed, _problems(rep)


def test_a_mark_of_version_3_for_a_counts_model_fails_the_replay(privbayes, tmp_path, base_lowered):
    """PrivBayes has sample_counts: version 3 draws exactly as 2, so data.csv replays; the
    selected attempt's mark still has to be what manifest.json says (no sampler: not 3)."""
    b, t = _forged_transcript(privbayes, tmp_path, _mark_version(3))
    rep = _audit(privbayes, b, replay=True, transcript=t)
    assert rep.verdict != "verified"
    assert any("sampler" in p for p in rep.get("replay").problems), _problems(rep)


def test_a_manifest_claiming_version_3_at_or_below_the_base_fails(prereg_small, tmp_path):
    """n <= 4,194,304 (the real base): a claim of version 3 is refused by the public audit."""
    made = prereg_small
    b = _copy(made, tmp_path)
    n = json.loads((b / "manifest.json").read_text())["n"]
    assert n <= sampling.BASE_RECORDS
    edit_json(b / "manifest.json",
              lambda m: m.__setitem__("sampler", {"version": 3, "base_records": sampling.BASE_RECORDS}))
    rerender_datasheet(b)
    resign(b, made["key"])
    rep = _audit(made, b)
    assert rep.verdict != "verified"
    assert any("manifest.json: sampler" in p for c in rep.checks for p in c.problems), _problems(rep)


def test_an_edited_step_5_fails_the_documentation_check(privsyn, tmp_path, base_lowered):
    b = _copy(privsyn, tmp_path)
    html = (b / "README.html").read_text()
    n = json.loads((b / "manifest.json").read_text())["n"]
    q = n // BASE
    forged = html.replace(f"holds each of them {_times(q)}", f"holds each of them {_times(q + 1)}")
    assert forged != html
    (b / "README.html").write_text(forged)
    resign(b, privsyn["key"])
    rep = _audit(privsyn, b)
    assert rep.verdict != "verified" and any("README" in p for _c, ps in _problems(rep) for p in ps), \
        _problems(rep)


@pytest.mark.parametrize("claim", [{"version": 3, "base_records": float(BASE)},
                                   {"version": 3.0, "base_records": float(BASE)}], ids=["float-base", "all-floats"])
def test_a_float_in_the_sampler_claim_fails(privsyn, tmp_path, base_lowered, claim):
    b = _copy(privsyn, tmp_path)
    edit_json(b / "manifest.json", lambda m: m.__setitem__("sampler", claim))
    rerender_datasheet(b)
    resign(b, privsyn["key"])
    hidden = "holds each of them" not in _step5((b / "README.html").read_text())
    assert hidden, "the forged claim's datasheet no longer says how data.csv was drawn"
    assert _audit(privsyn, b, replay=True).verdict != "verified"


def test_model_json_saying_3_where_the_rule_says_2_fails_the_replay(prereg_small, tmp_path):
    made = prereg_small
    b = _copy(made, tmp_path)
    assert json.loads((b / "model.json").read_text())["sampler"] == 2
    edit_json(b / "model.json", lambda d: d.__setitem__("sampler", 3))
    resign(b, made["key"])
    rep = _audit(made, b, replay=True)
    assert rep.verdict != "verified" and rep.get("replay").failed


def test_model_json_saying_3_where_the_rule_says_2_fails_the_public_audit(prereg_small, tmp_path):
    made = prereg_small
    b = _copy(made, tmp_path)
    edit_json(b / "model.json", lambda d: d.__setitem__("sampler", 3))
    resign(b, made["key"])
    rep = _audit(made, b)
    assert rep.get("rederivation").result == "pass"    # the data re-derive: the claim is the problem
    assert rep.verdict != "verified"


def _rerender_registry_entry(b: Path) -> None:
    """registry-entry.yaml as the public audit renders it from the (edited) public files."""
    from dpbundle.audit import metadata as md
    from dpbundle.audit.bundle_io import open_bundle
    from dpbundle.audit.context import AuditContext

    ctx = AuditContext(open_bundle(b))
    (b / "registry-entry.yaml").write_bytes(
        md.entry_mod.entry_yaml(md.entry_mod.registry_entry_of(md._registry_facts(ctx, ctx.view()))))


def test_a_scaled_bundle_relabelled_as_0_3_fails_the_public_audit(prereg_scaled, tmp_path, base_lowered):
    made = prereg_scaled
    b = _copy(made, tmp_path)
    assert json.loads((b / "model.json").read_text())["sampler"] == 3
    edit_json(b / "manifest.json", lambda m: (m.pop("sampler"), m.__setitem__("dpbundle_version", "0.3.0")))
    _rerender_registry_entry(b)
    rerender_datasheet(b)
    resign(b, made["key"])
    assert "holds each of them" not in _step5((b / "README.html").read_text())
    replay = _audit(made, b, replay=True)
    assert replay.verdict != "verified"                  # the enclave replay catches it
    rep = _audit(made, b)
    assert rep.verdict != "verified", "the public audit verifies a datasheet that hides the scaling"


# ----------------------------------------------------------------------------- 1/3. wide domains


EXTRA_COLUMNS, EXTRA_SIZE = 16, 8     # with the births columns: more than 2^62 cells


def _wide_release(tmp: Path) -> dict:
    """PrivSyn on the births columns and 16 more of 8 categories (2^48 x 207,360 cells >= 2^62:
    no int64 cell index, so the iteration samples rows, sampler version 1)."""
    spec = yaml.safe_load(fx.fast_spec(tmp / "spec.yaml").read_text())
    spec["generators"] = [{"type": "privsyn"}]
    cats = [chr(97 + i) for i in range(EXTRA_SIZE)]
    names = [f"x{j}" for j in range(EXTRA_COLUMNS)]
    for name in names:
        spec["input"]["columns"].append({"name": name, "type": "category", "categories": cats, "description": name})
        spec["columns"].append({"name": name, "description": name, "source": {"column": name},
                                "alternatives": [{"id": "all", "categories": cats}]})
    spec["faithfulness"]["exact"] += names
    spec["acceptance"] = [e for e in spec["acceptance"] if e["type"] == "smoothed_ratio"]
    (tmp / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    data = fx.example_registry(tmp / "births.csv", 3000, 5)
    lines = data.read_text().splitlines()
    rng = np.random.default_rng(1)
    rows = [lines[0] + "," + ",".join(names)]
    rows += [x + "," + ",".join(cats[i] for i in rng.integers(0, EXTRA_SIZE, EXTRA_COLUMNS)) for x in lines[1:]]
    data.write_text("\n".join(rows) + "\n")
    return _release(tmp, tmp / "spec.yaml", data)


def test_the_public_rule_with_the_domain_is_what_the_iteration_records(base_lowered):
    """public_sampler(generator, n, domain) agrees with the iteration's transcript mark on both
    sides of 2^62 cells (the iteration falls back to rows, unrecorded, for a wider domain)."""
    from dpbundle.mechanisms.coding import Coded, ColumnCoding
    from dpbundle.mechanisms.generators import make_generator
    from dpbundle.release.scheme import iteration as it

    rng = np.random.default_rng(0)
    for d in (3, 22):
        cols = tuple(ColumnCoding(f"c{j}", tuple("abcdefgh"), np.arange(8.0), False,
                                  np.full(8, np.nan), np.full(8, np.nan)) for j in range(d))
        real = Coded(rng.integers(0, 8, (3 * BASE, d)), cols)
        model = make_generator("privsyn", 2.0).fit(real.codes, real.domain, Randomness())
        rand = Randomness(Transcript())
        it._sample_and_project(lambda _name, fn, *a: fn(*a), model, real, [], 2, rand, it.DEFAULT_SAMPLER,
                               {"type": "privsyn"})
        used = sampling.sampler_of_records(rand.transcript.records)
        assert sampling.public_sampler({"type": "privsyn"}, real.n, real.domain) == used, (d, used)
    assert used == sampling.ROW_SAMPLER


def test_a_wide_domain_release_claims_the_sampler_it_used(tmp_path, base_lowered):
    made = _wide_release(tmp_path)
    manifest = json.loads((made["bundle"] / "manifest.json").read_text())
    used = sampling.sampler_of_records(_records(made["transcript"]))
    assert (manifest.get("sampler") or {}).get("version", used) == used, (manifest.get("sampler"), used)
    rep = _audit(made, replay=True)
    assert rep.verdict == "verified", _problems(rep)


# ----------------------------------------------------------------------------- 3. step 5's arithmetic


def _render_with_base(made: dict, base: int) -> str:
    """README.html of ``made``'s public files with manifest.json's sampler naming ``base``."""
    from dpbundle.templates.datasheet import datasheet_html, meta_from_manifest, read_public_files

    b = made["bundle"]
    meta = meta_from_manifest(json.loads((b / "manifest.json").read_text()))
    meta = dataclasses.replace(meta, sampler={"version": 3, "base_records": base})
    public = read_public_files(lambda n: (b / n).read_bytes(), lambda n: (b / n).is_file(), meta)
    return _step5(datasheet_html(public))


def _stated(step5: str) -> tuple[int, int, int, int]:
    """(records kept, q, r (0 if not stated), n) as step 5 states them."""
    num = r"(\d[\d,]*)"
    how = r"(once|twice|\d[\d,]* times)"
    kept = re.search(rf"keeping {num} records", step5)
    q = re.search(rf"holds each of them {how}", step5)
    r = re.search(rf"and {num} of them, chosen at random, {how}", step5)
    n = re.search(rf"{num} records in all", step5)
    assert kept and q and n, step5
    as_int = lambda m: int(m.group(1).replace(",", ""))      # noqa: E731
    q_val = _count(q.group(1))
    if r:
        assert _count(r.group(2)) == q_val + 1, step5
    return as_int(kept), q_val, as_int(r) if r else 0, as_int(n)


def _times(k: int) -> str:
    return {1: "once", 2: "twice"}.get(k, f"{k:,} times")


def _count(words: str) -> int:
    """once -> 1, twice -> 2, "3 times" -> 3."""
    return {"once": 1, "twice": 2}.get(words) or int(words.split()[0].replace(",", ""))


def test_step_5_states_the_base_q_and_r_that_make_n(privsyn):
    n = json.loads((privsyn["bundle"] / "manifest.json").read_text())["n"]
    exact = next(n // d for d in range(2, n) if n % d == 0)           # r = 0 (n is not prime here)
    for base in (n - 1, n // 2 + 1, exact, BASE, 7):
        kept, q, r, stated_n = _stated(_render_with_base(privsyn, base))
        assert (kept, stated_n) == (base, n) and q * base + r == n and 0 <= r < base, (base, q, r)
    assert "chosen at random" not in _render_with_base(privsyn, exact)  # r = 0: no extra clause


def test_step_5_reads_well_when_each_base_record_appears_once(privsyn):
    n = json.loads((privsyn["bundle"] / "manifest.json").read_text())["n"]
    step5 = _render_with_base(privsyn, n - 1)
    assert "1 times" not in step5, step5


# ----------------------------------------------------------------------------- 4. the law


def _share_variance_law(p: float, base: int, n: int) -> float:
    """Var of a cell's share in version 3: p (1 - p) / B (1 + r (B - r) / n^2) (module docstring)."""
    r = n % base
    return p * (1 - p) / base * (1 + r * (base - r) / n**2)


def test_the_variance_of_a_share_is_the_documented_law():
    """Monte Carlo through scale_counts: a base of B i.i.d. draws (a cell of probability p:
    Binomial(B, p) of them), scaled to n. The variance of the cell's share in the n records is
    the law in mechanisms/sampling.py's docstring, above the B-draw variance p (1 - p) / B that
    docs/national-scale.md states, by 12.5 % at n = 4 B / 3."""
    base, n, p, reps = 300, 400, 0.5, 20000
    rng = np.random.default_rng(38)
    cells = rng.binomial(base, p, reps)
    shares = np.array([sampling.scale_counts(np.array([c, base - c]), n, rng)[0] for c in cells]) / n
    assert abs(shares.mean() - p) < 4 * math.sqrt(_share_variance_law(p, base, n) / reps)
    law = _share_variance_law(p, base, n)
    assert abs(shares.var() / law - 1) < 0.05, (shares.var(), law)
    assert shares.var() > 1.07 * p * (1 - p) / base


def test_the_scaling_of_a_fixed_base_adds_the_hypergeometric_variance():
    """A base whose counts are fixed (GUM, raking: records fitted, not drawn): the share's
    variance is the r-subset's alone, r (B - r) / (B - 1) c (1 - c) / n^2, its mean c."""
    base, n, c, reps = 300, 400, 90, 20000
    rng = np.random.default_rng(83)
    shares = np.array([sampling.scale_counts(np.array([c, base - c]), n, rng)[0] for _ in range(reps)]) / n
    r, frac = n % base, c / base
    law = r * (base - r) / (base - 1) * frac * (1 - frac) / n**2
    assert abs(shares.mean() - frac) < 4 * math.sqrt(law / reps)
    assert abs(shares.var() / law - 1) < 0.05, (shares.var(), law)


def test_the_extra_variance_is_at_most_one_eighth():
    """max over n > B of r (B - r) / n^2 is 1/8 (at n = 4 B / 3), the bound the docstring states."""
    base = sampling.BASE_RECORDS
    worst = max(_share_variance_law(0.5, base, n) for n in range(base + 1, 3 * base, 997))
    assert worst <= 0.25 / base * (1 + 1 / 8) and worst > 0.25 / base * (1 + 1 / 8 - 1e-4)


def test_the_documented_standard_error_bound_holds():
    """docs/national-scale.md ("Sampler version 3") states a bound on a share's standard error
    for B independent draws; the law's worst case over n > B must be within it."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "national-scale.md").read_text()
    section = text[text.index("## Sampler version 3"):]
    stated = float(re.search(r"at most (0\.\d+)", section).group(1))
    base = sampling.BASE_RECORDS
    worst = max(math.sqrt(_share_variance_law(0.5, base, n)) for n in range(base + 1, 2 * base, 997))
    assert worst <= stated, (worst, stated)
