"""NIST CRC SDNist's k-marginal score (2-way), written from its public description.

The score compares a target table with a synthetic (deidentified) one. For every pair of the
chosen features it takes each table's 2-way density (group-by count / number of rows), the L1
distance between the two densities over the union of cells seen in either table (a cell seen in
only one table has density 0 in the other), and averages that distance over all pairs:

    score = (2 - mean L1 over pairs) x 500        (0 = disjoint supports, 1000 = identical)

Numeric features (AGEP among the demographic-focused features) are first cut into 20 percentile
bins of the TARGET, and the synthetic values are put in the same bins; "N" (not applicable) and
any other code the data dictionary lists next to the min/max (POVPIP's "501") stay values of
their own.

Confirmed in usnistgov/SDNist (read with the project's code search, facts only, no code copied):

- ``sdnist/metrics/kmarginal.py`` (class ``KMarginal``, 2.x report version): the pairs are all
  i < j pairs of the sorted feature list minus PUMA and INDP; densities are
  ``groupby(pair).size() / len(table)``; the per-pair distance is the sum of absolute
  differences after aligning the two density series on the union of their cells with a missing
  cell counted as 0 (``subtract(..., fill_value=0)``); score ``(2 - mean) * 500``.
  (The older ``KMarginalScore`` of the same file drew 100 random column pairs instead; the
  report, and this module, use all pairs.)
- ``sdnist/report/dataset/binning.py`` (``percentile_rank_target``): the non-"N" target values
  are ranked with pandas' percentile rank (``rank(pct=True)``, ties get the average rank) and
  the bin is ``floor(20 x rank)``, or 19 for rank 1. ``percentile_rank_synthetic``: for each
  target bin in order, its upper edge is the largest target value in it; a synthetic value goes
  to the first bin whose edge is >= the value, and anything above the second-to-last edge to
  the last bin (so values outside the target's range land in the end bins).
  ``add_bin_for_NA``: "N" becomes its own bin (-1). POVPIP's "501" is kept out of the ranking
  and kept as its own value.
- ``sdnist/report/dataset/__init__.py``: the percentile-binned features are a fixed list,
  AGEP, POVPIP, PINCP, PWGTP, WGTP (``SDNIST_PERCENTILE_FEATURES`` here). NOC and NPF, which
  have a min/max in the data dictionary, are compared as categories; DENSITY is cut into
  logarithmic bins (not implemented here: the command refuses DENSITY).

Not confirmed: which SDNist release produced the archived scores quoted in the project's notes,
and how it treats rows with missing values (pandas' group-by drops them; this module refuses
them instead).

    python benchmarks/kmarginal.py TARGET.csv SYNTH.csv [--dictionary DICT.json]
        [--features AGEP SEX ...] [--numeric AGEP ...]
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

#: NIST's "demographic-focused" feature set of the Diverse Communities excerpts.
DEMOGRAPHIC_FEATURES = ("AGEP", "SEX", "MSP", "RAC1P", "HOUSING_TYPE", "OWN_RENT", "EDU",
                        "PINCP_DECILE", "DVET", "DEYE")
#: The features SDNist cuts into 20 percentile bins of the target.
SDNIST_PERCENTILE_FEATURES = ("AGEP", "POVPIP", "PINCP", "PWGTP", "WGTP")
N_BINS = 20
NOT_APPLICABLE = "N"


def _codes(spec: object) -> set[str]:
    """The values of a numeric feature kept as their own value: "N" plus any code its
    data-dictionary entry lists besides min/max (``spec`` may be that entry, its "values"
    mapping, an iterable of codes, or None)."""
    if isinstance(spec, Mapping):
        spec = spec.get("values", spec)
    if isinstance(spec, Mapping):
        extra = {str(k) for k in spec if k not in ("min", "max")}
    elif spec is None or isinstance(spec, str):
        extra = set()
    else:
        extra = {str(k) for k in spec}
    return extra | {NOT_APPLICABLE}


def _as_text(column: pd.Series) -> pd.Series:
    """Values as text, integral floats without ".0" (so 18 and 18.0 are the same cell)."""
    def one(v: object) -> str:
        if isinstance(v, (float, np.floating)) and math.isfinite(v) and float(v).is_integer():
            return str(int(v))
        return str(v)
    return column.map(one)


def percentile_edges(target: pd.Series, codes: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """(upper edges, labels) of the 20 percentile bins of the target's numeric values:
    bin = floor(20 x percentile rank) (19 for rank 1), ties sharing the average rank; each
    occupied bin's upper edge is the largest target value in it."""
    values = pd.to_numeric(target[~target.isin(codes)])
    if values.empty:
        return np.array([]), np.array([], dtype=int)
    pct = values.rank(pct=True, method="average")
    labels = np.minimum(np.floor(N_BINS * pct.to_numpy()).astype(int), N_BINS - 1)
    frame = pd.DataFrame({"v": values.to_numpy(dtype=float), "b": labels})
    upper = frame.groupby("b")["v"].max().sort_index()
    return upper.to_numpy(), upper.index.to_numpy()


