"""One-off script: estimate the parameters of `dpbundle example births` from public data.

Source: the US NVSS 2019 public-use natality data (singleton births), as the 160,000-row sample
in examples/data/nvss2019_singleton_160k.csv.gz. Only aggregated counts and summary figures are
written (release/data/births_example_model.json); no row of the sample is shipped.

Model (a small Bayesian network):
    month          ~ Categorical(month_counts)
    mother_age     ~ Categorical(age_counts) over years
    parity         | age band        ~ Categorical(parity_counts[band])
    true week      | age band        ~ Categorical(gestation_counts[band]); these counts are the
                                       observed ones less the expected recording errors
    is_female      ~ Bernoulli(female_share)
    birth_weight   | true week, is_female = center[group, sex] + scale[group] * r, where
        group = a run of consecutive weeks with >= 200 rows. Before week 37, EM fits per group
        (1 - error_share) * Normal(center[sex], scale) + error_share * (pooled weight density),
        so that recording errors (mostly term births recorded at a preterm week) do not inflate
        center and scale; from week 37, where such errors look like the pooled density, center
        and scale are trimmed medians and 1.4826 * MAD (iterated, rows within 3 scales) and
        error_share is 0. r ~ the pooled histogram of standardised residuals of the rows more
        likely clean than not, within +-5 (bins of 0.1, uniform within a bin): one shared,
        skewed shape.
    recorded gestation_week = the true week, or with probability error_rate a week drawn with
        probabilities proportional to error_week_weights (a recording error: it gives the rare
        implausible weight/week combinations of real registries).
    error_week_weights[w] = expected number of rows recorded at week w by mistake (sum of the
        EM's error probabilities); error_rate = their sum / rows.

Usage: python examples/fit_example_model.py [DATA] [OUT]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE / "data" / "nvss2019_singleton_160k.csv.gz"
DEFAULT_OUT = HERE.parent / "release" / "data" / "births_example_model.json"

AGE_BANDS = [10, 20, 25, 30, 35, 40, 71]  # left-closed bands [10,20), [20,25), ..., [40,71)
MIN_GROUP_ROWS = 200
WEIGHT_BIN = 100
OUTLIER_Z = 5.0
TERM = 37  # weeks from which recording errors are not modelled (they are not identifiable)


def _counts(s: pd.Series, lo: int, hi: int) -> list[int]:
    """Counts of the integer values lo..hi (inclusive)."""
    return [int(c) for c in s.value_counts().reindex(range(lo, hi + 1), fill_value=0)]


def week_groups(weeks: pd.Series) -> list[list[int]]:
    """Runs of consecutive weeks holding at least MIN_GROUP_ROWS rows each (last run merged back)."""
    counts = weeks.value_counts().sort_index()
    groups: list[list[int]] = []
    cur: list[int] = []
    total = 0
    for w in range(int(counts.index.min()), int(counts.index.max()) + 1):
        cur.append(w)
        total += int(counts.get(w, 0))
        if total >= MIN_GROUP_ROWS:
            groups.append([cur[0], cur[-1]])
            cur, total = [], 0
    if cur:
        if groups:
            groups[-1][1] = cur[-1]
        else:
            groups.append([cur[0], cur[-1]])
    return groups


def _fit_mixture(w: np.ndarray, f: np.ndarray, h: np.ndarray) -> tuple[float, float, float, float, np.ndarray]:
    """EM for (1 - eps) Normal(center[sex], scale) + eps * h; returns cm, cf, scale, eps, resp."""
    cm, cf = float(np.median(w[~f])), float(np.median(w[f]))
    scale = float(1.4826 * np.median(np.abs(w - np.where(f, cf, cm))))
    eps = 0.1
    for _ in range(200):
        c = np.where(f, cf, cm)
        normal = np.exp(-0.5 * ((w - c) / scale) ** 2) / (scale * np.sqrt(2 * np.pi))
        resp = eps * h / (eps * h + (1 - eps) * normal + 1e-300)
        keep = 1 - resp
        cm = float(np.sum(keep * w * ~f) / np.sum(keep * ~f))
        cf = float(np.sum(keep * w * f) / np.sum(keep * f))
        c = np.where(f, cf, cm)
        scale = float(np.sqrt(np.sum(keep * (w - c) ** 2) / np.sum(keep)))
        eps = float(np.mean(resp))
    return cm, cf, scale, eps, resp


def _fit_robust(w: np.ndarray, f: np.ndarray) -> tuple[float, float, float]:
    """Trimmed medians (per sex) and 1.4826 * MAD of the rows within 3 scales, iterated."""
    keep = np.ones(len(w), bool)
    for _ in range(10):
        cm = float(np.median(w[keep & ~f])) if (keep & ~f).any() else float(np.median(w[keep]))
        cf = float(np.median(w[keep & f])) if (keep & f).any() else float(np.median(w[keep]))
        c = np.where(f, cf, cm)
        scale = float(1.4826 * np.median(np.abs(w[keep] - c[keep])))
        keep = np.abs(w - c) <= 3 * scale
    return cm, cf, scale


def fit(df: pd.DataFrame) -> dict:
    """Estimate the parameter table from a births table."""
    month = pd.to_datetime(df["date_of_birth"]).dt.month
    age, parity, week = df["mother_age"], df["parity"], df["gestation_week"]
    female = df["is_female"].astype(bool)
    weight = df["birth_weight"]
    band = np.searchsorted(AGE_BANDS, age.to_numpy(), side="right") - 1

    a_lo, a_hi = int(age.min()), int(age.max())
    p_lo, p_hi = 1, int(parity.max())
    g_lo, g_hi = int(week.min()), int(week.max())
    parity_counts = [_counts(parity[band == b], p_lo, p_hi) for b in range(len(AGE_BANDS) - 1)]
    gest_counts = [_counts(week[band == b], g_lo, g_hi) for b in range(len(AGE_BANDS) - 1)]

    groups = week_groups(week)
    fem = female.to_numpy()
    w_all, wk = weight.to_numpy().astype(float), week.to_numpy()
    w_lo = int(weight.min()) // WEIGHT_BIN * WEIGHT_BIN
    w_hi = int(weight.max()) // WEIGHT_BIN * WEIGHT_BIN
    edges = np.arange(w_lo, w_hi + 2 * WEIGHT_BIN, WEIGHT_BIN)
    hist, _ = np.histogram(weight, bins=edges)
    density = hist / hist.sum() / WEIGHT_BIN  # pooled weight density: the error component
    table = []
    z = np.zeros(len(df))
    error_share = np.zeros(len(df))  # probability that a row's week is a recording error
    for lo, hi in groups:
        in_g = (wk >= lo) & (wk <= hi)
        w, f = w_all[in_g], fem[in_g]
        h = density[np.clip(((w - w_lo) // WEIGHT_BIN).astype(int), 0, len(density) - 1)]
        if hi < TERM:
            cm, cf, scale, eps, resp = _fit_mixture(w, f, h)
        else:  # at term, errors cannot be told apart from the pooled density: robust figures
            cm, cf, scale = _fit_robust(w, f)
            eps, resp = 0.0, np.zeros(len(w))
        c = np.where(f, cf, cm)
        table.append({"weeks": [lo, hi], "rows": int(in_g.sum()), "center_male": round(cm, 1),
                      "center_female": round(cf, 1), "scale": round(scale, 1),
                      "error_share": round(eps, 4)})
        z[in_g] = (w - c) / scale
        error_share[in_g] = resp
    # expected number of rows recorded at each week by mistake
    error_rows = [round(float(error_share[wk == w_].sum()), 1) for w_ in range(g_lo, g_hi + 1)]
    week_error_rate = float(sum(error_rows) / len(df))
    # the true-week tables: the observed counts less the expected recording errors
    share = np.array([e / max(1, int((wk == w_).sum())) for e, w_ in zip(error_rows, range(g_lo, g_hi + 1))])
    gest_counts = [[round(c * (1 - s_), 2) for c, s_ in zip(row, share)] for row in gest_counts]
    inlier = (np.abs(z) <= OUTLIER_Z) & (error_share < 0.5)
    r_edges = np.round(np.arange(-OUTLIER_Z, OUTLIER_Z + 0.05, 0.1), 1)
    r_hist, _ = np.histogram(z[inlier], bins=r_edges)

    return {
        "format": "dpbundle-example-model/1",
        "source": ("US NVSS 2019 public-use natality data, singleton births: aggregated counts and "
                   "summary figures estimated from a 160,000-row public sample by "
                   "examples/fit_example_model.py. No row of the sample is included."),
        "rows_fitted": int(len(df)),
        "month_counts": _counts(month, 1, 12),
        "mother_age": {"min": a_lo, "counts": _counts(age, a_lo, a_hi)},
        "age_bands": AGE_BANDS,
        "parity": {"min": p_lo, "counts_by_age_band": parity_counts},
        "gestation_week": {"min": g_lo, "counts_by_age_band": gest_counts,
                           "error_rate": round(week_error_rate, 5), "error_week_weights": error_rows},
        "female_share": round(float(female.mean()), 5),
        "birth_weight": {
            "groups": table,
            "residual_histogram": {"start": -OUTLIER_Z, "bin": 0.1, "counts": [int(h) for h in r_hist]},
        },
    }


def main(argv: list[str]) -> None:
    data = Path(argv[1]) if len(argv) > 1 else DEFAULT_DATA
    out = Path(argv[2]) if len(argv) > 2 else DEFAULT_OUT
    model = fit(pd.read_csv(data))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv)
