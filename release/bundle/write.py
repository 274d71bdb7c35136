"""The signed release bundle (one directory, optionally also a deterministic .zip).

Files (see docs/internals.md, "Bundle"):

    data.csv          released records, labels, spec column order, rows in the given (random) order
    metrics.csv       one row per acceptance criterion; numbers printed as format(x, ".6g")
    metrics.json      the same rows, full precision
    budget.json       every epsilon spent and how the total is composed
    spec.json         the public spec as used (without privacy.private_data_sha256) + selected configuration
    codebook.csv      every released column's values, in order: label, bounds, number, unit, description
    datapackage.json  Frictionless Data Package v2 declaring data.csv, codebook.csv and metrics.csv
    registry-entry.yaml  the bundle's OpenDP Deployments Registry entry (tier 3; registry_entry.py)
    (optional)        preregistration.json(.sig), seeds.json, model.json, configurations.yaml (the
                      --configs list the selection drew from, verbatim: configurations_file)
    README.html       the datasheet
    README.pdf        the datasheet, A4
    SHA256SUMS        ``<sha256>  <name>`` of every file above (``sha256sum -c`` reads it)
    SHA256SUMS.sig    raw 64-byte Ed25519 signature of the exact bytes of SHA256SUMS (openssl)
    SHA256SUMS.sshsig the OpenSSH signature (SSHSIG, namespace "dpbundle") of SHA256SUMS
                      (``ssh-keygen -Y verify``); both from dpbundle 0.3 (keys.py)
    manifest.json     SHA-256 and size of every file above, tool version, numpy and opendp versions,
                      creation day, public key, key fingerprint, transcript commitment, and (when the
                      release passes it) the ledger's spends on this registry: their number, this
                      one's id, the earlier ones' epsilons and the composed epsilon
    manifest.sig      raw 64-byte Ed25519 signature of the exact bytes of manifest.json

The bundle is built in a temporary sibling directory and renamed into place only when complete:
an interrupted run leaves no bundle, and an existing bundle is replaced only with ``force``.
The private randomness transcript is written outside the bundle (mode 0600); only its salted
commitment is published. The number of selection attempts never appears in any file.
"""
from __future__ import annotations

import copy
import csv
import dataclasses
import datetime as _dt
import functools
import hashlib
import io
import json
import math
import os
import re
import secrets
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from dpbundle.mechanisms import exact, noise

from dpbundle.mechanisms.cells import types_of
from dpbundle.mechanisms.coding import Coded, ColumnCoding
from dpbundle.release.bundle.data_csv import released_n, write_data_csv
from dpbundle.templates.datasheet import Meta, datasheet_html, read_public_files
from dpbundle.templates.datasheet.codebook import codebook_bytes
from dpbundle.templates.metadata import datapackage as metadata_package
from dpbundle.templates.metadata.dp_tables import TABLES_CSV, TABLES_JSON, dp_tables_csv
from dpbundle.templates.metadata.budget_words import budget_words_of_spec

from dpbundle.release.bundle import datasheet, timings
from dpbundle.release.common import jsonschemas
from dpbundle.release.bundle import keys
from dpbundle.templates.datasheet import value_noise
from dpbundle.release.data.fingerprint import file_sha256
from dpbundle.release.bundle.registry_entry import (REGISTRY_ENTRY, RegistryEntryError, RegistryFacts, registry_entry_bytes,
                                                   registry_entry_of)

__all__ = [
    "BUNDLE_FORMAT",
    "TRANSCRIPT_FORMAT",
    "COMMITMENT_CONSTRUCTION",
    "BundleError",
    "BundleContent",
    "content_from",
    "write_bundle",
    "check_public_files",
    "public_spec",
    "transcript_commitment",
    "write_transcript",
    "default_transcript_path",
    "private_dir",
    "PRIVATE_DIR_ENV",
    "write_zip",
    "file_digest",
    "metrics_csv_bytes",
    "configurations_file",
    "library_versions",
    "OPTIONAL_FILES",
    "CONFIGURATIONS",
    "CHECKSUM_FILES",
    "composed_epsilon",
]

BUNDLE_FORMAT = "dpbundle-bundle/1"
TRANSCRIPT_FORMAT = "dpbundle-transcript/1"
COMMITMENT_CONSTRUCTION = "sha256(salt || transcript.jsonl)"
METRICS_FIELDS = ["id", "type", "description", "threshold", "stakeholder_threshold", "threshold_inputs", "dp_value",
                  "passed", "epsilon", "sensitivity", "sensitivity_inputs", "mechanism", "noise_scale", "noise_std"]
METRICS_CSV_COLUMNS = ["id", "type", "description", "threshold", "stakeholder_threshold", "dp_value", "passed",
                       "epsilon", "sensitivity", "mechanism", "noise_scale", "noise_std",
                       "noise_on", "value_noise_std", "value_noise_mean"]
# noise_std is the std of the noise the mechanism draws; noise_on says where it goes ("value",
# "inside_fit", "selection_scores"); value_noise_std / value_noise_mean: the noise of the reported
# dp_value (estimated for a fit, empty when unknown; see value_noise.py and the datasheet).
ZIP_DATE = (1980, 1, 1, 0, 0, 0)

# Keys that would publish how many candidates the private selection tried (DESIGN: never).
_ATTEMPT_KEY = re.compile(r"attempt|^(n_|num_|number_of_)?(iterations?|tries|trials|candidates_tried)(_count|_index)?$"
                          r"|^iteration_index$|^selected_index$", re.IGNORECASE)


class BundleError(Exception):
    """The bundle cannot be written (bad input, existing output, inconsistent budget, ...)."""


# ----------------------------------------------------------------------------------------- helpers

def _utc_today() -> str:
    """The bundle's ``created``: the UTC day only. A time of day would tell, against the
    start of the run (a pre-registration, a log), how long the selection took, a proxy for the
    number of attempts, which is private."""
    return _dt.datetime.now(_dt.timezone.utc).date().isoformat()


def _jsonable(obj: Any, where: str = "$") -> Any:
    """Plain JSON types (numpy scalars/arrays, tuples, dates, paths converted); NaN/inf refused."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    if isinstance(obj, dict):
        return {str(k): _jsonable(v, f"{where}.{k}") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist(), where)
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if not math.isfinite(x):
            raise BundleError(f"{where}: {x} is not a finite number")
        return x
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, (_dt.date, _dt.datetime)):
        return obj.isoformat()
    if isinstance(obj, Path):
        return str(obj)
    raise BundleError(f"{where}: cannot write a {type(obj).__name__} to JSON")


def _check_no_attempt_count(obj: Any, where: str) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if _ATTEMPT_KEY.search(str(k)):
                raise BundleError(f"{where}.{k}: the number of selection attempts (or an attempt index) must never "
                                  f"be published")
            _check_no_attempt_count(v, f"{where}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_no_attempt_count(v, f"{where}[{i}]")


def _json_bytes(obj: Any) -> bytes:
    return metadata_package.json_bytes(obj)


def _write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _checked_json(obj: Any, schema: str, name: str) -> bytes:
    """``obj`` as the bundle's JSON bytes, after checking it against ``schema``."""
    jsonschemas.validate(obj, schema, document=name)
    return _json_bytes(obj)


