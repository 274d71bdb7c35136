"""Issue 36: the fixed-order routines of arithmetic version 2 (``mechanisms/arithmetic.py``)
agree with numpy's BLAS/LAPACK results to a tight tolerance, are bit-identical where order
independence is claimed, and give the same bits under every OpenBLAS kernel; the version's
plumbing (context, transcript mark, replay tolerance of version 1)."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from dpbundle.mechanisms import arithmetic as ar

from test_i36_determinism_replay import KERNELS, _cpu_flags


def _spd(rng: np.random.Generator, d: int, cond: float = 100.0) -> np.ndarray:
    """A random symmetric positive definite matrix with condition number ``cond``."""
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    lam = np.geomspace(1.0, cond, d) * rng.uniform(0.5, 2.0)
    return (q * lam) @ q.T


@pytest.mark.parametrize("d", [1, 2, 3, 5, 8, 13, 21, 30])
def test_jacobi_agrees_with_lapack_on_well_conditioned_matrices(d):
    rng = np.random.default_rng(100 + d)
    for _ in range(3):
        Q = _spd(rng, d)
        Q[0, 0] *= -1 if d > 2 else 1      # an indefinite one too (the noisy Q may be)
        lam, V = ar.sym_eigh(Q)
        ref = np.linalg.eigvalsh(Q)
        scale = np.max(np.abs(ref))
        assert np.all(np.diff(lam) >= 0)
        assert np.max(np.abs(lam - ref)) <= 1e-13 * d * scale
        assert np.max(np.abs(V.T @ V - np.eye(d))) <= 1e-13 * d
        assert np.max(np.abs((V * lam) @ V.T - 0.5 * (Q + Q.T))) <= 1e-13 * d * scale


@pytest.mark.parametrize("d", [1, 4, 9, 20])
def test_the_clipped_solve_and_least_squares_agree_with_numpy(d):
    rng = np.random.default_rng(7 + d)
    Q = _spd(rng, d, cond=1e3) - 0.3 * np.eye(d)    # some eigenvalues below the floor
    b = rng.normal(size=d)
    floor = 0.5
    lam, V = np.linalg.eigh(Q)
    want = V @ ((V.T @ b) / np.maximum(lam, floor))
    got = ar.solve_clipped(Q, b, floor)
    assert np.allclose(got, want, rtol=1e-11, atol=1e-12 * np.max(np.abs(want)))
    G = _spd(rng, d, cond=1e4)
    assert np.allclose(ar.lstsq_sym(G, b), np.linalg.lstsq(G, b, rcond=1e-12)[0], rtol=1e-9,
                       atol=1e-12)


def test_least_squares_is_the_minimum_norm_solution_of_a_singular_system():
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(200, 4))
    Z[:, 3] = Z[:, 2]                                # two equal columns: rank 3
    G = Z.T @ Z
    b = Z.T @ rng.normal(size=200)
    got = ar.lstsq_sym(G, b)
    assert np.allclose(got, np.linalg.lstsq(G, b, rcond=1e-12)[0], rtol=1e-9, atol=1e-12)
    assert got[2] == pytest.approx(got[3], rel=1e-9)   # the minimum norm splits them evenly


def test_gram_and_cross_agree_with_blas_and_are_exactly_symmetric():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(5000, 7))
    w = rng.integers(1, 50, size=5000).astype(np.float64)
    y = rng.normal(size=5000)
    G = ar.gram(X, w)
    assert np.array_equal(G, G.T)
    ref = (X * w[:, None]).T @ X
    assert np.allclose(G, ref, rtol=1e-12, atol=1e-12 * np.max(np.abs(ref)))
    assert np.allclose(ar.cross(X, y, w), (X * w[:, None]).T @ y, rtol=1e-11, atol=1e-9)
    assert ar.fsum_dot(X[:, 0], y) == pytest.approx(float(X[:, 0] @ y), rel=1e-12)


def test_sums_are_bit_identical_under_any_order_of_the_rows():
    """fsum is correctly rounded: permuting the record types changes no bit."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 6)) * np.geomspace(1, 1e6, 6)
    w = rng.integers(1, 1000, size=3000).astype(np.float64)
    y = rng.normal(size=3000) * 1e3
    G, c, s = ar.gram(X, w), ar.cross(X, y, w), ar.fsum_dot(w, y)
    for seed in range(5):
        p = np.random.default_rng(seed).permutation(3000)
        assert np.array_equal(ar.gram(X[p], w[p]), G)
        assert np.array_equal(ar.cross(X[p], y[p], w[p]), c)
        assert ar.fsum_dot(w[p], y[p]) == s


