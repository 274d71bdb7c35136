"""All randomness of a release: OpenDP noise, recorded post-processing seeds, and replay.

Record mode: every DP release goes through OpenDP 0.16's exact samplers (OS randomness: the
Laplace and report-noisy-max under pure DP, the Gaussian under zCDP), and
every post-processing random generator is seeded from :mod:`secrets`; each step appends a
JSON-able record to a :class:`Transcript`. Replay mode walks the records of a recorded run
instead: it re-checks what the code asks for (kind, purpose, sensitivity, epsilon, scale, the
recomputed true value) against the record and returns the recorded output, so that an auditor
with the private data and the transcript reproduces the released data byte for byte. Frozen
mode (the self-audit, ``dpbundle selftest``) runs other data along a recorded random path: it
returns the recorded noisy outputs and seeds and records the run's own true values and
sensitivities, for comparison with the recorded ones.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import secrets
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from . import exact
from .exact import Fraction

__all__ = [
    "Transcript",
    "Randomness",
    "ReplayMismatch",
    "PathDivergence",
    "laplace_measurement",
    "gaussian_measurement",
    "noisy_max_measurement",
    "calibrated_laplace_scale",
    "calibrated_exponential_scale",
    "calibrated_gaussian_scale",
    "map_distance",
    "to_jsonable",
    "write_transcript_file",
    "commitment_of",
    "transcript_header",
    "transcript_file_bytes",
    "read_transcript_file",
    "TRANSCRIPT_FORMAT",
]

TRANSCRIPT_FORMAT = "dpbundle-transcript/1"
_MAX_NUDGES = 10_000


class ReplayMismatch(Exception):
    """A replayed run asked for something other than what the transcript recorded.

    The message says *where* (record index, kind and mechanism, purpose, field), never *what*:
    no recorded or recomputed true value, noisy value, count or n appears in it (an enclave
    replay against other data would otherwise print private statistics).
    """

    def __init__(self, message: str, *, index: int | None = None, purpose: str | None = None,
                 field: str | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.purpose = purpose
        self.field = field


class PathDivergence(ReplayMismatch):
    """Frozen mode: the run asked for another call than the recorded run made at this point
    (kind, purpose, mechanism, epsilon or output shape), or made fewer or more calls.

    ``recorded`` and ``asked`` are ``(kind, purpose)`` pairs (``None`` past the end of the
    record list). Like :class:`ReplayMismatch` the message names calls, never values.
    """

    def __init__(self, message: str, *, index: int, purpose: str | None, field: str,
                 recorded: tuple[str, str] | None, asked: tuple[str, str] | None) -> None:
        super().__init__(message, index=index, purpose=purpose, field=field)
        self.recorded = recorded
        self.asked = asked


# --------------------------------------------------------------------------- JSON helpers


def to_jsonable(x: Any, _path: str = "record") -> Any:
    """Convert numpy scalars/arrays, tuples and nested containers to plain JSON values.

    Floats must be finite (the canonical form uses ``allow_nan=False``); dict keys must be str.
    """
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        v = float(x)
        if not math.isfinite(v):
            raise ValueError(f"{_path}: non-finite number {v!r} cannot be recorded")
        return v
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "f" and x.size and not np.all(np.isfinite(x)):
            raise ValueError(f"{_path}: array with non-finite numbers cannot be recorded")
        if x.dtype.kind in "fiub":
            return x.tolist()
        return [to_jsonable(v, f"{_path}[{i}]") for i, v in enumerate(x.tolist())]
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            if not isinstance(k, str):
                raise ValueError(f"{_path}: dict key {k!r} is not a string")
            out[k] = to_jsonable(v, f"{_path}.{k}")
        return out
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v, f"{_path}[{i}]") for i, v in enumerate(x)]
    raise ValueError(f"{_path}: value of type {type(x).__name__} cannot be recorded as JSON")


def _canonical(record: dict) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)


class Transcript:
    """Append-only list of JSON-able dict records, with a canonical JSON-lines form."""

    def __init__(self, records: Iterable[dict] | None = None) -> None:
        self.records: list[dict] = []
        for r in records or ():
            self.append(r)

    def append(self, record: dict) -> None:
        """Append one record (converted to plain JSON values; must have a string ``kind``)."""
        if not isinstance(record, dict):
            raise ValueError(f"a transcript record must be a dict, got {type(record).__name__}")
        rec = to_jsonable(record)
        if not isinstance(rec.get("kind"), str):
            raise ValueError("a transcript record needs a string field 'kind'")
        self.records.append(rec)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def __getitem__(self, i):
        return self.records[i]

    def to_jsonl(self) -> bytes:
        """Canonical bytes: one ``json.dumps(sort_keys, (",", ":"), allow_nan=False)`` per line."""
        return "".join(_canonical(r) + "\n" for r in self.records).encode("utf-8")

    @classmethod
    def from_jsonl(cls, data: bytes | str) -> "Transcript":
        """Parse the canonical form (blank lines are ignored)."""
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        t = cls()
        for lineno, line in enumerate(data.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"transcript line {lineno}: not JSON ({e})") from None
            t.append(rec)
        return t

    def commitment(self, salt: bytes) -> str:
        """``sha256(salt || to_jsonl()).hexdigest()``; ``salt`` is 32 random bytes."""
        return commitment_of(salt, self.to_jsonl())


def commitment_of(salt: bytes, records_jsonl: bytes) -> str:
    """The published commitment: ``sha256(salt || records_jsonl).hexdigest()`` (32-byte salt)."""
    if not isinstance(salt, (bytes, bytearray)) or len(salt) != 32:
        raise ValueError("the commitment salt must be 32 bytes")
    if not isinstance(records_jsonl, (bytes, bytearray)):
        raise TypeError("the transcript records must be bytes (Transcript.to_jsonl())")
    return hashlib.sha256(bytes(salt) + bytes(records_jsonl)).hexdigest()


def transcript_header(salt: bytes) -> dict:
    """The first line of a transcript file: format and salt (not covered by the commitment)."""
    if not isinstance(salt, (bytes, bytearray)) or len(salt) != 32:
        raise ValueError("the commitment salt must be 32 bytes")
    return {"kind": "header", "format": TRANSCRIPT_FORMAT, "salt": bytes(salt).hex()}


def transcript_file_bytes(records_jsonl: bytes, salt: bytes) -> bytes:
    """The bytes of a private transcript file: the header line, then the canonical records."""
    return (_canonical(transcript_header(salt)) + "\n").encode("utf-8") + bytes(records_jsonl)


def write_transcript_file(path: str | Path, transcript: Transcript, salt: bytes) -> None:
    """Write the private transcript file: a header line with the salt, then the records.

    Private: the file is created with mode 0600 before any content is written (a fresh sibling
    opened with ``O_CREAT | O_EXCL``, its mode forced whatever the umask), fsynced and renamed
    over ``path`` atomically; an existing file is replaced, never written into."""
    path = Path(path)
    data = transcript_file_bytes(transcript.to_jsonl(), salt)
    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(6)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_transcript_file(path: str | Path) -> tuple[bytes, Transcript]:
    """Read a file written by :func:`write_transcript_file` -> ``(salt, transcript)``."""
    data = Path(path).read_bytes()
    first, _, rest = data.partition(b"\n")
    try:
        header = json.loads(first)
    except json.JSONDecodeError:
        raise ValueError(f"{path}: the first line is not a JSON transcript header") from None
    if not isinstance(header, dict) or header.get("kind") != "header" \
            or header.get("format") != TRANSCRIPT_FORMAT:
        raise ValueError(f"{path}: the first line must be a {TRANSCRIPT_FORMAT!r} header")
    salt = bytes.fromhex(header["salt"])
    return salt, Transcript.from_jsonl(rest)


# --------------------------------------------------------------------------- OpenDP


def _dp():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


def laplace_measurement(scale: float, vector: bool, integer: bool = False):
    """OpenDP Laplace: scalar on (atom_domain, absolute_distance), vector on (vector_domain, l1).

    ``integer=True``: the discrete Laplace (geometric) mechanism on i64 values, same scale.
    """
    dp = _dp()
    T = "i64" if integer else float
    atom = dp.atom_domain(T="i64") if integer else dp.atom_domain(T=float, nan=False)
    if vector:
        return dp.m.make_laplace(dp.vector_domain(atom), dp.l1_distance(T=T), scale)
    return dp.m.make_laplace(atom, dp.absolute_distance(T=T), scale)


def gaussian_measurement(scale: float, vector: bool, integer: bool = True):
    """OpenDP Gaussian under ``zero_concentrated_divergence``: scalar on (atom_domain,
    absolute_distance), vector on (vector_domain, l2_distance), the *distance type f64* in
    both (OpenDP lets the sensitivity's type differ from the data's, so an L2 sensitivity such
    as sqrt(2) on an integer vector is a float, not rounded up to an integer).

    ``integer=True``: the discrete Gaussian (Canonne, Kamath & Steinke 2020) on i64 values,
    standard deviation parameter ``scale``; ``integer=False``: f64 values, OpenDP's default
    (finest) noise granularity."""
    dp = _dp()
    atom = dp.atom_domain(T="i64") if integer else dp.atom_domain(T=float, nan=False)
    if vector:
        return dp.m.make_gaussian(dp.vector_domain(atom), dp.l2_distance(T=float), scale)
    return dp.m.make_gaussian(atom, dp.absolute_distance(T=float), scale)


def noisy_max_measurement(scale: float):
    """OpenDP report-noisy-max on (vector_domain, non-monotonic linf), max_divergence.

    With max_divergence OpenDP 0.16 uses exponential noise (permute-and-flip).
    """
    dp = _dp()
    return dp.m.make_noisy_max(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)),
        dp.linf_distance(T=float),
        dp.max_divergence(),
        scale,
    )


def map_distance(sensitivity: float, integer: bool = False) -> float | int:
    """The input distance at which a calibrated measurement's OpenDP privacy map is checked.

    A float sensitivity computed by a formula (``2 / n``, ``(U - L) / m``) may lie up to half
    an ulp above the float ``s`` it was rounded to; every real number that rounds (to nearest
    or down) to ``s`` is below ``nextafter(s, +inf)``, so the map is checked there and covers
    the exact sensitivity. Exceptions: 0 (no noise needed; a formula's 0 is exact) and the
    integer (discrete) Laplace, whose sensitivity is an exact integer."""
    if integer:
        return int(sensitivity)
    if sensitivity == 0:
        return 0.0
    return math.nextafter(float(sensitivity), math.inf)


def _nudge(scale: float, build, d_in: Any, target: Fraction, what: str):
    """Increase ``scale`` by ulps until OpenDP's map is within ``target``, exactly:
    ``binary(build(scale).map(d_in)) <= target`` (OpenDP rounds its map up; the comparison is
    done on rationals, so a map one ulp above a decimal epsilon is caught)."""
    for _ in range(_MAX_NUDGES):
        meas = build(scale)
        if exact.binary(float(meas.map(d_in))) <= target:
            return scale, meas
        scale = math.nextafter(scale, math.inf)
    raise RuntimeError(f"could not calibrate a {what} scale with privacy map <= "
                       f"{exact.show(target)} at distance {d_in!r}")


def _check_budget(sensitivity: float, epsilon: float) -> tuple[float, float]:
    """(sensitivity, epsilon) as floats: epsilon finite > 0, sensitivity finite >= 0, neither
    a boolean. The epsilon is the float handed to OpenDP; calibration keeps OpenDP's map within
    ``exact.spendable(epsilon)`` (the smaller of its binary and its decimal value)."""
    return _check_numbers(sensitivity, epsilon, "epsilon")


def _check_numbers(sensitivity: float, budget: float, name: str) -> tuple[float, float]:
    """(sensitivity, budget) as floats; ``name`` ("epsilon" or "rho") names the budget."""
    if isinstance(sensitivity, (bool, np.bool_)) or isinstance(budget, (bool, np.bool_)):
        raise ValueError(f"sensitivity and {name} must be numbers, got {sensitivity!r}, {budget!r}")
    try:
        s = float(sensitivity)
        e = float(budget)
    except (TypeError, ValueError):
        raise ValueError(
            f"sensitivity and {name} must be numbers, got {sensitivity!r}, {budget!r}"
        ) from None
    if not math.isfinite(e) or e <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {budget!r}")
    if not math.isfinite(s) or s < 0:
        raise ValueError(f"sensitivity must be a finite number >= 0, got {sensitivity!r}")
    return s, e


def _int_sensitivity(s: float, what: str) -> int:
    if s != math.floor(s):
        raise ValueError(f"{what}: integer (discrete) Laplace needs an integer sensitivity, got {s!r}")
    return int(s)


@functools.lru_cache(maxsize=1024)
def _calibrated_laplace(s: float, e: float, vector: bool, integer: bool):
    """Cached (scale, measurement) for the Laplace mechanism (measurements are immutable).

    Calibration, exactly: with ``d = map_distance(s)`` and ``target = exact.spendable(e)``
    (``min(binary(e), dec(e))``, e.g. 4/5 for 0.8), OpenDP's Laplace map is ``d / scale``
    rounded up to a float, so every float scale below ``float_up(binary(d) / target)`` has
    ``map(d) >= d / scale > target``; that scale is the start, and it is nudged up by ulps
    until ``binary(map(d)) <= target`` (at most a few ulps: the rounding of OpenDP's quotient).
    The result is the smallest float scale whose OpenDP map at ``d`` is ``<= target``."""
    d_in = map_distance(s, integer)
    target = exact.spendable(e)
    start = exact.float_up(exact.binary(float(d_in)) / target)
    return _nudge(start, lambda sc: laplace_measurement(sc, vector, integer), d_in, target,
                  "Laplace")


@functools.lru_cache(maxsize=1024)
def _calibrated_noisy_max(s: float, e: float):
    """Cached (scale, measurement) for report-noisy-max: as :func:`_calibrated_laplace`, with
    OpenDP's map ``2 d / scale`` (rounded up), so the start is ``float_up(2 binary(d) / target)``."""
    d_in = map_distance(s)
    target = exact.spendable(e)
    start = exact.float_up(2 * exact.binary(d_in) / target)
    return _nudge(start, noisy_max_measurement, d_in, target, "report-noisy-max")


def calibrated_laplace_scale(sensitivity: float, epsilon: float, vector: bool = False,
                             integer: bool = False) -> float:
    """Smallest float scale whose OpenDP Laplace map at ``map_distance(sensitivity)`` is
    ``<= exact.spendable(epsilon)`` exactly (so ``>= sensitivity / epsilon``)."""
    s, e = _check_budget(sensitivity, epsilon)
    if integer:
        _int_sensitivity(s, "laplace")
    return _calibrated_laplace(s, e, bool(vector), bool(integer))[0]


def calibrated_exponential_scale(sensitivity: float, epsilon: float) -> float:
    """Smallest float scale whose OpenDP report-noisy-max map at ``map_distance(sensitivity)``
    is ``<= exact.spendable(epsilon)`` exactly (so ``>= 2 * sensitivity / epsilon``)."""
    s, e = _check_budget(sensitivity, epsilon)
    return _calibrated_noisy_max(s, e)[0]


def _check_rho(sensitivity: float, rho: float) -> tuple[float, float]:
    """(sensitivity, rho) as floats, checked as :func:`_check_budget` checks an epsilon."""
    return _check_numbers(sensitivity, rho, "rho")


def _min_gaussian_scale(d: Fraction, target: Fraction) -> float:
    """The smallest float ``sigma`` with ``d^2 / (2 sigma^2) <= target``, i.e. with
    ``sigma^2 >= d^2 / (2 target)``, decided on rationals (a float's square is exact as a
    Fraction)."""
    q = d * d / (2 * target)
    if q == 0:
        return 0.0
    sigma = float(math.sqrt(float(q)))
    while Fraction(sigma) ** 2 < q:
        sigma = math.nextafter(sigma, math.inf)
    while sigma > 0 and Fraction(math.nextafter(sigma, 0.0)) ** 2 >= q:
        sigma = math.nextafter(sigma, 0.0)
    return sigma


@functools.lru_cache(maxsize=1024)
def _calibrated_gaussian(s: float, r: float, vector: bool, integer: bool):
    """Cached (scale, measurement) for the Gaussian mechanism under zCDP.

    Derivation. OpenDP's zCDP map of ``make_gaussian`` at input distance ``d`` is
    ``(d / scale)^2 / 2`` (CKS20 for the discrete Gaussian on integer vectors: for a shift
    ``Delta`` the Renyi divergence of every order ``a`` is at most ``a ||Delta||_2^2 / (2
    scale^2)``, the same bound as the continuous Gaussian), evaluated with upward rounding,
    so it is at least the exact value. The L2 distance is a float here
    (:func:`gaussian_measurement`), so a non-integer sensitivity is handed over as it is; like
    the Laplace, the map is checked at ``d = map_distance(s)``, the next float above ``s``
    (for ``s = sqrt(2)``: ``fl(sqrt 2)`` is already above the real sqrt(2), and ``d`` is one ulp
    higher still; every real sensitivity that rounds to ``s`` is below ``d``). A rho-zCDP
    guarantee at distance ``d`` holds at every smaller distance (the map is increasing in
    ``d``), so the release is rho-zCDP for neighbours whose true values differ by at most the
    real sensitivity in L2. With ``target = exact.spendable(r)``, the start is the smallest
    float ``scale`` with the *exact* map ``binary(d)^2 / (2 scale^2) <= target``
    (:func:`_min_gaussian_scale`): every smaller float has an exact map above the target, and
    OpenDP's rounded map is no smaller, so it is above too. The start is nudged up by ulps
    until ``binary(OpenDP's map(d)) <= target`` (a few ulps at most: OpenDP's rounding). The
    result is the smallest float scale whose OpenDP map at ``d`` is ``<= target``."""
    d_in = map_distance(s)
    target = exact.spendable(r)
    start = _min_gaussian_scale(exact.binary(d_in), target)
    return _nudge(start, lambda sc: gaussian_measurement(sc, vector, integer), d_in, target,
                  "Gaussian")


def calibrated_gaussian_scale(sensitivity: float, rho: float, integer: bool = True,
                              vector: bool = True) -> float:
    """Smallest float scale (standard deviation) whose OpenDP Gaussian zCDP map at
    ``map_distance(sensitivity)`` (the next float above the L2 sensitivity) is ``<=
    exact.spendable(rho)`` exactly (so ``>= sensitivity / sqrt(2 rho)``). The map does not
    depend on ``vector`` (scalar and vector measurements calibrate alike); it is a parameter
    for symmetry with :func:`calibrated_laplace_scale`."""
    s, r = _check_rho(sensitivity, rho)
    return _calibrated_gaussian(s, r, bool(vector), bool(integer))[0]


# --------------------------------------------------------------------------- Randomness


def _check_purpose(purpose: str) -> str:
    if not isinstance(purpose, str) or not purpose:
        raise ValueError(f"purpose must be a non-empty string, got {purpose!r}")
    return purpose


def _where(rec: dict, kind: str | None = None, purpose: str | None = None) -> str:
    """A record named for a replay mismatch: kind, purpose (or mark name) and mechanism, never
    one of its numbers (``true``, ``noisy`` and counts are private)."""
    k = rec.get("kind") if kind is None else kind
    what = rec.get("purpose", rec.get("mark")) if purpose is None else purpose
    mech = rec.get("mechanism")
    out = f"{k if isinstance(k, str) else 'unknown'} {what!r}" if isinstance(what, str) \
        else f"{k if isinstance(k, str) else 'unknown'} record"
    return out + (f" via {mech}" if isinstance(mech, str) and len(mech) <= 80 else "")


def _call_of(rec: dict) -> tuple[str, str]:
    """(kind, purpose or mark name) of a record, for :class:`PathDivergence`."""
    kind = rec.get("kind")
    what = rec.get("mark") if kind == "mark" else rec.get("purpose")
    return (kind if isinstance(kind, str) else "unknown", what if isinstance(what, str) else "?")


def _laplace_true(true_value: Any, purpose: str, integer: bool,
                  kind: str = "laplace") -> tuple[tuple | None, Any]:
    """The checked true value of a Laplace (or ``kind``) call: (shape or ``None`` for a scalar,
    record value)."""
    if np.ndim(true_value) > 0:
        arr = np.asarray(true_value)
        return arr.shape, _laplace_true_array(arr, purpose, integer, kind)
    return None, _laplace_true_scalar(true_value, purpose, integer, kind)


def _laplace_true_array(arr: np.ndarray, purpose: str, integer: bool, kind: str = "laplace") -> list:
    """The flat record list of an array true value (numeric, finite, integral if ``integer``)."""
    kind_name = f"integer {kind}" if integer else kind
    if arr.size == 0:
        raise ValueError(f"{kind} {purpose!r}: the true value is an empty array")
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{kind} {purpose!r}: the true value must be numeric, got {arr.dtype}")
    if integer and arr.dtype.kind in "biu":
        if arr.dtype.kind == "u" and arr.size and arr.max() >= 2**62:
            raise ValueError(f"{kind_name} {purpose!r}: the true values are too large")
        return arr.astype(np.int64).reshape(-1).tolist()
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{kind} {purpose!r}: the true value has non-finite entries")
    if integer:
        if not np.all(arr == np.floor(arr)) or np.any(np.abs(arr) >= 2.0**53):
            raise ValueError(f"{kind_name} {purpose!r}: the true values must be integers")
        return arr.astype(np.int64).reshape(-1).tolist()
    return arr.reshape(-1).tolist()


def _laplace_true_scalar(true_value: Any, purpose: str, integer: bool,
                         kind: str = "laplace") -> int | float:
    """The record value of a scalar true value (a finite number, an integer if ``integer``)."""
    kind_name = f"integer {kind}" if integer else kind
    try:
        tv = float(true_value)
    except (TypeError, ValueError):
        raise ValueError(f"{kind} {purpose!r}: true value {true_value!r} is not a number") from None
    if not math.isfinite(tv):
        raise ValueError(f"{kind} {purpose!r}: true value {tv!r} is not finite")
    if integer:
        if tv != math.floor(tv) or abs(tv) >= 2.0**62:
            raise ValueError(f"{kind_name} {purpose!r}: the true value {tv!r} is not an integer")
        return int(tv)
    return tv


def _with_shape(record: dict, shape: tuple | None) -> dict:
    """``record`` with a ``shape`` field added for a multi-dimensional array output."""
    if shape is not None and len(shape) != 1:
        record["shape"] = list(shape)
    return record


class Randomness:
    """Source of all randomness of a run; records (default), replays a transcript, or
    follows one on other data (frozen mode, :meth:`frozen`).

    In replay mode ``transcript`` collects the replayed records, so it equals the recorded
    transcript once the replay has consumed it. In frozen mode it collects the run's own
    records (its true values, sensitivities and scales) with the recorded outputs.
    """

    def __init__(self, transcript: Transcript | None = None, seeds: Any = None) -> None:
        """``seeds``: an optional :class:`dpbundle.mechanisms.seeds.SeedBinding`; the seeds of
        bound post-processing steps are then derived from it instead of drawn from ``secrets``."""
        self.transcript: Transcript = transcript if transcript is not None else Transcript()
        self._replay: list[dict] | None = None
        self._frozen: list[dict] | None = None
        self._cursor: int = 0
        self._seeds = seeds
        self._seed_uses: dict[str, int] = {}
        self._true_rtol = 0.0
        #: replay mode: (record index, purpose) of each continuous Laplace true value accepted
        #: within ``true_rtol`` rather than equal (:meth:`replay`)
        self.tolerated: list[tuple[int, str]] = []

    @classmethod
    def replay(cls, records: Iterable[dict] | Transcript, start: int = 0,
               true_rtol: float = 0.0) -> "Randomness":
        """Replay mode over ``records`` with the cursor at record index ``start``.

        ``true_rtol`` (default 0: every true value must be the recorded one exactly): the
        relative difference a recomputed true value of a *continuous* Laplace release may have
        from the recorded one (``|a - b| <= true_rtol max(|a|, |b|)``, element by element); for
        replaying, on another BLAS kernel, an attempt made with arithmetic version 1
        (``mechanisms/arithmetic.py``, docs/determinism.md). Each such record is listed in
        :attr:`tolerated`. Integer releases (counts), noisy-max scores, sensitivities, scales,
        seeds and the recorded outputs are compared exactly whatever it is."""
        recs = list(records.records if isinstance(records, Transcript) else records)
        if not 0 <= start <= len(recs):
            raise ValueError(f"replay start {start} is outside 0..{len(recs)}")
        rtol = float(true_rtol)
        if not 0.0 <= rtol < 1e-3:
            raise ValueError(f"true_rtol {true_rtol!r} is not in [0, 1e-3)")
        r = cls()
        r._replay = recs
        r._cursor = int(start)
        r._true_rtol = rtol
        return r

    @classmethod
    def frozen(cls, records: Iterable[dict] | Transcript) -> "Randomness":
        """Frozen mode (the self-audit): follow a recorded run's random path on other data.

        Every DP call returns the *recorded* output (noisy value, chosen index) and every
        :meth:`rng` the *recorded* seed, so that a run on a neighbouring dataset takes the
        recorded run's random path (the coupling of a DP proof: same noise, same outputs);
        the transcript collects the run's *own* records (true value, sensitivity, scale, with
        the recorded output), for comparison with the recorded ones. The call sequence must
        follow the recording: another kind, purpose, mechanism or epsilon, another output
        shape, or a run past the end raises :class:`PathDivergence`
        (:meth:`check_finished` catches a run that ends early). Marks are followed by name
        only (their fields are private diagnostics). Nothing is drawn, nothing is spent."""
        r = cls()
        r._frozen = list(records.records if isinstance(records, Transcript) else records)
        return r

    # ---- state

    @property
    def replaying(self) -> bool:
        """True in replay mode."""
        return self._replay is not None

    @property
    def following(self) -> bool:
        """True in frozen mode (:meth:`frozen`)."""
        return self._frozen is not None

    def _script(self) -> list[dict] | None:
        return self._replay if self._replay is not None else self._frozen

    @property
    def cursor(self) -> int:
        """Index of the next record (replay and frozen mode) or the number of records so far
        (record mode)."""
        return self._cursor if self._script() is not None else len(self.transcript)

    def remaining(self) -> int:
        """Records not yet replayed or followed (0 in record mode)."""
        script = self._script()
        return len(script) - self._cursor if script is not None else 0

    def check_finished(self) -> None:
        """Raise :class:`ReplayMismatch` if replay mode has records left over
        (:class:`PathDivergence` in frozen mode)."""
        if self._frozen is not None and self.remaining():
            rec = self._frozen[self._cursor]
            raise PathDivergence(
                f"record {self._cursor} ({_where(rec)}) and {self.remaining() - 1} more records "
                "of the recorded run were not asked for: the run ended earlier",
                index=self._cursor, purpose=rec.get("purpose"), field="end",
                recorded=_call_of(rec), asked=None)
        if self.remaining():
            rec = self._replay[self._cursor]
            raise ReplayMismatch(
                f"transcript record {self._cursor} ({_where(rec)}) and "
                f"{self.remaining() - 1} more records were not replayed: the code differs from "
                "the recorded run",
                index=self._cursor, purpose=rec.get("purpose"), field="end",
            )

    # ---- replay plumbing

    def _next(self, kind: str, purpose: str) -> tuple[int, dict]:
        assert self._replay is not None
        i = self._cursor
        if i >= len(self._replay):
            raise ReplayMismatch(
                f"the transcript ended after {len(self._replay)} records but the run asked for "
                f"another ({kind} {purpose!r}): the code differs from the recorded run",
                index=i, purpose=purpose, field="end",
            )
        rec = self._replay[i]
        if rec.get("kind") != kind:
            raise ReplayMismatch(
                f"transcript record {i} is {_where(rec)} but the run asked for a {kind} "
                f"record ({purpose!r}): the code differs from the recorded run",
                index=i, purpose=purpose, field="kind",
            )
        label = f"transcript record {i} ({kind} {purpose!r})"
        if kind != "mark" and rec.get("purpose") != purpose:
            raise ReplayMismatch(
                f"{label}: the recorded purpose is {rec.get('purpose')!r}: the code differs from "
                "the recorded run", index=i, purpose=purpose, field="purpose",
            )
        return i, rec

    def _expect(self, i: int, rec: dict, kind: str, purpose: str, field: str, value: Any,
                what: str) -> None:
        # Neither value is printed: a sensitivity or scale recomputed on other data may depend on
        # private numbers (n, a group size), and the recorded one comes from the private transcript.
        if rec.get(field) != value:
            raise ReplayMismatch(
                f"transcript record {i} ({_where(rec, kind, purpose)}), field {field!r}: the "
                f"recomputed {what} differs from the recorded one: the code, the public spec or "
                "the private data differ from the recorded run", index=i, purpose=purpose, field=field,
            )

    def _within_rtol(self, kind: str, rec: dict, value: Any) -> bool:
        """Whether a recomputed continuous Laplace true value is within the replay's
        ``true_rtol`` of the recorded one (:meth:`replay`); never for other records."""
        if not self._true_rtol or kind != "laplace" or rec.get("mechanism") != "opendp.make_laplace":
            return False
        recorded = rec.get("true")
        if isinstance(value, list) != isinstance(recorded, list):
            return False
        try:
            a = np.asarray(value, dtype=np.float64).reshape(-1)
            b = np.asarray(recorded, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            return False
        if a.shape != b.shape or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            return False
        return bool(np.all(np.abs(a - b) <= self._true_rtol * np.maximum(np.abs(a), np.abs(b))))

    def _expect_true(self, i: int, rec: dict, kind: str, purpose: str, value: Any) -> None:
        # Private: the message names the record, mechanism, purpose and (for a vector) the first
        # differing element's position; never a true value, a difference or how many differ.
        recorded = rec.get("true")
        if recorded != value and self._within_rtol(kind, rec, value):
            self.tolerated.append((i, purpose))
            return
        tail = ": the private data or the code differ from the recorded run"
        label = f"transcript record {i} ({_where(rec, kind, purpose)}), field 'true'"
        if isinstance(value, list):
            if not isinstance(recorded, list) or len(recorded) != len(value):
                raise ReplayMismatch(
                    f"{label}: the recomputed true value and the recorded one have different "
                    f"shapes{tail}", index=i, purpose=purpose, field="true",
                )
            a = np.asarray(value, dtype=np.float64)
            b = np.asarray(recorded, dtype=np.float64)
            diff = np.flatnonzero(a != b)
            if diff.size:
                raise ReplayMismatch(
                    f"{label}: the recomputed true value differs from the recorded one (first at "
                    f"element {int(diff[0])}){tail}", index=i, purpose=purpose, field="true",
                )
        elif recorded != value:
            raise ReplayMismatch(
                f"{label}: the recomputed true value differs from the recorded one{tail}",
                index=i, purpose=purpose, field="true",
            )

    def _emit(self, record: dict) -> None:
        self.transcript.append(record)
        if self._script() is not None:
            self._cursor += 1

    # ---- frozen-mode plumbing

    def _follow(self, kind: str, purpose: str) -> tuple[int, dict]:
        """The recorded record the run's next call must match (kind and purpose), else
        :class:`PathDivergence`."""
        assert self._frozen is not None
        i = self._cursor
        if i >= len(self._frozen):
            raise PathDivergence(
                f"the recorded run ended after {len(self._frozen)} records but this run asked "
                f"for another ({kind} {purpose!r})", index=i, purpose=purpose, field="end",
                recorded=None, asked=(kind, purpose))
        rec = self._frozen[i]
        name = rec.get("mark") if kind == "mark" else rec.get("purpose")
        if rec.get("kind") != kind or name != purpose:
            raise PathDivergence(
                f"record {i}: the recorded run made {_where(rec)} but this run asked for "
                f"{kind} {purpose!r}", index=i, purpose=purpose,
                field="kind" if rec.get("kind") != kind else "purpose",
                recorded=_call_of(rec), asked=(kind, purpose))
        return i, rec

    def _diverge_if(self, differs: bool, i: int, rec: dict, field: str, what: str) -> None:
        if differs:
            raise PathDivergence(
                f"record {i} ({_where(rec)}): this run's {what} differs from the recorded run's",
                index=i, purpose=rec.get("purpose"), field=field, recorded=_call_of(rec),
                asked=_call_of(rec))

    def _frozen_laplace(self, record: dict, shape: tuple | None, integer: bool) -> Any:
        """Frozen mode: ``record`` (this run's own) gets the recorded output, which is returned."""
        return self._frozen_additive("laplace", "epsilon", record, shape, integer)

    def _frozen_additive(self, kind: str, budget: str, record: dict, shape: tuple | None,
                         integer: bool) -> Any:
        """Frozen mode of an additive-noise call (``laplace`` or ``gaussian``; ``budget``: the
        record's epsilon or rho field): ``record`` (this run's own) gets the recorded output,
        which is returned."""
        i, rec = self._follow(kind, record["purpose"])
        self._diverge_if(rec.get("mechanism") != record["mechanism"], i, rec, "mechanism", "mechanism")
        self._diverge_if(rec.get(budget) != record[budget], i, rec, budget, budget)
        mine, theirs = record["true"], rec.get("true")
        self._diverge_if(isinstance(mine, list) != isinstance(theirs, list)
                         or (isinstance(mine, list) and len(mine) != len(theirs))
                         or record.get("shape") != rec.get("shape"),
                         i, rec, "shape", "output shape")
        noisy = rec.get("noisy")
        self._emit({**record, "noisy": noisy})
        if shape is None:
            return int(noisy) if integer else float(noisy)
        return np.asarray(noisy, dtype=np.int64 if integer else np.float64).reshape(shape)

    def _frozen_choice(self, record: dict) -> int:
        """Frozen mode: the recorded choice of a report-noisy-max call."""
        i, rec = self._follow("exponential", record["purpose"])
        self._diverge_if(rec.get("epsilon") != record["epsilon"], i, rec, "epsilon", "epsilon")
        theirs = rec.get("true")
        self._diverge_if(not isinstance(theirs, list) or len(theirs) != len(record["true"]),
                         i, rec, "shape", "number of candidates")
        choice = int(rec.get("noisy"))
        self._emit({**record, "noisy": choice})
        return choice

    # ---- mechanisms

    def laplace(self, true_value: float | np.ndarray, *, sensitivity: float, epsilon: float,
                purpose: str, integer: bool = False) -> float | np.ndarray:
        """Laplace mechanism via OpenDP ``make_laplace``: ``true + Lap(scale)`` per coordinate.

        Scalar: (atom_domain, absolute_distance); array: (vector_domain, l1_distance) where
        ``sensitivity`` is the L1 sensitivity. ``scale`` = the smallest float whose OpenDP
        privacy map at the next float above ``sensitivity`` (the exact integer for
        ``integer=True``; see :func:`map_distance`) is ``<= exact.spendable(epsilon)`` in exact
        arithmetic, so the release is ``epsilon``-DP for neighbours at that distance whether
        ``epsilon`` is read as a decimal (0.8 -> 4/5) or as its binary value. Returns a float
        or a float64 array of the input's shape.

        ``integer=True`` (e.g. for counts): OpenDP's discrete Laplace on i64 values, which is
        exact and about 5x faster; the true value must be integer-valued, the sensitivity an
        integer, and the output is an int (or an int64 array).
        """
        purpose = _check_purpose(purpose)
        s, e = _check_budget(sensitivity, epsilon)
        if integer:
            _int_sensitivity(s, f"laplace {purpose!r}")  # refuses a non-integer sensitivity
        shape, true_rec = _laplace_true(true_value, purpose, integer)
        scale, meas = _calibrated_laplace(s, e, shape is not None, bool(integer))
        mech = "opendp.make_laplace/integer" if integer else "opendp.make_laplace"
        base = {"kind": "laplace", "purpose": purpose, "mechanism": mech, "sensitivity": s,
                "epsilon": e, "scale": scale, "true": true_rec}
        if self._replay is not None:
            return self._replayed_laplace(base, shape, integer)
        if self._frozen is not None:
            return self._frozen_laplace(_with_shape(dict(base), shape), shape, integer)
        return self._fresh_laplace(base, meas, shape, integer)

    def _replayed_laplace(self, base: dict, shape: tuple | None, integer: bool) -> Any:
        """Replay mode: check the call against the next record and return its recorded output."""
        return self._replayed_additive("laplace", "epsilon", base, shape, integer)

    def _replayed_additive(self, kind: str, budget: str, base: dict, shape: tuple | None,
                           integer: bool) -> Any:
        """Replay mode of an additive-noise call (``laplace`` or ``gaussian``; ``budget``: the
        record's epsilon or rho field): check the call against the next record and return its
        recorded output."""
        purpose, true_rec = base["purpose"], base["true"]
        i, rec = self._next(kind, purpose)
        self._expect(i, rec, kind, purpose, "sensitivity", base["sensitivity"], "sensitivity")
        self._expect(i, rec, kind, purpose, budget, base[budget], budget)
        self._expect(i, rec, kind, purpose, "scale", base["scale"], "noise scale")
        self._expect_true(i, rec, kind, purpose, true_rec)
        self._expect(i, rec, kind, purpose, "mechanism", base["mechanism"], "mechanism")
        noisy = rec.get("noisy")
        num = int if integer else (int, float)
        ok = (isinstance(noisy, list) and len(noisy) == len(true_rec)
              and all(isinstance(v, num) and not isinstance(v, bool) for v in noisy)) \
            if shape is not None else (isinstance(noisy, num) and not isinstance(noisy, bool))
        if not ok:
            raise ReplayMismatch(
                f"transcript record {i} ({_where(rec, kind, purpose)}), field 'noisy': "
                "the recorded output is malformed", index=i, purpose=purpose, field="noisy")
        dtype = np.int64 if integer else np.float64
        out: Any = np.asarray(noisy, dtype=dtype).reshape(shape) if shape is not None else \
            (int(noisy) if integer else float(noisy))
        self._emit(rec)
        return out

    def _fresh_laplace(self, base: dict, meas, shape: tuple | None, integer: bool) -> Any:
        """Record mode: draw the noise with the OpenDP measurement and record the call (any
        additive-noise measurement: Laplace or Gaussian)."""
        conv = int if integer else float
        if shape is not None:
            noisy_list = [conv(v) for v in meas(base["true"])]
            out = np.asarray(noisy_list, dtype=np.int64 if integer else np.float64).reshape(shape)
            noisy_rec: Any = noisy_list
        else:
            out = conv(meas(base["true"]))
            noisy_rec = out
        self._emit(_with_shape({**base, "noisy": noisy_rec}, shape))
        return out

    def gaussian(self, true_value: float | np.ndarray, *, sensitivity: float, rho: float,
                 purpose: str, integer: bool = True) -> float | np.ndarray:
        """Gaussian mechanism via OpenDP ``make_gaussian`` under ``zero_concentrated_divergence``:
        ``true + N(0, scale^2)`` per coordinate, rho-zCDP.

        Scalar: (atom_domain, absolute_distance); array: (vector_domain, l2_distance), the
        distance type f64 (:func:`gaussian_measurement`), ``sensitivity`` the *L2* sensitivity
        (a float: ``sqrt(2)`` for a count table under change-one, where one record leaves one
        cell and enters another). ``scale`` (the standard deviation) is the smallest float whose
        OpenDP zCDP map at the next float above ``sensitivity`` (:func:`map_distance`) is
        ``<= exact.spendable(rho)`` in exact arithmetic (derivation in
        :func:`_calibrated_gaussian`), so the release is rho-zCDP for neighbours whose true
        values differ by at most ``sensitivity`` in L2, whether ``rho`` is read as a decimal
        or as its binary value.

        ``integer=True`` (the default, for counts): OpenDP's discrete Gaussian on i64 values
        (mechanism ``opendp.make_gaussian/integer``); the true value must be integer-valued and
        the output is an int (or an int64 array of the input's shape). ``integer=False``:
        continuous values (``opendp.make_gaussian``), a float or float64 array. The sensitivity
        need not be an integer either way.

        Record: ``{"kind": "gaussian", "purpose", "mechanism", "sensitivity", "rho", "scale",
        "true", "noisy"}`` (plus ``"shape"`` for a multi-dimensional array); replay and frozen
        mode as for :meth:`laplace` (the recorded ``rho`` in place of ``epsilon``)."""
        purpose = _check_purpose(purpose)
        s, r = _check_rho(sensitivity, rho)
        shape, true_rec = _laplace_true(true_value, purpose, integer, "gaussian")
        scale, meas = _calibrated_gaussian(s, r, shape is not None, bool(integer))
        mech = "opendp.make_gaussian/integer" if integer else "opendp.make_gaussian"
        base = {"kind": "gaussian", "purpose": purpose, "mechanism": mech, "sensitivity": s,
                "rho": r, "scale": scale, "true": true_rec}
        if self._replay is not None:
            return self._replayed_additive("gaussian", "rho", base, shape, integer)
        if self._frozen is not None:
            return self._frozen_additive("gaussian", "rho", _with_shape(dict(base), shape),
                                         shape, integer)
        return self._fresh_laplace(base, meas, shape, integer)

    def exponential(self, scores: np.ndarray, *, sensitivity: float, epsilon: float,
                    purpose: str) -> int:
        """Private selection via OpenDP ``make_noisy_max`` under ``max_divergence`` (argmax).

        ``sensitivity`` bounds ``max_i |u_i(D) - u_i(D')|`` (non-monotonic linf); scale =
        ``2 * sensitivity / epsilon`` rounded up to the smallest float whose OpenDP map at
        :func:`map_distance` is ``<= exact.spendable(epsilon)`` exactly, so the choice is
        epsilon-DP. Note: under ``max_divergence`` OpenDP 0.16 adds *exponential*
        noise (report-noisy-max = permute-and-flip, McKenna & Sheldon 2020), not Gumbel noise:
        the choice probabilities are those of permute-and-flip, which is at least as accurate
        as the exponential mechanism ``P[i] ∝ exp(epsilon * u_i / (2 * sensitivity))`` at the
        same epsilon. Returns the chosen index.
        """
        purpose = _check_purpose(purpose)
        s, e = _check_budget(sensitivity, epsilon)
        arr = np.asarray(scores, dtype=np.float64).reshape(-1)
        if arr.size == 0:
            raise ValueError(f"exponential {purpose!r}: no candidates (empty scores)")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"exponential {purpose!r}: scores must be finite")
        true_rec = arr.tolist()
        scale, meas = _calibrated_noisy_max(s, e)

        if self._replay is not None:
            i, rec = self._next("exponential", purpose)
            self._expect(i, rec, "exponential", purpose, "sensitivity", s, "sensitivity")
            self._expect(i, rec, "exponential", purpose, "epsilon", e, "epsilon")
            self._expect(i, rec, "exponential", purpose, "scale", scale, "noise scale")
            self._expect_true(i, rec, "exponential", purpose, true_rec)
            noisy = rec.get("noisy")
            if not isinstance(noisy, int) or isinstance(noisy, bool) or not 0 <= noisy < arr.size:
                raise ReplayMismatch(
                    f"transcript record {i} ({_where(rec, 'exponential', purpose)}), field "
                    "'noisy': the recorded choice is not an index of the candidates",
                    index=i, purpose=purpose, field="noisy")
            self._emit(rec)
            return noisy

        if self._frozen is not None:
            return self._frozen_choice({
                "kind": "exponential", "purpose": purpose, "mechanism": "opendp.make_noisy_max",
                "sensitivity": s, "epsilon": e, "scale": scale, "true": true_rec})

        choice = int(meas(true_rec))
        self._emit({
            "kind": "exponential", "purpose": purpose, "mechanism": "opendp.make_noisy_max",
            "sensitivity": s, "epsilon": e, "scale": scale, "true": true_rec, "noisy": choice,
        })
        return choice

    def rng(self, purpose: str) -> np.random.Generator:
        """Post-processing randomness: ``Generator(PCG64(seed))``, seed = ``secrets.randbits(256)``.

        The seed is recorded as 64 hex characters (replay mode returns the recorded seed).
        """
        purpose = _check_purpose(purpose)
        if self._replay is not None:
            i, rec = self._next("seed", purpose)
            hexseed = rec.get("seed")
            if not isinstance(hexseed, str) or len(hexseed) != 64:
                raise ReplayMismatch(
                    f"transcript record {i} (seed {purpose!r}): the recorded seed is malformed",
                    index=i, purpose=purpose, field="seed")
            try:
                seed = int(hexseed, 16)
            except ValueError:
                raise ReplayMismatch(
                    f"transcript record {i} (seed {purpose!r}): the recorded seed is not hex",
                    index=i, purpose=purpose, field="seed") from None
            self._emit(rec)
        elif self._frozen is not None:
            i, rec = self._follow("seed", purpose)
            hexseed = rec.get("seed")
            self._diverge_if(not isinstance(hexseed, str) or len(hexseed) != 64, i, rec, "seed",
                             "seed record")
            seed = int(hexseed, 16)
            self._emit(rec)
        else:
            seed = self._fresh_seed(purpose)
            self._emit({"kind": "seed", "purpose": purpose, "seed": f"{seed:064x}"})
        return np.random.Generator(np.random.PCG64(seed))

    def _fresh_seed(self, purpose: str) -> int:
        """A bound seed (pre-registered secret + beacon) for the steps that may be bound, else
        256 bits from ``secrets``."""
        from .seeds import is_bound_purpose

        if self._seeds is None or not is_bound_purpose(purpose):
            return secrets.randbits(256)
        k = self._seed_uses.get(purpose, 0)
        self._seed_uses[purpose] = k + 1
        return self._seeds.seed(purpose, k)

    def mark(self, kind: str, **fields: Any) -> None:
        """Structural record ``{"kind": "mark", "mark": kind, **fields}``; replay checks equality."""
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"mark kind must be a non-empty string, got {kind!r}")
        if "kind" in fields or "mark" in fields:
            raise ValueError("mark fields may not be called 'kind' or 'mark'")
        record = to_jsonable({"kind": "mark", "mark": kind, **fields})
        if self._replay is not None:
            i, rec = self._next("mark", kind)
            if rec.get("mark") != kind:
                raise ReplayMismatch(
                    f"transcript record {i} is a mark {rec.get('mark')!r} but the run made a mark "
                    f"{kind!r}: the code differs from the recorded run",
                    index=i, purpose=kind, field="mark")
            if _canonical(rec) != _canonical(record):
                keys = sorted(set(rec) | set(record))
                diff = [k for k in keys if rec.get(k) != record.get(k)]
                raise ReplayMismatch(
                    f"transcript record {i} (mark {kind!r}): field(s) {diff} differ from the "
                    "recorded run", index=i, purpose=kind, field=",".join(diff))
            self._emit(rec)
            return
        if self._frozen is not None:
            self._follow("mark", kind)
        self._emit(record)
