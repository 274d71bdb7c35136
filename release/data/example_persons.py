"""Built-in example data: a SIMULATED labour-force-style registry of employed persons
(`dpbundle example persons`).

The rows are drawn from a chain of conditional tables (a small Bayesian network) whose
parameters are approximate, rounded PUBLIC AGGREGATE figures of the US labour force (BLS / Census
published tables; release/data/persons_example_model.json names them under `sources`). No row
describes a real person. The CSV exercises the spec language: headers with spaces and special
characters, integer-coded categories (sex 1/2, education 1..9, marital status 1..5 with 9 =
unknown), a numeric column with its own missing marker (hours -4 = "hours vary"), a country of
birth with many values, and a date of birth from which the spec derives the age.

Network (age band = the model's `age_bands`): sex ~ Bernoulli; age ~ Cat (years); region of birth
| age band; country | region; education | age band, region (x a degree tilt by sex); marital
status | age band; occupation | sex, education group; hours | sex, occupation (part-time share,
then a band, then a whole hour with heaping on multiples of 5); annual earnings = lognormal with
mu from education, sex, occupation, age band and hours, reported as a band. Recording errors at
the model's rates (education or marital code replaced at random, hours 0) make the rows that
fail the persons spec's raw constraints, like a real registry.
"""
from __future__ import annotations

import json
from datetime import date
from functools import lru_cache
from importlib.resources import files

import numpy as np

DEFAULT_ROWS = 45_000
DEFAULT_SEED = 2023
# CSV header texts, in file order
HEADERS = ("date of birth", "sex", "education", "marital status", "occupation group", "hours per week",
           "income band (USD/yr)", "country of birth")


@lru_cache(maxsize=1)
def load_model() -> dict:
    """The parameter table of the persons example (package data)."""
    text = files("dpbundle.release").joinpath("data/persons_example_model.json").read_text("utf-8")
    return json.loads(text)


def _draw(rng: np.random.Generator, weights, size: int) -> np.ndarray:
    """Indices drawn with probabilities proportional to weights."""
    p = np.asarray(weights, dtype=float)
    return rng.choice(len(p), size=size, p=p / p.sum())