def file_digest(path: Path) -> tuple[str, int]:
    """(SHA-256 hex, size in bytes) of a file."""
    return file_sha256(path), Path(path).stat().st_size


def _is_within(path: Path, directory: Path) -> bool:
    path, directory = path.resolve(), directory.resolve()
    return path == directory or directory in path.parents


# --------------------------------------------------------------------------------- public pieces

def public_spec(spec: dict) -> dict:
    """The spec as published: a deep copy without ``privacy.private_data_sha256``."""
    out = copy.deepcopy(spec)
    if isinstance(out.get("privacy"), dict):
        out["privacy"].pop("private_data_sha256", None)
    return out


transcript_commitment = noise.commitment_of  # sha256(salt || records_jsonl), one definition


PRIVATE_DIR_ENV = "DPBUNDLE_PRIVATE_DIR"


def private_dir() -> Path:
    """The private directory for transcripts: ``$DPBUNDLE_PRIVATE_DIR`` if set, else
    ``$XDG_DATA_HOME/dpbundle/private`` (XDG_DATA_HOME defaults to ``~/.local/share``).

    Created with mode 0700 if missing. An existing default directory that we own is narrowed to
    0700; an existing ``$DPBUNDLE_PRIVATE_DIR`` is the user's choice and is left as it is, with a
    warning if others may read it (the files in it are 0600 either way). If the directory cannot
    be created it is returned all the same: the caller's "no such directory" check says so.
    """
    env = os.environ.get(PRIVATE_DIR_ENV)
    if env:
        d = Path(env).expanduser()
    else:
        xdg = os.environ.get("XDG_DATA_HOME")
        base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
        d = base / "dpbundle" / "private"
    d = d.absolute()
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = d.stat()
        if st.st_mode & 0o077:
            if not env and st.st_uid == os.getuid():
                os.chmod(d, 0o700)
            else:
                print(f"warning: the private directory {d} may be read by other users (mode "
                      f"{st.st_mode & 0o777:o}); the transcript itself is written with mode 0600",
                      file=sys.stderr)
    except OSError:
        pass
    return d


def default_transcript_path(out: Path) -> Path:
    """The default transcript location: in the private directory (:func:`private_dir`, mode
    0700), not beside the bundle, where copying the folder that holds the bundle would ship it.
    The name is the bundle's name and a random tag, so two releases never collide, and no time
    (the start time beside the bundle's ``created`` would give the run time):
    ``<name>.<12 hex>.transcript.jsonl``; the file itself is written 0600."""
    out = Path(out)
    d = private_dir()
    if d.resolve() == out.absolute().parent.resolve():
        print(f"warning: {PRIVATE_DIR_ENV} is the folder that holds the bundle: copying that folder "
              f"would ship the PRIVATE transcript", file=sys.stderr)
    return d / f"{out.name}.{secrets.token_hex(6)}.transcript.jsonl"


def _one_per_class(values: list) -> list:
    """The first element of each JSON class in ``values`` (int, integral float, other float, each
    other type). The transcript-record schema constrains the ``true``/``noisy`` arrays only by
    their element types and ``minItems: 1``, so this short list is valid exactly when ``values`` is."""
    seen: dict = {}
    for v in values:
        seen.setdefault((type(v), v.is_integer()) if type(v) is float else type(v), v)
    return list(seen.values())


def _validate_transcript_records(records_jsonl: bytes, document: str) -> None:
    """Validate every record line against ``transcript-record`` (SchemaValidationError naming the
    line). Long numeric arrays are checked in bulk; a failing record is re-validated in full so
    the error names the exact JSON path."""
    for lineno, line in enumerate(bytes(records_jsonl).decode("utf-8").splitlines(), start=2):
        where = f"{document} line {lineno}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BundleError(f"{where}: not a JSON record ({exc})") from None
        view = rec
        if isinstance(rec, dict) and any(isinstance(rec.get(k), list) for k in ("true", "noisy")):
            view = {k: _one_per_class(v) if k in ("true", "noisy") and isinstance(v, list) else v
                    for k, v in rec.items()}
        if jsonschemas.iter_errors(view, "transcript-record"):
            jsonschemas.validate(rec, "transcript-record", document=where)


def write_transcript(path: Path, records_jsonl: bytes, salt: bytes, *, force: bool = False) -> str:
    """Write the private transcript file (mode 0600): a header line, then the records.

    Returns the commitment. Refuses to overwrite an existing file unless ``force``. The header and
    every record are validated against their schemas first (``SchemaValidationError``).
    """
    path = Path(path)
    commitment = transcript_commitment(salt, records_jsonl)
    jsonschemas.validate(noise.transcript_header(salt), "transcript-header", document=f"{path} (header)")
    _validate_transcript_records(records_jsonl, str(path))
    if (path.exists() or path.is_symlink()) and not force:
        raise BundleError(f"{path}: the transcript file exists; refusing to overwrite it (use --force)")
    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(6)}")
    try:
        _write_bytes(tmp, noise.transcript_file_bytes(bytes(records_jsonl), salt), 0o600)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return commitment


SHA256SUMS = "SHA256SUMS"
SHA256SUMS_SIG = "SHA256SUMS.sig"        # raw Ed25519 signature of SHA256SUMS (openssl pkeyutl)
SHA256SUMS_SSHSIG = "SHA256SUMS.sshsig"  # SSHSIG signature of SHA256SUMS (ssh-keygen -Y verify)
# the files that follow the content files, in the manifest's order: the checksum list and its signatures
CHECKSUM_FILES = (SHA256SUMS, SHA256SUMS_SIG, SHA256SUMS_SSHSIG)
CONFIGURATIONS = "configurations.yaml"
# optional public files -> their JSON Schema (None: not JSON; a .yaml file is parsed as YAML and
# validated against its schema)
OPTIONAL_FILES = {"preregistration.json": "preregistration", "preregistration.json.sig": None,
                  "seeds.json": "seeds", "model.json": "model", CONFIGURATIONS: "narrowed",
                  TABLES_JSON: "dp-tables"}


