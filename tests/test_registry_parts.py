"""A registry split into files (issue 28): prepared part by part here or on a Dask LocalCluster,
it gives the single file's counts, fingerprint and (same transcript) bundle."""
from __future__ import annotations

import gzip
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.release.data.fingerprint import table_fingerprint  # noqa: E402
from dpbundle.release.data.parts import prepare_parts, registry_parts  # noqa: E402
from dpbundle.release.data.prepare import InputError, prepare  # noqa: E402
from dpbundle.release.spec.load import load_spec  # noqa: E402

distributed = pytest.importorskip("distributed")


def _split(single: Path, where: Path, cuts: list[int]) -> Path:
    """The file's rows in len(cuts)+1 parts (each with the header; the second gzipped)."""
    lines = single.read_bytes().splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    where.mkdir()
    bounds = [0, *cuts, len(body)]
    for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
        content = header + b"".join(body[a:b])
        if k == 1:
            (where / f"part-{k:02d}.csv.gz").write_bytes(gzip.compress(content))
        else:
            (where / f"part-{k:02d}.csv").write_bytes(content)
    (where / "notes.txt").write_text("not a part")
    return where


def _multiset(prepared) -> dict:
    rows = np.stack([np.ascontiguousarray(v).view(np.int64) for _, v in sorted(prepared.distinct.items())], axis=1)
    out: dict = {}
    for r, c in zip(map(tuple, rows), prepared.counts):
        if c:
            out[r] = out.get(r, 0) + int(c)
    return out


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("parts")
    spec_path = fx.fast_spec(tmp / "fast.yaml")
    single = fx.example_registry(tmp / "registry.csv", 6000, 11)
    parts = _split(single, tmp / "parts", [1500, 3700])
    return tmp, spec_path, single, parts


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as c:
        yield c


def test_parts_are_the_csv_files_in_name_order(registry, tmp_path):
    _, _, single, parts = registry
    assert [p.name for p in registry_parts(parts)] == ["part-00.csv", "part-01.csv.gz", "part-02.csv"]
    assert registry_parts(single) == [single]
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="has none"):
        registry_parts(tmp_path / "empty")
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.csv").write_text("x\n")
    (d / "._a.csv").write_text("resource fork\n")             # hidden: not a part
    assert [p.name for p in registry_parts(d)] == ["a.csv"]
    (d / "a.csv.gz").write_bytes(gzip.compress(b"x\n"))
    with pytest.raises(InputError, match="both parts"):
        registry_parts(d)


def test_part_paths_are_absolute(registry, monkeypatch):
    _, _, _, parts = registry
    monkeypatch.chdir(parts.parent)
    got = registry_parts(Path(parts.name))
    assert all(p.is_absolute() and p.exists() for p in got) and len(got) == 3


@pytest.mark.parametrize("policy", ["declared_public", "dp_count"])
def test_local_and_cluster_preparation_give_the_single_files_counts(registry, cluster, tmp_path, policy):
    _, _, single, parts = registry
    spec = load_spec(fx.fast_spec(tmp_path / "spec.yaml", policy))
    one = prepare(single, spec)
    here = prepare_parts(parts, spec)
    there = prepare_parts(parts, spec, scheduler=cluster.scheduler_address)
    for p in (here, there):
        assert (p.n, p.rows_read, p.dropped_by, p.dropped_total) == \
            (one.n, one.rows_read, one.dropped_by, one.dropped_total)
        assert _multiset(p) == _multiset(one)
        assert table_fingerprint(p, spec) == table_fingerprint(one, spec)
        if policy == "dp_count":     # the records in the file's order (the resize depends on it)
            a, b = p.table, one.table
            assert all(np.array_equal(a[k].view(np.int64), b[k].view(np.int64)) for k in a)
    assert here.sha256 == there.sha256 != one.sha256      # the parts' own hash