def test_matvec_is_row_by_row_and_agrees_with_blas():
    rng = np.random.default_rng(9)
    Z = rng.normal(size=(4000, 8))
    beta = rng.normal(size=8)
    got = ar.matvec(Z, beta, 2.5)
    assert np.allclose(got, 2.5 + Z @ beta, rtol=1e-13, atol=1e-13)
    p = rng.permutation(4000)
    assert np.array_equal(ar.matvec(Z[p], beta, 2.5), got[p])    # a row's value is its own
    assert np.array_equal(ar.matvec(Z[:7], beta, 2.5), got[:7])


ROUTINES = r"""
import hashlib, json, numpy as np
from dpbundle.mechanisms import arithmetic as ar
rng = np.random.default_rng(2024)
out = {}
for d in (3, 7, 16):
    M = rng.normal(size=(d, d)); Q = M + M.T + d * np.eye(d); b = rng.normal(size=d)  # (no BLAS here)
    X = rng.normal(size=(999, d)); w = rng.integers(1, 9, size=999).astype(float)
    lam, V = ar.sym_eigh(Q)
    parts = [lam, V, ar.solve_clipped(Q, b, 0.3), ar.lstsq_sym(Q, b), ar.gram(X, w),
             ar.cross(X, X[:, 0], w), ar.matvec(X, b, 1.0)]
    out[d] = hashlib.sha256(b"".join(np.ascontiguousarray(p).tobytes() for p in parts)).hexdigest()
print(json.dumps(out))
"""