def apply_bins(column: pd.Series, codes: set[str], edges: np.ndarray,
               labels: np.ndarray) -> pd.Series:
    """Numeric values -> "b<label>" of the first bin whose upper edge is >= the value (the last
    bin above all edges); codes stay as they are."""
    text = _as_text(column)
    is_code = text.isin(codes)
    out = text.copy()
    numeric = pd.to_numeric(text[~is_code]).to_numpy(dtype=float)
    if len(numeric):
        if len(labels) == 0:
            raise ValueError(f"{column.name}: the target has no numeric value to bin by")
        where = np.searchsorted(edges[:-1], numeric, side="left")
        out[~is_code] = [f"b{labels[i]}" for i in where]
    return out


def _prepare(target: pd.DataFrame, synthetic: pd.DataFrame, features: list[str],
             numeric: Mapping[str, object]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both tables restricted to ``features`` as text, numeric features binned by the target."""
    for name, table in (("target", target), ("synthetic", synthetic)):
        missing = [f for f in features if f not in table.columns]
        if missing:
            raise ValueError(f"{name} table lacks feature(s): {', '.join(missing)}")
        if len(table) == 0:
            raise ValueError(f"{name} table has no rows")
        if table[features].isna().any().any():
            raise ValueError(f"{name} table has missing values in the chosen features")
    t = pd.DataFrame({f: _as_text(target[f]) for f in features})
    s = pd.DataFrame({f: _as_text(synthetic[f]) for f in features})
    for f in features:
        if f in numeric:
            codes = _codes(numeric[f])
            edges, labels = percentile_edges(t[f], codes)
            t[f] = apply_bins(t[f], codes, edges, labels)
            s[f] = apply_bins(s[f], codes, edges, labels)
    return t, s


def pair_distance(target: pd.DataFrame, synthetic: pd.DataFrame, pair: tuple[str, str]) -> float:
    """L1 distance between the two tables' 2-way densities of ``pair`` (0..2)."""
    t = target.groupby(list(pair)).size() / len(target)
    s = synthetic.groupby(list(pair)).size() / len(synthetic)
    return float(t.subtract(s, fill_value=0).abs().sum())


def kmarginal(target: pd.DataFrame, synthetic: pd.DataFrame, features: list[str],
              numeric: Mapping[str, object]) -> float:
    """SDNist's 2-way k-marginal score of ``synthetic`` against ``target`` (0..1000).

    ``numeric`` maps each feature to cut into 20 target percentile bins to its data-dictionary
    entry (or its codes: values kept as their own, "N" always); other features are categories.
    """
    features = list(dict.fromkeys(features))
    if len(features) < 2:
        raise ValueError("k-marginal needs at least two features")
    t, s = _prepare(target, synthetic, features, numeric)
    pairs = list(itertools.combinations(sorted(features), 2))
    mean = sum(pair_distance(t, s, p) for p in pairs) / len(pairs)
    return (2.0 - mean) * 500.0


def numeric_from_dictionary(dictionary: Mapping[str, object],
                            features: Iterable[str]) -> dict[str, object]:
    """SDNist's percentile-binned features among ``features``, with their dictionary entries."""
    return {f: dictionary.get(f) for f in features if f in SDNIST_PERCENTILE_FEATURES}


def read_table(path: Path) -> pd.DataFrame:
    """A CSV with every value as text ("N" stays "N", nothing becomes missing)."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="SDNist 2-way k-marginal score (0-1000).")
    p.add_argument("target", type=Path)
    p.add_argument("synthetic", type=Path)
    p.add_argument("--features", nargs="+", default=list(DEMOGRAPHIC_FEATURES))
    p.add_argument("--dictionary", type=Path, help="data dictionary JSON (codes of numeric features)")
    p.add_argument("--numeric", nargs="*", default=None,
                   help="features to cut into target percentile bins "
                        f"(default: those of {', '.join(SDNIST_PERCENTILE_FEATURES)} chosen)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Print the score; exit 2 with a one-line message on bad input."""
    args = _parser().parse_args(argv)
    try:
        if "DENSITY" in args.features:
            raise ValueError("DENSITY (log bins in SDNist) is not supported")
        dictionary = json.loads(args.dictionary.read_text("utf-8")) if args.dictionary else {}
        chosen = args.numeric if args.numeric is not None else [
            f for f in args.features if f in SDNIST_PERCENTILE_FEATURES]
        numeric = {f: dictionary.get(f) for f in chosen}
        score = kmarginal(read_table(args.target), read_table(args.synthetic),
                          args.features, numeric)
    except (OSError, ValueError) as exc:
        print(f"kmarginal: error: {exc}", file=sys.stderr)
        return 2
    print(f"{score:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
