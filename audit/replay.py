"""Check 9, enclave replay: with the private transcript and the private data, verify the
transcript's salted commitment against the manifest and replay the selected iteration, which
must reproduce data.csv byte for byte and every DP value exactly (and a published model.json,
every number). Before the replay, the recorded noise of every draw of the whole transcript is
tested against its declared distribution (``noise_check.py``: zero, too small or too regular
noise fails, though it would replay byte for byte), and a pre-registered bundle's transcript
must have used the beacon-bound seeds.

The steps mirror ``release/scheme/iteration.py`` (read, not imported) in order and purposes:

    (dp_count policy, before the first iteration) the DP count of the plausible records and the
    resize seed, replayed with dpbundle.mechanisms.records (the recorded true count must be the
    private data's); T is then resized with the same plan
    mark "iteration" (index, config, config_id)
    mark "arithmetic" (version 2) if the attempt has one: the whole attempt is then evaluated
         with ``dpbundle.mechanisms.arithmetic`` version 2 (fixed-order sums and linear algebra,
         the same bits on every CPU and BLAS kernel); without it, version 1 (numpy's BLAS and
         LAPACK, bundles of dpbundle <= 0.2), whose criterion values (dp_value, and the true
         value of a continuous Laplace release) may then differ from the released ones by
         ``arithmetic.BLAS_REPLAY_RTOL`` (1e-9 relative; a warning names each criterion,
         docs/determinism.md), never data.csv, a count, a draw or ``passed``
    T  <- the audit's own loading + raw constraints + binning (audit/private_data.py)
    model <- make_generator(type, eps_gen, **hyperparameters).fit(T.codes, T.domain, rand)
             (aim_pure: with the workload of the spec's criteria, model_check.config_generator)
    S  <- sample rounds k = 0..7: m = max(ceil(1.1 * need / max(rate, 0.05)), 16) rows with
          rand.rng("sample round k") (a raking model, ``accepts_keep``, gets the audit's
          constraint filter as ``keep``), drop rows matching a synthetic constraint (the audit's
          own evaluation), until n rows are kept; keep the first n (sampler version 1). An
          attempt with a "sampler" mark (version 2, before its first sampling seed) is sampled
          with ``dpbundle.mechanisms.sampling.sample_types`` instead: counts of record types,
          the constraint filter (the audit's own) on the distinct types; with a mark of version
          3 the same function draws a base of ``BASE_RECORDS`` records and scales it to n
          (seed "sample scale")
    C  <- project(S, min_count, rand.rng("projection"))
    every acceptance criterion in spec order: make_criterion(entry).evaluate(ctx, rand)
    mark "iteration end" (index, passed)

The generators, projection, criteria and noise replay come from ``dpbundle.mechanisms`` (their
replay is the point); data loading, binning, the constraint filter and the CSV writing are the
audit's own.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from pathlib import Path

import numpy as np

from .edges_check import spec_edges
from .edges_replay import EdgesMismatch, replay_edges, split_head
from .configurations import config_id  # noqa: F401 - also dpbundle.audit.replay.config_id
from .context import AuditContext, Missing
from .private_data import PrivateDataError, bin_stored, load_private, private_limit
from .replay_data import PrivateCodes, arranged_csv_blocks, csv_blocks, digest_of
from .run_binding import check_run_binding
from .report import CheckResult, StopCheck

__all__ = ["check_replay", "read_transcript", "check_records", "commitment_of", "TranscriptError",
           "selected_slice", "fit_slice", "transcript_retries", "replay_iteration", "config_id", "sample_and_project", "csv_bytes",
           "DrawLimit", "CountMismatch"]

MAX_TRANSCRIPT_BYTES = 2 * 1024**3
OVERSAMPLE = 1.1
MAX_SAMPLE_ROUNDS = 8


class TranscriptError(ValueError):
    """The transcript file is unusable."""


class DrawLimit(TranscriptError):
    """The sampling rounds would draw more rows in all than their bound (``limit``)."""

    def __init__(self, limit: int):
        # no number in the message: in the enclave replay the bound is a multiple of n
        super().__init__("the sampling rounds would draw more rows in all than their bound "
                         "(4 n + 128 rows, docs/audit.md \"Bounds\")")
        self.limit = limit


class CountMismatch(TranscriptError):
    """The replayed DP count of records is not the public n (found before the resize)."""


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def read_transcript(path: Path) -> tuple[bytes, bytes, list[dict]]:
    """(salt, record bytes as in the file, parsed records)."""
    from .safe_read import InputFileError, read_small_file

    try:   # a regular file only (never a FIFO or a device), read with a byte limit
        data = read_small_file(path, "transcript", MAX_TRANSCRIPT_BYTES)
    except InputFileError as e:
        raise TranscriptError(str(e)) from None
    first, sep, rest = data.partition(b"\n")
    try:
        header = json.loads(first.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise TranscriptError(f"{path}: the first line is not a JSON header") from None
    if not isinstance(header, dict) or header.get("kind") != "header" \
            or header.get("format") != "dpbundle-transcript/1":
        raise TranscriptError(f"{path}: the first line is not a dpbundle-transcript/1 header")
    try:
        from .schema_util import SchemaMissing, validate

        errs = validate(header, "transcript-header")
        if errs:
            raise TranscriptError(f"{path}: header: {errs[0]}")
    except SchemaMissing:
        pass
    salt_hex = header.get("salt")
    if not isinstance(salt_hex, str) or len(salt_hex) != 64:
        raise TranscriptError(f"{path}: header salt is not 64 hex characters")
    try:
        salt = bytes.fromhex(salt_hex)
    except ValueError:
        raise TranscriptError(f"{path}: header salt is not hex") from None
    records = []
    try:
        text = rest.decode("utf-8")
    except UnicodeDecodeError:
        raise TranscriptError(f"{path}: records are not UTF-8") from None
    for lineno, line in enumerate(text.splitlines(), start=2):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise TranscriptError(f"{path} line {lineno}: not JSON ({e})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("kind"), str):
            raise TranscriptError(f"{path} line {lineno}: a record must be an object with a kind")
        records.append(rec)
    return salt, rest, records


def _one_per_class(values: list) -> list:
    """First element of each JSON class (int, integral float, other float, other types): the
    transcript-record schema limits ``true``/``noisy`` arrays only by element type and minItems 1."""
    seen: dict = {}
    for v in values:
        seen.setdefault((type(v), v.is_integer()) if type(v) is float else type(v), v)
    return list(seen.values())


def check_records(path: Path, records: list[dict]) -> None:
    """TranscriptError naming the record and JSON path if a record does not match the
    ``transcript-record`` schema (long numeric arrays are checked in bulk, then in full on failure).
    The message names the JSON path and the schema keyword, never the value (it may be private)."""
    from .schema_util import SchemaMissing, validate

    try:
        for i, rec in enumerate(records):
            view = {k: _one_per_class(v) if k in ("true", "noisy") and isinstance(v, list) else v
                    for k, v in rec.items()}
            if validate(view, "transcript-record", limit=1):
                raise TranscriptError(f"{path}: transcript record {i} does not match the "
                                      f"transcript-record schema at " + "; ".join(_schema_where(rec)))
    except SchemaMissing:
        pass


def _schema_where(rec: dict, limit: int = 3) -> list[str]:
    """'path (keyword)' of the first schema violations of a record, without the offending values."""
    from jsonschema import Draft202012Validator

    from .schema_util import load_schema

    validator = Draft202012Validator(load_schema("transcript-record"))
    out = []
    for err in sorted(validator.iter_errors(rec), key=lambda e: list(map(str, e.absolute_path)))[:limit]:
        where = "/".join(str(p) for p in err.absolute_path) or "(record)"
        out.append(f"{where} ({err.validator})")
    return out or ["(record)"]


def commitment_of(salt: bytes, records: list[dict]) -> str:
    """sha256(salt || canonical JSON lines of the records)."""
    body = "".join(_canonical(r) + "\n" for r in records).encode("utf-8")
    return hashlib.sha256(salt + body).hexdigest()


def _selection_marks(marks: list[dict]) -> tuple[float | None, list[dict]]:
    """(stop probability of the 'selection' mark or None for transcripts made before it was
    recorded, the other marks). The 'selection' mark, if any, is the first mark and unique."""
    sel = [i for i, r in enumerate(marks) if r.get("mark") == "selection"]
    if not sel:
        return None, marks
    if sel != [0]:
        raise TranscriptError("the transcript's 'selection' mark must come once, before the first attempt")
    gamma = marks[0].get("stop_probability")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma < 1:
        raise TranscriptError("the transcript's 'selection' mark has no stop probability in [0, 1)")
    return float(gamma), marks[1:]


def _without_stop_draws(marks: list[dict], gamma: float | None) -> list[dict]:
    """The marks without the stop draws, after checking them: with a stop probability > 0 every
    failed attempt is followed by exactly one stop draw of its index that said 'continue' (a
    draw that said 'stop' ends the run with nothing released); with 0 (or no 'selection' mark)
    there is none."""
    out: list[dict] = []
    for i, r in enumerate(marks):
        if r.get("mark") != "stop draw":
            out.append(r)
            continue
        prev = marks[i - 1] if i else {}
        if not gamma:
            raise TranscriptError("the transcript has a stop draw but its stop probability is 0")
        if prev.get("mark") != "iteration end" or prev.get("passed") is not False \
                or prev.get("index") != r.get("index"):
            raise TranscriptError(f"stop draw {r.get('index')!r} does not follow its failed attempt")
        if r.get("stop") is not False:
            raise TranscriptError(f"the stop draw after attempt {r.get('index')!r} said stop, yet "
                                  "the selection went on")
    if gamma:
        for i, r in enumerate(marks):
            if r.get("mark") == "iteration end" and r.get("passed") is False and \
                    (i + 1 >= len(marks) or marks[i + 1].get("mark") != "stop draw"):
                raise TranscriptError(f"failed attempt {r.get('index')!r} has no stop draw after it")
    return out


def transcript_retries(records: list[dict]) -> str:
    """How the transcript's selection retried: "resample" when its 'selection' mark says so (the
    generator fitted once, marks 'fit' .. 'fit end' before the first attempt), else "refit"."""
    sel = next((r for r in records if r.get("kind") == "mark" and r.get("mark") == "selection"), {})
    return "resample" if sel.get("retries") == "resample" else "refit"


def _without_fit_marks(marks: list[dict], retries: str, gamma: float | None) -> list[dict]:
    """The marks after the 'selection' mark without the one fit's: a resample selection starts
    with 'fit' and 'fit end' (a fit that failed releases nothing, so a released bundle has none)
    and has a stop probability above 0; a refit selection has no fit mark."""
    names = [r.get("mark") for r in marks]
    if retries != "resample":
        if "fit" in names or "fit end" in names:
            raise TranscriptError("the transcript has a 'fit' mark but its selection refits every attempt")
        return marks
    if not gamma:
        raise TranscriptError("the transcript's resample selection has stop probability 0: it might never end")
    if names[:2] != ["fit", "fit end"] or "fit" in names[2:] or "fit end" in names[2:]:
        raise TranscriptError("a resample selection must fit once, before its first attempt "
                              "(one 'fit' and one 'fit end' mark)")
    if "failure" in marks[1]:
        raise TranscriptError("the transcript's one fit failed, yet an attempt followed")
    return marks[2:]


def fit_slice(records: list[dict]) -> tuple[int, int, dict]:
    """(start, end, 'fit' mark) of a resample selection's one fit: its records from the 'fit'
    mark to the 'fit end' mark, inclusive."""
    starts = [i for i, r in enumerate(records) if r.get("kind") == "mark" and r.get("mark") == "fit"]
    ends = [i for i, r in enumerate(records) if r.get("kind") == "mark" and r.get("mark") == "fit end"]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise TranscriptError("the transcript's resample selection has no single 'fit' .. 'fit end' block")
    return starts[0], ends[0] + 1, records[starts[0]]


def _check_first_passing(records: list[dict], budget_stop: float | None = None) -> None:
    """Private selection with a known threshold releases the FIRST passing candidate: iterations
    0, 1, ..., k in order, each closed by its 'iteration end', only the last one passed, each
    failed one followed by its stop draw (stop probability > 0), then one 'selected' mark for it
    as the last record (anything else is cherry-picking or a second run). ``budget_stop``: the
    stop probability budget.json publishes, which the 'selection' mark must record."""
    marks = [r for r in records if r.get("kind") == "mark" and r.get("mark") not in ("sampler", "arithmetic")]
    retries = transcript_retries(records)
    gamma, marks = _selection_marks(marks)
    if gamma is not None and budget_stop is not None and gamma != budget_stop:
        raise TranscriptError("the stop probability in the transcript differs from budget.json's")
    marks = _without_fit_marks(marks, retries, gamma)
    marks = _without_stop_draws(marks, gamma)
    seq = [(r.get("mark"), r.get("index"), r.get("passed")) for r in marks]
    if not seq or seq[-1][0] != "selected" or records[-1] is not marks[-1] \
            or sum(m == "selected" for m, _, _ in seq) != 1:
        raise TranscriptError("the transcript must end with exactly one 'selected' mark")
    body = seq[:-1]
    if len(body) % 2:
        raise TranscriptError("the transcript's iterations are not each closed by an 'iteration end' mark")
    for k in range(len(body) // 2):
        (m1, i1, _), (m2, i2, passed) = body[2 * k], body[2 * k + 1]
        if (m1, m2) != ("iteration", "iteration end") or i1 != k or i2 != k:
            raise TranscriptError(f"the transcript's iteration marks are out of order at iteration {k}")
        if passed is not (2 * k + 2 == len(body)):
            raise TranscriptError(f"iteration {k} {'passed' if passed else 'did not pass'}, but the selection "
                                  "must release the first passing iteration and stop there")
    if seq[-1][1] != len(body) // 2 - 1:
        raise TranscriptError("the 'selected' mark does not name the last (first passing) iteration")


def selected_slice(records: list[dict], budget_stop: float | None = None) -> tuple[int, int, int, dict]:
    """(selected index, start, end, iteration mark record) of the selected iteration."""
    sel = [r for r in records if r.get("kind") == "mark" and r.get("mark") == "selected"]
    if not sel:
        raise TranscriptError("the transcript has no 'selected' mark")
    _check_first_passing(records, budget_stop)
    index = sel[-1].get("index")
    starts = [i for i, r in enumerate(records) if r.get("kind") == "mark"
              and r.get("mark") == "iteration" and r.get("index") == index]
    if len(starts) != 1:
        raise TranscriptError(f"the transcript has {len(starts)} 'iteration' marks with index {index!r}")
    start = starts[0]
    end = start + 1
    while end < len(records):
        r = records[end]
        if r.get("kind") == "mark" and r.get("mark") in ("iteration", "selected"):
            break
        end += 1
    return index, start, end, records[start]


def _violations(constraints: list, codes: np.ndarray, view) -> np.ndarray:
    from .constraints import violations

    bad = np.zeros(codes.shape[0], dtype=bool)
    for _, mask in violations(constraints, view.columns, codes, view.names):
        bad |= mask
    return bad


def csv_bytes(view, codes: np.ndarray) -> bytes:
    """data.csv as the release writes it: header, then labels, \\n line ends."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(view.names)
    labels = [np.asarray(c.labels, dtype=object)[codes[:, j]] for j, c in enumerate(view.columns)]
    w.writerows(zip(*labels))
    return buf.getvalue().encode("utf-8")


