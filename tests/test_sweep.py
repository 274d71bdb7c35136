"""`dpbundle sweep`: Wilson intervals, resume, refusal on private data, narrowed.yaml, Dask, report.

Most tests inject a cheap stand-in iteration (module-level, so worker processes can import it);
the real iteration is exercised by a `slow` end-to-end test.
"""
from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import typer
import yaml

from conftest import small_births_doc
from typer.testing import CliRunner

from dpbundle.release.sweep.run import (
    RUNS,
    SweepError,
    load_narrowed,
    read_runs,
    run_sweep,
    select_configs,
    wilson_interval,
    cli_sweep,
)


# --------------------------------------------------------------------------- stand-in iteration

@dataclass
class FakeCriterion:
    id: str
    dp_value: float
    threshold: float
    passed: bool


@dataclass
class FakeResult:
    config: dict
    real: object
    candidate: object
    results: list = field(default_factory=list)
    passed: bool = False


def passes_needed(config: dict) -> int:
    """Deterministic acceptance: a run of `config` passes iff rep < passes_needed(config) (of 4 reps)."""
    m = {"coarse": 0, "years": 2, "coarse-37": 1}[config["columns"]["mother_age"]]
    m += 1 if config["generator"].get("epsilon_split") == 0.5 else 0
    m += 1 if config["projection"]["min_count"] == 2 else 0
    return m


class StandIn:
    """Cheap iteration: T = transform(data, config), C = T resampled; pass rule from passes_needed.

    Every call appends "config_id rep" to ``log`` (a file), so tests can count calls made in
    worker processes.
    """

    def __init__(self, log: str | None = None):
        self.log = log
        self._rep: dict[str, int] = {}

    def __call__(self, prepared, spec, config, rand):
        from dpbundle.release.scheme.space import config_id
        from dpbundle.release.data.transform import transform

        cid = config_id(config)
        rng = rand.rng("stand-in")
        real = transform(prepared, spec, config)
        cand = real.with_codes(real.codes[rng.integers(0, real.n, real.n)])
        # which repetition is this? the sweep does not tell the iteration (nor should it), so the
        # stand-in reads it back from its own call log
        rep = 0
        if self.log:
            with open(self.log, "a+", encoding="utf-8") as fh:
                fh.seek(0)
                rep = sum(1 for line in fh if line.split()[0] == cid)
                fh.write(f"{cid} {rep}\n")
        passed = rep < passes_needed(config)
        ratio = 0.5 if passed else 1.5
        results = [FakeCriterion("alpha", ratio * 0.01 + rng.normal(0, 1e-4), 0.01, passed),
                   FakeCriterion("beta", float(rng.uniform(0, 0.9)), 1.0, True)]
        return FakeResult(config, real, cand, results, passed)


def calls(log: Path) -> list[tuple[str, int]]:
    if not log.exists():
        return []
    return [(line.split()[0], int(line.split()[1])) for line in log.read_text().splitlines() if line.strip()]


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def data_csv(tmp_path_factory) -> Path:
    from dpbundle.release.data.example import write_example

    path = tmp_path_factory.mktemp("data") / "births_public.csv"
    write_example(path, rows=1200, seed=7)
    return path


@pytest.fixture(scope="module")
def small_spec(tmp_path_factory) -> Path:
    """The births spec with an 8-configuration space (mother_age x epsilon_split x min_count)."""
    doc = small_births_doc([0.25, 0.5])
    path = tmp_path_factory.mktemp("spec") / "small.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    return path


def _spec_with(path: Path, tmp: Path, **privacy) -> Path:
    doc = yaml.safe_load(path.read_text("utf-8"))
    doc["privacy"].update(privacy)
    out = tmp / "spec-variant.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    return out


# --------------------------------------------------------------------------- Wilson