def test_the_routines_give_the_same_bits_under_every_openblas_kernel():
    flags = _cpu_flags()
    kernels = [k for k, need in KERNELS.items() if need <= flags]
    if len(kernels) < 2:
        pytest.skip(f"this CPU runs fewer than two OpenBLAS kernels ({kernels})")
    seen = {}
    for kernel in kernels:
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
        env["OPENBLAS_CORETYPE"] = kernel
        proc = subprocess.run([sys.executable, "-c", ROUTINES], env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        seen[kernel] = json.loads(proc.stdout)
    assert len({json.dumps(v, sort_keys=True) for v in seen.values()}) == 1, seen


# --------------------------------------------------------------------------- versions


def test_the_version_is_chosen_by_a_context_and_defaults_to_version_1():
    assert ar.current() == ar.BLAS
    with ar.use(2):
        assert ar.current() == ar.FIXED
        with ar.use(1):
            assert ar.current() == ar.BLAS
        assert ar.current() == ar.FIXED
    assert ar.current() == ar.BLAS
    for bad in (0, 3, True, "2"):
        with pytest.raises(ValueError):
            with ar.use(bad):
                pass


def test_the_transcript_mark_names_the_version():
    mark = {"kind": "mark", "mark": "arithmetic", "version": 2}
    assert ar.arithmetic_of_records([{"kind": "seed", "purpose": "x"}]) == 1
    assert ar.arithmetic_of_records([{"kind": "mark", "mark": "iteration"}, mark]) == 2
    for bad in ([mark, mark], [dict(mark, version=7)], [dict(mark, version=True)],
                [dict(mark, extra=1)]):
        with pytest.raises(ValueError):
            ar.arithmetic_of_records(bad)


def test_the_replay_checks_the_arithmetic_mark(tmp_path):
    """The transcript-record schema's mark_arithmetic: exactly kind, mark and a known version."""
    from dpbundle.audit.replay import TranscriptError, check_records

    check_records(tmp_path / "t", [{"kind": "mark", "mark": "arithmetic", "version": 2}])
    for bad, where in (({"kind": "mark", "mark": "arithmetic", "version": 5}, "version"),
                       ({"kind": "mark", "mark": "arithmetic", "version": 2, "note": "x"}, "additionalProperties")):
        with pytest.raises(TranscriptError, match=f"transcript record 0 .*{where}"):
            check_records(tmp_path / "t", [bad])


def test_criteria_routines_follow_the_version():
    """OLS and the clipped solve of the criteria: version 2 is the fixed routine, within
    rounding of version 1's numpy result."""
    from dpbundle.mechanisms.criteria import regression as R

    rng = np.random.default_rng(1)
    Z = rng.normal(size=(500, 4))
    y = Z @ np.array([1.0, -2.0, 0.5, 3.0]) + rng.normal(size=500)
    w = rng.integers(1, 5, size=500).astype(np.float64)
    v1 = R.ols(Z, y, w)
    with ar.use(2):
        v2 = R.ols(Z, y, w)
        A = np.column_stack([np.ones(500), Z])
        assert np.array_equal(v2, ar.lstsq_sym(ar.gram(A, w), ar.cross(A, y, w)))
    assert np.allclose(v1, v2, rtol=1e-10, atol=1e-12)
    Q = _spd(rng, 5)
    b = rng.normal(size=5)
    with ar.use(2):
        assert np.array_equal(R._solve(Q, b, 0.1), ar.solve_clipped(Q, b, 0.1))
    assert np.allclose(R._solve(Q, b, 0.1), ar.solve_clipped(Q, b, 0.1), rtol=1e-11)


def _laplace_record(true, mechanism="opendp.make_laplace"):
    from dpbundle.mechanisms.noise import Randomness

    rand = Randomness()
    rand.laplace(true, sensitivity=1.0, epsilon=1.0, purpose="criterion x",
                 integer=mechanism.endswith("integer"))
    return rand.transcript.records


def test_version_1_true_values_are_accepted_within_the_tolerance_and_listed():
    from dpbundle.mechanisms.noise import Randomness, ReplayMismatch

    recs = _laplace_record(100.0)
    rand = Randomness.replay(recs, true_rtol=ar.BLAS_REPLAY_RTOL)
    rand.laplace(100.0 * (1 + 1e-12), sensitivity=1.0, epsilon=1.0, purpose="criterion x")
    assert rand.tolerated == [(0, "criterion x")]
    assert rand.laplace.__self__ is rand
    with pytest.raises(ReplayMismatch):       # beyond the tolerance
        Randomness.replay(recs, true_rtol=ar.BLAS_REPLAY_RTOL).laplace(
            100.0 * (1 + 1e-8), sensitivity=1.0, epsilon=1.0, purpose="criterion x")
    with pytest.raises(ReplayMismatch):       # no tolerance unless asked (version 2)
        Randomness.replay(recs).laplace(100.0 * (1 + 1e-12), sensitivity=1.0, epsilon=1.0,
                                        purpose="criterion x")
    ints = _laplace_record(np.array([5, 7]), "opendp.make_laplace/integer")
    with pytest.raises(ReplayMismatch):       # counts: never
        Randomness.replay(ints, true_rtol=ar.BLAS_REPLAY_RTOL).laplace(
            np.array([5, 8]), sensitivity=1.0, epsilon=1.0, purpose="criterion x", integer=True)


def test_a_hash_of_the_routines_is_stable_in_process():
    """The same input twice: the same bits (no state, no threading)."""
    rng = np.random.default_rng(4)
    Q = _spd(rng, 12)
    h = [hashlib.sha256(np.concatenate([*ar.sym_eigh(Q)[1], ar.sym_eigh(Q)[0]]).tobytes()).hexdigest()
         for _ in range(2)]
    assert h[0] == h[1]


def test_the_fixed_exponential_is_within_an_ulp_or_two_of_the_c_librarys():
    import math
    import random

    rnd = random.Random(36)
    for _ in range(20000):
        x = rnd.uniform(-700.0, 700.0) if rnd.random() < 0.3 else -rnd.uniform(0.0, 2.0)
        want = math.exp(x)
        assert abs(ar.exp(x) - want) <= 2 * math.ulp(want), x
    assert ar.exp(0.0) == 1.0 and ar.exp(-800.0) == 0.0 and ar.exp(800.0) == math.inf


def test_the_one_way_noise_variance_follows_the_version():
    import math

    from dpbundle.mechanisms.oneway import discrete_laplace_variance

    b = 37.25
    q = ar.exp(-1.0 / b)
    with ar.use(2):
        assert discrete_laplace_variance(b) == 2.0 * q / (1.0 - q) ** 2
    q1 = math.exp(-1.0 / b)
    assert discrete_laplace_variance(b) == 2.0 * q1 / (1.0 - q1) ** 2