def _bound_aim_work(config: dict, view) -> None:
    """An aim_pure configuration re-derives its candidate marginals from spec.json's criteria:
    the work is counted first (``bounds.aim_candidate_problems``, as for a published model), so
    that a spec whose criteria give millions of column sets is refused, not attempted."""
    gen = config.get("generator")
    if not isinstance(gen, dict) or gen.get("type") != "aim_pure":
        return
    from .bounds import aim_candidate_problems

    if "workload" in gen:
        raise TranscriptError("the iteration's configuration sets aim_pure's workload; the release sets "
                              "it from the spec's criteria")
    max_size = gen.get("max_size", 3)
    if isinstance(max_size, bool) or not isinstance(max_size, int) or not 2 <= max_size <= 6:
        raise TranscriptError(f"the iteration's aim_pure max_size {max_size!r} is not an integer in 2..6")
    problems = aim_candidate_problems(view.spec, list(view.names), [len(c.labels) for c in view.columns],
                                      max_size)
    if problems:
        raise TranscriptError(problems[0])


def replay_iteration(records: list[dict], index, mark: dict, view, real_codes: np.ndarray,
                     edges, fitted: list | None = None,
                     arithmetic: dict | None = None,
                     fit_records: list[dict] | None = None) -> tuple[bytes, list]:
    """Replay one iteration from its records; (a callable giving data.csv's bytes in blocks,
    criterion results). ``real_codes``: T's rows, or the binned private records
    (:class:`PrivateCodes`: T as record types). ``fitted``: a list that receives the fitted
    model (for the comparison with a published model.json). ``arithmetic``: a dict that
    receives the attempt's arithmetic ``version`` and the ``tolerated`` (record index, purpose)
    of true values accepted within version 1's tolerance (module docstring). ``fit_records``:
    the one fit of a resample selection ('fit' .. 'fit end', :func:`fit_slice`): the model is
    replayed from them, and the iteration only samples it and evaluates the criteria."""
    from dpbundle.mechanisms import arithmetic as ar
    from dpbundle.mechanisms.cells import deferred
    from dpbundle.mechanisms.coding import Coded, ColumnCoding
    from dpbundle.mechanisms.noise import Randomness

    config = mark.get("config")
    if not isinstance(config, dict):
        raise TranscriptError("the iteration mark has no configuration")
    _bound_aim_work(config, view)
    columns = tuple(ColumnCoding(c.name, c.labels, c.numbers, c.ordered, c.lower, c.upper,
                                 categories=c.categories, integer=c.integer, special=c.special)
                    for c in view.columns)
    if isinstance(real_codes, PrivateCodes):      # T as record types, its rows only if needed
        real = deferred(real_codes.types(columns), make=real_codes.rows)
    else:
        real = Coded(codes=real_codes, columns=columns)
    model = None if fit_records is None else _replay_fit(fit_records, config, view, real)
    arith = _arithmetic_version(records)
    rand = Randomness.replay(records, true_rtol=ar.BLAS_REPLAY_RTOL if arith == ar.BLAS else 0.0)
    rand.mark("iteration", index=index, config=config, config_id=config_id(config))
    if arith != ar.BLAS:   # right after the iteration mark, as the release writes it
        rand.mark(ar.ARITHMETIC_MARK, version=arith)
    with ar.use(arith):
        blocks, results = _replay_attempt(records, index, config, view, real, rand, fitted, model)
    if arithmetic is not None:
        arithmetic.update(version=arith, tolerated=list(rand.tolerated))
    return blocks, results