def configurations_file(path: Path | None) -> dict[str, bytes]:
    """The public file of the configuration list the private selection draws from:
    ``{"configurations.yaml": <the bytes of the --configs list>}``, verbatim, so that its SHA-256
    is the ``configs_sha256`` a pre-registration record registers (``dpbundle preregister
    --configs`` hashes the file's bytes); ``{}`` when ``path`` is None (the selection drew from
    the spec's whole space, which spec.json publishes). The list is public: a ``dpbundle
    sweep`` on public data wrote it. BundleError if it cannot be read or is not a narrowed list
    (schemas/narrowed.schema.json). The audit checks that the selected configuration is in it
    and, for a pre-registered bundle, that its SHA-256 is the registered one.

    Pass the result to :func:`write_bundle` in ``public_files`` (with the other optional files)."""
    if path is None:
        return {}
    try:
        content = Path(path).read_bytes()
    except OSError as exc:
        raise BundleError(f"{path}: cannot read the configuration list ({exc.strerror})") from None
    _check_yaml(CONFIGURATIONS, content, OPTIONAL_FILES[CONFIGURATIONS])
    return {CONFIGURATIONS: content}


def _check_yaml(name: str, content: bytes, schema: str) -> None:
    """A public YAML file parses (the release's hardened reader) and matches its schema. The
    answer for the same name, bytes and schema is remembered (a release checks its list when it
    loads it, before the spend, and when it writes the bundle)."""
    _checked_yaml(name, bytes(content), schema)


@functools.lru_cache(maxsize=8)
def _checked_yaml(name: str, content: bytes, schema: str) -> None:
    from dpbundle.release.spec.yaml_text import SpecTextError, load_yaml

    try:
        doc = load_yaml(content.decode("utf-8"))[0]
    except UnicodeDecodeError:
        raise BundleError(f"{name}: not UTF-8 text") from None
    except SpecTextError as exc:
        raise BundleError(f"{name}: not a readable YAML document ({exc})") from None
    try:
        jsonschemas.validate(doc, schema, document=name)
    except ValueError as exc:
        raise BundleError(f"{name}: {exc}") from None


def library_versions() -> dict[str, str]:
    """manifest.json's ``versions``: the installed numpy and opendp, on which a bundle's bytes
    depend (docs/reproducibility.md); the replay and the re-derivation warn when theirs differ."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for lib in ("numpy", "opendp"):
        try:
            out[lib] = version(lib)
        except PackageNotFoundError:  # pragma: no cover
            out[lib] = "unknown"
    return out


LEDGER_FIELDS = ("spends_on_registry", "spend_id", "earlier_epsilons", "composed_epsilon")


def composed_epsilon(total_epsilon: Any, earlier_epsilons: Sequence[Any]) -> float:
    """manifest.json's ``ledger.composed_epsilon``: this bundle's total epsilon plus the earlier
    spends' on the registry (pure-DP sequential composition), summed exactly as declared decimals
    (:func:`dpbundle.mechanisms.exact.total`), then the nearest float."""
    return float(exact.dec(total_epsilon) + exact.total(earlier_epsilons))


def _ledger_doc(ledger: dict | None, total_epsilon: Any) -> dict | None:
    """manifest.json's ``ledger`` from write_bundle's argument (BundleError if malformed):
    ``spends_on_registry`` k, ``spend_id``, ``earlier_epsilons`` (k - 1 epsilons, in ledger order)
    and ``composed_epsilon`` (computed from budget.json's ``total_epsilon`` when not given, and
    required to be that sum when given)."""
    if ledger is None:
        return None
    if not isinstance(ledger, dict):
        raise BundleError("ledger must be a dict {'spends_on_registry': k, 'spend_id': id, "
                          "'earlier_epsilons': [...]}")
    k, sid = ledger.get("spends_on_registry"), ledger.get("spend_id")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise BundleError(f"ledger.spends_on_registry must be an integer >= 1 (this spend "
                          f"included), got {k!r}")
    if not isinstance(sid, str) or not sid or len(sid) > 200:
        raise BundleError("ledger.spend_id must be the ledger entry's id (a non-empty string)")
    unknown = sorted(set(ledger) - set(LEDGER_FIELDS))
    if unknown:
        raise BundleError(f"ledger: unknown field(s) {unknown}")
    earlier = _earlier_epsilons(ledger.get("earlier_epsilons"), k)
    composed = composed_epsilon(total_epsilon, earlier)
    stated = ledger.get("composed_epsilon", composed)
    if isinstance(stated, bool) or not isinstance(stated, (int, float)) or float(stated) != composed:
        raise BundleError(f"ledger.composed_epsilon {stated!r} is not budget.json's total_epsilon plus the "
                          f"earlier epsilons, {composed!r}")
    return {"spends_on_registry": k, "spend_id": sid, "earlier_epsilons": earlier, "composed_epsilon": composed}


def _earlier_epsilons(values: Any, k: int) -> list[float]:
    """The earlier spends' epsilons (finite numbers >= 0), k - 1 of them; BundleError otherwise."""
    if not isinstance(values, (list, tuple)):
        raise BundleError("ledger.earlier_epsilons must list the epsilons of the earlier spends on the "
                          "registry (an empty list for the first)")
    if len(values) != k - 1:
        raise BundleError(f"ledger.earlier_epsilons lists {len(values)} epsilon(s); spends_on_registry "
                          f"{k} means {k - 1} earlier spend(s)")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(v)) or float(v) < 0:
            raise BundleError(f"ledger.earlier_epsilons[{i}] must be a finite number >= 0, got {v!r}")
        out.append(float(v))
    return out


def check_public_files(files: dict[str, bytes]) -> dict[str, bytes]:
    """The optional public files in a fixed order; BundleError for an unknown name or a JSON
    (YAML) file that does not match its schema."""
    out: dict[str, bytes] = {}
    for name in OPTIONAL_FILES:
        if name not in files:
            continue
        content = bytes(files[name])
        schema = OPTIONAL_FILES[name]
        if schema is not None and name.endswith(".yaml"):
            _check_yaml(name, content, schema)
        elif schema is not None:
            try:
                jsonschemas.validate(json.loads(content.decode("utf-8")), schema, document=name)
            except (UnicodeDecodeError, ValueError) as exc:
                raise BundleError(f"{name}: {exc}") from None
        out[name] = content
    unknown = sorted(set(files) - set(OPTIONAL_FILES))
    if unknown:
        raise BundleError(f"unknown optional bundle file(s) {unknown}; allowed: {sorted(OPTIONAL_FILES)}")
    return out


_check_public_files = check_public_files   # the name before 0.3


def _as_coding(col: Any) -> ColumnCoding:
    """A released column as a :class:`ColumnCoding` (the codebook needs its numbers and bounds);
    a column known only by name and labels gets its codes as numbers and no bounds."""
    if isinstance(col, ColumnCoding):
        return col
    k = len(col.labels)
    nan = np.full(k, np.nan)
    return ColumnCoding(name=col.name, labels=tuple(col.labels), values=np.arange(k, dtype=float),
                        ordered=False, lower=nan, upper=nan)


