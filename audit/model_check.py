"""The published model (``model.json``) against what the public spec and the selected
configuration fix: its structure, its table sizes and the noise each table carries.

A publisher could swap model.json for another model (one without noise, or one without every
birth under 2,500 g), re-derive data.csv from it with the published seeds and re-sign: the
re-derivation would still pass. Nobody can tell from a model alone whether its numbers came
from noisy measurements. What the public audit *can* check, and does here, is everything about
the model that the spec, the configuration and the public n determine:

* the **structure** the generator allows: a PrivBayes network is a permutation of the columns,
  its first node has no parents, every parent comes earlier, and each parent set is one that the
  flavour admits (theta: its table within ``theta_max_cells(n, eps_2, d, theta)`` cells and
  maximal under that cap, as PrivBayes enumerates them; degree: ``min(degree, i)`` columns at
  the finest level); an ``mst_pure`` model is a tree (one parent, finest level, for every node
  but the first); a PrivSyn model's marginals are exactly its selected pairs, among the pairs
  PrivSyn scores; an ``aim_pure`` model's marginals are exactly the column sets its rounds
  chose, every round's columns a candidate of the workload the spec's criteria give
  (``mechanisms/aim.py``: ``criteria_workload``, ``candidates``), its rounds' epsilons what the
  budget rule allows (``schedule_problems``) and its ``epsilon_1way`` the configuration's; a
  raked model is PrivBayes with ``oneway`` (and only then), raked to a share vector for every
  column, with the release's method and rounds;
* the **sizes**: every table's shape is the one its parents and the released columns give;
* every **distribution** is one (non-negative, summing to 1);
* the **noise scales**: each measured table's epsilon and OpenDP Laplace scale, recomputed from
  the spec's generation epsilon, the configuration's hyperparameters and the model's public
  structure (:func:`noise_plan`); a model document that declares its noise (``noise``) must
  declare exactly these.

What this does not prove: that the numbers of the tables came from those measurements (only
the enclave replay, from the private transcript, checks that the fitted model is the one the
noisy measurements give).
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["model_structure_problems", "noise_plan", "config_generator", "MAX_STRUCTURE_COLUMNS"]

MAX_STRUCTURE_COLUMNS = 1_000     # the spec's column bound (audit/bounds.py MAX_COLUMNS)
SUM_TOLERANCE = 1e-9              # |sum - 1| of a published distribution, per value


def config_generator(config: dict, epsilon: float | None, spec: dict | None = None,
                     names: list[str] | None = None, rho: float | None = None):
    """The configuration's generator, built as the release builds it
    (``release/scheme/iteration.py`` ``make_config_generator``, read, not imported): its
    hyperparameters, and for ``aim_pure`` the ``workload`` the spec's criteria give
    (``mechanisms.aim.criteria_workload`` of the public spec document and its released column
    names, in order) unless the configuration sets one. ``spec`` is spec.json's ``spec``."""
    from dpbundle.mechanisms.generators import make_generator

    gen = dict(config.get("generator") or {})
    params = {k: v for k, v in gen.items() if k not in ("type", "flavour")}
    if gen.get("type") == "aim_pure" and "workload" not in params and spec is not None:
        from dpbundle.mechanisms.aim import criteria_workload

        try:
            params["workload"] = criteria_workload(spec, list(names or []))
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise ValueError(f"aim_pure: the spec's criteria give no workload ({e})") from None
    if rho is not None:      # a zCDP bundle: the generator's rho (budget.json generation.rho)
        return make_generator(gen["type"], rho=float(rho), **params)
    return make_generator(gen["type"], float(epsilon), **params)



def _distribution_problem(where: str, values) -> str | None:
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a < 0):
        return f"{where} is not a probability distribution (negative or not finite)"
    if abs(float(a.sum()) - 1.0) > SUM_TOLERANCE * max(1, a.size):
        return f"{where} is not a probability distribution (its values sum to {float(a.sum()):.12g}, not 1)"
    return None