def _replay_fit(fit_records: list[dict], config: dict, view, real):
    """A resample selection's one fit, replayed from its records: marks 'fit' (the selected
    iteration's configuration), 'arithmetic' (version 2), the fit, 'fit end'."""
    from dpbundle.mechanisms import arithmetic as ar
    from dpbundle.mechanisms.noise import Randomness

    arith = _arithmetic_version(fit_records)
    rand = Randomness.replay(fit_records, true_rtol=ar.BLAS_REPLAY_RTOL if arith == ar.BLAS else 0.0)
    rand.mark("fit", config=config, config_id=config_id(config))
    if arith != ar.BLAS:
        rand.mark(ar.ARITHMETIC_MARK, version=arith)
    with ar.use(arith):
        model = _fit(config, view, real, rand)
    rand.mark("fit end")
    rand.check_finished()
    return model


def _fit(config: dict, view, real, rand):
    """The configuration's generator (eps_gen of spec.json) fitted on T with ``rand``."""
    from dpbundle.mechanisms.cells import fit_on_types

    from .model_check import config_generator

    spec = view.spec
    priv = spec["privacy"]
    if priv.get("definition") == "zcdp":
        generator = config_generator(config, None, spec, list(view.names), rho=float(priv["rho_generation"]))
    else:
        generator = config_generator(config, float(priv["epsilon_generation"]), spec, list(view.names))
    return fit_on_types(generator, real, rand)


