"""Issue 39, part 3: the DP count tables as a product (``publish: tables``).

- the 95% half-width against the discrete Laplace's distribution: exact tail sums at every
  scale tried (worst case: the boundary), and OpenDP's own draws covering at the nominal rate;
- the published tables' sensitivity on neighbouring datasets (change one record), worst cases
  included, for every generator that publishes tables;
- the persons example (PrivBayes) and an ACS-style census table (PrivSyn, hierarchical
  estimator: merged codes) end to end: spec, release, public audit, enclave replay, datasheet,
  datapackage; and forged tables (re-signed by the key holder) refused, naming the rule.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_bundles import resign  # noqa: E402

from dpbundle.audit.tables_check import half_width as audit_half_width  # noqa: E402
from dpbundle.mechanisms.generators import make_generator  # noqa: E402
from dpbundle.mechanisms.measured import half_width, measured_of, tables_document  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


# ------------------------------------------------------------------ the interval


def _tail(scale: float, t: int) -> float:
    """P(|Z| > t) of OpenDP's discrete Laplace, summed term by term (no closed form)."""
    a = math.exp(-1.0 / scale)
    p0 = (1 - a) / (1 + a)
    inside = p0 + 2 * sum(p0 * a ** k for k in range(1, t + 1))
    return 1.0 - inside


@pytest.mark.parametrize("level", [0.95, 0.975])
@pytest.mark.parametrize("scale", [0.05, 0.3, 0.5, 1.0, 1.7, 2.0, 5.333, 8.57, 10.0, 13.0, 50.0, 66.6, 250.0])
def test_half_width_is_the_smallest_covering_integer(scale, level):
    t = half_width(scale, level)
    assert t == audit_half_width(scale, level)
    assert _tail(scale, t) <= 1 - level + 1e-12
    if t > 0:
        assert _tail(scale, t - 1) > 1 - level - 1e-12


def test_half_width_at_the_boundary():
    """Scales where P(|Z| > t) crosses 5% exactly between two integers: both implementations
    agree with the term-by-term sum on either side."""
    for t_star in (1, 3, 10, 40):
        # the scale at which P(|Z| > t_star) = 0.05 exactly (bisection on the closed form)
        lo, hi = 1e-3, 1e3
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _tail(mid, t_star) < 0.05 else (lo, mid)
        for s in (lo * (1 - 1e-9), hi * (1 + 1e-9)):
            assert half_width(s) == audit_half_width(s)
            assert _tail(s, half_width(s)) <= 0.05 + 1e-9


def test_opendp_draws_cover_at_the_nominal_rate():
    """20,000 cells of a table drawn through OpenDP (Randomness.laplace, integer): the share of
    cells whose interval holds the true count is at least 95% (minus three standard errors), and
    the interval is not wider than it must be (t - 1 covers less than 95%, plus three)."""
    from dpbundle.mechanisms.noise import Randomness, calibrated_laplace_scale

    true = np.random.default_rng(5).integers(0, 40, size=20_000)
    eps = 0.3
    noisy = np.asarray(Randomness().laplace(true, sensitivity=2, epsilon=eps, integer=True, purpose="coverage test"))
    t = half_width(calibrated_laplace_scale(2, eps, vector=True, integer=True))
    se = math.sqrt(0.95 * 0.05 / true.size)
    lo, hi = np.maximum(0, noisy - t), np.maximum(0, noisy + t)
    assert np.mean((lo <= true) & (true <= hi)) >= 0.95 - 3 * se
    assert np.mean(np.abs(noisy - true) <= t - 1) < 0.95 + 3 * se


