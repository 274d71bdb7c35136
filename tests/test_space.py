"""The configuration space (release/scheme/space.py)."""
from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math

import pytest

from dpbundle.release.scheme.space import (check_config, config_at, config_id, dimensions, draw_config,
                                    enumerate_configs, generator_configs, space_size)


@pytest.fixture(scope="module")
def all_configs(births_spec) -> list[dict]:
    return list(enumerate_configs(births_spec))


def _size_from_yaml(doc: dict) -> int:
    """Independently: product of alternatives x product of each generator's grid x min_count values."""
    cols = math.prod(len(c["alternatives"]) for c in doc["columns"])
    gens = sum(math.prod(len(v) for v in g.get("grid", {}).values()) for g in doc["generators"])
    return cols * gens * len(doc["projection"]["min_count"])


def test_size_is_1152(births_spec, births_doc, all_configs):
    assert [len(c["alternatives"]) for c in births_doc["columns"]] == [1, 3, 2, 2, 1, 1]
    assert _size_from_yaml(births_doc) == 3 * 2 * 2 * 1 * (4 * 12) * 2 == 1152
    assert space_size(births_spec) == 1152
    assert len(all_configs) == 1152
    assert math.prod(len(v) for _, v in dimensions(births_spec)) == 1152


def test_generator_grid(births_spec):
    gens = generator_configs(births_spec)
    assert len(gens) == 48
    expected = [{"type": "privbayes", "flavour": "theta", "epsilon_split": s, "theta": t}
                for s in (0.1, 0.25, 0.5, 0.75) for t in (2, 4, 8, 16, 20, 25, 30, 35, 40, 50, 60, 100)]
    assert sorted(gens, key=json.dumps) == sorted(expected, key=json.dumps)


def test_configs_are_distinct_and_well_formed(births_doc, all_configs):
    keys = {json.dumps(c, sort_keys=True) for c in all_configs}
    assert len(keys) == 1152
    alts = {c["name"]: {a["id"] for a in c["alternatives"]} for c in births_doc["columns"]}
    for c in all_configs:
        assert set(c) == {"columns", "generator", "projection"}
        assert list(c["columns"]) == [col["name"] for col in births_doc["columns"]]
        assert all(c["columns"][k] in alts[k] for k in alts)
        assert c["projection"]["min_count"] in (2, 3)
    # every combination of column alternatives appears 48 x 2 times
    combos = {}
    for c in all_configs:
        key = tuple(c["columns"].values())
        combos[key] = combos.get(key, 0) + 1
    assert len(combos) == 12 and set(combos.values()) == {96}


def test_config_ids_distinct_and_stable(all_configs):
    ids = [config_id(c) for c in all_configs]
    assert len(set(ids)) == 1152
    for c, i in zip(all_configs[:50], ids):
        # id = first 16 hex digits of SHA-256 over the canonical JSON (sorted keys, no whitespace)
        canon = json.dumps(c, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        assert i == hashlib.sha256(canon).hexdigest()[:16]
        assert len(i) == 16 and int(i, 16) >= 0
    # independent of dict ordering and of copying
    c = all_configs[123]
    shuffled = {"projection": dict(c["projection"]),
                "generator": dict(reversed(list(c["generator"].items()))),
                "columns": dict(reversed(list(c["columns"].items())))}
    assert config_id(shuffled) == config_id(copy.deepcopy(c)) == ids[123]


def test_config_id_pinned_value():
    # A hand-written config, hashed by hand: guards against an accidental change of the id scheme.
    config = {"columns": {"x": "a"}, "generator": {"type": "crosstab"}, "projection": {"min_count": 2}}
    canon = b'{"columns":{"x":"a"},"generator":{"type":"crosstab"},"projection":{"min_count":2}}'
    assert config_id(config) == hashlib.sha256(canon).hexdigest()[:16]


def test_config_at_matches_enumeration(births_spec, all_configs):
    for i, c in enumerate(all_configs):
        assert config_at(births_spec, i) == c, i


def test_enumeration_order(births_doc, all_configs):
    # Deterministic, last dimension fastest: first = every first choice, next differs in min_count only.
    first = all_configs[0]
    assert first["columns"] == {c["name"]: c["alternatives"][0]["id"] for c in births_doc["columns"]}
    assert first["projection"] == {"min_count": 2}
    assert all_configs[1]["projection"] == {"min_count": 3}
    assert all_configs[1]["columns"] == first["columns"] and all_configs[1]["generator"] == first["generator"]
    assert all_configs[-1]["columns"]["mother_age"] == "years"
    assert all_configs[-1]["projection"] == {"min_count": 3}


def test_draw_config_returns_members(births_spec, all_configs):
    ids = {config_id(c) for c in all_configs}
    drawn = [config_id(draw_config(births_spec)) for _ in range(200)]
    assert set(drawn) <= ids
    assert len(set(drawn)) > 100  # 200 uniform draws from 1152: about 184 distinct; > 100 always in practice
    narrowed = all_configs[10:13]
    for _ in range(30):
        assert draw_config(births_spec, narrowed) in narrowed


def test_check_config_accepts_members(births_spec, all_configs):
    for c in itertools.islice(all_configs, 0, 1152, 97):
        assert check_config(births_spec, c) == []


@pytest.mark.parametrize("change,where", [
    (lambda c: c["columns"].__setitem__("mother_age", "decades"), "columns.mother_age"),
    (lambda c: c["columns"].pop("parity"), "columns.parity"),
    (lambda c: c["columns"].__setitem__("colour", "blue"), "columns"),
    (lambda c: c["generator"].__setitem__("theta", 3), "generator"),
    (lambda c: c["generator"].__setitem__("type", "crosstab"), "generator"),
    (lambda c: c.__setitem__("projection", {"min_count": 5}), "projection.min_count"),
])
def test_check_config_flags_non_members(births_spec, all_configs, change, where):
    c = copy.deepcopy(all_configs[0])
    change(c)
    problems = check_config(births_spec, c)
    assert len(problems) == 1
    assert problems[0].startswith(where + ":")


@pytest.mark.parametrize("index", [-1, 1152, 10**6])
def test_config_at_out_of_range(births_spec, index):
    with pytest.raises(IndexError):
        config_at(births_spec, index)
