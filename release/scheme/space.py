"""The configuration space: the Cartesian product of every released column's alternatives, each
generator's hyperparameter grid, and the projection's min_count values.

A configuration is a plain dict::

    {"columns": {"mother_age": "coarse", ...},
     "generator": {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.25, "theta": 30},
     "projection": {"min_count": 2}}

Its id is the first 16 hex digits of SHA-256 over its canonical JSON: stable across runs,
machines and dict orderings.
"""
from __future__ import annotations

import hashlib
import itertools
import math
import secrets
from typing import Iterator

from dpbundle.release.spec.load import Spec, canonical_json


def config_id(config: dict) -> str:
    """Stable id of a configuration (hash of its canonical JSON)."""
    return hashlib.sha256(canonical_json(config)).hexdigest()[:16]


def generator_configs(spec: Spec) -> list[dict]:
    """Every generator setting: per generator entry, the product of its grid. Its size is bounded
    before this runs (:func:`dpbundle.release.spec.load.space_problems`: at most
    ``MAX_GENERATOR_SETTINGS``, counted arithmetically); duplicates are found with a set of
    canonical texts, never by comparing each setting with every earlier one."""
    out: list[dict] = []
    seen: set[bytes] = set()
    for gen in spec.model.generators:
        grid = gen.grid_lists()
        keys = sorted(grid)
        base = {"type": gen.type}
        if gen.flavour is not None:
            base["flavour"] = gen.flavour
        for combo in itertools.product(*(grid[k] for k in keys)):
            setting = {**base, **dict(zip(keys, combo))}
            if gen.type == "privbayes" and setting.get("oneway", "none") != "measure" \
                    and "oneway_split" in setting:
                # only oneway "measure" spends oneway_split: one setting for none/tables, not one
                # per oneway_split value
                del setting["oneway_split"]
                key = canonical_json(setting)
                if key in seen:
                    continue
                seen.add(key)
            out.append(setting)
    return out


def dimensions(spec: Spec) -> list[tuple[str, list]]:
    """The space's dimensions in a fixed order: (name, values)."""
    dims: list[tuple[str, list]] = []
    for col in spec.model.columns:
        dims.append((f"column {col.name}", col.alternative_ids))
    dims.append(("generator", generator_configs(spec)))
    dims.append(("projection min_count", list(spec.model.projection.min_count)))
    return dims


def space_size(spec: Spec) -> int:
    """The number of configurations (the product of the dimensions' sizes)."""
    return math.prod(len(values) for _, values in dimensions(spec))


def _build(spec: Spec, choice: tuple) -> dict:
    names = spec.column_names
    return {
        "columns": dict(zip(names, choice[: len(names)])),
        "generator": choice[len(names)],
        "projection": {"min_count": choice[len(names) + 1]},
    }


def enumerate_configs(spec: Spec) -> Iterator[dict]:
    """Every configuration of the space, in a deterministic order."""
    for choice in itertools.product(*(values for _, values in dimensions(spec))):
        yield _build(spec, choice)


def config_at(spec: Spec, index: int) -> dict:
    """The configuration at position ``index`` of :func:`enumerate_configs` (mixed radix)."""
    dims = [values for _, values in dimensions(spec)]
    size = math.prod(len(values) for values in dims)
    if not 0 <= index < size:
        raise IndexError(f"configuration index {index} is outside the space 0..{size - 1}")
    choice = []
    for values in reversed(dims):
        index, r = divmod(index, len(values))
        choice.append(values[r])
    return _build(spec, tuple(reversed(choice)))


def draw_config(spec: Spec, configs: list[dict] | None = None) -> dict:
    """A uniform draw (CSPRNG: ``secrets``) from the space, or from a narrowed list."""
    if configs:
        return configs[secrets.randbelow(len(configs))]
    return config_at(spec, secrets.randbelow(space_size(spec)))


def check_config(spec: Spec, config: dict) -> list[str]:
    """Problems that make ``config`` not a member of the spec's space (for --configs files)."""
    problems = []
    cols = config.get("columns", {})
    for col in spec.model.columns:
        ids = col.alternative_ids
        if cols.get(col.name) not in ids:
            problems.append(f"columns.{col.name}: {cols.get(col.name)!r} is not one of {ids}")
    extra = set(cols) - set(spec.column_names)
    if extra:
        problems.append(f"columns: unknown column(s) {sorted(extra)}")
    if config.get("generator") not in generator_configs(spec):
        problems.append(f"generator: {config.get('generator')!r} is not in the spec's generator grids")
    min_counts = list(spec.model.projection.min_count)
    if config.get("projection", {}).get("min_count") not in min_counts:
        problems.append(f"projection.min_count: {config.get('projection')!r} is not among {min_counts}")
    return problems