def _bn_problems(doc: dict, gen_type: str, generator, n: int) -> list[str]:
    """Structure, sizes and distributions of a bayesian_network document."""
    from dpbundle.mechanisms.privbayes import MAX_TABLE_CELLS, level_size, max_level

    where = "model.json"
    domain = [int(k) for k in doc["domain"]]
    d = len(domain)
    order = [node["attribute"] for node in doc["network"]]
    if sorted(order) != list(range(d)):
        return [f"{where}: the network's attributes {order} are not each released column once"]
    out: list[str] = []
    cap = generator.max_table_cells(n, d) if gen_type == "privbayes" else math.inf
    seen: list[int] = []
    for i, node in enumerate(doc["network"]):
        x, parents = node["attribute"], [tuple(p) for p in node["parents"]]
        label = f"{where}: network[{i}] (column {x})"
        cols = [j for j, _ in parents]
        if len(set(cols)) != len(cols) or any(j not in seen for j in cols):
            out.append(f"{label}: every parent must be a distinct column earlier in the network")
            seen.append(x)
            continue
        if any(not 0 <= lv <= max(max_level(domain[j]), 0) for j, lv in parents):
            out.append(f"{label}: a parent's generalisation level is outside its column's levels")
            seen.append(x)
            continue
        sizes = [level_size(domain[j], lv) for j, lv in parents]
        n_pi = math.prod(sizes)
        table = doc["conditionals"][i]
        if len(table) != n_pi or any(len(row) != domain[x] for row in table):
            out.append(f"{label}: its table is not {n_pi} x {domain[x]} (parent configurations x "
                       f"values)")
        else:
            for r, row in enumerate(table):
                p = _distribution_problem(f"{label}: row {r} of its table", row)
                if p:
                    out.append(p)
                    break
        if i == 0 and parents:
            out.append(f"{label}: the first node of the network has no parents")
        elif gen_type == "mst_pure":
            if i > 0 and (len(parents) != 1 or parents[0][1] != 0):
                out.append(f"{label}: an mst_pure model is a tree: one parent at the finest level")
        elif gen_type == "privbayes" and i > 0:
            out += _privbayes_parent_problems(label, generator, x, parents, sizes, seen, domain,
                                              cap, MAX_TABLE_CELLS)
        seen.append(x)
    return out


def _privbayes_parent_problems(label: str, generator, x: int, parents: list, sizes: list,
                               chosen: list[int], domain: list[int], cap: float,
                               max_cells: int) -> list[str]:
    """The parent set is one PrivBayes enumerates for ``x`` given the columns chosen before."""
    from dpbundle.mechanisms.privbayes import level_size, max_level

    n_pi = math.prod(sizes)
    if generator.theta is not None:
        limit = cap / domain[x]     # an empty set is maximal only when no column fits
        if n_pi > limit:
            return [f"{label}: its table has {domain[x] * n_pi:,} cells, more than the "
                    f"theta-usefulness cap of {cap:,.6g} (n, eps_2, d and theta are public)"]
        levels = dict(parents)
        for j in chosen:
            if j in levels:
                lv = levels[j]
                if lv > 0 and n_pi // level_size(domain[j], lv) * level_size(domain[j], lv - 1) <= limit:
                    return [f"{label}: its parent set is not maximal under the theta cap (column "
                            f"{j} could be one level finer): PrivBayes never chooses it"]
            elif max_level(domain[j]) >= 0 and n_pi * level_size(domain[j], max_level(domain[j])) <= limit:
                return [f"{label}: its parent set is not maximal under the theta cap (column {j} "
                        f"could be added): PrivBayes never chooses it"]
        return []
    k = min(generator.degree, len(chosen))
    if not parents:
        return []     # only when no k-set fits MAX_TABLE_CELLS (not checked: public and rare)
    if len(parents) != k or any(lv != 0 for _, lv in parents) \
            or domain[x] * n_pi > max_cells:
        return [f"{label}: the degree flavour takes {k} parents at the finest level"]
    return []


def _gum_distribution_problems(doc: dict) -> list[str]:
    """The first one-way and the first marginal of a GUM model that is not a distribution."""
    out: list[str] = []
    for j, p in enumerate(doc["oneways"]):
        prob = _distribution_problem(f"model.json: oneways[{j}]", p)
        if prob:
            out.append(prob)
            break
    for i, mg in enumerate(doc["marginals"]):
        prob = _distribution_problem(f"model.json: marginals[{i}].p", mg["p"])
        if prob:
            out.append(prob)
            break
    return out


def _gum_problems(doc: dict) -> list[str]:
    from dpbundle.mechanisms.privsyn import candidate_pairs

    out: list[str] = []
    domain = [int(k) for k in doc["domain"]]
    pairs = [tuple(sorted(int(c) for c in mg["columns"])) for mg in doc["marginals"]]
    selected = [tuple(sorted(int(c) for c in pr)) for pr in doc["selected"]]
    allowed = set(candidate_pairs(domain))
    if len(set(selected)) != len(selected) or any(p not in allowed for p in selected):
        out.append("model.json: selected pairs must be distinct pairs that PrivSyn scores "
                   "(both columns with two values or more, a table within its cell limit)")
    if set(pairs) != set(selected):
        out.append("model.json: the marginals are not exactly the selected pairs")
    return out + _gum_distribution_problems(doc)