def _wilson_by_quadratic(k: int, n: int, z: float) -> tuple[float, float]:
    """Textbook definition: the p with |p_hat - p| = z sqrt(p (1 - p) / n), i.e. the roots of
    (1 + z^2/n) p^2 - (2 p_hat + z^2/n) p + p_hat^2 = 0 (solved here with numpy.roots)."""
    ph = k / n
    a, b, c = 1 + z * z / n, -(2 * ph + z * z / n), ph * ph
    roots = sorted(np.real(np.roots([a, b, c])))
    return max(roots[0], 0.0), min(roots[-1], 1.0)


@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (5, 10), (8, 10), (10, 10), (3, 7), (37, 120), (1, 1000)])
def test_wilson_interval_matches_textbook(k, n):
    z = 1.959963984540054
    lo, hi = wilson_interval(k, n)
    elo, ehi = _wilson_by_quadratic(k, n, z)
    assert lo == pytest.approx(elo, abs=1e-9)
    assert hi == pytest.approx(ehi, abs=1e-9)


def test_wilson_interval_published_values():
    # Published 95% Wilson intervals (e.g. Newcombe 1998, Table I; Brown, Cai & DasGupta 2001)
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=5e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=5e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=5e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_select_configs_seeded_and_nested():
    ids = [f"{i:016x}" for i in range(50)]
    a = select_configs(ids, 8, seed=123)
    assert a == select_configs(ids, 8, seed=123)
    assert len(set(a)) == 8
    assert select_configs(ids, 12, seed=123)[:8] == a
    assert select_configs(ids, 8, seed=124) != a
    assert select_configs(ids, None, seed=1) == ids


# --------------------------------------------------------------------------- refusals

def _cli():
    app = typer.Typer()
    app.command()(cli_sweep)
    return app


def test_refuses_private_fingerprint(small_spec, data_csv, tmp_path):
    sha = hashlib.sha256(data_csv.read_bytes()).hexdigest()
    spec = _spec_with(small_spec, tmp_path, private_data_sha256=["0" * 64, sha])
    out = tmp_path / "S"
    res = CliRunner().invoke(_cli(), [str(spec), str(data_csv), "--out", str(out), "--reps", "1", "--sample", "1"])
    assert res.exit_code == 2, res.output
    text = res.output + (res.stderr if res.stderr_bytes is not None else "")
    assert "private_data_sha256" in text and sha in text.replace("\n", "")
    assert not out.exists()


def test_other_fingerprint_is_not_refused(small_spec, data_csv, tmp_path):
    spec = _spec_with(small_spec, tmp_path, private_data_sha256=["ab" * 32])
    res = run_sweep(spec, data_csv, tmp_path / "S", reps=1, max_reps=1, sample=1, workers=1, iteration=StandIn(),
                    progress=False, report=False, utility="none", mp_context="fork")
    assert res.summary["runs"] == 1


# --------------------------------------------------------------------------- resume

