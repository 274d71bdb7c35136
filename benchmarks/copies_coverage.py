"""How often the intervals of m synthetic copies (``dpbundle sample --copies``) cover a known truth.

Each replication builds a registry, fits the generator on it (OpenDP noise, as the release does),
draws m copies from the posterior of its measured tables (``mechanisms/copies.py``: the
generator's own estimator, then the face-privacy projection at the example spec's first
``min_count``: persons 2, ACS 1) and combines, per estimand, the m
estimates with the rules of docs/reading-the-data.md. It counts how often the interval holds

- the registry's own value ("registry": the value in the records the generator was fitted on),
- the population's value ("population": the registry is a random sample of it),

for shares of the values of every column, of the cells of every pair of columns that one measured
table holds, neither read in groups ("modelled pairs": a margin of the table), and of the cells of
pairs that no measured table holds together ("unmodelled pairs": no interval promise; shown so
the docs can say what the copies cannot do). Estimands with a true share under 2%
are left out (see docs/reading-the-data.md on rare cells). "one copy" is the usual 95% interval
computed on a single copy as if it were the registry: what a user who ignores the DP noise gets.

Not simulated here (``dpbundle sample --copies`` does them): the records policy ``dp_count`` (the
registry's n is taken as public, so no copy redraws it, and totals are not measured) and the
synthetic constraints (their filter is the same for every copy).

Registries: ``persons`` simulates a new registry per replication from the built-in example's
model (population: 400,000 simulated records); ``--acs PATH`` (an ACS excerpt of the format of
examples/acs-excerpt-eps1.yaml, e.g. the NIST Massachusetts excerpt) takes the file as the
registry, and for the population target a bootstrap sample of it (the file is then the
population). ``acs-like`` (the tests) simulates a table in the excerpt's format.

    python benchmarks/copies_coverage.py --registry persons --generator privbayes --reps 200
    python benchmarks/copies_coverage.py --registry acs --acs ma2019.csv --generator privsyn
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("registry", "population")
GROUPS = ("one-way", "modelled pairs", "unmodelled pairs", "one copy", "one-way, RRR's rule")
MIN_SHARE = 0.02
GENERATORS = {"privbayes": {"epsilon_split": 0.25, "theta": 8}, "mst_pure": {},
              "privsyn": {"estimator": "hierarchical", "select_rule": "top", "max_pairs": 8}}


def acs_like_csv(rows: int, seed: int) -> bytes:
    """A table in the input format of examples/acs-excerpt-eps1.yaml with dependent columns and
    "N" where the dictionary says not applicable (the excerpts are not shipped)."""
    rng = np.random.default_rng(seed)
    age = rng.integers(0, 100, size=rows)
    sex = rng.integers(1, 3, size=rows)
    own = np.where(rng.random(rows) < np.where(age >= 40, 0.7, 0.35), 1, 2)
    edu = np.clip(np.round(age / 6 + rng.normal(0, 2, rows)), 1, 12).astype(int)
    dec = np.clip(np.round(edu * 0.6 + rng.normal(0, 2, rows)), 0, 9).astype(int)
    race = rng.choice(9, size=rows, p=[.6, .12, .01, .01, .01, .12, .01, .05, .07]) + 1
    msp = rng.integers(1, 7, size=rows)
    dvet = rng.choice(np.array(["N", "1", "2"]), size=rows, p=[0.9, 0.05, 0.05])
    deye = np.where(rng.random(rows) < 0.03, 1, 2)
    na = np.array("N", dtype=object)
    cols = [age, sex, np.where(age >= 15, msp.astype(str), na), race, np.ones(rows, dtype=int), own,
            np.where(age >= 3, edu.astype(str), na), np.where(age >= 15, dec.astype(str), na), dvet, deye]
    lines = [",".join(["AGEP", "SEX", "MSP", "RAC1P", "HOUSING_TYPE", "OWN_RENT", "EDU", "PINCP_DECILE",
                       "DVET", "DEYE"])]
    lines += [",".join(map(str, r)) for r in zip(*cols)]
    return ("\n".join(lines) + "\n").encode()


@dataclass
class Tally:
    """Hits and trials per (group, target), and interval widths."""

    hits: dict = field(default_factory=dict)
    widths: dict = field(default_factory=dict)

    def add(self, group: str, target: str, hit: bool, width: float) -> None:
        key = (group, target)
        self.hits.setdefault(key, []).append(bool(hit))
        self.widths.setdefault(key, []).append(float(width))

    def rate(self, group: str, target: str) -> float:
        v = self.hits.get((group, target), [])
        return float(np.mean(v)) if v else float("nan")

    def count(self, group: str, target: str) -> int:
        return len(self.hits.get((group, target), []))

    def width(self, group: str, target: str) -> float:
        """The median width (RRR's rule has intervals of astronomical width when its degrees of
        freedom collapse: a mean would say nothing)."""
        v = self.widths.get((group, target), [])
        return float(np.median(v)) if v else float("nan")


class Setting:
    """The spec (first alternative of every column), the configuration and the coding."""

    def __init__(self, example: str) -> None:
        from dpbundle.release.spec.load import load_spec

        doc = yaml.safe_load((ROOT / "examples" / example).read_text())
        for c in doc["columns"]:
            c["alternatives"] = c["alternatives"][:1]
        self.tmp = Path(tempfile.mkdtemp(prefix="dpbundle-coverage-"))
        (self.tmp / "spec.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        self.spec = load_spec(self.tmp / "spec.yaml")
        self.config = {"columns": {c["name"]: c["alternatives"][0]["id"] for c in doc["columns"]}}
        self.min_count = int(doc["projection"]["min_count"][0])   # the example's first value

    def codes(self, data: bytes) -> np.ndarray:
        """The registry's codes under the configuration (the release's reading and coding)."""
        from dpbundle.release.data.prepare import prepare
        from dpbundle.release.data.transform import transform

        path = self.tmp / "registry.csv"
        path.write_bytes(data)
        return transform(prepare(path, self.spec, show_values=False), self.spec, self.config).codes


def _shares(codes: np.ndarray, cols: tuple[int, ...], sizes: tuple[int, ...]) -> np.ndarray:
    idx = np.zeros(len(codes), dtype=np.int64)
    for c, k in zip(cols, sizes):
        idx = idx * k + codes[:, c]
    return np.bincount(idx, minlength=math.prod(sizes)) / max(len(codes), 1)


def estimands(registry: np.ndarray, domain: list[int], pairs: list[tuple[int, int]],
              unmodelled: list[tuple[int, int]]) -> list[tuple[str, tuple[int, ...], int]]:
    """(group, columns, cell) of every share of at least MIN_SHARE in the registry."""
    out = []
    for group, sets in (("one-way", [(j,) for j in range(len(domain))]), ("modelled pairs", pairs),
                        ("unmodelled pairs", unmodelled)):
        for cols in sets:
            p = _shares(registry, cols, tuple(domain[c] for c in cols))
            out += [(group, cols, int(cell)) for cell in np.flatnonzero(p >= MIN_SHARE)]
    return out


def replicate(tally: Tally, registry: np.ndarray, population: np.ndarray | None, domain: list[int],
              generator_type: str, epsilon: float, m: int, min_count: int, seed: int,
              hyper: dict | None = None) -> None:
    """One replication (module docstring): fit, m copies, combine, count."""
    from scipy.stats import norm

    from dpbundle.mechanisms.copies import combine, posterior_model
    from dpbundle.mechanisms.generators import make_generator
    from dpbundle.mechanisms.measured import measured_of
    from dpbundle.mechanisms.noise import Randomness
    from dpbundle.mechanisms.projection import project

    gen = make_generator(generator_type, epsilon, **(GENERATORS[generator_type] if hyper is None else hyper))
    n = len(registry)
    tables = measured_of(gen.fit(registry, domain, Randomness()))
    # modelled: two columns of one measured table, neither read in groups (a marginal of the
    # table's cells); not measured: two columns that no table holds together
    pairs = sorted({tuple(sorted((a, b))) for t in tables for i, (a, ga) in enumerate(zip(t.columns, t.merge))
                    for b, gb in list(zip(t.columns, t.merge))[i + 1:] if ga == gb == 1})
    measured_pairs = {tuple(sorted((a, b))) for t in tables for a in t.columns for b in t.columns if a != b}
    rng = np.random.default_rng(seed)
    unmodelled = [(a, b) for a in range(len(domain)) for b in range(a + 1, len(domain))
                  if (a, b) not in measured_pairs and domain[a] * domain[b] <= 200]
    unmodelled = [unmodelled[i] for i in rng.permutation(len(unmodelled))[:4]]
    todo = estimands(registry, domain, pairs, unmodelled)
    q = np.zeros((m, len(todo)))
    u = np.zeros((m, len(todo)))
    for i in range(m):
        model = posterior_model(gen, tables, domain, n, rng)
        copy = project(model.sample(n, rng), min_count, rng)
        for e, (group, cols, cell) in enumerate(todo):
            p = _shares(copy, cols, tuple(domain[c] for c in cols))[cell]
            q[i, e], u[i, e] = p, p * (1 - p) / len(copy)
    z = norm.ppf(0.975)
    for e, (group, cols, cell) in enumerate(todo):
        sizes = tuple(domain[c] for c in cols)
        truth = {"registry": _shares(registry, cols, sizes)[cell]}
        if population is not None:
            truth["population"] = _shares(population, cols, sizes)[cell]
        for target, value in truth.items():
            c = combine(q[:, e], u[:, e], target=target)
            tally.add(group, target, c.lower <= value <= c.upper, c.upper - c.lower)
        if group == "one-way":
            half = z * math.sqrt(u[0, e])
            tally.add("one copy", "registry", abs(q[0, e] - truth["registry"]) <= half, 2 * half)
            half = _rrr_half_width(q[:, e], u[:, e])
            tally.add("one-way, RRR's rule", "registry", abs(q[:, e].mean() - truth["registry"]) <= half, 2 * half)


def _rrr_half_width(q: np.ndarray, u: np.ndarray) -> float:
    """Raghunathan, Reiter and Rubin's (2003) fully synthetic rule, for comparison: T_f = (1 +
    1/m) b - ū with nu = (m - 1)(1 - ū / ((1 + 1/m) b))^2; where T_f <= 0, Reiter's (2002)
    fallback ū with m - 1 degrees of freedom."""
    from scipy.stats import t

    m = len(q)
    between, ubar = (1 + 1 / m) * q.var(ddof=1), u.mean()
    if between - ubar <= 0:
        return float(t.ppf(0.975, m - 1) * math.sqrt(ubar))
    nu = (m - 1) * (1 - ubar / between) ** 2
    return float(t.ppf(0.975, nu) * math.sqrt(between - ubar))


def run(registry: str, generator_type: str, epsilon: float, reps: int, m: int, *, rows: int = 6000,
        acs: Path | None = None, target: str = "registry", min_count: int | None = None, progress: bool = False,
        hyper: dict | None = None) -> Tally:
    """``reps`` replications (module docstring); ``target`` "population" draws every registry
    from a population (for ``acs``: a bootstrap sample of the file) and counts both targets."""
    from dpbundle.release.data.example import example_csv

    example = "persons.yaml" if registry == "persons" else "acs-excerpt-eps1.yaml"
    setting = Setting(example)
    min_count = setting.min_count if min_count is None else min_count
    tally = Tally()
    if registry == "persons":
        population = setting.codes(example_csv("persons", 400_000, 7)) if target == "population" else None
    elif registry == "acs":
        population = setting.codes(Path(acs).read_bytes())
    else:
        population = setting.codes(acs_like_csv(200_000, 7)) if target == "population" else None
    domain = [c.size for c in _columns(setting)]
    t0 = time.time()
    for r in range(reps):
        rng = np.random.default_rng(10_000 + r)
        if registry == "persons":
            reg = setting.codes(example_csv("persons", rows, 1000 + r))
        elif registry == "acs":
            reg = population if target == "registry" else population[rng.integers(0, len(population), len(population))]
        else:
            reg = setting.codes(acs_like_csv(rows, 1000 + r))
        replicate(tally, reg, population, domain, generator_type, epsilon, m, min_count, seed=r, hyper=hyper)
        if progress and (r + 1) % 20 == 0:
            print(f"  {r + 1}/{reps} replications, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return tally


def _columns(setting: Setting):
    from dpbundle.release.spec.coding import column_coding

    return [column_coding(setting.spec, name, alt) for name, alt in setting.config["columns"].items()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--registry", choices=["persons", "acs", "acs-like"], default="persons")
    ap.add_argument("--acs", type=Path, help="an ACS excerpt CSV (with --registry acs)")
    ap.add_argument("--generator", choices=sorted(GENERATORS), default="privbayes")
    ap.add_argument("--epsilon", type=float, default=0.9, help="the generator's epsilon")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--copies", type=int, default=5)
    ap.add_argument("--target", choices=KINDS, default="population")
    ap.add_argument("--hyper", help="the generator's hyperparameters as JSON (default: GENERATORS[generator])")
    a = ap.parse_args(argv)
    if a.registry == "acs" and a.acs is None:
        ap.error("--registry acs needs --acs PATH")
    t0 = time.time()
    hyper = json.loads(a.hyper) if a.hyper else None
    tally = run(a.registry, a.generator, a.epsilon, a.reps, a.copies, acs=a.acs, target=a.target, progress=True,
                hyper=hyper)
    shown = GENERATORS[a.generator] if hyper is None else hyper
    print(f"{a.registry}, {a.generator} {json.dumps(shown)}, epsilon {a.epsilon}, m = {a.copies}, {a.reps} replications "
          f"({time.time() - t0:.0f} s)")
    print(f"| estimands | target | intervals | coverage | median width |\n|---|---|---:|---:|---:|")
    for group in GROUPS:
        for target in KINDS:
            if tally.count(group, target):
                print(f"| {group} | {target} | {tally.count(group, target):,} | "
                      f"{tally.rate(group, target):.1%} | {tally.width(group, target):.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