def _adaptive_problems(doc: dict, generator) -> list[str]:
    """adaptive_gum (aim_pure): marginals and rounds as the generator makes them, the budget
    rule's epsilons, the 1-way epsilon, sizes and distributions."""
    from dpbundle.mechanisms.aim import candidates, schedule_problems

    out: list[str] = []
    domain = [int(k) for k in doc["domain"]]
    d = len(domain)
    rounds = [tuple(int(c) for c in r["columns"]) for r in doc["rounds"]]
    marginals = [tuple(int(c) for c in mg["columns"]) for mg in doc["marginals"]]
    if set(marginals) != set(rounds) or len(set(marginals)) != len(marginals):
        out.append("model.json: the marginals are not exactly the distinct column sets its rounds "
                   "chose (aim_pure publishes one consistent marginal per measured column set)")
    workload = generator.workload if generator.workload is not None else \
        [[[a, b] for a in range(d) for b in range(a + 1, d)]]
    allowed = set(candidates(workload, domain, generator.max_size, generator.max_cells)[0])
    for t, r in enumerate(rounds):
        if r not in allowed:
            out.append(f"model.json: rounds[{t}] columns {list(r)} are not a candidate marginal of "
                       f"the workload the spec's criteria give (2..{generator.max_size} columns of "
                       f"a workload set, each of two values or more, at most {generator.max_cells:,} "
                       "cells)")
            break
    out += schedule_problems(doc["rounds"], generator.epsilon, generator.split_1way,
                             generator.measure_split, generator.rounds_per_column, d,
                             has_candidates=bool(allowed))
    if doc["epsilon_1way"] != generator.epsilon_1:
        out.append(f"model.json: epsilon_1way {doc['epsilon_1way']!r} is not the configuration's "
                   f"1-way epsilon {generator.epsilon_1!r} (split_1way x the generation epsilon, "
                   "rounded down)")
    if len(doc["oneways"]) != d or any(len(p) != k for p, k in zip(doc["oneways"], domain)):
        out.append("model.json: oneways must be one distribution per column, of its number of values")
        return out
    for i, (cols, mg) in enumerate(zip(marginals, doc["marginals"])):
        if len(mg["p"]) != math.prod(domain[c] for c in cols):
            out.append(f"model.json: marginals[{i}].p has {len(mg['p'])} cells, not the "
                       f"{math.prod(domain[c] for c in cols)} of columns {list(cols)}")
            return out
    return out + _gum_distribution_problems(doc)


def _raked_problems(doc: dict, gen: dict) -> list[str]:
    from dpbundle.mechanisms.oneway import DEFAULT_ROUNDS

    out: list[str] = []
    if doc["method"] != "rake" or doc["rounds"] != DEFAULT_ROUNDS:
        out.append(f"model.json: raked with method {doc['method']!r} and {doc['rounds']} rounds; the "
                   f"release rakes with 'rake' and {DEFAULT_ROUNDS} rounds")
    for j, sh in enumerate(doc["shares"]):
        if sh is None:
            out.append(f"model.json: shares[{j}] is null: PrivBayes with oneway rakes every column")
            break
        prob = _distribution_problem(f"model.json: shares[{j}]", sh)
        if prob:
            out.append(prob)
            break
    return out