def _replay_attempt(records: list[dict], index, config: dict, view, real, rand, fitted, model=None):
    """The attempt after its marks: fit (unless ``model``, fitted once), sample, project,
    criteria, 'iteration end'."""
    from dpbundle.mechanisms.criteria import EvalContext, make_criterion

    spec = view.spec
    if model is None:
        model = _fit(config, view, real, rand)
    version = _sampler_version(records)
    if version != 1:   # the count sampler's mark, right before its first seed
        rand.mark("sampler", version=version)
    _set_sampler(model, version)
    if fitted is not None:
        fitted.append(model)
    cand, blocks = _replayed_candidate(model, real, config, view, rand, version)
    ctx = EvalContext(real=real, synth=cand, spec=spec, alternatives={c.name: c.alternative for c in view.columns})
    results = [make_criterion(entry).evaluate(ctx, rand) for entry in spec["acceptance"]]
    rand.mark("iteration end", index=index, passed=all(r.passed for r in results))
    rand.check_finished()
    return blocks, results


def _replayed_candidate(model, real, config: dict, view, rand, version: int):
    """(C, a callable giving data.csv's blocks): a count-sampled candidate held as its record
    types and their order (no row built), else the sampled and projected rows."""
    from dpbundle.mechanisms.cells import deferred, types_from_cells
    from dpbundle.mechanisms.coding import mixed_radix_index
    from dpbundle.mechanisms.projection import project_counts_order
    from dpbundle.mechanisms.sampling import model_sampler

    from .bounds import max_drawn

    sampler = model_sampler(model) if version is None else version
    if sampler not in (2, 3):
        rows = sample_and_project(model, real.n, config, view, rand.rng, sampler=version)
        return real.with_codes(rows), lambda: csv_blocks(view, rows)
    constraints = view.spec.get("synthetic_constraints", []) or []
    types, counts = _sample_counts(model, real.n, view, rand.rng, max_drawn(real.n), constraints, sampler)
    out, which = project_counts_order(types, counts, int(config["projection"]["min_count"]), rand.rng("projection"))
    keep = out > 0
    domain = tuple(len(c.labels) for c in view.columns)
    cand = deferred(types_from_cells(mixed_radix_index(types[keep], domain), real.columns, out[keep]),
                    make=lambda: np.take(types, which, axis=0))
    return cand, lambda: arranged_csv_blocks(view, types, which)


def sample_and_project(model, n: int, config: dict, view, rng_for,
                       max_rows: int | None = None, sampler: int | None = None) -> np.ndarray:
    """The post-processing of a fitted model, as ``release/scheme/iteration.py`` does it (read, not
    imported): sample rounds k = 0..7 of m = max(ceil(1.1 * need / max(rate, 0.05)), 16) rows
    with ``rng_for("sample round k")`` (a raking model, ``accepts_keep``, gets the constraint
    filter as ``keep``), drop rows matching a synthetic constraint, keep the first n, then
    ``project(S, min_count, rng_for("projection"))``. Shared by the enclave replay (seeds from
    the transcript) and the public re-derivation (seeds from the published secret and beacon).

    ``sampler``: the sampler version (the transcript's "sampler" mark; default: the one a
    published model records, ``"sampler"`` of model.json, else 1). Version 2 samples counts of
    record types with ``dpbundle.mechanisms.sampling.sample_types`` (the constraint filter is
    the audit's own, on the distinct types) and projects them with ``project_counts``.

    The rounds draw at most ``max_rows`` rows in all (default ``bounds.max_drawn(n)`` = 4 n +
    128): a round that would draw more raises :class:`DrawLimit` before it draws (a model whose
    samples mostly fail the constraints would otherwise draw up to 22 n rows a round).
    """
    from dpbundle.mechanisms.projection import project
    from dpbundle.mechanisms.sampling import model_sampler

    from .bounds import max_drawn

    limit = max_drawn(n) if max_rows is None else int(max_rows)
    constraints = view.spec.get("synthetic_constraints", []) or []
    version = model_sampler(model) if sampler is None else sampler
    if version in (2, 3):
        return _sample_counts_and_project(model, n, config, view, rng_for, limit, constraints, version)
    kept, have, rate, drawn = [], 0, 1.0, 0
    sampled = None
    for k in range(MAX_SAMPLE_ROUNDS):
        need = n - have
        m = max(int(math.ceil(OVERSAMPLE * need / max(rate, 0.05))), 16)
        if drawn + m > limit:
            raise DrawLimit(limit)
        drawn += m
        rng = rng_for(f"sample round {k}")
        if constraints and getattr(model, "accepts_keep", False):  # a raking model (oneway)
            rows = model.sample(m, rng, keep=lambda r: ~_violations(constraints, r, view))
        else:
            rows = model.sample(m, rng)
        if constraints:
            rows = rows[~_violations(constraints, rows, view)]
            rate = max(len(rows) / m, 1e-6)
        kept.append(rows)
        have += len(rows)
        if have >= n:
            sampled = np.concatenate(kept)[:n]
            break
    if sampled is None:
        raise TranscriptError("the sampling could not keep n rows (the recorded run would have failed)")
    return project(sampled, int(config["projection"]["min_count"]), rng_for("projection"))


def _sample_counts_and_project(model, n: int, config: dict, view, rng_for, limit: int,
                               constraints: list, version: int = 2) -> np.ndarray:
    """Sampler version 2 or 3 (:func:`sample_and_project`): counts of record types, then the
    projection of the types, the same draws as the release's."""
    from dpbundle.mechanisms.projection import project_counts

    rows, counts = _sample_counts(model, n, view, rng_for, limit, constraints, version)
    return project_counts(rows, counts, int(config["projection"]["min_count"]), rng_for("projection"))