def test_intervals_cover_the_registry_counts_through_the_dp_count_and_the_resize():
    """The whole path of a dp_count release, with OpenDP's draws: the DP count m, the resize of
    the plausible records to m (subsample or pads), the table's noise; the interval of
    tables_document (2.5% for each noise) holds the count of the plausible records in at least
    95% of the cells (minus three standard errors). Worst case included: a column whose one
    value holds every record (the resize moves that cell by exactly |m - n| when it subsamples)."""
    from dpbundle.mechanisms.measured import cell_interval, measured_table
    from dpbundle.mechanisms.noise import Randomness, calibrated_laplace_scale
    from dpbundle.mechanisms.records import dp_record_count, resize_plan

    rng = np.random.default_rng(8)
    n, sizes = 400, [4, 2]
    codes = np.stack([rng.choice(4, size=n, p=[0.75, 0.15, 0.07, 0.03]), np.zeros(n, dtype=int)], axis=1)
    truth = [np.bincount(codes[:, j], minlength=k) for j, k in enumerate(sizes)]
    eps_count, eps_table = 0.2, 2.0
    s_n = calibrated_laplace_scale(1, eps_count, integer=True)
    rand = Randomness()
    hits, cells, worst = 0, 0, 0
    for _ in range(1200):
        m = dp_record_count(n, eps_count, rand)
        resized = resize_plan(n, m, 2, rand.rng("resize")).apply(codes, sizes)
        tables = [measured_table([j], [1], sizes, rand.laplace(np.bincount(resized[:, j], minlength=k),
                                                                sensitivity=2, epsilon=eps_table,
                                                                integer=True, purpose="t"), 2, eps_table, "t")
                  for j, k in enumerate(sizes)]
        doc = tables_document(tables, ["a", "b"], count_scale=s_n)
        for t, c in zip(doc["tables"], truth):
            for y, true in zip(t["counts"], c):
                lo, hi = cell_interval(y, t["half_width"])
                hits += lo <= true <= hi
                cells += 1
        worst = max(worst, abs(int(np.bincount(resized[:, 1], minlength=2)[0]) - n))
    assert doc["resize"]["half_width"] == half_width(s_n, 0.975) > 0
    assert worst > 0, "the resize moved the all-records cell"
    assert hits / cells >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / cells)


# ------------------------------------------------------------------ sensitivity on neighbours


class TrueRand:
    """Returns every measurement without noise (to read the true tables) and a fixed choice."""

    def laplace(self, true, *, sensitivity, epsilon, purpose, integer=False):
        return np.asarray(true)

    def exponential(self, scores, *, sensitivity, epsilon, purpose):
        return 0

    def rng(self, name):
        return np.random.default_rng(0)


GENERATORS = [("privbayes", {"epsilon_split": 0.3, "theta": 4}),
              ("privbayes", {"epsilon_split": 0.3, "theta": 4, "oneway": "measure"}),
              ("mst_pure", {}), ("privsyn", {}), ("privsyn", {"estimator": "hierarchical", "pair_values": 4})]


@pytest.mark.parametrize("gen_type,kw", GENERATORS)
def test_tables_move_by_at_most_their_sensitivity_on_neighbours(gen_type, kw):
    """|f(D) - f(D')|_1 <= sensitivity for D, D' differing in one record (change-one), each
    vector draw as a whole (mst_pure's d 1-way tables are one draw of sensitivity 2d), with the
    worst case (a record that changes every column) among the neighbours; the structure is held
    fixed (the exponential choices are the same), as in the measurement's privacy proof."""
    rng = np.random.default_rng(11)
    domain = [9, 3, 4, 2]
    worst = 0.0
    for trial in range(25):
        D = rng.integers(0, domain, size=(200, len(domain)))
        D2 = D.copy()
        i = rng.integers(200)
        D2[i] = (D2[i] + 1 + rng.integers(0, np.array(domain) - 1)) % domain if trial % 2 else \
            rng.integers(0, domain)
        a = measured_of(make_generator(gen_type, epsilon=1.0, **kw).fit(D, domain, TrueRand()))
        b = measured_of(make_generator(gen_type, epsilon=1.0, **kw).fit(D2, domain, TrueRand()))
        assert [t.columns for t in a] == [t.columns for t in b]
        draws: dict[str, list[float]] = {}
        for x, y in zip(a, b):
            draws.setdefault(x.measurement, []).append(float(np.abs(x.counts - y.counts).sum()))
        for what, moves in draws.items():
            limit = next(t.sensitivity for t in a if t.measurement == what)
            assert sum(moves) <= limit, (what, moves, limit)
            worst = max(worst, sum(moves) / limit)
    assert worst == 1.0, "the worst case (every column changed) reaches the sensitivity"


