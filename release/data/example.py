"""Built-in example data: a SIMULATED birth registry (`dpbundle example births`); the simulated
labour-force-style persons registry (`dpbundle example persons`) is in release/data/example_persons.py.

The rows are drawn from a small Bayesian network whose parameters are public figures
(release/data/births_example_model.json, estimated by examples/fit_example_model.py from the
US NVSS 2019 public-use natality sample; aggregated counts and summary figures only). No row
describes a real birth. Dates are 2014-MM-15 (month resolution), matching the births spec's
period.

Network: month ~ Cat; mother_age ~ Cat (years); parity | age band ~ Cat; true week | age band ~ Cat;
is_female ~ Bernoulli; birth_weight | true week, is_female = center + scale * r of the week's
group (r from a shared histogram of standardised residuals; whole grams); the recorded
gestation_week is the true week or, with the model's error rate, a week drawn from its error weights (a
recording error, which makes the rare implausible week/weight rows of real registries).

"""
from __future__ import annotations

import errno
import json
import os
import tempfile
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Iterator

import numpy as np
from dpbundle.release.data.example_errors import ExampleError  # noqa: F401  (also importable from here)

YEAR = 2014
DEFAULT_ROWS = 167_000
DEFAULT_SEED = 2014
EXAMPLES = ("births", "persons")
COLUMNS = ("mother_age", "parity", "gestation_week", "is_female", "birth_weight", "date_of_birth")
# the births spec's input ranges (examples/births.yaml `input.columns`); simulated values stay inside
INPUT_RANGES = {"mother_age": (10, 70), "parity": (1, 30), "gestation_week": (10, 50),
                "birth_weight": (100, 10000)}


MAX_ROWS = 1_000_000_000   # written CHUNK_ROWS at a time: about 30 GB of CSV (births) at the most
#: Rows simulated and written at a time (about 0.4-0.6 GB of memory). A file of at most this
#: many rows is the one simulation of its seed; a longer one continues, chunk k >= 1, with the
#: generator of SeedSequence(seed, spawn_key=(k,)): the same seed still gives the same file.
CHUNK_ROWS = 250_000


def check_rows(rows) -> int:
    """``rows`` as an int from 1 to :data:`MAX_ROWS`; ExampleError otherwise (before anything is
    simulated: a billion rows would end in a MemoryError after minutes)."""
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or not 1 <= int(rows) <= MAX_ROWS:
        raise ExampleError(f"--rows: must be a whole number from 1 to {MAX_ROWS:,} (got {rows!r})")
    return int(rows)


@lru_cache(maxsize=1)
def load_model() -> dict:
    """The parameter table of the births example (package data)."""
    text = files("dpbundle.release").joinpath("data/births_example_model.json").read_text("utf-8")
    return json.loads(text)


def _categorical(rng: np.random.Generator, counts, size: int) -> np.ndarray:
    """Indices drawn with probabilities proportional to counts."""
    p = np.asarray(counts, dtype=float)
    return rng.choice(len(p), size=size, p=p / p.sum())


def _conditional(rng: np.random.Generator, table, parent: np.ndarray) -> np.ndarray:
    """Indices drawn from table[parent[i]] (rows of counts), vectorised by inverse CDF."""
    t = np.asarray(table, dtype=float)
    cdf = np.cumsum(t / t.sum(axis=1, keepdims=True), axis=1)
    cdf[:, -1] = 1.0
    u = rng.random(len(parent))
    # count of cdf entries <= u in the parent's row
    idx = (cdf[parent] <= u[:, None]).sum(axis=1)
    return np.minimum(idx, t.shape[1] - 1)


def chunk_generator(seed: int, k: int) -> np.random.Generator:
    """The generator of chunk ``k`` of an example file of seed ``seed`` (see CHUNK_ROWS)."""
    if k == 0:
        return np.random.Generator(np.random.PCG64(seed))
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(k,))))