def noise_plan(doc: dict, config: dict, epsilon: float, n: int, spec: dict | None = None,
               names: list[str] | None = None) -> list[dict]:
    """Every table the model's generator measured, with its epsilon and OpenDP Laplace scale,
    recomputed from public information (the spec's generation epsilon, the configuration's
    hyperparameters, the model's structure, n; ``spec`` and ``names``: spec.json's spec and
    released column names, for :func:`config_generator`)."""
    from dpbundle.mechanisms import exact
    from dpbundle.mechanisms.noise import calibrated_laplace_scale

    gen = config["generator"]
    generator = config_generator(config, epsilon, spec, names)
    base = doc["base"] if doc["kind"] == "raked" else doc
    domain = [int(k) for k in base["domain"]]
    d = len(domain)
    out: list[dict] = []

    def add(what: str, cells: int, sens: float, eps: float) -> None:
        out.append({"measurement": what, "cells": int(cells), "sensitivity": sens,
                    "epsilon": eps, "mechanism": "opendp.make_laplace/integer",
                    "scale": calibrated_laplace_scale(sens, eps, vector=True, integer=True)})

    if gen["type"] == "privbayes":
        from dpbundle.mechanisms.privbayes import level_size

        eps_table = exact.split_float(generator.epsilon_2, d)
        for node in base["network"]:
            x = node["attribute"]
            cells = domain[x] * math.prod(level_size(domain[j], lv) for j, lv in node["parents"])
            add(f"conditional table of column {x}", cells, 2.0, eps_table)
    elif gen["type"] == "mst_pure":
        from dpbundle.mechanisms.mst import oneway_sensitivity

        add("1-way marginals", sum(domain), float(oneway_sensitivity(d)), generator.epsilon_1)
        eps_pair = exact.split_float(generator.epsilon_2, d - 1) if d > 1 else 0.0
        for node in base["network"][1:]:
            (j, _lv), x = node["parents"][0], node["attribute"]
            add(f"2-way marginal of columns {sorted([j, x])}", domain[j] * domain[x], 2.0, eps_pair)
    elif gen["type"] == "privsyn":
        from dpbundle.mechanisms import estimation
        from dpbundle.mechanisms.privsyn import allocate

        ones = [(j,) for j in range(d) if domain[j] >= 2]
        attrs = ones + [tuple(int(c) for c in pr) for pr in doc["selected"]]
        # the hierarchical estimator measures pairs on merged codes (a public rule of the domain
        # and pair_values): their cells, and so their epsilons, are the merged table's
        merged = [estimation.merged_size(k, estimation.merge_factor(k, generator.pair_values))
                  if generator.estimator == "hierarchical" else k for k in domain]
        cells = [domain[a[0]] if len(a) == 1 else math.prod(merged[j] for j in a) for a in attrs]
        for a, c, e in zip(attrs, cells, allocate(generator.epsilon_measure, cells)):
            add(f"{len(a)}-way marginal of column{'s' if len(a) > 1 else ''} {list(a)}", c, 2.0, e)
    elif gen["type"] == "aim_pure":
        from dpbundle.mechanisms.mst import oneway_sensitivity

        add("1-way marginals", sum(domain), float(oneway_sensitivity(d)), generator.epsilon_1)
        for t, r in enumerate(base["rounds"]):
            cols = [int(c) for c in r["columns"]]
            add(f"round {t}: {len(cols)}-way marginal of columns {cols}",
                math.prod(domain[c] for c in cols), 2.0, float(r["epsilon_measure"]))
    return out


def model_structure_problems(doc: dict, config: dict, epsilon: float, n: int,
                             spec: dict | None = None,
                             names: list[str] | None = None) -> tuple[list[str], list[dict]]:
    """(problems, noise plan) of a schema-valid, bounds-checked model document that belongs to
    the selected configuration (``bounds.model_problems`` first). ``spec`` and ``names``:
    spec.json's spec and the released column names in order (aim_pure's workload comes from
    them)."""
    gen = config.get("generator") or {}
    gen_type = gen.get("type")
    if gen_type == "aim_pure" and spec is None:
        return ["model.json: an aim_pure model is checked against the spec's criteria, and none "
                "was given"], []
    if gen_type == "aim_pure" and "workload" in gen:
        return ["spec.json: the configuration sets aim_pure's workload; the release sets it from "
                "the spec's criteria (a spec may not set it)"], []
    try:
        generator = config_generator(config, epsilon, spec, names)
    except (KeyError, TypeError, ValueError) as e:
        return [f"spec.json: the configuration's generator cannot be built ({e})"], []
    out: list[str] = []
    if gen_type == "privbayes":
        raked = getattr(generator, "oneway", "none") != "none"
        if raked != (doc["kind"] == "raked"):
            out.append(f"model.json: kind {doc['kind']!r}, but the configuration's oneway is "
                       f"{getattr(generator, 'oneway', 'none')!r} (raked exactly when it is not 'none')")
            return out, []
    base = doc["base"] if doc["kind"] == "raked" else doc
    if doc["kind"] == "raked":
        out += _raked_problems(doc, gen)
    if len(base["domain"]) > MAX_STRUCTURE_COLUMNS:
        return out + [f"model.json: more than {MAX_STRUCTURE_COLUMNS} columns"], []
    if base["kind"] == "bayesian_network":
        out += _bn_problems(base, gen_type, generator, n)
    elif base["kind"] == "adaptive_gum":
        out += _adaptive_problems(base, generator)
    else:
        out += _gum_problems(base)
    if out:
        return out, []
    plan = noise_plan(doc, config, epsilon, n, spec, names)
    declared = doc.get("noise")
    if declared is not None and declared != plan:
        out.append("model.json: its declared noise (epsilons, scales, cells) is not what the spec, "
                   "the configuration and the model's structure give")
    return out, plan