# ------------------------------------------------------------------ spec validation


def test_spec_validation_names_what_publish_tables_needs():
    from dpbundle.release.spec.load import semantic_problems

    doc = yaml.safe_load((ROOT / "examples" / "persons.yaml").read_text())
    doc["publish"] = "tables"
    assert not [p for p in semantic_problems(doc) if "publish" in p or "tables" in p]
    doc["generators"] = [{"type": "aim_pure", "grid": {}}]
    probs = semantic_problems(doc)
    assert any("publish: tables needs a generator" in p and "aim_pure" in p for p in probs), probs
    doc = yaml.safe_load((ROOT / "examples" / "acs-excerpt-zcdp.yaml").read_text())
    doc["publish"] = ["tables"]
    assert "publish: tables is not available with privacy.definition: zcdp yet" in semantic_problems(doc)
    doc = yaml.safe_load((ROOT / "examples" / "persons.yaml").read_text())
    doc["publish"] = ["model", "tables"]
    doc["columns"][0]["name"] = "dp_count"
    assert any("dp-tables.csv's own column names" in p for p in semantic_problems(doc))


# ------------------------------------------------------------------ end to end


def _spec(tmp: Path, example: str, generator: dict, policy: str | None = None,
          publish: str | list = "tables") -> Path:
    doc = yaml.safe_load((ROOT / "examples" / example).read_text())
    for c in doc["columns"]:
        c["alternatives"] = c["alternatives"][:1]
    doc["generators"] = [generator]
    doc["projection"] = {"min_count": [1]}
    for e in doc["acceptance"]:
        if isinstance(e.get("threshold"), (int, float)):
            e["threshold"] = 1e9
    doc["publish"] = publish
    if policy:
        doc["privacy"]["records"] = {"policy": policy}
    doc["privacy"]["epsilon_cap"] = 20
    doc["privacy"].pop("selection", None)
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _census_registry(path: Path, rows: int = 3000) -> Path:
    """An ACS-excerpt-like table in the input format of examples/acs-excerpt-eps1.yaml (the
    excerpts themselves are not shipped with the project): dependent columns, "N" where the
    dictionary says not applicable."""
    rng = np.random.default_rng(39)
    age = rng.integers(0, 100, size=rows)
    adult = age >= 15
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["AGEP", "SEX", "MSP", "RAC1P", "HOUSING_TYPE", "OWN_RENT", "EDU", "PINCP_DECILE", "DVET", "DEYE"])
    for i in range(rows):
        a = int(age[i])
        w.writerow([a, rng.integers(1, 3), rng.integers(1, 7) if adult[i] else "N", rng.integers(1, 10),
                    rng.integers(1, 4), rng.integers(0, 3), rng.integers(1, 13) if a >= 3 else "N",
                    rng.integers(0, 10) if adult[i] else "N", rng.choice(["N", "1", "2"]), rng.integers(1, 3)])
    path.write_text(out.getvalue())
    return path


def _released(tmp: Path, spec: Path, data: Path) -> dict:
    from dpbundle.release.cli.main import app

    def run(*args):
        res = runner.invoke(app, [str(a) for a in args])
        assert res.exit_code == 0, res.output

    run("keygen", "--out", tmp / "k")
    (tmp / "private").mkdir(mode=0o700)
    run("release", spec, data, "--out", tmp / "B", "--key", tmp / "k.key", "--ledger", tmp / "ledger.jsonl",
        "--transcript", tmp / "private" / "t.jsonl")
    return {"tmp": tmp, "bundle": tmp / "B", "key": tmp / "k.key", "pub": tmp / "k.pub", "data": data,
            "transcript": tmp / "private" / "t.jsonl"}


