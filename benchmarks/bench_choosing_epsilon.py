"""Workload error of the births lists at 9.98, 4.98 and 3.0 (docs/choosing-epsilon.md, issue 25).

For each spec and its shipped narrowed list, every configuration of the list is fitted once at
the spec's generation epsilon on the public 160k sample and sampled (n rows); the table gives
the mean over the list's configurations of the largest and the mean |share difference| over all
cells of all 1-, 2- and 3-way marginals (bench_side_by_side.workload_error). Each list is
measured in its own released columns, so lists with coarser bins have fewer, larger cells.

    python benchmarks/bench_choosing_epsilon.py
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_side_by_side import ROOT, environment, workload_error  # noqa: E402

CASES = (("births-recommended.yaml", "births-recommended-narrowed-nvss160k.yaml"),
         ("births-eps5.yaml", "births-eps5-narrowed-nvss160k.yaml"),
         ("births-eps3.yaml", "births-eps3-narrowed-nvss160k.yaml"))


def main() -> None:
    from dpbundle.mechanisms.noise import Randomness
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.data.transform import transform
    from dpbundle.release.scheme.iteration import make_config_generator
    from dpbundle.release.spec.load import load_spec

    data = ROOT / "examples" / "data" / "nvss2019_singleton_160k.csv.gz"
    print(f"# Workload error of the births lists\n\n{environment()}\n")
    print("| spec | total epsilon | generation epsilon | configurations | 1-way err max / mean "
          "| 2-way err max / mean | 3-way err max / mean |")
    print("|---|---|---|---|---|---|---|")
    for spec_name, list_name in CASES:
        spec = load_spec(ROOT / "examples" / spec_name)
        prepared = prepare(data, spec)
        listed = yaml.safe_load((ROOT / "examples" / list_name).read_text())["configurations"]
        errs = []
        for entry in listed:
            config = entry["config"]
            real = transform(prepared, spec, config)
            model = make_config_generator(spec, config).fit(real.codes, real.domain, Randomness())
            synth = model.sample(real.n, np.random.default_rng())
            errs.append(workload_error(real.codes, synth, real.domain))
        cells = [f"{statistics.mean(e[k][0] for e in errs):.4f} / {statistics.mean(e[k][1] for e in errs):.5f}"
                 for k in (1, 2, 3)]
        print(f"| {spec_name} | {spec.total_epsilon:g} | {spec.epsilon_generation:g} | {len(listed)} | "
              + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