def test_a_bad_part_is_named_with_its_line_from_the_cluster(registry, cluster, tmp_path):
    _, spec_path, single, _ = registry
    parts = _split(single, tmp_path / "bad", [1000])
    p1 = parts / "part-00.csv"
    lines = p1.read_text().splitlines()
    cells = lines[5].split(",")
    cells[0] = "999"                                   # mother's age outside the input range
    lines[5] = ",".join(cells)
    p1.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as exc:
        prepare_parts(parts, load_spec(spec_path), show_values=False, scheduler=cluster.scheduler_address)
    assert "part-00.csv" in str(exc.value) and "line 6" in str(exc.value) and "999" not in str(exc.value)


@pytest.mark.parametrize("policy", ["declared_public", "dp_count"])
def test_a_release_from_parts_on_the_cluster_replays_from_the_single_file(registry, cluster, tmp_path, policy):
    """Same transcript, same bundle: the enclave replay of the cluster-prepared bundle against
    the concatenated file reproduces data.csv byte for byte (and the DP count's resize)."""
    from typer.testing import CliRunner

    from dpbundle.audit.runner import run_audit
    from dpbundle.release.cli.main import app

    _, _, single, parts = registry
    spec_path = fx.fast_spec(tmp_path / "spec.yaml", policy)
    runner = CliRunner()
    assert runner.invoke(app, ["keygen", "--out", str(tmp_path / "k")]).exit_code == 0
    res = runner.invoke(app, ["release", str(spec_path), str(parts), "--out", str(tmp_path / "B"),
                              "--key", str(tmp_path / "k.key"), "--ledger", str(tmp_path / "ledger.jsonl"),
                              "--transcript", str(tmp_path / "t.jsonl"), "--scheduler", cluster.scheduler_address])
    assert res.exit_code == 0, res.output
    for data in (single, parts):          # the concatenated file, and the parts themselves
        rep = run_audit(tmp_path / "B", pubkey=tmp_path / "k.pub", transcript=tmp_path / "t.jsonl", data=data)
        failed = {c.check: c.problems for c in rep.checks if c.failed}
        assert failed == {}, failed
        assert rep.get("replay").result == "pass"


def test_an_unreachable_scheduler_is_a_clear_error_before_any_spend(registry, tmp_path):
    from typer.testing import CliRunner

    from dpbundle.release.cli.main import app

    _, spec_path, _, parts = registry
    runner = CliRunner()
    assert runner.invoke(app, ["keygen", "--out", str(tmp_path / "k")]).exit_code == 0
    res = runner.invoke(app, ["release", str(spec_path), str(parts), "--out", str(tmp_path / "B"),
                              "--key", str(tmp_path / "k.key"), "--ledger", str(tmp_path / "ledger.jsonl"),
                              "--scheduler", "tcp://127.0.0.1:9"])
    assert res.exit_code == 2, res.output
    assert "cannot use the Dask cluster" in res.output and "nothing was spent" in res.output
    assert not (tmp_path / "ledger.jsonl").exists() and not (tmp_path / "B").exists()


def test_a_cluster_without_workers_is_refused_before_any_spend(registry, tmp_path):
    from dpbundle.release.data.parts import ClusterError

    _, spec_path, _, parts = registry
    with distributed.LocalCluster(n_workers=0, processes=True, dashboard_address=None,
                                  host="127.0.0.1") as empty:
        with pytest.raises(ClusterError, match="no workers"):
            prepare_parts(parts, load_spec(spec_path), scheduler=empty.scheduler_address)


def test_spec_validate_reads_a_directory_of_parts(registry):
    from typer.testing import CliRunner

    from dpbundle.release.cli.main import app

    _, spec_path, single, parts = registry
    runner = CliRunner()
    one = runner.invoke(app, ["spec", "validate", str(spec_path), "--data", str(single)], env={"COLUMNS": "200"})
    many = runner.invoke(app, ["spec", "validate", str(spec_path), "--data", str(parts)], env={"COLUMNS": "200"})
    assert one.exit_code == many.exit_code == 0, many.output
    rows = [line for line in many.output.splitlines() if "rows read" in line or "plausible" in line]
    assert rows and all(line in one.output for line in rows)