def simulate(rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED, model: dict | None = None,
             rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
    """Simulated births as a dict of columns (deterministic for a seed; ``rng``: draw from this
    generator instead of the seed's)."""
    rows = check_rows(rows)
    if seed < 0:
        raise ExampleError(f"--seed: must be a non-negative integer (got {seed})")
    m = load_model() if model is None else model
    rng = np.random.Generator(np.random.PCG64(seed)) if rng is None else rng
    month = _categorical(rng, m["month_counts"], rows) + 1
    age = _categorical(rng, m["mother_age"]["counts"], rows) + m["mother_age"]["min"]
    band = np.searchsorted(np.asarray(m["age_bands"]), age, side="right") - 1
    parity = _conditional(rng, m["parity"]["counts_by_age_band"], band) + m["parity"]["min"]
    week = _conditional(rng, m["gestation_week"]["counts_by_age_band"], band) + m["gestation_week"]["min"]
    female = rng.random(rows) < m["female_share"]

    bw = m["birth_weight"]
    groups = bw["groups"]
    starts = np.array([g["weeks"][0] for g in groups])
    gi = np.clip(np.searchsorted(starts, week, side="right") - 1, 0, len(groups) - 1)
    center = np.where(female, np.array([g["center_female"] for g in groups])[gi],
                      np.array([g["center_male"] for g in groups])[gi])
    scale = np.array([g["scale"] for g in groups])[gi]
    res = bw["residual_histogram"]
    r_bin = _categorical(rng, res["counts"], rows)
    weight = center + scale * (res["start"] + res["bin"] * (r_bin + rng.random(rows)))
    lo, hi = INPUT_RANGES["birth_weight"]
    weight = np.clip(np.rint(weight), lo, hi).astype(np.int64)
    # recording errors of the gestation week, at the weeks where the model places them
    g = m["gestation_week"]
    err = rng.random(rows) < g["error_rate"]
    week[err] = g["min"] + _categorical(rng, g["error_week_weights"], int(err.sum()))

    for name, col in (("mother_age", age), ("parity", parity), ("gestation_week", week)):
        lo, hi = INPUT_RANGES[name]
        np.clip(col, lo, hi, out=col)
    return {"mother_age": age.astype(np.int64), "parity": parity.astype(np.int64),
            "gestation_week": week.astype(np.int64), "is_female": female,
            "birth_weight": weight, "month": month.astype(np.int64)}


def _integer_text(col: np.ndarray) -> np.ndarray:
    """Decimal texts of an integer column, by lookup in the texts of its range (object array)."""
    col = np.asarray(col, dtype=np.int64)
    lo, hi = int(col.min()), int(col.max())
    return np.array([str(i) for i in range(lo, hi + 1)], dtype=object)[col - lo]


def _csv_bytes(cols: dict[str, np.ndarray], header: bool = True) -> bytes:
    """The input-format CSV (header, True/False booleans, YYYY-MM-15 dates, '\\n' line ends)."""
    months = np.array([f"{YEAR}-{mo:02d}-15" for mo in range(1, 13)], dtype=object)
    sex = np.array(["False", "True"], dtype=object)
    parts = [_integer_text(cols["mother_age"]), _integer_text(cols["parity"]),
             _integer_text(cols["gestation_week"]), sex[cols["is_female"].astype(np.int64)],
             _integer_text(cols["birth_weight"]), months[cols["month"] - 1]]
    head = ",".join(COLUMNS) + "\n" if header else ""
    return (head + "\n".join(map(",".join, zip(*parts))) + "\n").encode("ascii")


def example_defaults(name: str) -> tuple[int, int]:
    """(default rows, default seed) of a built-in example."""
    if name == "persons":
        from dpbundle.release.data.example_persons import DEFAULT_ROWS as rows, DEFAULT_SEED as seed

        return rows, seed
    if name == "births":
        return DEFAULT_ROWS, DEFAULT_SEED
    raise ExampleError(f"unknown example {name!r}; choices: {', '.join(EXAMPLES)}")


def example_csv(name: str, rows: int, seed: int) -> bytes:
    """The CSV bytes of a built-in example (in memory: see :func:`example_blocks`)."""
    return b"".join(example_blocks(name, rows, seed))


def example_blocks(name: str, rows: int, seed: int) -> Iterator[bytes]:
    """The CSV of a built-in example, CHUNK_ROWS rows at a time (the header first)."""
    rows = check_rows(rows)
    if name == "persons":
        from dpbundle.release.data.example_persons import csv_bytes, simulate as simulate_persons

        def chunk(size: int, k: int) -> bytes:
            return csv_bytes(simulate_persons(size, seed, rng=chunk_generator(seed, k)), header=k == 0)
    else:
        example_defaults(name)  # refuses an unknown name

        def chunk(size: int, k: int) -> bytes:
            return _csv_bytes(simulate(size, seed, rng=chunk_generator(seed, k)), header=k == 0)
    if seed < 0:
        raise ExampleError(f"--seed: must be a non-negative integer (got {seed})")
    for k, start in enumerate(range(0, rows, CHUNK_ROWS)):
        yield chunk(min(CHUNK_ROWS, rows - start), k)


def write_example(out: Path, rows: int | None = None, seed: int | None = None, force: bool = False,
                  name: str = "births") -> int:
    """Write a simulated registry CSV (`name`: births or persons) to `out` atomically; return the
    number of rows. rows/seed default to the example's own defaults."""
    default_rows, default_seed = example_defaults(name)
    rows = default_rows if rows is None else rows
    seed = default_seed if seed is None else seed
    out = Path(out)
    rows = check_rows(rows)
    if (out.exists() or out.is_symlink()) and not force:
        raise ExampleError(f"{out}: file exists (use --force to overwrite)")
    if not out.parent.is_dir():
        raise ExampleError(f"{out}: directory {out.parent} does not exist")
    if out.is_dir():
        raise ExampleError(f"{out}: is a directory; give a file name")
    from dpbundle.release.common.safe_io import replace_problem

    problem = replace_problem(out, "the example registry")
    if problem:                      # never a device node, FIFO or link, even with --force
        raise ExampleError(problem)
    blocks = example_blocks(name, rows, seed)
    try:
        first = next(blocks)         # bad arguments fail here, before any file is made
    except MemoryError:
        raise ExampleError(f"--rows {rows:,}: not enough memory to simulate a chunk of {CHUNK_ROWS:,} rows") from None
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(first)
            for block in blocks:     # one chunk in memory at a time
                fh.write(block)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except MemoryError:
        Path(tmp).unlink(missing_ok=True)
        raise ExampleError(f"--rows {rows:,}: not enough memory to simulate a chunk of {CHUNK_ROWS:,} rows") from None
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.errno == errno.ENOSPC:
            raise ExampleError(f"{out}: no space left on the device for {rows:,} rows; nothing was written") from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return rows