def _draw_rows(rng: np.random.Generator, table: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Index j drawn with probability table[row[i], j] / sum_j (inverse CDF, vectorised)."""
    t = np.asarray(table, dtype=float)
    cdf = np.cumsum(t / t.sum(axis=1, keepdims=True), axis=1)
    cdf[:, -1] = 1.0
    u = rng.random(len(row))
    return np.minimum((cdf[row] <= u[:, None]).sum(axis=1), t.shape[1] - 1)


def _ages(rng: np.random.Generator, m: dict, rows: int) -> np.ndarray:
    """Whole years: an age group by its count, then a year uniformly inside it."""
    groups = np.asarray(m["age"]["groups"])
    g = _draw(rng, m["age"]["counts"], rows)
    lo, hi = groups[g, 0], groups[g, 1]
    return lo + np.floor(rng.random(rows) * (hi - lo + 1)).astype(np.int64)


def _birth_dates(rng: np.random.Generator, age: np.ndarray, reference: date) -> np.ndarray:
    """ISO dates of birth such that the whole years completed at `reference` equal `age`."""
    # the last birthday falls within the year before the reference date (inclusive of the reference day)
    # latest[a] = the reference day a years earlier: the latest date of birth of someone aged a
    latest = np.array([np.datetime64(date(reference.year - a, reference.month, reference.day).isoformat(), "D")
                       for a in range(0, 120)])
    span = (latest[:-1] - latest[1:]).astype(np.int64)  # the dates of birth of age a: (latest[a+1], latest[a]]
    days_back = np.floor(rng.random(len(age)) * span[age]).astype(np.int64)
    return latest[age] - days_back.astype("timedelta64[D]")


def _education(rng: np.random.Generator, m: dict, age: np.ndarray, region: np.ndarray, female: np.ndarray) -> np.ndarray:
    """Education codes 1..9 by age band, region of birth and sex (with recording errors)."""
    e = m["education"]
    adult = np.asarray(e["percent_25plus_by_region"], dtype=float)
    # one row per (table, sex): tables 0..3 = regions (25+), 4 = ages 16-21, 5 = ages 22-24
    tables = np.vstack([adult, e["percent_16_21"], e["percent_22_24"]])
    tilt = np.ones((2, 9))
    tilt[0, 5:] = e["sex_tilt_degree"]["male"]
    tilt[1, 5:] = e["sex_tilt_degree"]["female"]
    full = np.vstack([tables * tilt[0], tables * tilt[1]])  # index = sex * 6 + table
    table = np.where(age < 22, 4, np.where(age < 25, 5, region))
    code = _draw_rows(rng, full, female.astype(np.int64) * 6 + table) + 1
    err = rng.random(len(age)) < e["error_rate"]
    code[err] = rng.integers(1, 10, size=int(err.sum()))
    return code


def _marital(rng: np.random.Generator, m: dict, band: np.ndarray) -> np.ndarray:
    """Marital codes 1..5 by age band; some recorded as the unknown code, some at random."""
    ms = m["marital_status"]
    code = _draw_rows(rng, ms["percent_by_age_band"], band) + 1
    err = rng.random(len(band)) < ms["error_rate"]
    code[err] = rng.integers(1, 6, size=int(err.sum()))
    code[rng.random(len(band)) < ms["unknown_rate"]] = ms["unknown_code"]
    return code


def _hours(rng: np.random.Generator, m: dict, female: np.ndarray, occ: np.ndarray) -> np.ndarray:
    """Usual weekly hours: part-time or not by sex and occupation, a band, then a whole hour."""
    h = m["hours"]
    n = len(occ)
    pt_share = np.array([h["part_time_share"]["male"], h["part_time_share"]["female"]])[female.astype(int), occ]
    part = rng.random(n) < pt_share
    bands = np.array(h["part_time_bands"] + h["full_time_bands"])
    n_pt = len(h["part_time_bands"])
    pt_band = _draw(rng, h["part_time_band_shares"], n)
    ft_band = _draw_rows(rng, h["full_time_band_shares_by_occupation"], occ) + n_pt
    band = np.where(part, pt_band, ft_band)
    hours = np.empty(n, dtype=np.int64)
    for b, (lo, hi) in enumerate(bands):
        rows = np.flatnonzero(band == b)
        values = np.arange(lo, hi + 1)
        weights = np.where(values % 5 == 0, h["heaping_weight"], 1.0)
        hours[rows] = values[_draw(rng, weights, len(rows))]
    hours[rng.random(n) < h["zero_rate"]] = 0
    hours[rng.random(n) < h["vary_rate"]] = h["vary_code"]
    return hours


def _earnings_band(rng: np.random.Generator, m: dict, edu: np.ndarray, female: np.ndarray, occ: np.ndarray,
                   band: np.ndarray, hours: np.ndarray) -> np.ndarray:
    """Index of the annual earnings band: lognormal with a mean log from the parents."""
    e = m["earnings"]
    mu = np.log(52.0 * np.asarray(e["weekly_median_by_education"], dtype=float)[edu - 1])
    mu += np.where(female, e["sex_log_shift"]["female"], e["sex_log_shift"]["male"])
    mu += np.asarray(e["occupation_log_shift"])[occ] + np.asarray(e["age_band_log_shift"])[band]
    h = np.clip(np.where(hours > 0, hours, 40), 1, None) / 40.0  # 'vary' and 0 hours: as full time
    mu += np.where(h < 1, e["hours_elasticity_below_40"], e["hours_elasticity_above_40"]) * np.log(h)
    annual = np.exp(mu + e["log_sd"] * rng.standard_normal(len(edu)))
    return np.searchsorted(np.asarray(e["band_edges"], dtype=float), annual, side="right")


def simulate(rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED, model: dict | None = None,
             rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
    """Simulated persons as a dict of columns (deterministic for a seed).

    Keys: date_of_birth (datetime64[D]), age (years at the reference date), female (bool),
    education (1..9), marital (1..5, 9), occupation (index into the model's groups),
    hours (-4, 0..80), income (index into the earnings bands), country (name), region (index).
    """
    from dpbundle.release.data.example_errors import ExampleError

    if rows < 1:
        raise ExampleError(f"--rows: must be at least 1 (got {rows})")
    if seed < 0:
        raise ExampleError(f"--seed: must be a non-negative integer (got {seed})")
    m = load_model() if model is None else model
    rng = np.random.Generator(np.random.PCG64(seed)) if rng is None else rng
    reference = date.fromisoformat(m["reference_date"])
    female = rng.random(rows) < m["female_share"]
    age = _ages(rng, m, rows)
    band = np.searchsorted(np.asarray(m["age_bands"]["starts"]), age, side="right") - 1
    bp = m["birthplace"]
    foreign = rng.random(rows) < np.asarray(bp["foreign_share_by_age_band"])[band]
    region = np.where(foreign, _draw(rng, bp["foreign_region_shares"], rows) + 1, 0)
    country = np.full(rows, bp["regions"][0], dtype=object)
    for r, name in enumerate(bp["regions"][1:], start=1):
        rows_r = np.flatnonzero(region == r)
        names = list(bp["countries"][name])
        country[rows_r] = np.asarray(names, dtype=object)[_draw(rng, list(bp["countries"][name].values()), len(rows_r))]
    edu = _education(rng, m, age, region, female)
    marital = _marital(rng, m, band)
    groups = m["occupation"]["education_groups"]
    edu_group = np.zeros(10, dtype=np.int64)
    for g, codes in enumerate(groups.values()):
        edu_group[codes] = g
    occ_table = np.vstack([m["occupation"]["percent"]["male"], m["occupation"]["percent"]["female"]])
    occ = _draw_rows(rng, occ_table, female.astype(np.int64) * len(groups) + edu_group[edu])
    hours = _hours(rng, m, female, occ)
    income = _earnings_band(rng, m, edu, female, occ, band, hours)
    return {"date_of_birth": _birth_dates(rng, age, reference), "age": age, "female": female,
            "education": edu, "marital": marital, "occupation": occ, "hours": hours,
            "income": income, "country": country.astype(str), "region": region}


def _quote(text: str) -> str:
    """A CSV field (RFC 4180: quoted when it holds a comma, quote or line break)."""
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_bytes(cols: dict[str, np.ndarray], model: dict | None = None, header: bool = True) -> bytes:
    """The input-format CSV of the persons spec (header texts as in HEADERS, '\\n' line ends)."""
    m = load_model() if model is None else model
    occ_names = np.array(m["occupation"]["groups"])
    bands = np.array(m["earnings"]["bands"])
    parts = [np.datetime_as_string(cols["date_of_birth"], unit="D"),
             np.where(cols["female"], "2", "1"), cols["education"].astype(str), cols["marital"].astype(str),
             occ_names[cols["occupation"]], cols["hours"].astype(str), bands[cols["income"]],
             cols["country"].astype(str)]
    body = parts[0].astype(str)
    for p in parts[1:]:
        body = np.char.add(np.char.add(body, ","), np.asarray(p, dtype=str))
    head = ",".join(_quote(h) for h in HEADERS) + "\n" if header else ""
    return (head + "\n".join(body.tolist()) + "\n").encode("utf-8")


def example_bytes(rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED) -> bytes:
    """The CSV of a simulated persons registry."""
    return csv_bytes(simulate(rows, seed))