def test_resume_skips_finished_runs(small_spec, data_csv, tmp_path):
    log = tmp_path / "calls.log"
    out = tmp_path / "S"
    kw = dict(workers=1, progress=False, report=False, utility="none", mp_context="fork")
    # a fixed design (max_reps = reps): the adaptive repetitions are tested in test_sweep_adaptive.py
    first = run_sweep(small_spec, data_csv, out, reps=2, max_reps=2, sample=3, iteration=StandIn(str(log)), **kw)
    assert first.new_runs == 6 and len(calls(log)) == 6
    assert len(read_runs(out)) == 6

    # resuming without --reps/--sample reuses the recorded ones (and the recorded sample seed)
    again = run_sweep(small_spec, data_csv, out, iteration=StandIn(str(log)), **kw)
    assert again.new_runs == 0 and len(calls(log)) == 6          # nothing re-run
    assert again.summary == first.summary

    # more reps: only the new ones run, for the same (recorded-seed) sample
    more = run_sweep(small_spec, data_csv, out, reps=3, sample=3, iteration=StandIn(str(log)), **kw)
    assert more.new_runs == 3 and len(calls(log)) == 9
    assert {c for c, _ in calls(log)[6:]} == {c["config_id"] for c in first.summary["configurations"]}

    # a crash: the last two records are lost and a torn line is left behind
    lines = (out / RUNS).read_text().splitlines(keepends=True)
    (out / RUNS).write_text("".join(lines[:-2]) + lines[-2][: len(lines[-2]) // 2])
    lost = {(json.loads(x)["config_id"], json.loads(x)["rep"]) for x in lines[-2:]}
    run_sweep(small_spec, data_csv, out, reps=3, sample=3, iteration=StandIn(str(log)), **kw)
    assert len(calls(log)) == 11
    assert set(read_runs(out)) >= lost and len(read_runs(out)) == 9


def test_resume_refuses_other_spec_or_data(small_spec, data_csv, tmp_path):
    out = tmp_path / "S"
    kw = dict(workers=1, progress=False, report=False, utility="none", mp_context="fork", iteration=StandIn(),
              max_reps=1)
    run_sweep(small_spec, data_csv, out, reps=1, sample=1, **kw)
    doc = yaml.safe_load(small_spec.read_text("utf-8"))
    doc["acceptance"][0]["threshold"] = 0.02
    other_spec = tmp_path / "other.yaml"
    other_spec.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    with pytest.raises(SweepError, match="different spec"):
        run_sweep(other_spec, data_csv, out, reps=1, sample=1, **kw)
    other_data = tmp_path / "other.csv"
    lines = data_csv.read_text().splitlines(keepends=True)
    other_data.write_text("".join(lines[:-1]))
    with pytest.raises(SweepError, match="different data"):
        run_sweep(small_spec, other_data, out, reps=1, sample=1, **kw)
    # via the CLI: exit code 2 and a clear message
    res = CliRunner().invoke(_cli(), [str(other_spec), str(data_csv), "--out", str(out), "--reps", "1"])
    assert res.exit_code == 2 and "cannot resume" in res.output + res.stderr


# --------------------------------------------------------------------------- narrowed list + report

@pytest.fixture(scope="module")
def full_sweep(small_spec, data_csv, tmp_path_factory):
    """All 8 configurations x 4 reps on a process pool with 2 workers."""
    out = tmp_path_factory.mktemp("sweep") / "S"
    res = run_sweep(small_spec, data_csv, out, reps=4, max_reps=4, workers=2, iteration=StandIn(str(out.parent / "calls.log")),
                    min_acceptance=0.5, progress=False, report=True, utility="first", mp_context="fork")
    return res


def test_narrowed_follows_threshold(full_sweep):
    from dpbundle.release.scheme.space import config_id

    s = full_sweep.summary
    assert s["configurations_swept"] == 8 and s["runs"] == 32
    by_id = {c["config_id"]: c for c in s["configurations"]}
    narrowed = load_narrowed(full_sweep.out / "narrowed.yaml")
    expected = set()
    for entry in narrowed:
        assert config_id(entry["config"]) == entry["id"]
        assert entry["acceptance"] == pytest.approx(passes_needed(entry["config"]) / 4)
        assert entry["acceptance"] >= 0.5
        assert entry["runs"] == 4
        assert entry["wilson_low"] <= entry["acceptance"] <= entry["wilson_high"]
    # every configuration with passes_needed >= 2 (of 4) is in, and no other
    doc = yaml.safe_load((full_sweep.out / "narrowed.yaml").read_text())
    assert {e["id"] for e in doc["configurations"]} == {e["id"] for e in narrowed}
    for cid, row in by_id.items():
        assert row["acceptance"] in (0.0, 0.25, 0.5, 0.75, 1.0)
        if row["acceptance"] >= 0.5:
            expected.add(cid)
    assert {e["id"] for e in narrowed} == expected and 0 < len(expected) < 8
    # expected private iterations = 1 / mean acceptance over the narrowed list
    mean = sum(by_id[c]["acceptance"] for c in expected) / len(expected)
    assert s["narrowed"]["expected_private_iterations"] == pytest.approx(1 / mean)
    assert s["narrowed"]["expected_private_seconds"] == pytest.approx(
        s["narrowed"]["expected_private_iterations"] * s["narrowed"]["median_iteration_seconds"])


def test_narrowed_rejects_edited_file(full_sweep, tmp_path):
    doc = yaml.safe_load((full_sweep.out / "narrowed.yaml").read_text())
    doc["configurations"][0]["config"]["projection"]["min_count"] = 7
    bad = tmp_path / "n.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match="does not match"):
        load_narrowed(bad)


def test_summary_files_and_schemas(full_sweep):
    from dpbundle.release.common.jsonschemas import validate

    out = full_sweep.out
    for name in ("sweep.json", "runs.jsonl", "runs.csv", "summary.csv", "summary.json", "utility.jsonl"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    validate(summary, "sweep-summary")
    for line in (out / "runs.jsonl").read_text().splitlines():
        validate(json.loads(line), "sweep-run")
    utility = [json.loads(x) for x in (out / "utility.jsonl").read_text().splitlines()]
    for rec in utility:
        validate(rec, "sweep-utility")
    # 'first' policy: one evaluated accepted run per configuration that has any accepted run
    accepting = {c["config_id"] for c in summary["configurations"] if c["accepted"]}
    assert {r["config_id"] for r in utility} == accepting
    assert len(utility) == len(accepting)
    # C is T resampled: utility measures are near their null values
    u = utility[0]["utility"]
    assert 0.2 < u["propensity"]["pmse_ratio"] < 2.5
    dims = {d["name"] for d in summary["dimensions"]}
    assert dims == {"columns.mother_age", "generator.epsilon_split", "projection.min_count"}
    assert len((out / "summary.csv").read_text().splitlines()) == 9
    assert len((out / "runs.csv").read_text().splitlines()) == 33


def test_report_contains_plots(full_sweep):
    html = (full_sweep.out / "report.html").read_text()
    assert html.count("<svg") >= 6
    for dim in ("columns.mother_age", "generator.epsilon_split", "projection.min_count"):
        assert f'data-dimension="{dim}"' in html
    assert "DP value / threshold" in html
    assert "pMSE ratio" in html and "SPECKS" in html and "S_pMSE" in html
    assert html.count('class="point"') >= 32  # strip plot: one point per run and criterion, at least
    pdf = (full_sweep.out / "report.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and len(pdf) > 5000


def test_resume_is_instant_and_keeps_outputs(full_sweep, small_spec, data_csv):
    before = {p.name: p.stat().st_mtime_ns for p in full_sweep.out.iterdir()}
    res = run_sweep(small_spec, data_csv, full_sweep.out, reps=4, iteration=StandIn(), min_acceptance=0.5,
                    progress=False, report=True, utility="first")
    assert res.new_runs == 0 and res.backend == "none"
    after = {p.name: p.stat().st_mtime_ns for p in full_sweep.out.iterdir()}
    assert after["report.pdf"] == before["report.pdf"]  # nothing changed, nothing rewritten


# --------------------------------------------------------------------------- Dask

def test_dask_local_cluster(small_spec, data_csv, tmp_path):
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    me = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(me)  # workers need not import the test module
    log = tmp_path / "calls.log"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster:
        out = tmp_path / "S"
        res = run_sweep(small_spec, data_csv, out, reps=1, max_reps=1, sample=4, scheduler=cluster.scheduler_address,
                        iteration=StandIn(str(log)), progress=False, report=False, utility="none")
        assert res.backend == "dask" and res.workers == 2 and res.new_runs == 4
        runs = read_runs(out)
        assert len(runs) == 4 and all(r["error"] is None for r in runs.values())
        assert len({r["worker"] for r in runs.values()}) >= 1
        again = run_sweep(small_spec, data_csv, out, reps=1, sample=4, scheduler=cluster.scheduler_address,
                          iteration=StandIn(str(log)), progress=False, report=False, utility="none")
        assert again.new_runs == 0 and len(calls(log)) == 4
    cloudpickle.unregister_pickle_by_value(me)


def test_workers_and_scheduler_are_exclusive(small_spec, data_csv, tmp_path):
    with pytest.raises(SweepError, match="not both"):
        run_sweep(small_spec, data_csv, tmp_path / "S", workers=2, scheduler="tcp://127.0.0.1:1")


# --------------------------------------------------------------------------- the real iteration

@pytest.mark.slow
def test_real_iteration_end_to_end(small_spec, data_csv, tmp_path):
    """The real iteration on the default (spawn) pool; thresholds relaxed so that the accepted
    candidates' utility is evaluated on real IterationResults."""
    pytest.importorskip("dpbundle.release.scheme.iteration")
    doc = yaml.safe_load(small_spec.read_text("utf-8"))
    for c in doc["acceptance"]:
        c["threshold"] = 1e9
    relaxed = tmp_path / "relaxed.yaml"
    relaxed.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    out = tmp_path / "S"
    res = run_sweep(relaxed, data_csv, out, reps=1, sample=2, workers=2, progress=False, report=False,
                    utility="all")
    runs = read_runs(out)
    assert len(runs) == 2
    for r in runs.values():
        assert r["error"] is None, r["error"]
        assert {c["id"] for c in r["criteria"]} == {"kway", "ratio", "mean_parity", "mean_weight", "mean_gestation",
                                                    "regression", "mae", "faithfulness"}
        assert r["passed"]
    assert res.summary["runs"] == 2 and res.summary["accepted"] == 2
    utility = [json.loads(x) for x in (out / "utility.jsonl").read_text().splitlines()]
    assert len(utility) == 2 and all(u["utility"] and not u["error"] for u in utility)
    assert res.summary["utility"]["evaluated_configurations"] == 2
    assert res.summary["utility"]["median"]["pmse_ratio"] > 0


def test_report_pdf_never_splits_a_table_row(full_sweep):
    """Issue 15: a row of the report's tables stays on one page and the header row repeats on
    every page a table spans (rendered with the report's own template and CSS)."""
    import io

    from pypdf import PdfReader
    from weasyprint import HTML

    from dpbundle.release.sweep.report import build_context, render_html

    summary = json.loads((full_sweep.out / "summary.json").read_text())
    base = summary["configurations"][0]
    # 90 configurations, each with a long wrapped configuration text: the table spans pages
    summary["configurations"] = [dict(base, config_id=f"cfg{i:03d}x", narrowed=False) for i in range(90)]
    long_cfg = {f"cfg{i:03d}x": {"columns": {f"column_{k}": f"alternative-{k}-row{i:03d}-end" for k in range(9)},
                                 "generator": {"type": "privbayes"}} for i in range(90)}
    html = render_html(build_context(summary, runs={}, utility={}, configs_by_id=long_cfg))
    assert "<thead><tr><th>id</th><th>runs</th>" in html and "tr, td, th { break-inside: avoid;" in html
    reader = PdfReader(io.BytesIO(HTML(string=html).write_pdf()))
    pages = [p.extract_text() for p in reader.pages]
    for i in range(90):
        first, last = f"cfg{i:03d}x", f"alternative-8-row{i:03d}-end"
        on = [k for k, t in enumerate(pages) if first in t]
        assert on, first
        assert any(last in pages[k].replace("\n", "") for k in on), f"row {first} split across pages"
    table_pages = sorted({k for k, t in enumerate(pages) if "alternative-0-" in t})
    assert len(table_pages) >= 3
    for k in table_pages:
        assert "expectediterations[95%]" in "".join(pages[k].split()), \
            f"page {k + 1}: the table's header row is not repeated"