@pytest.fixture(scope="module")
def persons(tmp_path_factory):
    from dpbundle.release.data.example import example_csv

    t = tmp_path_factory.mktemp("i39-persons")
    (t / "reg.csv").write_bytes(example_csv("persons", 6000, 3))
    spec = _spec(t, "persons.yaml", {"type": "privbayes", "flavour": "theta",
                                     "grid": {"epsilon_split": [0.25], "theta": [8]}})
    return _released(t, spec, t / "reg.csv")


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    t = tmp_path_factory.mktemp("i39-census")
    # max_pairs 45: every pair of the 10 columns is measured, so that AGEP's pairs (read in groups)
    # are there whatever the DP selection's noise (with 8, one CI run selected none of them)
    spec = _spec(t, "acs-excerpt-eps1.yaml", {"type": "privsyn", "grid": {
        "estimator": ["hierarchical"], "select_rule": ["top"], "max_pairs": [45]}}, policy="declared_public")
    return _released(t, spec, _census_registry(t / "census.csv"))


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """mst_pure with publish: [model, tables] on the persons example (dp_count)."""
    from dpbundle.release.data.example import example_csv

    t = tmp_path_factory.mktemp("i39-tree")
    (t / "reg.csv").write_bytes(example_csv("persons", 5000, 4))
    spec = _spec(t, "persons.yaml", {"type": "mst_pure", "grid": {}}, publish=["model", "tables"])
    return _released(t, spec, t / "reg.csv")


def _audit(*args) -> tuple[int, dict]:
    import typer
    from dpbundle.audit.cli import cli_audit

    app = typer.Typer()
    app.command("audit")(cli_audit)
    report = Path(args[0]).parent / f"report-{hashlib.sha256(repr(args).encode()).hexdigest()[:8]}.json"
    res = runner.invoke(app, [str(a) for a in (*args, "--json", report)], env={"COLUMNS": "200"})
    doc = json.loads(report.read_text())
    report.unlink()
    return res.exit_code, {c["check"]: c for c in doc["checks"]}


def _rows(bundle: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO((bundle / "dp-tables.csv").read_text())))


@pytest.mark.parametrize("which", ["persons", "census", "tree"])
def test_release_passes_the_public_audit_and_the_enclave_replay(which, request):
    rel = request.getfixturevalue(which)
    b = rel["bundle"]
    doc = json.loads((b / "dp-tables.json").read_text())
    manifest = json.loads((b / "manifest.json").read_text())
    assert {"dp-tables.json", "dp-tables.csv"} <= {f["path"] for f in manifest["files"]}
    rows = _rows(b)
    assert len(rows) == sum(len(t["counts"]) for t in doc["tables"])
    for row in rows[:200]:
        assert 0 <= int(row["lower_95"]) <= int(row["upper_95"])
    package = json.loads((b / "datapackage.json").read_text())
    assert package["resources"][-1]["path"] == "dp-tables.csv"
    code, checks = _audit(b, "--pubkey", rel["pub"], "--transcript", rel["transcript"], "--data", rel["data"])
    assert code == 0, {k: v["problems"] for k, v in checks.items() if v["result"] == "fail"}
    assert checks["tables"]["result"] == "pass" and checks["replay"]["result"] == "pass"
    assert checks["tables"]["facts"]["tables"] == len(doc["tables"])
    policy = json.loads((b / "budget.json").read_text())["records"]["policy"]
    assert ("resize" in doc) == (policy == "dp_count")
    html = (b / "README.html").read_text()
    assert "The DP count tables" in html and all(f">{t['id']}<" in html for t in doc["tables"])


def test_census_tables_read_ages_in_groups(census):
    """The hierarchical estimator reads AGEP (100 values) in groups of 5 for its pairs: cells
    labelled "FIRST to LAST", and the 1-way table of AGEP keeps every age."""
    doc = json.loads((census["bundle"] / "dp-tables.json").read_text())
    age_pairs = [t for t in doc["tables"] if "AGEP" in t["columns"] and len(t["columns"]) == 2]
    one_way = [t for t in doc["tables"] if t["columns"] == ["AGEP"]]
    assert one_way and one_way[0]["sizes"] == [100]
    labels = {r["AGEP"] for r in _rows(census["bundle"]) if r["table"] in {t["id"] for t in age_pairs}}
    assert len(age_pairs) == 9, "every pair is measured (max_pairs 45): AGEP's 9 pairs"
    assert "0 to 4" in labels and "95 to 99" in labels


