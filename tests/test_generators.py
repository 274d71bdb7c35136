"""Tests of the generator registry and protocol."""
from __future__ import annotations

import importlib.util
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpbundle.mechanisms import generators as G
from dpbundle.mechanisms.generators import (
    Generator,
    Model,
    check_codes,
    even_split,
    generator_types,
    make_generator,
    register_generator,
)
from dpbundle.mechanisms.noise import Randomness

MBI_INSTALLED = all(importlib.util.find_spec(m) is not None for m in ("mbi", "jax", "polars"))


def test_generator_types_lists_all():
    types = generator_types()
    assert {"privbayes", "crosstab", "marginals", "aim", "mst"} <= set(types)
    for info in types.values():
        assert set(info) == {"available", "reason", "hyperparameters"}
    assert types["crosstab"]["available"] and types["crosstab"]["hyperparameters"] == ["max_cells"]
    assert "marginals" in types["marginals"]["hyperparameters"]
    assert "allow_nonconvergence" in types["marginals"]["hyperparameters"]


@pytest.mark.skipif(MBI_INSTALLED, reason="the mbi extra is installed")
def test_mbi_generators_unavailable_without_extra():
    types = generator_types()
    for t in ("aim", "mst"):
        assert types[t]["available"] is False
        assert "dpbundle[mbi]" in types[t]["reason"]
        with pytest.raises(ValueError, match=r"not available.*dpbundle\[mbi\]"):
            make_generator(t, 1.0)
    assert "degree" in types["aim"]["hyperparameters"]


def test_unknown_type_and_hyperparameters():
    with pytest.raises(ValueError, match=r"unknown generator type 'gan'.*crosstab.*marginals.*privbayes"):
        make_generator("gan", 1.0)
    with pytest.raises(ValueError, match=r"unknown hyperparameter.*'theta'.*valid ones are \['max_cells'\]"):
        make_generator("crosstab", 1.0, theta=4)
    for eps in (0, -1.0, math.inf, math.nan, "1"):
        with pytest.raises(ValueError, match="epsilon"):
            make_generator("crosstab", eps)
    with pytest.raises(ValueError, match="max_cells"):
        make_generator("crosstab", 1.0, max_cells=0)


@pytest.mark.parametrize("gtype", ["crosstab", "marginals"])
def test_protocol_and_budget(gtype):
    g = make_generator(gtype, 0.8)
    assert isinstance(g, Generator) and g.type == gtype and g.epsilon == 0.8
    assert g.privacy_map(1) == 0.8 and g.privacy_map(3) == pytest.approx(2.4)
    parts = g.budget_parts()
    assert parts and sum(Fraction(p["epsilon"]) for p in parts) <= Fraction(4, 5)   # exactly
    assert math.fsum(p["epsilon"] for p in parts) == pytest.approx(0.8)
    hp = g.hyperparameters()
    assert make_generator(gtype, 0.8, **hp).hyperparameters() == hp
    model = g.fit(np.zeros((20, 2), dtype=np.int64), (2, 3), Randomness())
    assert isinstance(model, Model)


def test_explicit_marginals_budget_parts():
    g = make_generator("marginals", 1.0, marginals=[(0, 1), (1, 2), (0, 2)])
    parts = g.budget_parts()
    assert [p["purpose"] for p in parts] == ["marginal [0, 1]", "marginal [1, 2]", "marginal [0, 2]"]
    assert sum(Fraction(p["epsilon"]) for p in parts) <= 1          # exactly, 3 x 1/3


def test_privbayes_is_resolved_lazily():
    info = generator_types()["privbayes"]
    if not info["available"]:
        pytest.skip(f"privbayes not importable yet: {info['reason']}")
    cls, _ = G._resolve("privbayes")
    assert cls.__name__ == "PrivBayes" and cls.__module__ == "dpbundle.mechanisms.privbayes"


def test_register_generator():
    class Dummy:
        type = "dummy"

        def __init__(self, epsilon: float, k: int = 1) -> None:
            if k < 1:
                raise ValueError("k must be >= 1")
            self.epsilon, self.k = epsilon, k

    register_generator("dummy", Dummy)
    try:
        assert generator_types()["dummy"] == {"available": True, "reason": "",
                                              "hyperparameters": ["k"]}
        assert make_generator("dummy", 2.0, k=3).k == 3
        with pytest.raises(ValueError, match="k must be"):
            make_generator("dummy", 2.0, k=0)
        with pytest.raises(ValueError):
            register_generator("bad", "no_colon")
    finally:
        del G._REGISTRY["dummy"]


def test_check_codes():
    codes, dom = check_codes([[0, 1], [1, 2]], (2, 3))
    assert codes.dtype == np.int64 and dom == (2, 3)
    with pytest.raises(ValueError, match="outside the domain"):
        check_codes([[0, 3]], (2, 3))
    with pytest.raises(ValueError, match="outside the domain"):
        check_codes([[-1, 0]], (2, 3))
    with pytest.raises(ValueError, match="shape"):
        check_codes([[0, 1, 1]], (2, 3))
    with pytest.raises(ValueError, match="integers"):
        check_codes([[0.5, 1.0]], (2, 3))
    with pytest.raises(ValueError, match="positive"):
        check_codes([[0, 0]], (2, 0))


@settings(max_examples=300, deadline=None)
@given(st.floats(1e-6, 1e3, allow_nan=False), st.integers(1, 200))
def test_even_split_never_exceeds_budget(eps, k):
    """Exactly (rationals, not fsum, which rounds 5 x fl(0.8) = 4 + 2.2e-16 back to 4.0): k
    shares sum to at most the declared decimal (repr: the shortest decimal of the float)."""
    e = even_split(eps, k)
    assert k * Fraction(e) <= Fraction(repr(eps))
    assert e == pytest.approx(eps / k, rel=1e-12)
    assert 5 * Fraction(even_split(4.0, 5)) <= 4 < 5 * Fraction(0.8)
