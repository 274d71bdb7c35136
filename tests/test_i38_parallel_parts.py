"""Issue 38 (reading at the speed of the disk): the parts of a registry read by parallel local
processes give the same prepared table as reading them one after the other, and a bad part's
error crosses the process whole (its line, column and rule; no value under show_values=False)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import audit_fixtures as fx

from dpbundle.release.data.parts import local_workers, prepare_parts
from dpbundle.release.data.prepare import InputError
from dpbundle.release.spec.load import load_spec


def _parts(tmp: Path, k: int = 3, rows: int = 1200) -> Path:
    from dpbundle.release.data.example import example_csv

    d = tmp / "parts"
    d.mkdir()
    for i in range(k):
        lines = example_csv("births", rows, 20 + i).decode().splitlines(keepends=True)
        (d / f"part-{i}.csv").write_text("".join(lines))
    return d


@pytest.mark.parametrize("policy", ["declared_public", "dp_count"])
def test_parallel_reading_gives_the_same_prepared_table(tmp_path, policy):
    spec = load_spec(fx.fast_spec(tmp_path / "spec.yaml", policy=policy))
    parts = _parts(tmp_path)
    one, two = prepare_parts(parts, spec, workers=1), prepare_parts(parts, spec, workers=2)
    assert one.n == two.n and one.rows_read == two.rows_read == 3600
    assert one.sha256 == two.sha256 and one.dropped_by == two.dropped_by
    for name in one.distinct:
        assert np.array_equal(one.distinct[name], two.distinct[name]), name
    assert np.array_equal(np.asarray(one.index), np.asarray(two.index))


def test_a_bad_part_fails_with_its_line_and_no_value(tmp_path):
    spec = load_spec(fx.fast_spec(tmp_path / "spec.yaml"))
    parts = _parts(tmp_path)
    bad = parts / "part-1.csv"
    lines = bad.read_text().splitlines(keepends=True)
    cells = lines[5].rstrip("\n").split(",")
    cells[1] = "SECRET-777"
    lines[5] = ",".join(cells) + "\n"
    bad.write_text("".join(lines))
    with pytest.raises(InputError) as caught:
        prepare_parts(parts, spec, show_values=False, workers=2)
    message = str(caught.value)
    assert "part-1.csv" in message and "line 6" in message and "SECRET-777" not in message


def test_small_or_single_parts_are_read_in_this_process(tmp_path, monkeypatch):
    import dpbundle.release.data.parts as parts_module

    parts = _parts(tmp_path, k=2, rows=100)
    paths = sorted(parts.iterdir())
    monkeypatch.setenv("DPBUNDLE_READ_WORKERS", "2")
    assert local_workers(paths) == 1                       # below PARALLEL_BYTES
    monkeypatch.setattr(parts_module, "PARALLEL_BYTES", 0)
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert local_workers(paths) == min(2, cores)           # as many as asked, at most the cores
    monkeypatch.delenv("DPBUNDLE_READ_WORKERS")
    assert local_workers(paths) == 1                       # one process unless the steward asks
    assert local_workers(paths[:1], workers=4) == 1        # one part
    assert local_workers(paths, workers=4) == 2            # at most one process per part