def _forge(rel: dict, tmp: Path, edit) -> Path:
    """A copy of the bundle with ``edit(bundle)`` applied, datapackage.json's hash of
    dp-tables.csv updated and everything re-signed with the publisher's key."""
    b = tmp / "forged"
    shutil.copytree(rel["bundle"], b)
    edit(b)
    package = json.loads((b / "datapackage.json").read_text())
    for res in package["resources"]:
        if res["path"] == "dp-tables.csv" and (b / "dp-tables.csv").exists():
            raw = (b / "dp-tables.csv").read_bytes()
            res["hash"], res["bytes"] = "sha256:" + hashlib.sha256(raw).hexdigest(), len(raw)
    (b / "datapackage.json").write_text(json.dumps(package, indent=2, ensure_ascii=False) + "\n")
    resign(b, rel["key"])
    return b


def _edit_json(b: Path, change) -> None:
    doc = json.loads((b / "dp-tables.json").read_text())
    change(doc)
    (b / "dp-tables.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")


def _rerender(b: Path) -> None:
    from dpbundle.audit.labels import build_view
    from dpbundle.templates.metadata.dp_tables import dp_tables_csv

    view = build_view(json.loads((b / "spec.json").read_text()))
    doc = json.loads((b / "dp-tables.json").read_text())
    (b / "dp-tables.csv").write_bytes(dp_tables_csv(doc, [(c.name, list(c.labels)) for c in view.columns]))


def test_an_edited_interval_fails_the_public_audit(persons, tmp_path):
    def edit(b):
        text = (b / "dp-tables.csv").read_text().splitlines(keepends=True)
        head, row = text[0], text[1].rstrip("\n").split(",")
        row[-1] = str(int(row[-1]) - 1)          # a narrower interval than the noise allows
        (b / "dp-tables.csv").write_text(head + ",".join(row) + "\n" + "".join(text[2:]))
    code, checks = _audit(_forge(persons, tmp_path, edit), "--pubkey", persons["pub"])
    assert code != 0 and checks["tables"]["result"] == "fail"
    assert any("dp-tables.csv: not dp-tables.json rendered" in p and "line 2" in p
               for p in checks["tables"]["problems"])


@pytest.mark.parametrize("field,value,message", [
    ("epsilon", 9.0, "epsilon 9.0, but the spec and the configuration give"),
    ("scale", 1.0, "scale 1.0, but the spec and the configuration give"),
    ("half_width", 0, "half_width 0, but the 95% interval needs"),
    ("resize", None, "resize None, but the records policy dp_count gives"),
])
def test_a_tightened_noise_claim_fails_the_public_audit(persons, tmp_path, field, value, message):
    def edit(b):
        _edit_json(b, lambda d: d.pop("resize") if field == "resize" else d["tables"][0].update({field: value}))
        _rerender(b)
    code, checks = _audit(_forge(persons, tmp_path, edit), "--pubkey", persons["pub"])
    assert code != 0 and any(message in p for p in checks["tables"]["problems"]), checks["tables"]


def test_removed_tables_fail_the_audit(persons, tmp_path):
    def edit(b):
        for f in ("dp-tables.json", "dp-tables.csv"):
            (b / f).unlink()
        m = json.loads((b / "manifest.json").read_text())
        m["files"] = [f for f in m["files"] if not f["path"].startswith("dp-tables")]
        (b / "manifest.json").write_text(json.dumps(m, indent=2) + "\n")
        sums = [ln for ln in (b / "SHA256SUMS").read_text().splitlines(keepends=True) if "dp-tables" not in ln]
        (b / "SHA256SUMS").write_text("".join(sums))
    code, checks = _audit(_forge(persons, tmp_path, edit), "--pubkey", persons["pub"])
    assert code != 0
    assert any("spec.json says publish: tables" in p for p in checks["tables"]["problems"])


