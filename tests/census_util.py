"""The census walkthrough of docs/spec.md ("A census table: what the datasheet says"): its spec,
read from the page, and a simulated census extract in its input format (no real person)."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "spec.md"


def census_spec_text() -> str:
    """The YAML block of docs/spec.md that starts with ``# spec: census walkthrough``."""
    m = re.search(r"```yaml\n(# spec: census walkthrough\n.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert m, "docs/spec.md lost its census walkthrough spec"
    return m.group(1)


def census_spec() -> dict:
    return yaml.safe_load(census_spec_text())


def simulate_census(path: Path, n: int = 20000, seed: int = 21) -> Path:
    """A census-like extract: age code (age - 16), sex, education-num, hours-per-week, income
    class, with income depending on schooling, hours, age and sex."""
    rng = np.random.default_rng(seed)
    age = rng.integers(17, 91, size=n)
    sex = rng.choice(["Male", "Female"], size=n, p=[0.52, 0.48])
    school = np.clip(np.rint(rng.normal(10, 2.5, size=n)), 1, 16).astype(int)
    hours = np.clip(np.rint(rng.normal(np.where(sex == "Male", 42, 36), 11)), 1, 99).astype(int)
    hours = np.where(age > 65, np.clip(hours - 15, 1, 99), hours)
    logit = -7 + 0.35 * school + 0.04 * hours + 0.03 * np.minimum(age, 60) - 0.6 * (sex == "Female")
    income = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), ">50K", "<=50K")
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["age code", "sex", "education-num", "hours-per-week", "income"])
        for row in zip(age - 16, sex, school, hours, income):
            w.writerow(row)
    return path