def sha256sums_bytes(directory: Path, files: Sequence[str]) -> bytes:
    """``SHA256SUMS`` in the format ``sha256sum -c`` reads: ``<hex>  <name>`` per line, sorted
    by name (the manifest and its signature are not listed: the manifest lists this file)."""
    lines = [f"{file_digest(Path(directory) / f)[0]}  {f}\n" for f in sorted(files)]
    return "".join(lines).encode("utf-8")


def write_zip(directory: Path, zip_path: Path, *, root: str | None = None) -> Path:
    """A deterministic zip of ``directory``: entries sorted, under ``root/`` (default: the directory's
    name), timestamps 1980-01-01 00:00, mode 0644, deflated at level 9, no extra fields, no
    comment. Byte-identical for identical directory contents with the same zlib (the signature
    covers the files inside, not the zip: a different zlib may give other zip bytes but the same
    verified files)."""
    directory, zip_path = Path(directory), Path(zip_path)
    root = directory.name if root is None else root
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9,
                         allowZip64=True) as zf:
        for p in files:
            rel = p.relative_to(directory).as_posix()
            info = zipfile.ZipInfo(f"{root}/{rel}" if root else rel, date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, so that external_attr is a unix mode everywhere
            info.external_attr = (0o100644 & 0xFFFF) << 16
            info.extra = b""
            info.comment = b""
            zf.writestr(info, p.read_bytes(), compresslevel=9)
        zf.comment = b""
    zip_path.write_bytes(buf.getvalue())
    return zip_path


def metrics_csv_bytes(criteria: list[dict], noise_estimates: dict | None = None) -> bytes:
    """metrics.csv: one row per criterion, numbers printed with the datasheet's format;
    ``noise_estimates``: value_noise.estimate(...) for the value-noise columns of fits."""
    vnoise = value_noise.value_noise_rows(criteria, noise_estimates)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(METRICS_CSV_COLUMNS)
    for c in criteria:
        row = dict(c, **vnoise[c["id"]])
        w.writerow([row[k] if isinstance(row[k], str) else datasheet.format_number(row[k])
                    for k in METRICS_CSV_COLUMNS])
    return buf.getvalue().encode("utf-8")


DATAPACKAGE_PROFILE = metadata_package.DATAPACKAGE_PROFILE
DATAPACKAGE_VERSION = metadata_package.DATAPACKAGE_VERSION
DATAPACKAGE_ID_PREFIX = metadata_package.DATAPACKAGE_ID_PREFIX
SIMULATED_TITLE_SUFFIX = metadata_package.SIMULATED_TITLE_SUFFIX
SIMULATED_NOTE = metadata_package.SIMULATED_NOTE
datapackage_id = metadata_package.datapackage_id
if list(metadata_package.METRICS_CSV_FIELDS) != METRICS_CSV_COLUMNS:  # pragma: no cover - kept in step
    raise ImportError("datapackage.json's metrics.csv schema is out of step with metrics.csv's columns")


def spec_sha256(spec: dict) -> str:
    """SHA-256 of the canonical JSON of the public spec as declared (as ``audit --spec`` computes
    it: without the edges its ``dp_edges`` alternatives drew)."""
    from dpbundle.mechanisms.edges import declared_document
    from dpbundle.release.spec.load import canonical_json

    return hashlib.sha256(canonical_json(public_spec(declared_document(spec)))).hexdigest()


def _datapackage(spec: dict, columns: Sequence[Any], descriptions: dict, digests: dict[str, tuple[str, int]],
                 created: str, configuration_id: str, configuration: dict | None = None,
                 table_ids: Sequence[str] = ()) -> dict:
    """datapackage.json (:func:`dpbundle.templates.metadata.datapackage.datapackage`, which the
    audit renders again from the bundle): the public spec, each column's labels and
    ``categoriesOrdered`` (:func:`_ordered_flags`), its description, the tables' digests
    (``digests``: file name -> (SHA-256, size)), the day and the configuration id."""
    ordered = _ordered_flags(spec, configuration, columns)
    facts = metadata_package.PackageFacts(
        spec=spec, columns=[(c.name, [str(x) for x in c.labels], ordered[c.name]) for c in columns],
        descriptions=descriptions, digests=digests, created=created, configuration_id=configuration_id,
        spec_sha256=spec_sha256(spec), table_ids=table_ids,
        specials={c.name: [(c.labels[i], c.special[i]) for i in c.special_codes]
                  for c in columns if getattr(c, "special_codes", ())})
    return metadata_package.datapackage(facts)


def _ordered_flags(spec: dict, configuration: dict | None, columns: Sequence[Any]) -> dict[str, bool]:
    """Column -> ``categoriesOrdered``: what the spec says under the configuration
    (:func:`dpbundle.release.spec.coding.categories_ordered`: bins, and categories whose
    alternative declares ``ordered: true``); a column the spec does not resolve (a hand-made
    content without the spec's alternatives) keeps its coding's ``ordered``."""
    from dpbundle.release.spec.coding import categories_ordered

    flags: dict[str, bool] = {}
    if isinstance(configuration, dict):
        try:
            flags = categories_ordered(spec, configuration)
        except (KeyError, TypeError, AttributeError):
            flags = {}
    return {c.name: bool(flags.get(c.name, getattr(c, "ordered", False))) for c in columns}


# ------------------------------------------------------------------------------- input checking

def _check_columns_and_codes(spec: dict, columns: Sequence[Any], codes: Any) -> Any:
    """The released table checked against the columns: an int64 array, or a Coded table (kept
    as it is: a candidate held as record types is checked on them, its rows never built)."""
    data = codes
    if isinstance(data, Coded):
        codes = types_of(data).table.codes      # its distinct rows: the same ranges
        n, d = data.n, codes.shape[1]
    else:
        codes = np.asarray(codes)
        if codes.ndim != 2 or not np.issubdtype(codes.dtype, np.integer):
            raise BundleError(f"codes must be a 2-d integer array, got {codes.dtype} with shape {codes.shape}")
        n, d = codes.shape
    if n == 0:
        raise BundleError("no records to release")
    if d != len(columns):
        raise BundleError(f"codes have {d} columns but {len(columns)} column codings were given")
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise BundleError(f"duplicate column names: {names}")
    spec_names = [c.get("name") for c in spec.get("columns") or []]
    if spec_names and spec_names != names:
        raise BundleError(f"released columns {names} differ from the spec's columns {spec_names} (same order required)")
    for j, col in enumerate(columns):
        k = len(col.labels)
        labels = [str(x) for x in col.labels]
        if len(set(labels)) != k:
            raise BundleError(f"column {col.name}: duplicate labels {labels}")
        lo, hi = int(codes[:, j].min()), int(codes[:, j].max())
        if lo < 0 or hi >= k:
            raise BundleError(f"column {col.name}: codes range {lo}..{hi} outside 0..{k - 1}")
    return data if isinstance(data, Coded) else codes.astype(np.int64, copy=False)


def _check_metrics(criteria: list[dict], n: int) -> None:
    for c in criteria:
        missing = [k for k in METRICS_FIELDS if k not in c]
        if missing:
            raise BundleError(f"criterion {c.get('id', '?')}: missing fields {missing}")
        if bool(c["passed"]) != (c["dp_value"] < c["threshold"]):
            raise BundleError(f"criterion {c['id']}: passed={c['passed']} but dp_value {c['dp_value']!r} vs threshold "
                              f"{c['threshold']!r} says otherwise")
    ids = [c["id"] for c in criteria]
    if len(set(ids)) != len(ids):
        raise BundleError(f"duplicate criterion ids: {ids}")


def _check_budget_words(budget: dict, words: dict) -> None:
    """budget.json's statements are the spec's (templates/metadata/budget_words.py), which the
    audit re-derives: BundleError naming the first that is not."""
    for path, want in words.items():
        got: Any = budget
        for key in path.split("."):
            got = got.get(key) if isinstance(got, dict) else None
        if want is not None and got != want:
            raise BundleError(f"budget.json: {path} {got!r} is not the statement the spec gives, {want!r} "
                              "(templates/metadata/budget_words.py; the audit re-derives it)")


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _complete_budget(budget: dict, spec: dict, criteria: list[dict]) -> dict:
    b = _jsonable(copy.deepcopy(budget), "budget")
    words = budget_words_of_spec(spec)
    if "unit_of_privacy" not in b and words["unit_of_privacy"]:
        b["unit_of_privacy"] = words["unit_of_privacy"]
    b.setdefault("neighbouring", words["neighbouring"])
    b.setdefault("input_metric", words["input_metric"])
    b.setdefault("pre_selection", [])
    _check_budget_words(b, words)
    _check_no_attempt_count(b, "budget.json")
    if "opendp_version" not in b:
        from importlib.metadata import PackageNotFoundError, version
        try:
            b["opendp_version"] = version("opendp")
        except PackageNotFoundError:
            b["opendp_version"] = "unknown"
    jsonschemas.validate(b, "budget", document="budget.json")
    # The arithmetic must hold before anything is signed.
    problems = []
    dec = exact.dec
    zcdp = b.get("definition") == "zcdp"
    key = "rho" if zcdp else "epsilon"
    gen, ev = dec(b["generation"][key]), dec(b["evaluation"]["epsilon"])
    if exact.total(c["epsilon"] for c in b["evaluation"]["criteria"]) != ev:
        problems.append("evaluation.epsilon is not the sum of the criteria's epsilons")
    parts = b["generation"].get("parts") or []
    if any(f"{key}_opendp" in p for p in parts) and exact.total(p[key] for p in parts) != gen:
        problems.append(f"generation.parts' decimal shares do not add up to generation.{key}")
    if zcdp:
        problems += _zcdp_problems(b, gen, ev)
        gen = 0      # the generator's rho is in the zcdp block's total, not in the epsilon sum below
    once = gen if b["selection"].get("retries") == "resample" else 0   # fitted once
    if gen - once + ev != dec(b["per_iteration_epsilon"]):
        problems.append("per_iteration_epsilon is not the candidate's epsilon (generation.epsilon, unless "
                        "fitted once, + evaluation.epsilon)")
    rec = b.get("records") or {"policy": "declared_public", "epsilon": 0}
    edges = b.get("edges") or {"epsilon": 0, "alternatives": []}
    if exact.total(a["epsilon"] for a in edges["alternatives"]) != dec(edges["epsilon"]):
        problems.append("edges.epsilon is not the sum of its alternatives' epsilons")
    expected = (dec(rec["epsilon"]) + dec(edges["epsilon"]) + once
                + dec(b["selection"]["factor"]) * dec(b["per_iteration_epsilon"])
                + exact.total(p["epsilon"] for p in b["pre_selection"]))
    if not zcdp and expected != dec(b["total_epsilon"]):
        problems.append(f"total_epsilon {b['total_epsilon']!r} is not records (+ generation fitted once) "
                        f"+ factor x per-iteration + pre-selection = {exact.show(expected)}")
    if dec(b["total_epsilon"]) > dec(b["epsilon_cap"]):
        problems.append(f"total_epsilon {b['total_epsilon']!r} exceeds the cap {b['epsilon_cap']!r}")
    by_id = {c["id"]: c["epsilon"] for c in b["evaluation"]["criteria"]}
    for c in criteria:
        if c["id"] in by_id and not _close(float(c["epsilon"]), float(by_id[c["id"]])):
            problems.append(f"criterion {c['id']}: epsilon {c['epsilon']!r} in metrics but {by_id[c['id']]!r} in the budget")
    if problems:
        raise BundleError("inconsistent privacy budget: " + "; ".join(problems))
    return b


# ------------------------------------------------------------------------------------- the writer

@dataclass(frozen=True, eq=False)
class BundleContent:
    """What a bundle publishes, as :func:`write_bundle` receives it (not yet checked).

    ``spec``: the spec document (a plain dict, in its order: spec.json keeps it); ``columns``:
    objects with ``.name`` and ``.labels`` (and optionally ``.description``, ``.ordered``), in
    the spec's column order; ``codes``: int (n, d) codes into each column's labels, rows already
    in their (random) release order; ``metrics``: CriterionResult dicts; ``budget``: per
    internals.md; ``transcript_records_jsonl``: ``Transcript.to_jsonl()`` (private: only its
    salted commitment is published); ``extra``: more public information for the manifest and the
    datasheet; ``public_files``: optional public files by name (the pre-registration record and
    its signature, ``seeds.json``, a published model; names from :data:`OPTIONAL_FILES`, JSON
    ones validated against their schemas; the configuration list from
    :func:`configurations_file`); ``ledger``: what the private budget ledger recorded on this
    registry when this release reserved its budget, ``{"spends_on_registry": k, "spend_id": id,
    "earlier_epsilons": [...]}`` (k spends on the same data, this one included; its entry's id;
    the k - 1 earlier spends' epsilons in ledger order), signed in manifest.json's ``ledger`` with
    ``composed_epsilon`` (:func:`composed_epsilon`; the public audit checks the arithmetic, the
    enclave audit's ``--ledger`` checks the rest against the ledger)."""

    spec: dict
    configuration: dict
    configuration_id: str
    columns: Sequence[Any]
    codes: np.ndarray
    metrics: list[dict]
    budget: dict
    transcript_records_jsonl: bytes
    extra: dict | None = None
    public_files: dict[str, bytes] | None = None
    ledger: dict | None = None


def content_from(content: BundleContent | None, fields: dict[str, Any]) -> BundleContent:
    """``content`` with ``fields`` replaced, or (``content`` None) a :class:`BundleContent` of
    ``fields``: the keyword form of :func:`write_bundle` (``spec=..., codes=...``). TypeError
    for a name that is not a field, as a call with an unknown keyword raises."""
    if content is None:
        return BundleContent(**fields)
    return dataclasses.replace(content, **fields) if fields else content


@dataclass(frozen=True, eq=False)
class _Documents:
    """The bundle's public documents, built from a BundleContent and checked (nothing written)."""

    spec: dict
    columns: Sequence[Any]
    codes: np.ndarray
    n: int
    criteria: list[dict]
    budget: dict
    metrics: dict
    spec_doc: dict
    extra: dict | None
    optional: dict[str, bytes]
    ledger: dict | None
    descriptions: dict[str, str]
    transcript: bytes


@dataclass(frozen=True)
class _Stamp:
    """What the files share beyond the documents: the day, the key, the transcript's salt and
    commitment, the file list (without SHA256SUMS) and the registry entry's bytes."""

    version: str
    created: str
    public_pem: str
    fingerprint: str
    salt: bytes
    commitment: str
    files: tuple[str, ...]
    entry_bytes: bytes


def write_bundle(out: Path, content: BundleContent | None = None, *, transcript_path: Path,
                 private_key: Any, force: bool = False, make_zip: bool = False, **fields: Any) -> Path:
    """Write the signed bundle directory ``out`` (and ``out.zip`` if ``make_zip``); return ``out``.

    ``content``: what the bundle publishes (:class:`BundleContent`); its fields may also be given
    as keywords (``spec=..., codes=...``; with ``content``, they replace its fields).
    ``transcript_path``: where the private transcript is written, with a fresh salt (mode 0600,
    outside the bundle); ``private_key``: an Ed25519PrivateKey (see keys.load_private_key).
    Every JSON file is validated against its schema before writing; a ``SHA256SUMS`` file lists
    every file's hash. manifest.json also records the numpy and opendp versions (``versions``),
    on which the bundle's bytes depend. Raises :class:`BundleError` (nothing written) on bad
    input or an existing output without ``force``.
    """
    content = content_from(content, fields)
    out, transcript_path = Path(out), Path(transcript_path)
    with timings.stage("write.documents"):
        _check_target(out, content, transcript_path, private_key, force, make_zip)
        docs = _documents(content)
        stamp = _stamp(docs, private_key)
    _write_and_place(out, docs, stamp, private_key, transcript_path, make_zip)
    print(f"warning: the randomness transcript {transcript_path} is PRIVATE: it must stay inside the enclave "
          f"(the bundle publishes only its commitment {stamp.commitment[:16]}...)", file=sys.stderr)
    return out


def _check_target(out: Path, content: BundleContent, transcript_path: Path, private_key: Any,
                  force: bool, make_zip: bool) -> None:
    """The key, the transcript's type, and where the bundle, its zip and the transcript go."""
    zip_path = out.with_name(out.name + ".zip")
    if not isinstance(private_key, keys.Ed25519PrivateKey):
        raise BundleError("private_key must be an Ed25519 private key (keys.load_private_key)")
    if not isinstance(content.transcript_records_jsonl, (bytes, bytearray)):
        raise BundleError("transcript_records_jsonl must be bytes (Transcript.to_jsonl())")
    if not out.parent.is_dir():
        raise BundleError(f"{out.parent}: no such directory")
    if out.exists() or out.is_symlink():
        if not force:
            raise BundleError(f"{out}: exists; refusing to overwrite it (use --force to replace a bundle)")
        from dpbundle.release.bundle.preflight import replaceable_bundle_problem

        problem = replaceable_bundle_problem(out)
        if problem:
            raise BundleError(f"{problem}; --force replaces only a complete dpbundle bundle, so "
                              "nothing was touched")
    if make_zip and zip_path.exists() and not force:
        raise BundleError(f"{zip_path}: exists; refusing to overwrite it (use --force)")
    if _is_within(transcript_path, out) or transcript_path.resolve() == zip_path.resolve():
        raise BundleError(f"{transcript_path}: the private transcript must not be written inside the bundle {out}")
    if transcript_path.resolve().parent.name.startswith(f".{out.name}.tmp-"):
        raise BundleError(f"{transcript_path}: not a valid transcript location")
    if not transcript_path.parent.is_dir():
        raise BundleError(f"{transcript_path.parent}: no such directory (for the transcript)")
    if (transcript_path.exists() or transcript_path.is_symlink()) and not force:
        raise BundleError(f"{transcript_path}: the transcript file exists; refusing to overwrite it (use --force)")


def _documents(content: BundleContent) -> _Documents:
    """Every public document, checked (attempt counts, budget arithmetic, schemas) before
    anything is written."""
    spec = _jsonable(content.spec, "spec")
    codes = _check_columns_and_codes(spec, content.columns, content.codes)
    n = released_n(codes)
    criteria = [_jsonable(m, f"metrics[{i}]") for i, m in enumerate(content.metrics)]
    criteria = [{k: c[k] for k in METRICS_FIELDS} | {k: v for k, v in c.items() if k not in METRICS_FIELDS}
                for c in criteria]
    _check_metrics(criteria, n)
    budget_doc = _complete_budget(content.budget, spec, criteria)
    if "records" in budget_doc and budget_doc["records"]["released_n"] != n:
        raise BundleError(f"inconsistent privacy budget: records.released_n "
                          f"{budget_doc['records']['released_n']} but data.csv has {n} rows")
    metrics_doc = {"n": n, "number_format": datasheet.NUMBER_FORMAT_DOC, "criteria": criteria}
    spec_doc = {"spec": public_spec(spec), "configuration": _jsonable(content.configuration, "configuration"),
                "configuration_id": str(content.configuration_id)}
    extra_doc = _jsonable(content.extra, "extra") if content.extra else None
    optional = check_public_files(content.public_files or {})
    ledger_doc = _ledger_doc(content.ledger, budget_doc["total_epsilon"])
    _check_documents(metrics_doc, budget_doc, spec_doc, extra_doc)
    spec_cols = {c.get("name"): c for c in spec.get("columns") or []}
    descriptions = {c.name: (getattr(c, "description", None) or spec_cols.get(c.name, {}).get("description") or "")
                    for c in content.columns}
    return _Documents(spec=spec, columns=content.columns, codes=codes, n=n, criteria=criteria,
                      budget=budget_doc, metrics=metrics_doc, spec_doc=spec_doc, extra=extra_doc,
                      optional=optional, ledger=ledger_doc, descriptions=descriptions,
                      transcript=bytes(content.transcript_records_jsonl))


def _check_documents(metrics_doc: dict, budget_doc: dict, spec_doc: dict, extra_doc: dict | None) -> None:
    """No attempt count anywhere; metrics.json, spec.json (and its spec) match their schemas."""
    for where, doc in (("metrics.json", metrics_doc), ("budget.json", budget_doc), ("spec.json", spec_doc),
                       ("extra", extra_doc)):
        _check_no_attempt_count(doc, where)
    jsonschemas.validate(metrics_doc, "metrics", document="metrics.json")
    jsonschemas.validate(spec_doc, "spec-json", document="spec.json")
    try:
        jsonschemas.load_schema("spec")
    except FileNotFoundError:
        pass
    else:
        jsonschemas.validate(spec_doc["spec"], "spec", document="spec.json: spec")


def _stamp(docs: _Documents, private_key: Any) -> _Stamp:
    """The day, the key's PEM and fingerprint, a fresh salt and the transcript's commitment, the
    file list, and the OpenDP Deployments Registry entry (from the documents checked above)."""
    from dpbundle.release import __version__

    created = _utc_today()
    public_pem = keys.public_key_pem(private_key)
    fingerprint = keys.public_key_fingerprint(private_key)
    salt = secrets.token_bytes(32)
    commitment = transcript_commitment(salt, docs.transcript)
    files = ("data.csv", "codebook.csv", "metrics.csv", "metrics.json", "budget.json", "spec.json",
             "datapackage.json", REGISTRY_ENTRY, *docs.optional,
             *((TABLES_CSV,) if TABLES_JSON in docs.optional else ()), "README.html", "README.pdf")
    optional = docs.optional
    try:
        entry_bytes = registry_entry_bytes(registry_entry_of(RegistryFacts(
            spec=docs.spec_doc["spec"], configuration=docs.spec_doc["configuration"],
            configuration_id=docs.spec_doc["configuration_id"], budget=docs.budget, criteria=docs.criteria,
            n=docs.n, columns=[(c.name, len(c.labels), bool(getattr(c, "ordered", False))) for c in docs.columns],
            created=created, dpbundle_version=__version__, fingerprint=fingerprint,
            files=[*files, *CHECKSUM_FILES], ledger=docs.ledger,
            preregistration=(json.loads(optional["preregistration.json"].decode("utf-8"))
                             if "preregistration.json" in optional else None))))
    except RegistryEntryError as exc:
        raise BundleError(str(exc)) from None
    return _Stamp(version=__version__, created=created, public_pem=public_pem, fingerprint=fingerprint,
                  salt=salt, commitment=commitment, files=files, entry_bytes=entry_bytes)


def _write_and_place(out: Path, docs: _Documents, stamp: _Stamp, private_key: Any, transcript_path: Path,
                     make_zip: bool) -> None:
    """Write every file into a temporary sibling of ``out``, then put the bundle, the transcript
    and the zip in place. On any failure (an interrupt included) nothing is left behind and a
    bundle that was being replaced is put back."""
    zip_path = out.with_name(out.name + ".zip")
    # the PID in the names lets a later run remove what a killed run left (preflight.clean_stale)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    zip_tmp = out.with_name(f".{out.name}.zip.tmp-{os.getpid()}-{secrets.token_hex(6)}")
    old = out.with_name(f".{out.name}.old-{secrets.token_hex(6)}")
    # The transcript goes to a temporary sibling too and replaces an existing one (--force) only
    # once the bundle is in place: a failure never leaves a bundle with another run's transcript.
    transcript_tmp = transcript_path.with_name(f".{transcript_path.name}.tmp-{secrets.token_hex(6)}")
    try:
        os.chmod(tmp, 0o755)
        _write_files(tmp, docs, stamp, private_key, transcript_tmp)
        if make_zip:
            write_zip(tmp, zip_tmp, root=out.name)
        if out.exists():
            os.rename(out, old)
        os.rename(tmp, out)
        os.replace(transcript_tmp, transcript_path)
        if make_zip:
            os.replace(zip_tmp, zip_path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        zip_tmp.unlink(missing_ok=True)
        transcript_tmp.unlink(missing_ok=True)
        if old.exists() and not out.exists():
            os.rename(old, out)  # put the previous bundle back
        raise
    shutil.rmtree(old, ignore_errors=True)


def _write_files(tmp: Path, docs: _Documents, stamp: _Stamp, private_key: Any, transcript_tmp: Path) -> None:
    """Every file of the bundle: the tables, the JSON documents, the optional files and the
    registry entry, and README.html are built (and checked) in memory; README.pdf then starts
    rendering in the background renderer, if there is one, while they are written (each
    fsynced) with the private transcript (to ``transcript_tmp``, outside the bundle); then
    README.pdf, SHA256SUMS with its two signatures, and the signed manifest."""
    with timings.stage("write.data"):
        data_digest = write_data_csv(tmp / "data.csv", docs.columns, docs.codes)
    with timings.stage("write.files"):
        files = _public_files(docs, stamp, data_digest)
    with timings.stage("write.html"):
        html = _datasheet_html(files, docs, stamp)
        datasheet.prefetch_pdf(html)
        files["README.html"] = html.encode("utf-8")
    with timings.stage("write.disk"):
        for name, content in files.items():
            _write_bytes(tmp / name, content)
    with timings.stage("write.transcript"):
        write_transcript(transcript_tmp, docs.transcript, stamp.salt)
    with timings.stage("write.pdf"):
        datasheet.render_pdf(html, tmp / "README.pdf")
        os.chmod(tmp / "README.pdf", 0o644)
    with timings.stage("write.manifest"):
        _write_signed_checksums(tmp, stamp.files, private_key)
        _write_manifest(tmp, docs, stamp, private_key)


def _public_files(docs: _Documents, stamp: _Stamp, data_digest: tuple[str, int]) -> dict[str, bytes]:
    """The files the datasheet is made from, by name, in the order the bundle lists them (but
    data.csv, already written: ``data_digest`` is its SHA-256 and size): the tables, the JSON
    documents (each checked against its schema), datapackage.json (declaring the tables' hashes
    and sizes), the optional files and the registry entry."""
    codings = [_as_coding(c) for c in docs.columns]
    units = {c.get("name"): str(c.get("unit") or "") for c in docs.spec.get("columns") or []}
    value_noise_est = value_noise.estimate(docs.spec, docs.columns, docs.codes, docs.criteria)
    files = {"codebook.csv": codebook_bytes(codings, units, docs.descriptions),
             "metrics.csv": metrics_csv_bytes(docs.criteria, value_noise_est),
             "metrics.json": _checked_json(docs.metrics, "metrics", "metrics.json"),
             "budget.json": _checked_json(docs.budget, "budget", "budget.json"),
             "spec.json": _checked_json(docs.spec_doc, "spec-json", "spec.json")}
    if TABLES_JSON in docs.optional:
        files[TABLES_CSV] = _dp_tables_csv(docs.optional[TABLES_JSON], docs.columns)
    digests = {"data.csv": data_digest} | {f: (hashlib.sha256(files[f]).hexdigest(), len(files[f]))
                                           for f in ("codebook.csv", "metrics.csv", TABLES_CSV) if f in files}
    table_ids = ([t["id"] for t in json.loads(docs.optional[TABLES_JSON].decode("utf-8"))["tables"]]
                 if TABLES_JSON in docs.optional else [])
    package = _datapackage(docs.spec, docs.columns, docs.descriptions, digests, stamp.created,
                           docs.spec_doc["configuration_id"], docs.spec_doc["configuration"], table_ids)
    files["datapackage.json"] = _checked_json(package, "datapackage", "datapackage.json")
    files.update(docs.optional)
    files[REGISTRY_ENTRY] = stamp.entry_bytes
    return files


def _dp_tables_csv(tables_json: bytes, columns: Sequence[Any]) -> bytes:
    """dp-tables.csv rendered from dp-tables.json and the released columns' labels."""
    try:
        return dp_tables_csv(json.loads(tables_json.decode("utf-8")),
                             [(c.name, [str(x) for x in c.labels]) for c in columns])
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"{TABLES_JSON}: {exc}") from None


def _datasheet_html(files: dict[str, bytes], docs: _Documents, stamp: _Stamp) -> str:
    """README.html, from the public files (what the audit renders again from the bundle)."""
    meta = Meta(created=stamp.created, dpbundle_version=stamp.version, fingerprint=stamp.fingerprint,
                public_key_pem=stamp.public_pem, commitment=stamp.commitment, files=(*stamp.files, *CHECKSUM_FILES),
                extra=json.loads(_json_bytes(docs.extra)) if docs.extra else None, ledger=docs.ledger,
                sampler=_sampler_field(docs.spec_doc.get("configuration"), docs.n, docs.columns).get("sampler"))
    public = read_public_files(files.__getitem__, files.__contains__, meta, codes=docs.codes)
    return datasheet_html(public)


def _write_signed_checksums(tmp: Path, files: Sequence[str], private_key: Any) -> None:
    """SHA256SUMS (every file of ``files``) and its two signatures: SHA256SUMS.sig (raw Ed25519,
    checked before it is written) and SHA256SUMS.sshsig (SSHSIG). The list people check with
    ``sha256sum -c`` is then itself signed: a list regenerated after an edit no longer verifies."""
    sums = sha256sums_bytes(tmp, files)
    signatures = keys.sign_checksum_list(private_key, sums)
    if not keys.verify(private_key.public_key(), sums, signatures[SHA256SUMS_SIG]):  # pragma: no cover
        raise BundleError("the signature of SHA256SUMS does not verify")
    _write_bytes(tmp / SHA256SUMS, sums)
    for name in (SHA256SUMS_SIG, SHA256SUMS_SSHSIG):
        _write_bytes(tmp / name, signatures[name])


def _sampler_field(configuration: Any, n: int, columns: Sequence[Any]) -> dict:
    """manifest.json's ``sampler`` (sampler version 3 only, ``mechanisms/sampling.py``): the
    public rule's version for the configuration's generator, n and the released columns' sizes,
    as the iteration recorded it."""
    from dpbundle.mechanisms.sampling import BASE_RECORDS, BASE_SAMPLER, public_sampler

    generator = configuration.get("generator") if isinstance(configuration, dict) else None
    if public_sampler(generator, n, [len(c.labels) for c in columns]) != BASE_SAMPLER:
        return {}
    return {"sampler": {"version": BASE_SAMPLER, "base_records": BASE_RECORDS}}


def _write_manifest(tmp: Path, docs: _Documents, stamp: _Stamp, private_key: Any) -> None:
    """manifest.json (every file's SHA-256 and size, SHA256SUMS and its signatures included) and
    manifest.sig, its Ed25519 signature, checked before it is written."""
    files = [*stamp.files, *CHECKSUM_FILES]
    manifest = {
        "format": BUNDLE_FORMAT,
        "dpbundle_version": stamp.version,
        "created": stamp.created,
        "n": docs.n,
        "title": (docs.spec.get("release") or {}).get("title") or "",
        "configuration_id": docs.spec_doc["configuration_id"],
        **_sampler_field(docs.spec_doc.get("configuration"), docs.n, docs.columns),
        "number_format": datasheet.NUMBER_FORMAT_DOC,
        "files": [dict(zip(("path", "sha256", "size"), (f, *file_digest(tmp / f)))) for f in files],
        "public_key": {"algorithm": "Ed25519", "pem": stamp.public_pem, "fingerprint": stamp.fingerprint},
        "transcript_commitment": {"algorithm": "sha256", "construction": COMMITMENT_CONSTRUCTION,
                                  "value": stamp.commitment},
    }
    manifest["versions"] = library_versions()
    if docs.ledger is not None:
        manifest["ledger"] = docs.ledger
    if docs.extra:
        manifest["extra"] = docs.extra
    _check_no_attempt_count(manifest, "manifest.json")
    jsonschemas.validate(manifest, "manifest", document="manifest.json")
    manifest_bytes = _json_bytes(manifest)
    signature = keys.sign(private_key, manifest_bytes)
    if not keys.verify(private_key.public_key(), manifest_bytes, signature):  # pragma: no cover
        raise BundleError("the manifest signature does not verify")
    _write_bytes(tmp / "manifest.json", manifest_bytes)
    _write_bytes(tmp / "manifest.sig", signature)


def _zcdp_problems(b: dict, rho_gen, eps_eval) -> list[str]:
    """A zCDP budget's rho parts, their total and the epsilon it implies at delta."""
    from dpbundle.mechanisms import zcdp

    dec, z = exact.dec, b["zcdp"]
    rec = b.get("records") or {"epsilon": 0}
    want = zcdp.release_rho(dec(rec["epsilon"]), rho_gen, eps_eval,
                            [dec(p["epsilon"]) for p in b["pre_selection"]])
    problems = [f"zcdp.{name} is not {exact.show(want[part])}"
                for name, part in (("rho_count", "count"), ("rho_generation", "generation"),
                                   ("rho_selection", "selection"), ("rho_pre_selection", "pre_selection"),
                                   ("total_rho", "total")) if dec(z[name]) != want[part]]
    if b["total_epsilon"] != zcdp.epsilon_at_delta(want["total"], z["delta"]):
        problems.append("total_epsilon is not the epsilon at zcdp.delta of the total rho")
    return problems
