"""The arithmetic of the values an enclave replay compares: versions, and the fixed-order
routines of version 2 that give the same bits on every CPU and BLAS kernel.

Why. numpy hands a float matrix product (``@``, ``np.dot``, ``einsum`` with BLAS) to OpenBLAS,
and ``np.linalg`` (``lstsq``, ``eigh``, ``solve``) to LAPACK on top of it. OpenBLAS picks its
kernel at run time from the CPU (Haswell, SkylakeX, Sandybridge, ...; ``OPENBLAS_CORETYPE``
overrides it), and the kernels add the products in different orders (blocking, vector width,
fused multiply-add). The rounding then differs in the last bits, and an eigen-decomposition or
a least-squares solve passes that on: a regression fit made on one machine is not the one
replayed on another (docs/determinism.md). Every value the enclave replay compares must be
the same on the auditor's machine, so version 2 computes them without BLAS or LAPACK:

* **sums of products** (Gram matrices X'WX, X'Wy, dot products): each entry is
  ``math.fsum`` of the elementwise products. An elementwise product is one IEEE-754 operation
  (correctly rounded, the same on every machine), and ``fsum`` returns the correctly rounded
  sum of its inputs, which does not depend on their order or on how the machine adds;
* **matrix-vector products** of a design (predictions ``b0 + Z beta`` per record type): a fixed
  sequence of numpy elementwise operations, column after column (``acc = acc + Z[:, j] *
  beta[j]``); each is one correctly rounded operation per element, separate ufunc calls (never
  fused), so each row's result depends on its own numbers and the column order only;
* **symmetric eigen-decomposition** (the d x d matrices of the functional mechanism, sufficient
  statistics and logistic fits, d = design columns + 1): the cyclic Jacobi method, sweeping the
  pairs (p, q) in a fixed order with rotations computed from +, -, *, / and square roots
  (IEEE-754: correctly rounded, hence the same everywhere), a fixed stopping rule, and a
  stable sort of the eigenvalues; solves and minimum-norm least squares are built from it with
  ``fsum`` dot products.

Version 1 is the arithmetic of dpbundle 0.2 (numpy with BLAS and LAPACK): bundles made with
it replay byte for byte on the kernel they were made on, and within a stated tolerance on
another (audit/replay.py, docs/determinism.md).

Which version runs. A release writes the version of each attempt into its private transcript
(the mark ``{"kind": "mark", "mark": "arithmetic", "version": 2}``, right after the attempt's
"iteration" mark); the enclave replay reads it (none: version 1) and evaluates with it. Code
that evaluates criteria chooses with :func:`use` (a context manager); the default, outside any
:func:`use`, is version 1, so callers that never ask keep the numbers they had.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Iterator, Sequence

import numpy as np

__all__ = ["BLAS", "FIXED", "ARITHMETICS", "DEFAULT", "ARITHMETIC_MARK", "current", "use",
           "BLAS_REPLAY_RTOL", "arithmetic_of_records", "release_arithmetic", "fsum_dot", "gram", "cross", "matvec", "sym_eigh",
           "solve_clipped", "lstsq_sym", "exp", "JACOBI_MAX_SWEEPS"]

#: 1 = numpy with BLAS/LAPACK (dpbundle <= 0.2); 2 = the fixed-order routines of this module.
BLAS, FIXED = 1, 2
ARITHMETICS = (BLAS, FIXED)
#: The arithmetic of new releases.
DEFAULT = FIXED
#: The transcript mark of an attempt evaluated with version 2 (none: version 1).
ARITHMETIC_MARK = "arithmetic"

#: Sweeps of the Jacobi method before it gives up converging (it converges quadratically: a
#: well-scaled d <= 100 matrix needs fewer than 15).
JACOBI_MAX_SWEEPS = 60

#: Replaying an attempt made with version 1 on another BLAS kernel: the relative difference
#: ``|a - b| <= 1e-9 max(|a|, |b|)`` a value computed with version 1's arithmetic may have from
#: the released one (a criterion's dp_value, a continuous Laplace release's true value; never
#: data.csv, a count, a noise draw, a seed or ``passed``). Derivation (docs/determinism.md):
#: both machines evaluate the same formulas with backward-stable kernels (sums, products,
#: LAPACK's symmetric eigensolver and SVD least squares), whose results differ from the exact
#: one, hence from each other, by at most about c(d) u kappa relatively, u = 2^-53 ~ 1.1e-16,
#: c(d) <= 10 d^2 for the d x d systems and design sums of these criteria, kappa the condition
#: number of the solve (the clipped noisy Q: its largest eigenvalue over the clip floor
#: sqrt(d) x scale), and the cancellation of a difference of two such values (the MAE criterion)
#: adding a like factor. 1e-9 covers c(d) kappa up to about 10^7 (d = 30 with kappa up to
#: 10^4); the golden bundles differ by at most 5e-14 across the Haswell, SkylakeX, Sandybridge
#: and Prescott kernels. Nine significant digits are beyond what any document of the bundle
#: prints of these values (they are rounded to their noise) and far below the DP noise each
#: carries, so the tolerance cannot hide a change a reader could see; a value beyond it, or a
#: change of ``passed``, still fails the replay.
BLAS_REPLAY_RTOL = 1e-9

_CURRENT: contextvars.ContextVar[int] = contextvars.ContextVar("dpbundle_arithmetic", default=BLAS)


def current() -> int:
    """The arithmetic version in force (1 outside any :func:`use`)."""
    return _CURRENT.get()


@contextlib.contextmanager
def use(version: int) -> Iterator[int]:
    """Evaluate with arithmetic ``version`` inside the ``with`` block."""
    if version not in ARITHMETICS or isinstance(version, bool):
        raise ValueError(f"unknown arithmetic version {version!r}; known: {ARITHMETICS}")
    token = _CURRENT.set(int(version))
    try:
        yield int(version)
    finally:
        _CURRENT.reset(token)


def release_arithmetic() -> int:
    """The arithmetic a new release uses: :data:`DEFAULT` (2), marked in its transcript."""
    return DEFAULT


def arithmetic_of_records(records: Sequence[dict]) -> int:
    """The arithmetic version of one attempt's transcript records: the ``"arithmetic"`` mark's
    version, else 1 (transcripts made before version 2 have no such mark). ValueError for a
    mark naming no known version or given twice."""
    found = [r for r in records if r.get("kind") == "mark" and r.get("mark") == ARITHMETIC_MARK]
    if not found:
        return BLAS
    version = found[0].get("version")
    if len(found) > 1 or isinstance(version, bool) or version not in ARITHMETICS \
            or set(found[0]) != {"kind", "mark", "version"}:
        raise ValueError("the transcript's arithmetic mark names no known arithmetic version "
                         "(or comes more than once in an attempt)")
    return int(version)


# --------------------------------------------------------------------------- sums of products


def fsum_dot(a: np.ndarray, b: np.ndarray) -> float:
    """sum_i a_i b_i: the correctly rounded sum of the rounded products (order-independent)."""
    prod = np.multiply(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    return math.fsum(prod.ravel().tolist())


def _weighted(X: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    return X if w is None else X * np.asarray(w, dtype=np.float64)[:, None]


def gram(X: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """X' diag(w) X (d x d, exactly symmetric): entry (j, k), j <= k, is the fsum of
    ``(w * X[:, j]) * X[:, k]`` over the rows; the lower triangle is its mirror."""
    X = np.asarray(X, dtype=np.float64)
    wX = _weighted(X, w)
    d = X.shape[1]
    cols = [np.ascontiguousarray(X[:, k]) for k in range(d)]
    wcols = [np.ascontiguousarray(wX[:, j]) for j in range(d)]
    G = np.empty((d, d))
    for j in range(d):
        for k in range(j, d):
            G[j, k] = G[k, j] = math.fsum((wcols[j] * cols[k]).tolist())
    return G


def cross(X: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """X' diag(w) y (d entries): entry j is the fsum of ``(w * X[:, j]) * y``."""
    wX = _weighted(X, w)
    y = np.asarray(y, dtype=np.float64)
    return np.array([math.fsum((np.ascontiguousarray(wX[:, j]) * y).tolist())
                     for j in range(wX.shape[1])], dtype=np.float64)