def _sample_counts(model, n: int, view, rng_for, limit: int, constraints: list,
                   version: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Sampler version 2's or 3's record types of the sample (distinct rows ascending, counts);
    version 3 draws a base of ``BASE_RECORDS`` records and scales it to n when n is larger
    (``dpbundle.mechanisms.sampling``), else as version 2."""
    from dpbundle.mechanisms.sampling import ConstraintShortfall, DrawBoundExceeded, sample_types

    implausible = (lambda rows, _cells: _violations(constraints, rows, view)) if constraints else None
    try:
        rows, counts, _ = sample_types(model, n, [len(c.labels) for c in view.columns], implausible,
                                       rng_for, limit, version=version)
    except DrawBoundExceeded as e:
        raise DrawLimit(e.limit) from None
    except ConstraintShortfall:
        raise TranscriptError("the sampling could not keep n rows (the recorded run would have failed)") from None
    return rows, counts


def _arithmetic_version(records: list[dict]) -> int:
    """The arithmetic version of the iteration's records (its "arithmetic" mark; none: 1)."""
    from dpbundle.mechanisms.arithmetic import arithmetic_of_records

    try:
        return arithmetic_of_records(records)
    except ValueError as e:
        raise TranscriptError(str(e)) from None


def _sampler_version(records: list[dict]) -> int:
    """The sampler version of the iteration's records (its "sampler" mark; none: 1)."""
    from dpbundle.mechanisms.sampling import sampler_of_records

    try:
        return sampler_of_records(records)
    except ValueError as e:
        raise TranscriptError(str(e)) from None


def _set_sampler(model, version: int) -> None:
    """Record the version on the replayed model (model.json of a count-sampled bundle says it)."""
    from dpbundle.mechanisms.sampling import set_model_sampler

    set_model_sampler(model, version)


def _first_differing_line(a: bytes, b: bytes) -> int:
    """1-based number of the first line where two CSV texts differ (a position, not a value)."""
    la, lb = a.split(b"\n"), b.split(b"\n")
    for k, (x, y) in enumerate(zip(la, lb), start=1):
        if x != y:
            return k
    return min(len(la), len(lb)) + 1


def _warn_on_version_change(r: CheckResult, manifest: dict) -> None:
    """A replay re-runs the mechanisms: another dpbundle version may legitimately compute
    differently (a mismatch then says nothing about the release). Say so up front."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        here = version("dpbundle")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return
    made = manifest.get("dpbundle_version")
    if isinstance(made, str) and made != here:
        r.warn(f"the bundle was made with dpbundle {made} and is replayed with {here}: "
               f"a mismatch may come from the code, not from the release; replay with {made}")
    for w in library_version_warnings(manifest, "replayed"):
        r.warn(w)


# The libraries whose versions a bundle's bytes depend on (docs/reproducibility.md): numpy (the
# samplers, float sums), opendp (the calibration of every noise scale). manifest.json's
# ``versions`` records the release's.
LIBRARIES = ("numpy", "opendp")


def library_version_warnings(manifest, what: str) -> list[str]:
    """Warnings for each library of manifest.json's ``versions`` whose installed version
    differs (a byte mismatch may then come from the library, not from the release)."""
    from importlib.metadata import PackageNotFoundError, version

    made = manifest.get("versions") if isinstance(manifest, dict) else None
    if not isinstance(made, dict):
        return []
    out = []
    for lib in LIBRARIES:
        want = made.get(lib)
        try:
            here = version(lib)
        except PackageNotFoundError:  # pragma: no cover
            here = "not installed"
        if isinstance(want, str) and want != here:
            out.append(f"the bundle was made with {lib} {want[:40]} and is {what} with {here}: a "
                       f"difference may come from {lib} (docs/reproducibility.md), not from the "
                       f"release; use {lib} {want[:40]} to be sure")
    return out


def records_policy(ctx: AuditContext) -> str:
    """The bundle's records policy (budget.json; a bundle without one: declared_public)."""
    try:
        rec = ctx.json("budget.json").get("records")
    except (Missing, AttributeError):
        rec = None
    return rec.get("policy", "declared_public") if isinstance(rec, dict) else "declared_public"


def _budget_stop(ctx: AuditContext) -> float | None:
    """budget.json's selection.stop_probability (None if absent or not a number)."""
    try:
        stop = (ctx.json("budget.json").get("selection") or {}).get("stop_probability")
    except (Missing, AttributeError):
        return None
    return float(stop) if isinstance(stop, (int, float)) and not isinstance(stop, bool) else None


def replay_records(head: list[dict], n_plausible: int, ctx: AuditContext, columns: int,
                   public_n: int | None = None):
    """Replay the records before the first iteration: the DP count of the plausible records
    (its recorded true value must be the private data's count) and the resize plan. With
    ``public_n``, a count that is not it raises :class:`CountMismatch` before the resize plan
    (whose size is the count) is made."""
    from dpbundle.mechanisms.noise import Randomness
    from dpbundle.mechanisms.records import RESIZE_PURPOSE, dp_record_count, resize_plan

    first = next((i for i, rec in enumerate(head) if rec.get("kind") == "mark"), len(head))
    eps = ctx.json("budget.json")["records"]["epsilon"]
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or eps <= 0:
        raise TranscriptError("budget.json: records.epsilon is not a positive number")
    rand = Randomness.replay(head[:first])
    m = dp_record_count(n_plausible, float(eps), rand)
    if public_n is not None and m != public_n:
        raise CountMismatch("the replayed DP count of records differs from the public n")
    plan = resize_plan(n_plausible, m, columns, rand.rng(RESIZE_PURPOSE))
    rand.check_finished()
    return plan


def check_replay(ctx: AuditContext, transcript: Path, data: Path) -> CheckResult:
    """Check 9: the transcript's commitment, noise and seeds, then the selected iteration's replay."""
    r = CheckResult("replay")
    try:
        manifest, want, view, n = _replay_inputs(ctx)
        records = _committed_records(r, transcript, want)
        check_run_binding(ctx, r, records)
        _warn_on_version_change(r, manifest)
        noise_detail = _check_noise(r, records)
        _check_bound_seeds(ctx, r, records)
        index, start, end, mark = _selected_iteration(ctx, r, records, view)
        _check_sampler_claim(r, manifest, records[start:end])
        _check_every_attempt(ctx, r, records)
        if mark.get("config") != view.configuration:
            return r    # nothing is fitted or sampled with a configuration the manifest does not sign
        fit_records = _fit_records(ctx, records, mark)
        head = records[:start] if fit_records is None else records[:records.index(fit_records[0])]
        codes, edges = _private_codes(ctx, data, view, head, n)
        arith: dict = {}
        results = _check_replayed_release(ctx, r, records[start:end], index, mark, view, codes,
                                          edges, arith, fit_records)
        close = _check_replayed_metrics(ctx, r, results, arith.get("version", 1))
        close |= _tolerated_criteria(r, arith)
    except StopCheck as e:
        r.fail(str(e))
        return r
    r.facts["arithmetic"] = arith.get("version", 1)
    if not r.failed:
        same = (f"{len(results)} DP values identical" if not close else
                f"{len(results) - len(close)} DP values identical, {len(close)} within arithmetic "
                "version 1's tolerance")
        drawn = spec_edges(view.spec)
        r.detail = ("commitment matches; "
                    + (f"the bin edges of {len(drawn)} alternative(s) drawn under DP replayed from the "
                       "registry; " if drawn else "")
                    + "the selected iteration replayed: "
                    f"data.csv identical byte for byte, {same}; " + noise_detail)
    return r


def _check_sampler_claim(r: CheckResult, manifest: dict, selected: list[dict]) -> None:
    """manifest.json's ``sampler`` (version 3) is the selected attempt's sampler mark: the
    datasheet's account of how data.csv was drawn (a base repeated) is what the run did."""
    claim = manifest.get("sampler") if isinstance(manifest, dict) else None
    claimed = claim.get("version") if isinstance(claim, dict) else None
    try:
        used = _sampler_version(selected)
    except TranscriptError as e:
        raise StopCheck(str(e)) from None
    if (claimed == 3) != (used == 3):
        r.fail(f"manifest.json's sampler names version {claimed if claimed is not None else 'none (1 or 2)'}, "
               f"but the selected attempt was sampled with version {used}")


def _tolerated_criteria(r: CheckResult, arith: dict) -> set:
    """Warn once per criterion whose true value (a continuous Laplace release) was accepted
    within arithmetic version 1's tolerance; the ids of those criteria."""
    from dpbundle.mechanisms.arithmetic import BLAS_REPLAY_RTOL

    out: set = set()
    for _index, purpose in arith.get("tolerated", []):
        cid = purpose[len("criterion "):] if purpose.startswith("criterion ") else purpose
        if cid in out:
            continue
        out.add(cid)
        r.warn(f"criterion {cid}: its recomputed true value differs from the recorded one in the "
               f"last digits (relative difference at most {BLAS_REPLAY_RTOL:g}): accepted because the "
               "attempt was made with arithmetic version 1 (numpy's BLAS and LAPACK), whose last "
               "bits depend on the machine's BLAS kernel (docs/determinism.md)")
    return out


def _replay_inputs(ctx: AuditContext) -> tuple[dict, object, object, int]:
    """The bundle's manifest, transcript commitment, spec view and public n."""
    try:
        manifest = ctx.json("manifest.json")
        want = (manifest.get("transcript_commitment") or {}).get("value")
        view = ctx.view()
        n = ctx.declared_n()
    except (Missing, AttributeError) as e:
        raise StopCheck(str(e)) from None
    return manifest, want, view, n


def _committed_records(r: CheckResult, transcript: Path, want) -> list[dict]:
    """The transcript's records, once its commitment is the manifest's and they are well-formed."""
    try:
        salt, raw, records = read_transcript(transcript)
    except TranscriptError as e:
        raise StopCheck(str(e)) from None
    got_raw = hashlib.sha256(salt + raw).hexdigest()
    got = commitment_of(salt, records)
    if want not in (got_raw, got):
        raise StopCheck(f"transcript commitment {got[:16]}... differs from the manifest's "
                        f"{str(want)[:16]}...")
    r.facts["commitment"] = "matches"
    try:
        check_records(transcript, records)
    except TranscriptError as e:
        raise StopCheck(str(e)) from None
    return records


def _selected_iteration(ctx: AuditContext, r: CheckResult, records: list[dict],
                        view) -> tuple[int, int, int, dict]:
    """The selected iteration's slice and mark; its configuration must be spec.json's."""
    try:
        index, start, end, mark = selected_slice(records, _budget_stop(ctx))
    except TranscriptError as e:
        raise StopCheck(str(e)) from None
    config = mark.get("config")
    cid = config_id(config) if isinstance(config, dict) else None
    if config != view.configuration:
        r.fail("the selected iteration's configuration differs from spec.json's")
    if mark.get("config_id") != cid or (view.configuration_id and view.configuration_id != cid):
        r.fail(f"configuration id: recomputed {cid}, transcript {mark.get('config_id')}, "
               f"spec.json {view.configuration_id}")
    return index, start, end, mark


def _private_codes(ctx: AuditContext, data: Path, view, head: list[dict], n: int):
    """The private data's binned codes and edges (resized by the replayed records plan, if any)."""
    try:
        table = load_private(data, view.spec, private_limit(n))
    except PrivateDataError as e:
        raise StopCheck(f"private data: {e}") from None
    records_part, edges_part = split_head(head)
    plan = _records_plan(ctx, records_part, table.n, view, n)
    _replay_edges(edges_part, table, view)
    try:
        stored, edges = bin_stored(table, view)
    except PrivateDataError as e:
        raise StopCheck(f"private data: cannot bin ({e})") from None
    except (KeyError, ValueError, StopIteration) as e:   # the message may hold a data value
        raise StopCheck(f"private data: cannot bin ({type(e).__name__})") from None
    return PrivateCodes(stored, table.record_rows(), plan, [len(lo) for lo, _up in edges]), edges


def _replay_edges(draws: list[dict], table, view) -> None:
    """The ``dp_edges`` draws of the head, replayed from the private table (audit/edges_replay.py)."""
    from dpbundle.mechanisms.noise import ReplayMismatch

    try:
        replay_edges(draws, table, view.spec)
    except ReplayMismatch as e:
        raise StopCheck(f"replay of the bins drawn under DP diverged from the transcript: {e}") from None
    except EdgesMismatch as e:
        raise StopCheck(str(e)) from None
    except (KeyError, TypeError, ValueError) as e:     # a malformed spec.json: no data value named
        raise StopCheck(f"replay of the bins drawn under DP: spec.json is unusable ({type(e).__name__})") from None


def _records_plan(ctx: AuditContext, head: list[dict], n_plausible: int, view, n: int):
    """The replayed resize plan of a dp_count records policy (None when the count is public)."""
    from dpbundle.mechanisms.noise import ReplayMismatch

    if records_policy(ctx) == "declared_public":
        if n_plausible != n:
            raise StopCheck("the private data's count of plausible records differs from the "
                            "public n (declared public): wrong data file or wrong bundle")
        return None
    try:
        plan = replay_records(head, n_plausible, ctx, len(view.columns), public_n=n)
    except ReplayMismatch as e:
        raise StopCheck(f"replay of the DP count of records diverged from the transcript: {e}") from None
    except TranscriptError as e:   # CountMismatch included
        raise StopCheck(str(e)) from None
    if plan.m != n:
        raise StopCheck("the replayed DP count of records differs from the public n")
    return plan


#: marks an attempt may hold besides its own 'iteration' and 'iteration end'
_ATTEMPT_MARKS = ("sampler", "arithmetic", "opaque_release")


def attempt_spending_problems(records: list[dict], budget: dict, retries: str) -> list[str]:
    """What the transcript spends outside the replayed parts, checked record by record (the
    replay itself reproduces only the head, the one fit and the selected attempt):

    * every draw lies in the head (before the first mark: the DP count), in the one fit of a
      resample selection, or inside an attempt ('iteration' .. 'iteration end');
    * in an attempt, a criterion's draw ('criterion ID ...') spends at most that criterion's
      epsilon (the declared decimal or the float handed to OpenDP; a criterion's draws over
      disjoint groups each spend it: parallel composition), and
      no zCDP (Gaussian) draw is made; with refit the other draws (the generator's) add up, in
      exact binary arithmetic, to at most the generation epsilon; with resample an attempt makes
      no draw but the criteria's (the generator's are all in the fit, so a refit hidden in an
      attempt fails) and carries the one fit's configuration.
    Returns the problems (none for a transcript the release wrote)."""
    from fractions import Fraction

    from dpbundle.mechanisms import exact

    crit = {c.get("id"): exact.dec(c.get("epsilon")) for c in (budget.get("evaluation") or {}).get("criteria") or []
            if isinstance(c, dict) and _is_number(c.get("epsilon"))}
    gen = (budget.get("generation") or {}).get("epsilon")
    eps_gen = exact.dec(gen) if _is_number(gen) else Fraction(0)
    problems: list[str] = []
    first = next((i for i, rec in enumerate(records) if rec.get("kind") == "mark"), len(records))
    fit_config = next((rec.get("config") for rec in records if rec.get("kind") == "mark"
                       and rec.get("mark") == "fit"), None)
    where, spent, index = "between", Fraction(0), None
    for i, rec in enumerate(records[first:], start=first):
        kind, name = rec.get("kind"), rec.get("mark")
        if kind == "mark":
            if name in ("fit", "fit end", "iteration", "iteration end"):
                where = {"fit": "fit", "iteration": "attempt"}.get(name, "between")
                if name == "iteration":
                    spent, index = Fraction(0), rec.get("index")
                    if retries == "resample" and rec.get("config") != fit_config:
                        problems.append(f"attempt {index!r} has another configuration than the one fit")
            elif name == "opaque_release" and where == "attempt":
                spent += _recorded_epsilon(rec)
            elif where == "between" and name not in ("selection", "stop draw", "selected", "attempt error"):
                problems.append(f"transcript record {i}: a {name!r} mark outside any attempt")
            continue
        if where == "fit" or kind == "seed" and where == "attempt":
            continue                    # the fit is replayed record by record; seeds spend nothing
        purpose = str(rec.get("purpose"))
        if where != "attempt":
            problems.append(f"transcript record {i} ({kind} {purpose!r}) lies outside the DP count, "
                            "the fit and every attempt")
        elif kind == "gaussian":
            problems.append(f"attempt {index!r} makes a zCDP draw ({purpose!r}): an attempt spends only "
                            "pure-DP epsilon")
        elif purpose.startswith("criterion "):
            cid = purpose.split(" ", 2)[1] if len(purpose.split(" ")) > 1 else ""
            if cid not in crit or _recorded_epsilon(rec) > max(crit[cid], exact.binary(float(crit[cid]))):
                problems.append(f"attempt {index!r}: draw {purpose!r} spends more than its criterion's epsilon")
        elif retries == "resample":
            problems.append(f"attempt {index!r} draws for {purpose!r}: a resample attempt draws only for "
                            "the criteria (the generator was fitted once)")
        else:
            spent += _recorded_epsilon(rec)
            if spent > eps_gen:
                problems.append(f"attempt {index!r}: its generator draws spend more than the generation "
                                f"epsilon {exact.show(eps_gen)} (at {purpose!r})")
                spent = Fraction(-10**9)        # one problem per attempt
    return problems


def _is_number(x) -> bool:
    """A JSON number, not a boolean (as audit/checks_budget.py's _num; a module that imports
    this one cannot be imported here)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _recorded_epsilon(rec: dict):
    """A record's epsilon as its exact binary value (0 if it has none)."""
    from fractions import Fraction

    from dpbundle.mechanisms import exact

    e = rec.get("epsilon")
    return exact.binary(float(e)) if _is_number(e) else Fraction(0)


def _check_every_attempt(ctx: AuditContext, r: CheckResult, records: list[dict]) -> None:
    """:func:`attempt_spending_problems` against budget.json's epsilons."""
    try:
        budget = ctx.json("budget.json")
    except (Missing, AttributeError):
        raise StopCheck("budget.json: cannot be read to check the attempts against") from None
    if not isinstance(budget, dict):
        raise StopCheck("budget.json: not an object")
    for problem in attempt_spending_problems(records, budget, transcript_retries(records))[:10]:
        r.fail(problem)


def _fit_records(ctx: AuditContext, records: list[dict], mark: dict) -> list[dict] | None:
    """The one fit's records of a resample selection (None for refit), once budget.json and the
    transcript agree on how the selection retried and the fit's configuration is the selected
    iteration's."""
    retries = transcript_retries(records)
    try:
        sel = ctx.json("budget.json").get("selection") or {}
    except (Missing, AttributeError):
        sel = {}
    if (sel.get("retries") if isinstance(sel, dict) else None) != (retries if retries == "resample" else None):
        raise StopCheck(f"the transcript's selection ({retries}) differs from budget.json's selection.retries")
    if retries != "resample":
        return None
    try:
        start, end, fit = fit_slice(records)
    except TranscriptError as e:
        raise StopCheck(str(e)) from None
    if fit.get("config") != mark.get("config") or fit.get("config_id") != mark.get("config_id"):
        raise StopCheck("the selected iteration's configuration differs from the one fit's")
    return records[start:end]


def _check_replayed_release(ctx: AuditContext, r: CheckResult, records: list[dict], index,
                            mark: dict, view, codes, edges, arith: dict | None = None,
                            fit_records: list[dict] | None = None) -> list:
    """Replay the iteration (with a resample selection's one fit, ``fit_records``); data.csv (and
    a published model.json) must be the replayed ones. ``arith`` receives the attempt's
    arithmetic (:func:`replay_iteration`)."""
    from dpbundle.mechanisms.noise import ReplayMismatch

    try:
        fitted: list = []
        blocks, results = replay_iteration(records, index, mark, view, codes, edges, fitted, arith,
                                           fit_records)
    except ReplayMismatch as e:
        raise StopCheck(f"replay diverged from the transcript: {e}") from None
    except TranscriptError as e:
        raise StopCheck(str(e)) from None
    try:
        released = ctx.bundle.digest("data.csv")
    except Exception as e:  # noqa: BLE001
        raise StopCheck(f"data.csv: {e}") from None
    if digest_of(blocks()) != released:     # then (only then) both in memory, to say where
        replayed, released_bytes = b"".join(blocks()), ctx.bundle.read_bytes("data.csv")
        r.fail(f"the replayed data.csv differs from the released one (first at line "
               f"{_first_differing_line(replayed, released_bytes)})")
    if fitted and ctx.bundle.has("model.json"):
        _check_published_model(ctx, r, fitted[0], mark.get("config"), view)
    if fitted and ctx.bundle.has("dp-tables.json"):
        _check_published_tables(ctx, r, fitted[0], view)
    return results


def _check_replayed_metrics(ctx: AuditContext, r: CheckResult, results: list,
                            arithmetic: int = 1) -> set:
    """Every replayed criterion's DP values must be metrics.json's: identical, except a
    dp_value of an attempt made with arithmetic version 1, which may differ by
    ``arithmetic.BLAS_REPLAY_RTOL`` relatively (a warning names the criterion; ``passed`` must
    still be the same). Returns the ids of the criteria accepted within that tolerance."""
    try:
        rows = {row.get("id"): row for row in ctx.json("metrics.json")["criteria"]}
    except (Missing, KeyError, TypeError, AttributeError) as e:
        raise StopCheck(f"metrics.json unusable: {e}") from None
    close: set = set()
    for res in results:
        row = rows.get(res.id)
        if row is None:
            r.fail(f"criterion {res.id}: not in metrics.json")
            continue
        # Where, never what: a replayed number computed from other data may be private.
        for field in ("dp_value", "sensitivity", "epsilon", "noise_scale", "threshold"):
            if row.get(field) == getattr(res, field):
                continue
            if field == "dp_value" and arithmetic == 1 and _within_blas_tolerance(row.get(field), res.dp_value):
                close.add(res.id)
                r.warn(_tolerance_warning(res.id))
                continue
            r.fail(f"criterion {res.id}: the replayed {field} differs from the released one")
        if row.get("passed") is not res.passed:
            r.fail(f"criterion {res.id}: the replayed 'passed' differs from the released one")
    return close


def _within_blas_tolerance(released, replayed) -> bool:
    """|a - b| <= BLAS_REPLAY_RTOL max(|a|, |b|), both finite numbers (not booleans)."""
    from dpbundle.mechanisms.arithmetic import BLAS_REPLAY_RTOL

    nums = [x for x in (released, replayed) if isinstance(x, (int, float)) and not isinstance(x, bool)]
    if len(nums) != 2 or not all(math.isfinite(x) for x in nums):
        return False
    a, b = float(nums[0]), float(nums[1])
    return abs(a - b) <= BLAS_REPLAY_RTOL * max(abs(a), abs(b))


def _tolerance_warning(cid: str) -> str:
    """The warning for criterion ``cid``'s dp_value accepted within version 1's tolerance."""
    from dpbundle.mechanisms.arithmetic import BLAS_REPLAY_RTOL

    return (f"criterion {cid}: the replayed dp_value differs from the released one in the last "
            f"digits (relative difference at most {BLAS_REPLAY_RTOL:g}): accepted because the "
            "attempt was made with arithmetic version 1 (numpy's BLAS and LAPACK), whose last bits "
            "depend on the machine's BLAS kernel (docs/determinism.md); 'passed' is the same")


def _check_published_model(ctx: AuditContext, r: CheckResult, model, config: dict, view) -> None:
    """``publish: model``: model.json must be the replayed fit (``mechanisms.published.
    model_document``), every number the same float (compared as canonical JSON: sorted keys,
    each float by its shortest repr). A swapped model, even one with the right structure and
    data.csv re-derived from it, fails here."""
    from dpbundle.mechanisms.published import PublishError, model_document

    try:
        doc = model_document(model, generator=config["generator"],
                             epsilon=float(view.spec["privacy"]["epsilon_generation"]),
                             columns=list(view.names))
        want = _canonical(doc)
        got = _canonical(ctx.json("model.json"))
    except (Missing, PublishError, KeyError, TypeError, ValueError) as e:
        r.fail(f"model.json cannot be compared with the replayed fit ({type(e).__name__})")
        return
    if got != want:
        r.fail("model.json is not the model the replayed noisy measurements give: the published "
               "model was replaced or edited")


def _check_published_tables(ctx: AuditContext, r: CheckResult, model, view) -> None:
    """``publish: tables``: dp-tables.json must be the replayed fit's measured tables
    (``mechanisms.measured.tables_document``), every count and number the same. Tables whose
    counts were edited (and the bundle re-signed, dp-tables.csv rendered again) fail here."""
    from dpbundle.mechanisms.measured import measured_of, tables_document

    from .tables_check import count_scale

    try:
        want = _canonical(tables_document(measured_of(model), list(view.names), count_scale(view.spec)))
        got = _canonical(ctx.json("dp-tables.json"))
    except (Missing, KeyError, TypeError, ValueError) as e:
        r.fail(f"dp-tables.json cannot be compared with the replayed fit ({type(e).__name__})")
        return
    if got != want:
        r.fail("dp-tables.json is not the tables the replayed noisy measurements give: the published "
               "tables were replaced or edited")


def _check_noise(r: CheckResult, records: list[dict]) -> str:
    """The recorded noise of every draw of the run against its declared distribution
    (audit/noise_check.py): a transcript whose noise is absent, too small or too regular fails,
    even though it replays byte for byte."""
    from .noise_check import check_noise

    res = check_noise(records)
    for p in res.problems:
        r.fail(p)
    r.facts["noise"] = res.facts
    return res.detail


def _check_bound_seeds(ctx: AuditContext, r: CheckResult, records: list[dict]) -> None:
    """A pre-registered bundle (seeds.json): every seed of a bound purpose in the transcript
    ('sample round k', 'projection'; k-th request within its attempt) must be the one derived
    from the published secret and beacon. Otherwise the publisher could have re-drawn the
    post-processing of an unpublished model, and the seeds check would bind nothing."""
    if not ctx.bundle.has("seeds.json"):
        return
    from dpbundle.mechanisms.seeds import is_bound_purpose

    from .checks_seeds import derive_seed

    try:
        seeds = ctx.json("seeds.json")
        secret, beacon = seeds["secret"], seeds["beacon"]["value"]
        bytes.fromhex(secret)
        if not isinstance(beacon, str):
            raise TypeError
    except (Missing, KeyError, TypeError, ValueError, AttributeError):
        r.fail("seeds.json: unusable, so the transcript's bound seeds cannot be checked")
        return
    uses: dict[str, int] = {}
    bad = []
    for i, rec in enumerate(records):
        if rec.get("kind") == "mark" and rec.get("mark") == "iteration":
            uses = {}
        if rec.get("kind") != "seed" or not isinstance(rec.get("purpose"), str) \
                or not is_bound_purpose(rec["purpose"]):
            continue
        k = uses.get(rec["purpose"], 0)
        uses[rec["purpose"]] = k + 1
        if rec.get("seed") != f"{derive_seed(secret, beacon, rec['purpose'], k):064x}":
            bad.append(i)
    if bad:
        r.fail(f"{len(bad)} seed record(s) of bound purposes (first: transcript record {bad[0]}) are "
               "not the seeds derived from the published secret and beacon value: the "
               "post-processing was not bound to the pre-registration")