def test_edited_counts_pass_the_public_audit_but_fail_the_replay(persons, tmp_path):
    """A count moved (and its interval and the CSV rendered again): only the enclave replay,
    which refits the generator from the transcript, can tell."""
    def edit(b):
        _edit_json(b, lambda d: d["tables"][0]["counts"].__setitem__(0, d["tables"][0]["counts"][0] + 7))
        _rerender(b)
    b = _forge(persons, tmp_path, edit)
    code, checks = _audit(b, "--pubkey", persons["pub"])
    assert checks["tables"]["result"] == "pass"
    code, checks = _audit(b, "--pubkey", persons["pub"], "--transcript", persons["transcript"],
                          "--data", persons["data"])
    assert code != 0 and any("dp-tables.json is not the tables the replayed noisy measurements give" in p
                             for p in checks["replay"]["problems"]), checks["replay"]


def test_the_document_is_what_the_generator_measured():
    """tables_document keeps every measured table in order, with the OpenDP scale."""
    from dpbundle.mechanisms.noise import Randomness, calibrated_laplace_scale

    codes = np.random.default_rng(2).integers(0, [5, 3, 2], size=(500, 3))
    model = make_generator("privsyn", epsilon=1.0).fit(codes, [5, 3, 2], Randomness())
    doc = tables_document(measured_of(model), ["a", "b", "c"])
    assert [t["columns"] for t in doc["tables"][:3]] == [["a"], ["b"], ["c"]]
    for t in doc["tables"]:
        assert t["scale"] == calibrated_laplace_scale(2, t["epsilon"], vector=True, integer=True)
        assert t["half_width"] == half_width(t["scale"]) and len(t["counts"]) == math.prod(t["sizes"])


def test_the_model_noise_plan_of_the_hierarchical_estimator_is_the_measured_one():
    """audit/model_check.noise_plan (the facts of a published model) used the unmerged cells
    of PrivSyn's pairs, and so other epsilons than the hierarchical estimator spends: now the
    epsilons and scales it gives are the measured tables'."""
    from dpbundle.audit.model_check import noise_plan
    from dpbundle.mechanisms.noise import Randomness
    from dpbundle.mechanisms.published import model_document

    codes = np.random.default_rng(4).integers(0, [30, 3, 4], size=(3000, 3))
    hp = {"estimator": "hierarchical", "pair_values": 10, "max_pairs": 3, "select_rule": "top"}
    model = make_generator("privsyn", epsilon=1.0, **hp).fit(codes, [30, 3, 4], Randomness())
    config = {"generator": {"type": "privsyn", **hp}}
    doc = json.loads(json.dumps(model_document(model, generator=config["generator"], epsilon=1.0,
                                               columns=["a", "b", "c"])))
    plan = noise_plan(doc, config, 1.0, 3000)
    measured = measured_of(model)
    assert any(g > 1 for t in measured for g in t.merge), "a pair on merged codes"
    assert [(p["epsilon"], p["scale"], p["cells"]) for p in plan] == \
        [(t.epsilon, t.scale, t.cells) for t in measured]


def test_the_documented_pandas_recipe_reads_every_table(census):
    """docs/reading-the-data.md's recipe, run on a released bundle: one group per table, its
    columns the table's."""
    import re

    pd = pytest.importorskip("pandas")
    text = (ROOT / "docs" / "reading-the-data.md").read_text()
    recipe = re.search(r"```python\n(import pandas as pd\nt = pd.read_csv\(\"dp-tables.csv\".*?)```", text, re.S).group(1)
    recipe = recipe.replace('"dp-tables.csv"', repr(str(census["bundle"] / "dp-tables.csv")))
    found: list = []
    exec(compile(recipe, "reading-the-data.md", "exec"), {"print": lambda *a: found.append(a), "pd": pd})
    doc = json.loads((census["bundle"] / "dp-tables.json").read_text())
    assert [(tid, sorted(dims), n) for tid, dims, n, _ in found] == \
        [(t["id"], sorted(t["columns"]), len(t["counts"])) for t in doc["tables"]]