def matvec(Z: np.ndarray, beta: np.ndarray, start: float = 0.0) -> np.ndarray:
    """start + Z beta, row by row in a fixed order: acc = start, then acc = acc + Z[:, j] *
    beta[j] for j = 0, 1, ... (numpy elementwise, one rounding per operation)."""
    Z = np.asarray(Z, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64).reshape(-1)
    if Z.ndim != 2 or Z.shape[1] != beta.size:
        raise ValueError(f"matvec: shapes {Z.shape} and {beta.shape} do not match")
    acc = np.full(Z.shape[0], float(start))
    for j in range(beta.size):
        acc = acc + Z[:, j] * float(beta[j])
    return acc


def _matvec_fsum(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A x with each entry a correctly rounded fsum (small A)."""
    return np.array([fsum_dot(A[i], x) for i in range(A.shape[0])], dtype=np.float64)


# --------------------------------------------------------------------------- eigen-decomposition


def _rotation(app: float, aqq: float, apq: float) -> tuple[float, float, float]:
    """(c, s, t) of the Jacobi rotation that zeroes a_pq (Golub & Van Loan, sym.schur2)."""
    theta = (aqq - app) / (2.0 * apq)
    if abs(theta) > 1e150:             # theta^2 would overflow: t ~ 1/(2 theta)
        t = 0.5 / theta
    else:
        t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
        if theta < 0:
            t = -t
    c = 1.0 / math.sqrt(t * t + 1.0)
    return c, t * c, t


def _negligible(app: float, aqq: float, apq: float) -> bool:
    """a_pq is below the rounding of both diagonal entries (Rutishauser's test), or zero."""
    g = 100.0 * abs(apq)
    return apq == 0.0 or (abs(app) + g == abs(app) and abs(aqq) + g == abs(aqq))


def _rotate(A: np.ndarray, V: np.ndarray, p: int, q: int, c: float, s: float, t: float) -> None:
    """A <- J' A J, V <- V J for the rotation J of (p, q); A stays exactly symmetric."""
    apq = float(A[p, q])
    app, aqq = float(A[p, p]), float(A[q, q])
    cp, cq = A[:, p].copy(), A[:, q].copy()
    A[:, p] = c * cp - s * cq
    A[:, q] = s * cp + c * cq
    A[p, :] = A[:, p]
    A[q, :] = A[:, q]
    A[p, p] = app - t * apq
    A[q, q] = aqq + t * apq
    A[p, q] = A[q, p] = 0.0
    vp, vq = V[:, p].copy(), V[:, q].copy()
    V[:, p] = c * vp - s * vq
    V[:, q] = s * vp + c * vq


def sym_eigh(Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvalues ascending, eigenvectors as columns) of the symmetric part of ``Q``, by the
    cyclic Jacobi method in a fixed order (module docstring): the same bits on every machine."""
    A = np.array(Q, dtype=np.float64, copy=True)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"sym_eigh: a square matrix is needed, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError("sym_eigh: the matrix has non-finite entries")
    A = 0.5 * (A + A.T)
    d = A.shape[0]
    V = np.eye(d)
    for _sweep in range(JACOBI_MAX_SWEEPS):
        rotated = False
        for p in range(d - 1):
            for q in range(p + 1, d):
                app, aqq, apq = float(A[p, p]), float(A[q, q]), float(A[p, q])
                if _negligible(app, aqq, apq):
                    A[p, q] = A[q, p] = 0.0
                    continue
                _rotate(A, V, p, q, *_rotation(app, aqq, apq))
                rotated = True
        if not rotated:
            break
    lam = np.diag(A).copy()
    order = np.argsort(lam, kind="stable")
    return lam[order], np.ascontiguousarray(V[:, order])


def solve_clipped(Q: np.ndarray, b: np.ndarray, floor: float) -> np.ndarray:
    """argmin w'Qw - 2b'w with Q's eigenvalues clipped below at ``floor`` (> 0): V diag(1 /
    max(lam, floor)) V' b, every product summed with fsum."""
    lam, V = sym_eigh(Q)
    lam = np.maximum(lam, float(floor))
    coef = _matvec_fsum(V.T, np.asarray(b, dtype=np.float64)) / lam
    return _matvec_fsum(V, coef)


def lstsq_sym(G: np.ndarray, b: np.ndarray, rcond: float = 1e-12) -> np.ndarray:
    """The minimum-norm least-squares solution of G w = b for a symmetric G, as
    ``np.linalg.lstsq(G, b, rcond)`` defines it: eigenvalues (G's singular values up to sign)
    with |lam| <= rcond max|lam| count as 0, so w = sum over the others of v (v'b) / lam."""
    lam, V = sym_eigh(G)
    big = float(np.max(np.abs(lam))) if lam.size else 0.0
    keep = np.abs(lam) > rcond * big
    proj = _matvec_fsum(V.T, np.asarray(b, dtype=np.float64))
    coef = np.where(keep, proj / np.where(keep, lam, 1.0), 0.0)
    return _matvec_fsum(V, coef)


# --------------------------------------------------------------------------- exponential

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01     # ln 2 split (fdlibm): k * _LN2_HI is exact for |k| < 2^20
_LN2_LO = 1.90821492927058770002e-10
_EXP_TERMS = 16                          # Taylor terms on |r| <= ln2/2: truncation below 1e-20


def exp(x: float) -> float:
    """e^x from +, -, *, / and an exact scaling by 2^k (no C library call, whose code the CPU
    chooses: glibc's ``exp`` has FMA variants): x = k ln2 + r with |r| <= ln2/2 (Cody and
    Waite's two-part ln 2), e^r by its Taylor polynomial in Horner form, then ``ldexp``. Within
    a few ulps of e^x; the same bits on every IEEE-754 machine. For version 2's post-processing
    weights (``oneway.discrete_laplace_variance``)."""
    x = float(x)
    if x != x:
        return x
    if x > 709.0:
        return math.inf
    if x < -745.0:
        return 0.0
    k = int(round(x * _LOG2E))
    r = (x - k * _LN2_HI) - k * _LN2_LO
    acc = 1.0
    for i in range(_EXP_TERMS, 0, -1):
        acc = 1.0 + acc * r / i
    return math.ldexp(acc, k)
