"""Issue 38: a sweep on a Dask cluster whose worker is lost (as a nanny restarts a worker above
its memory limit) stops with a clear error instead of recording every later run as cancelled;
the runs finished before are kept and the same command resumes."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from conftest import small_births_doc
from test_sweep import StandIn, calls

from dpbundle.release.sweep.request import SweepError
from dpbundle.release.sweep.run import run_sweep
from dpbundle.release.sweep.store import read_runs


class DiesOnThirdCall(StandIn):
    """The stand-in iteration, whose worker process ends abruptly on the third call overall (the
    calls are counted in the log file): what a worker killed above its memory limit looks like."""

    def __call__(self, prepared, spec, config, rand):
        if self.log and len(calls(Path(self.log))) >= 2 and not os.environ.get("I38_SURVIVE"):
            os._exit(3)
        return super().__call__(prepared, spec, config, rand)


def test_a_lost_worker_stops_the_sweep_with_a_clear_error_and_keeps_the_finished_runs(tmp_path):
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    from dpbundle.release.data.example import write_example

    data = tmp_path / "public.csv"
    write_example(data, rows=1200, seed=7)
    spec = tmp_path / "small.yaml"
    spec.write_text(yaml.safe_dump(small_births_doc([0.25, 0.5]), sort_keys=False), "utf-8")
    me = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(me)
    cloudpickle.register_pickle_by_value(sys.modules["test_sweep"])
    log = tmp_path / "calls.log"
    out = tmp_path / "S"
    try:
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                      dashboard_address=None, host="127.0.0.1") as cluster:
            with pytest.raises(SweepError, match="was lost while the sweep ran") as err:
                run_sweep(spec, data, out, reps=1, max_reps=1, sample=6, scheduler=cluster.scheduler_address,
                          iteration=DiesOnThirdCall(str(log)), progress=False, report=False, utility="none")
            assert "run the same command again to resume" in str(err.value)
            runs = read_runs(out)
            assert 1 <= len(runs) <= 2 and all(r["error"] is None for r in runs.values())
    finally:
        cloudpickle.unregister_pickle_by_value(me)
        cloudpickle.unregister_pickle_by_value(sys.modules["test_sweep"])
