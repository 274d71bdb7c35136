"""`dpbundle sweep`: adaptive repetitions, `--configs` re-measurement, and "nothing passes".

Stand-in iterations (module level, picklable) decide pass/fail from the configuration and, where
a rate is needed, from a call log (which run of that configuration this is), so every expected
count below follows from the rule, not from the code under test.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from conftest import REPO_ROOT, small_births_doc
from dpbundle.release.sweep.run import (
    NARROWED,
    RUNS,
    SweepError,
    cli_sweep,
    decide,
    load_narrowed,
    read_runs,
    run_sweep,
)
from dpbundle.release.sweep.execute import AdaptivePlan, Task

Z = 1.959963984540054


# --------------------------------------------------------------------------- stand-ins

@dataclass
class Crit:
    id: str
    dp_value: float
    threshold: float
    passed: bool


@dataclass
class Result:
    config: dict
    real: object
    candidate: object
    results: list = field(default_factory=list)
    passed: bool = False
    note: str = ""


def _count_call(log: str | None, cid: str) -> int:
    """0-based index of this call for configuration ``cid`` (appends to the log)."""
    if not log:
        return 0
    with open(log, "a+", encoding="utf-8") as fh:
        fh.seek(0)
        i = sum(1 for line in fh if line.split()[0] == cid)
        fh.write(f"{cid} {i}\n")
    return i


class ByAge:
    """mother_age 'coarse' always passes; 'years' passes every ``every``-th call (0: never)."""

    def __init__(self, log: str | None = None, every: int = 0):
        self.log, self.every = log, every

    def __call__(self, prepared, spec, config, rand):
        from dpbundle.release.scheme.space import config_id

        rand.rng("stand-in")
        i = _count_call(self.log, config_id(config))
        if config["columns"]["mother_age"] == "coarse":
            passed = True
        else:
            passed = bool(self.every) and i % self.every == 0
        return Result(config, None, None, [Crit("alpha", 0.5 if passed else 1.5, 1.0, passed)], passed)


class NeverPasses:
    """alpha always fails (DP value 2 x threshold); gamma fails for min_count 2 only; beta passes."""

    def __call__(self, prepared, spec, config, rand):
        rand.rng("stand-in")
        gamma_fails = config["projection"]["min_count"] == 2
        results = [Crit("beta", 0.25, 1.0, True),
                   Crit("alpha", 0.02, 0.01, False),
                   Crit("gamma", 1.5 if gamma_fails else 0.5, 1.0, not gamma_fails)]
        return Result(config, None, None, results, False)


class HalfOfCoarse:
    """mother_age 'coarse' passes every other call; 'years' never."""

    def __init__(self, log: str):
        self.log = log

    def __call__(self, prepared, spec, config, rand):
        from dpbundle.release.scheme.space import config_id

        rand.rng("stand-in")
        i = _count_call(self.log, config_id(config))
        passed = config["columns"]["mother_age"] == "coarse" and i % 2 == 0
        return Result(config, None, None, [Crit("alpha", 0.5 if passed else 1.5, 1.0, passed)], passed)


def calls(log: Path) -> list[str]:
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


class FakePrepared:
    n = 100


def fake_prepare(path, spec):
    return FakePrepared()


KW = dict(workers=1, progress=False, report=False, utility="none", mp_context="fork", prepare=fake_prepare)


@pytest.fixture(scope="module")
def data_csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "public.csv"
    path.write_text("any public bytes\n")  # the stand-ins never read it (fake_prepare)
    return path


@pytest.fixture(scope="module")
def spec4(tmp_path_factory) -> Path:
    """4 configurations: mother_age coarse/years x min_count 2/3."""
    path = tmp_path_factory.mktemp("spec") / "small.yaml"
    path.write_text(yaml.safe_dump(small_births_doc([0.25]), sort_keys=False), "utf-8")
    return path


def _cli():
    app = typer.Typer()
    app.command()(cli_sweep)
    return app


def _output(res) -> str:
    return res.output + (res.stderr if res.stderr_bytes is not None else "")


# --------------------------------------------------------------------------- the decision rule

def test_decide_zero_passes_needs_35_runs():
    # Wilson upper bound at k = 0 is z^2 / (n + z^2): below 0.10 from n = 35 on
    assert Z * Z / (34 + Z * Z) > 0.10 > Z * Z / (35 + Z * Z)
    assert decide(0, 34, 0.10) == "undecided"
    assert decide(0, 35, 0.10) == "below"


def test_decide_above_and_straddling():
    # Wilson lower bound at k = n is n / (n + z^2): 3/3 -> 0.4386 >= 0.10
    assert decide(3, 3, 0.10) == "above"
    assert decide(3, 3, 0.44) == "undecided"     # 3 / (3 + z^2) = 0.4386 < 0.44
    assert decide(1, 20, 0.10) == "undecided"    # 5% with a [0.9%, 23.6%] interval
    assert decide(0, 0, 0.10) == "undecided"
    assert decide(0, 1, 0.0) == "above"          # every configuration meets acceptance >= 0


def _simulate(plan: AdaptivePlan, outcome, window: int = 4) -> dict[str, list[int]]:
    """Drive ``plan`` like `execute` does, finishing the oldest run first; returns reps per config."""
    it = plan.tasks()
    in_flight: list[Task] = []
    reps: dict[str, list[int]] = {}
    exhausted = False
    while True:
        while not exhausted and len(in_flight) < window:
            try:
                t = next(it)
            except StopIteration:
                exhausted = True
                break
            if t is None:
                break
            in_flight.append(t)
        if not in_flight:
            break
        t = in_flight.pop(0)
        reps.setdefault(t.config_id, []).append(t.rep)
        plan.record(t, outcome(t))
    return reps


def test_plan_stops_each_configuration_where_its_interval_decides():
    configs = {"a": {}, "b": {}, "c": {}}
    plan = AdaptivePlan(configs, {}, first=3, cap=40, batch=3, cut=0.10, workers=1)
    rule = {"a": lambda r: True, "b": lambda r: False, "c": lambda r: r % 10 == 0}
    reps = _simulate(plan, lambda t: rule[t.config_id](t.rep))
    assert len(reps["a"]) == 3                       # 3/3: lower bound 0.44 >= 0.10
    assert len(reps["b"]) == 36                      # batches of 3; 0/33 undecided, 0/36 below
    assert len(reps["c"]) == 40                      # 4/40 = [0.04, 0.23]: straddles at the cap
    for r in reps.values():
        assert sorted(r) == list(range(len(r)))      # every rep index once
    assert [plan.decision(c) for c in "abc"] == ["above", "below", "undecided"]
    assert plan.planned == 3 + 36 + 40


def test_plan_first_batch_is_rep_major_and_resumes():
    configs = {"a": {}, "b": {}}
    plan = AdaptivePlan(configs, {}, first=2, cap=2, batch=1, cut=0.5)
    it = plan.tasks()
    first = [next(it) for _ in range(4)]
    assert [(t.config_id, t.rep) for t in first] == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    # resume: 'a' already decided above, 'b' has 3 failed runs and a cap of 10 -> continues at rep 3
    # (cut 0.3: 3/3 has lower bound 0.44 -> above; 0/3 has upper bound 0.56 -> undecided)
    plan = AdaptivePlan(configs, {"a": {0: True, 1: True, 2: True}, "b": {0: False, 1: False, 2: False}},
                        first=3, cap=10, batch=2, cut=0.3)
    nxt = list(plan._queue)
    assert [(t.config_id, t.rep) for t in nxt] == [("b", 3), ("b", 4)]


def test_plan_errors_do_not_loop():
    plan = AdaptivePlan({"a": {}}, {}, first=3, cap=7, batch=2, cut=0.10)
    reps = _simulate(plan, lambda t: None)          # every run fails with an error
    assert sorted(reps["a"]) == list(range(7))       # each index of the cap tried once, then stop


def test_plan_batches_fill_idle_workers():
    # one open configuration, 8 workers: later batches grow to 8 so that no worker idles
    plan = AdaptivePlan({"a": {}}, {}, first=2, cap=40, batch=2, cut=0.10, workers=8)
    it = plan.tasks()
    t0, t1 = next(it), next(it)
    assert next(it) is None                          # nothing more until the first batch is in
    plan.record(t0, True)
    assert len(plan._queue) == 0                     # t1 still in flight
    plan.record(t1, False)                           # 1/2: [0.09, 0.91] straddles 0.10
    assert [t.rep for t in plan._queue] == list(range(2, 10))


# --------------------------------------------------------------------------- run_sweep

def test_adaptive_sweep_decides_and_reports(spec4, data_csv, tmp_path):
    out = tmp_path / "S"
    log = tmp_path / "calls.log"
    res = run_sweep(spec4, data_csv, out, reps=3, max_reps=40, iteration=ByAge(str(log)), **KW)
    s = res.summary
    rows = {r["config_id"]: r for r in s["configurations"]}
    by_age = {}
    for r in rows.values():
        by_age.setdefault(r["dimensions"]["columns.mother_age"], []).append(r)
    for r in by_age["coarse"]:
        assert (r["runs"], r["accepted"], r["decision"], r["narrowed"]) == (3, 3, "above", True)
        lo = 3 / (3 + Z * Z)
        assert r["wilson_low"] == pytest.approx(lo)
        assert r["expected_iterations"] == 1.0
        assert r["expected_iterations_low"] == pytest.approx(1.0)
        assert r["expected_iterations_high"] == pytest.approx(1 / lo)
    for r in by_age["years"]:
        assert (r["runs"], r["accepted"], r["decision"], r["narrowed"]) == (36, 0, "below", False)
        assert r["expected_iterations"] is None and r["expected_iterations_high"] is None
    assert s["runs"] == 2 * 3 + 2 * 36 == len(read_runs(out)) == len(calls(log))
    assert s["adaptive"] | {"rule": None} == {"first_batch": 3, "max_reps": 40, "batch": 3, "rule": None,
                                              "decided_above": 2, "decided_below": 2, "undecided": 0,
                                              "undecided_ids": []}
    nar = s["narrowed"]
    assert nar["expected_private_iterations"] == 1.0
    assert nar["expected_private_iterations_high"] == pytest.approx(1 / (3 / (3 + Z * Z)))
    doc = yaml.safe_load((out / NARROWED).read_text())
    assert doc["undecided"] == 0 and all(e["decision"] == "above" for e in doc["configurations"])
    assert len(load_narrowed(out / NARROWED)) == 2
    csv_head = (out / "summary.csv").read_text().splitlines()[0].split(",")
    assert {"decision", "expected_iterations_low", "expected_iterations_high"} <= set(csv_head)


def test_undecided_at_cap_is_flagged_and_resume_continues(spec4, data_csv, tmp_path):
    out = tmp_path / "S"
    log = tmp_path / "calls.log"
    # 'years' passes every 5th call (20%): 2/10 -> Wilson [0.057, 0.51] straddles 0.10 at the cap of 10
    res = run_sweep(spec4, data_csv, out, reps=5, max_reps=10, batch=5, iteration=ByAge(str(log), every=5), **KW)
    years = [r for r in res.summary["configurations"] if r["dimensions"]["columns.mother_age"] == "years"]
    for r in years:
        assert (r["runs"], r["accepted"], r["decision"], r["narrowed"]) == (10, 2, "undecided", True)
    assert res.summary["adaptive"]["undecided"] == 2
    assert sorted(res.summary["adaptive"]["undecided_ids"]) == sorted(r["config_id"] for r in years)
    doc = yaml.safe_load((out / NARROWED).read_text())
    assert doc["undecided"] == 2
    assert sorted(e["decision"] for e in doc["configurations"]) == ["above", "above", "undecided", "undecided"]
    before = (out / RUNS).read_bytes()
    n_calls = len(calls(log))

    # resume with a larger cap: only the undecided configurations run again, and runs.jsonl grows
    more = run_sweep(spec4, data_csv, out, max_reps=40, iteration=ByAge(str(log), every=5), **KW)
    assert (out / RUNS).read_bytes().startswith(before)
    new = calls(log)[n_calls:]
    assert set(new) == {r["config_id"] for r in years}
    for r in more.summary["configurations"]:
        if r["dimensions"]["columns.mother_age"] == "years":
            # 20% with 5-run batches: decided above once the lower bound reaches 0.10
            k, n = r["accepted"], r["runs"]
            assert r["decision"] == "above" and n > 10 and k == math.ceil(n / 5)
            assert decide(math.ceil((n - 5) / 5), n - 5, 0.10) == "undecided"  # the batch before did not decide
        else:
            assert r["runs"] == 5
    # nothing left to do: a third run starts nothing
    again = run_sweep(spec4, data_csv, out, iteration=ByAge(str(log), every=5), **KW)
    assert again.new_runs == 0 and again.summary == more.summary


# --------------------------------------------------------------------------- --configs

def _narrowed_from(spec: Path, data: Path, tmp: Path) -> Path:
    out = tmp / "first"
    run_sweep(spec, data, out, reps=2, max_reps=2, iteration=ByAge(), **KW)
    return out / NARROWED


def test_configs_remeasures_the_list(spec4, data_csv, tmp_path):
    listed = _narrowed_from(spec4, data_csv, tmp_path)
    ids = [e["id"] for e in load_narrowed(listed)]
    assert len(ids) == 2
    log = tmp_path / "calls.log"
    out = tmp_path / "again"
    res = run_sweep(spec4, data_csv, out, reps=4, max_reps=4, configs=listed, iteration=ByAge(str(log)), **KW)
    assert [r["config_id"] for r in res.summary["configurations"]] == ids
    assert sorted(calls(log)) == sorted(ids * 4)
    assert res.summary["configurations_from"] == str(listed)
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["configs"]["path"] == str(listed) and meta["selected"] == ids
    # resuming without --configs keeps the list (and does not fall back to the whole space)
    more = run_sweep(spec4, data_csv, out, max_reps=6, iteration=ByAge(str(log)), **KW)
    assert [r["config_id"] for r in more.summary["configurations"]] == ids
    assert more.new_runs == 0  # both decided above after 4/4


def test_configs_accepts_the_shipped_births_list(data_csv, tmp_path):
    spec = REPO_ROOT / "examples" / "births.yaml"
    listed = REPO_ROOT / "examples" / "births-narrowed-nvss160k.yaml"
    ids = [e["id"] for e in yaml.safe_load(listed.read_text())["configurations"]]
    res = run_sweep(spec, data_csv, tmp_path / "S", reps=1, max_reps=1, configs=listed, iteration=ByAge(), **KW)
    assert [r["config_id"] for r in res.summary["configurations"]] == ids


def _other_spec(spec: Path, tmp: Path) -> Path:
    doc = yaml.safe_load(spec.read_text("utf-8"))
    doc["acceptance"][0]["threshold"] = 0.02
    other = tmp / "other.yaml"
    other.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    return other


def test_configs_refuses_a_list_of_another_spec(spec4, data_csv, tmp_path):
    listed = _narrowed_from(spec4, data_csv, tmp_path)
    other = _other_spec(spec4, tmp_path)
    listed_sha = yaml.safe_load(listed.read_text())["spec_sha256"]
    res = CliRunner().invoke(_cli(), [str(other), str(data_csv), "--out", str(tmp_path / "X"),
                                      "--configs", str(listed), "--reps", "1", "-q", "--no-report"])
    text = _output(res).replace("\n", "")
    assert res.exit_code == 2, text
    assert listed_sha in text and "--allow-other-spec" in text
    from dpbundle.release.spec.load import load_spec
    from dpbundle.release.sweep.run import _spec_fingerprint

    assert _spec_fingerprint(load_spec(other)) in text
    assert not (tmp_path / "X").exists()
    # allowed on request: the configurations still belong to the (edited) spec's space
    res = run_sweep(other, data_csv, tmp_path / "Y", reps=1, max_reps=1, configs=listed, allow_other_spec=True,
                    iteration=ByAge(), **KW)
    assert len(res.summary["configurations"]) == 2


def test_configs_refuses_configurations_outside_the_space(spec4, data_csv, tmp_path):
    from dpbundle.release.scheme.space import config_id

    listed = _narrowed_from(spec4, data_csv, tmp_path)
    doc = yaml.safe_load(listed.read_text())
    doc["configurations"][0]["config"]["projection"]["min_count"] = 7
    doc["configurations"][0]["id"] = config_id(doc["configurations"][0]["config"])  # a consistent id
    bad = tmp_path / "outside.yaml"
    bad.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(SweepError, match=r"configurations\[0\].*projection.min_count"):
        run_sweep(spec4, data_csv, tmp_path / "S", configs=bad, iteration=ByAge(), **KW)
    doc["configurations"][0]["config"]["projection"]["min_count"] = 3 - 0  # id now stale
    bad.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(SweepError, match="does not match"):
        run_sweep(spec4, data_csv, tmp_path / "S", configs=bad, iteration=ByAge(), **KW)
    doc["configurations"] = []
    bad.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(SweepError, match="lists no configurations"):
        run_sweep(spec4, data_csv, tmp_path / "S", configs=bad, iteration=ByAge(), **KW)
    with pytest.raises(SweepError, match="not both"):
        run_sweep(spec4, data_csv, tmp_path / "S", configs=listed, sample=2, iteration=ByAge(), **KW)
    with pytest.raises(SweepError, match="no such file"):
        run_sweep(spec4, data_csv, tmp_path / "S", configs=tmp_path / "missing.yaml", iteration=ByAge(), **KW)
    assert not (tmp_path / "S").exists()


# --------------------------------------------------------------------------- nothing passes

def test_nothing_passes_exits_1_with_the_failing_criteria(spec4, data_csv, tmp_path, monkeypatch):
    import dpbundle.release.sweep.run as sweep_mod

    real = sweep_mod.run_sweep
    monkeypatch.setattr(sweep_mod, "run_sweep",
                        lambda *a, **k: real(*a, **dict(k, iteration=NeverPasses(), prepare=fake_prepare,
                                                        workers=1, mp_context="fork")))
    out = tmp_path / "S"
    res = CliRunner().invoke(_cli(), [str(spec4), str(data_csv), "--out", str(out), "--reps", "2",
                                      "--max-reps", "2", "-q", "--no-report", "--utility", "none"],
                             env={"COLUMNS": "200"})
    text = _output(res)
    assert res.exit_code == 1, text
    assert not (out / NARROWED).exists()
    s = json.loads((out / "summary.json").read_text())
    fails = s["failing_criteria"]
    # alpha fails every run (DP value 0.02 vs 0.01); gamma fails the min_count-2 half (1.5 vs 1); beta never
    assert [f["id"] for f in fails] == ["alpha", "gamma"]
    assert fails[0] | {} == {"id": "alpha", "fail_share": 1.0, "failed": 8, "runs": 8, "median_dp_value": 0.02,
                             "threshold": 0.01, "median_ratio_to_threshold": pytest.approx(2.0)}
    assert fails[1]["fail_share"] == 0.5 and fails[1]["median_dp_value"] == pytest.approx(1.0)
    assert "No configuration reached" in text and "No narrowed.yaml" in text
    assert text.index("alpha") < text.index("gamma") and "100% (8/8)" in text and "50% (4/8)" in text
    assert "beta" not in text.split("fail most")[1]


def test_stale_narrowed_list_is_removed_when_nothing_passes(spec4, data_csv, tmp_path):
    out = tmp_path / "S"
    log = tmp_path / "calls.log"
    first = run_sweep(spec4, data_csv, out, reps=4, max_reps=4, iteration=HalfOfCoarse(str(log)), **KW)
    assert first.summary["narrowed"]["count"] == 2 and (out / NARROWED).exists()
    # the same runs judged against a cut-off of 0.9: 2/4 passes no longer qualify
    again = run_sweep(spec4, data_csv, out, min_acceptance=0.9, iteration=HalfOfCoarse(str(log)),
                      **dict(KW, report=True))
    assert again.new_runs == 0
    assert again.summary["narrowed"]["count"] == 0 and not (out / NARROWED).exists()
    # alpha fails 12 of 16 runs: the 8 of 'years' and every other of 'coarse'
    assert again.summary["failing_criteria"] == [
        {"id": "alpha", "fail_share": 0.75, "failed": 12, "runs": 16, "median_dp_value": 1.5, "threshold": 1.0,
         "median_ratio_to_threshold": 1.5}]
    html = (out / "report.html").read_text()
    assert "No configuration reached the minimum acceptance" in html
    assert "75% (12/16)" in html.replace(".0%", "%")


def test_report_shows_intervals_and_decisions(spec4, data_csv, tmp_path):
    out = tmp_path / "S"
    run_sweep(spec4, data_csv, out, reps=5, max_reps=10, batch=5, iteration=ByAge(str(tmp_path / "log"), every=5),
              **dict(KW, report=True))
    html = (out / "report.html").read_text()
    assert "expected iterations [95%]" in html and "undecided" in html
    assert "decided above" in html and "2 undecided" in html


def test_console_table_shows_intervals(spec4, data_csv, tmp_path, monkeypatch):
    import dpbundle.release.sweep.run as sweep_mod

    real = sweep_mod.run_sweep
    monkeypatch.setattr(sweep_mod, "run_sweep",
                        lambda *a, **k: real(*a, **dict(k, iteration=ByAge(), prepare=fake_prepare,
                                                        workers=1, mp_context="fork")))
    res = CliRunner().invoke(_cli(), [str(spec4), str(data_csv), "--out", str(tmp_path / "S"), "--reps", "3",
                                      "--max-reps", "3", "-q", "--no-report", "--utility", "none"],
                             env={"COLUMNS": "200"})
    text = _output(res)
    assert res.exit_code == 0, text
    assert "Wilson 95%" in text and "3/3 [0.44,1.00]" in text
    assert "1.0 [1.0,2.3]" in text                               # 1/p with [1/1, 1/0.4386]
    assert "undecided" in text and "0/3 [0.00,0.56]" in text         # 0/3 at the cap of 3


# --------------------------------------------------------------------------- Dask

def test_adaptive_on_dask(spec4, data_csv, tmp_path):
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    me = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(me)
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None, host="127.0.0.1") as cluster:
            kw = dict(KW, workers=None)
            kw.pop("mp_context")
            res = run_sweep(spec4, data_csv, tmp_path / "S", reps=2, max_reps=12, batch=2, sample=4, seed=1,
                            scheduler=cluster.scheduler_address, iteration=ByAge(), **kw)
    finally:
        cloudpickle.unregister_pickle_by_value(me)
    assert res.backend == "dask"
    runs = sorted((r["dimensions"]["columns.mother_age"], r["runs"], r["decision"])
                  for r in res.summary["configurations"])
    # coarse 2/2: lower bound 2/(2+z^2) = 0.34 -> above; years 0 passes: undecided at the cap of 12
    assert runs == [("coarse", 2, "above"), ("coarse", 2, "above"), ("years", 12, "undecided"),
                    ("years", 12, "undecided")]


@pytest.mark.parametrize("spec_name, list_name", [
    ("births.yaml", "births-narrowed-nvss160k.yaml"),
    ("births-recommended.yaml", "births-recommended-narrowed-nvss160k.yaml"),
    ("births-eps5.yaml", "births-eps5-narrowed-nvss160k.yaml"),
    ("births-eps3.yaml", "births-eps3-narrowed-nvss160k.yaml"),
    ("persons-eps2.yaml", "persons-eps2-narrowed.yaml"),
    ("persons.yaml", "persons-narrowed.yaml"),
    ("persons-recommended.yaml", "persons-recommended-narrowed.yaml"),
])
def test_shipped_lists_were_swept_on_their_spec(spec_name, list_name):
    """Every shipped narrowed list records the fingerprint of the spec it ships with, and its
    configurations belong to that spec's space (a list swept on an edited spec is refused)."""
    from dpbundle.release.scheme.space import check_config
    from dpbundle.release.spec.load import load_spec
    from dpbundle.release.sweep.run import _spec_fingerprint

    spec = load_spec(REPO_ROOT / "examples" / spec_name)
    doc = yaml.safe_load((REPO_ROOT / "examples" / list_name).read_text())
    assert doc["spec_sha256"] == _spec_fingerprint(spec)
    assert doc["configurations"]
    for entry in doc["configurations"]:
        assert check_config(spec, entry["config"]) == []
