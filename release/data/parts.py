"""A registry split into files ("parts"): read and counted part by part, on this machine or on
the workers of a Dask cluster, and gathered into one prepared table on the steward's machine.

``DATA`` may be a directory: its ``*.csv``, ``*.csv.gz`` and ``*.parquet`` files, in name order,
are the parts of one registry (each CSV part with its header row; errors name the part, line or
row and row group, column and rule). CSV and Parquet parts may be mixed: each part is read and
typed on its own, by the reader of its name. Two parts with the same name but for the suffix
(``x.csv`` and ``x.csv.gz``, ``x.csv`` and ``x.parquet``) are refused as the same records twice.

Without ``--scheduler`` the parts are read on this machine, by ``$DPBUNDLE_READ_WORKERS``
parallel processes when it is set above 1 (at most one per usable core and per part, for parts of
at least :data:`PARALLEL_BYTES` in all; each holds one part while reading it); the result is the
same as reading them one after the other.

What runs where (``--scheduler ADDRESS``): each worker reads and validates one part with the
spec's input columns and reduces it to the distinct rows of its records' atoms and their counts
(:func:`count_part`: the same reader and checks as a single file;
:mod:`dpbundle.release.data.atoms`). Only that crosses the network back to the steward (through
the scheduler): the part's distinct atom rows and how many records hold each, the part's
plausible records as packed value ids with the values read (8 bytes a record: the material of
the ledger's fingerprint, sorted, so the registry's records up to their order, never the
file's text), the number of rows read and the part's SHA-256. Under the ``dp_count`` records
policy the order of the records crosses too (a 4-byte index per record): the DP count's resize
keeps a uniform subset of the records in file order, and the enclave replay repeats it from the
file. Everything after that (raw constraints, the ledger's fingerprint, the selection, the
bundle) runs on the steward's machine, as for a single file. The cluster must be inside the
enclave: its workers read the private files and hold their records in memory.

Each atom stands as its smallest value over all the parts (:func:`~dpbundle.release.data.atoms.joined_representatives`),
as in one reading of the whole registry. Under ``declared_public`` the gathered records are put
in a canonical order (the distinct atom rows, each repeated by its count); the release does not
depend on the order of the records (every step after the preparation works on their multiset),
so its bundle, given the same transcript, is the one made from the parts' concatenation in a
single file.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpbundle.release.data.atoms import joined_representatives
from dpbundle.release.data.csv_read import file_sha256
from dpbundle.release.data.distinct import distinct_rows, index_counts, index_dtype
from dpbundle.release.data.prepare import InputError, Prepared, _constrained, read_atoms
from dpbundle.release.data.record_keys import RecordKeys
from dpbundle.release.spec.model import Spec

__all__ = ["PART_PATTERNS", "PART_SUFFIXES", "PARALLEL_BYTES", "ClusterError", "PartCounts", "count_part", "local_workers",
           "part_stem", "prepare_parts", "registry_parts"]

PART_PATTERNS = ("*.csv", "*.csv.gz", "*.parquet")
#: the suffixes of the parts' names, longest first (a part's name without it is its stem)
PART_SUFFIXES = (".csv.gz", ".parquet", ".csv")


def part_stem(name: str) -> str:
    """A part's name without its suffix (``x`` for ``x.csv``, ``x.csv.gz`` and ``x.parquet``)."""
    suffix = next((s for s in PART_SUFFIXES if name.endswith(s)), "")
    return name[:len(name) - len(suffix)]


def registry_parts(path: Path | str) -> list[Path]:
    """The parts of a registry: a file is its only part; a directory's parts are its ``*.csv``,
    ``*.csv.gz`` and ``*.parquet`` files in name order (InputError when it has none, or when two
    of them differ only by their suffix: the same records twice)."""
    path = Path(path).absolute()       # the workers resolve nothing against their own directory
    if not path.is_dir():
        return [path]
    parts = sorted({p for pattern in PART_PATTERNS for p in path.glob(pattern)
                    if p.is_file() and not p.name.startswith(".")}, key=lambda p: p.name)
    if not parts:
        raise InputError(str(path), [f"a directory of registry parts must hold *.csv, *.csv.gz or *.parquet "
                                     f"files; {path} has none"])
    seen: dict[str, str] = {}
    for p in parts:
        first = seen.setdefault(part_stem(p.name), p.name)
        if first != p.name:
            raise InputError(str(path), [f"{first} and {p.name} are both parts: the same records twice? "
                                         "keep one of them"])
    return parts


class ClusterError(RuntimeError):
    """The Dask cluster could not read the parts (no workers, a worker lost)."""


@dataclass
class PartCounts:
    """One part, read and counted (what a worker sends back)."""

    source: str
    distinct: dict[str, np.ndarray]       # the part's distinct typed records
    counts: np.ndarray                    # how many rows hold each
    index: np.ndarray | None              # each row's distinct record, in file order (dp_count)
    rows_read: int
    sha256: str
    keys: RecordKeys | None = None        # the part's plausible records as packed value ids


def count_part(path: str, spec: Spec, show_values: bool = True, keep_order: bool = False) -> PartCounts:
    """Read and validate one part (InputError naming its line, column and rule), to the spec's
    atoms (its distinct atom rows and their counts; its plausible records as packed value ids,
    for the ledger fingerprint of the whole registry)."""
    distinct, index, rows, keys = read_atoms(Path(path), spec, show_values)
    if not keep_order:
        keys.compact()     # sorted: the part's records up to their order, as its counts
    size = len(next(iter(distinct.values()))) if distinct else 0
    counts = index_counts(index, size)
    return PartCounts(str(path), distinct, counts, index if keep_order else None, rows, file_sha256(Path(path)),
                      keys)


#: parts are read in parallel on this machine when they hold at least this many bytes in all
#: (below it, starting worker processes costs more than it saves)
PARALLEL_BYTES = 32 << 20


def local_workers(paths: list[Path], workers: int | None = None) -> int:
    """How many local processes read the parts: ``workers``, or ``$DPBUNDLE_READ_WORKERS``
    (default 1: each worker holds a part while it reads it, so parallel reading multiplies the
    reading's peak memory, and it is the steward's choice), never more than the usable cores
    (without ``workers``) nor one per part; 1 for parts below :data:`PARALLEL_BYTES` in all."""
    import os

    if workers is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        asked = os.environ.get("DPBUNDLE_READ_WORKERS", "")
        workers = min(cores, int(asked)) if asked.isdigit() and int(asked) > 0 else 1
        if sum(p.stat().st_size for p in paths) < PARALLEL_BYTES:
            return 1
    return max(1, min(int(workers), len(paths)))


def _counted_locally(paths: list[Path], spec: Spec, show_values: bool, keep_order: bool,
                     workers: int) -> list[PartCounts]:
    """The parts read and counted here, by ``workers`` processes (each part in one process, the
    results in the parts' order: the same as reading them one after the other; at most
    ``workers`` parts in memory at once besides the counts). An InputError of a part (naming its
    line, column and rule, never a value under ``show_values=False``) is raised whole."""
    if workers <= 1:
        return [count_part(str(p), spec, show_values, keep_order) for p in paths]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(count_part, str(p), spec, show_values, keep_order) for p in paths]
        return [f.result() for f in futures]


def _counted(paths: list[Path], spec: Spec, show_values: bool, keep_order: bool,
             scheduler: str | None, workers: int | None = None) -> list[PartCounts]:
    if scheduler is None:
        return _counted_locally(paths, spec, show_values, keep_order, local_workers(paths, workers))
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - optional dependency
        raise RuntimeError("--scheduler needs dask.distributed: pip install 'dpbundle[dask]'") from exc
    from distributed import CancelledError, KilledWorker

    from dpbundle.release.data.cluster import check_scheduler, client_errors, close_client

    address = check_scheduler(scheduler)   # SchedulerError: a bad address, or not a Dask scheduler
    client = None
    try:
        client = Client(address, timeout=15, set_as_default=False)
        if not client.scheduler_info().get("workers"):
            raise ClusterError(f"the Dask cluster at {scheduler} has no workers")
        futures = client.map(count_part, [str(p) for p in paths], spec=spec, show_values=show_values,
                             keep_order=keep_order, pure=False)
        return client.gather(futures)      # an InputError of a part is raised here, whole
    except InputError:
        raise
    except (KilledWorker, CancelledError) as exc:
        raise ClusterError(f"a Dask worker failed while reading the parts ({type(exc).__name__})") from None
    except client_errors() as exc:   # a broken or hostile server: never a traceback
        raise ClusterError(f"the Dask cluster at {scheduler} failed or answered with something a "
                           f"Dask scheduler does not send ({type(exc).__name__})") from None
    finally:
        close_client(client)


def registry_sha256(parts: list[PartCounts]) -> str:
    """The registry's file hash (the ledger's second key): of one part, its SHA-256; of several,
    the SHA-256 of 'name<TAB>sha256' lines of the parts in order."""
    if len(parts) == 1:
        return parts[0].sha256
    text = "".join(f"{Path(p.source).name}\t{p.sha256}\n" for p in parts)
    return hashlib.sha256(("dpbundle-registry-parts/1\n" + text).encode("utf-8")).hexdigest()


def prepare_parts(path: Path | str, spec: Spec, show_values: bool = True,
                  scheduler: str | None = None, workers: int | None = None) -> Prepared:
    """:func:`~dpbundle.release.data.prepare.prepare` of a registry given as one file or a
    directory of parts, each part read and counted here (by :func:`local_workers` processes in
    parallel; ``workers`` overrides) or (``scheduler``) on a Dask worker."""
    paths = registry_parts(path)
    keep_order = spec.records_policy != "declared_public"
    parts = _counted(paths, spec, show_values, keep_order, scheduler, workers)
    tables = joined_representatives(spec, [p.distinct for p in parts], [p.keys.values for p in parts])
    merged = {k: np.concatenate([t[k] for t in tables]) for k in parts[0].distinct}
    distinct, global_of = distinct_rows(merged)
    size = len(next(iter(distinct.values()))) if distinct else 0
    offsets = np.cumsum([0] + [len(p.counts) for p in parts])
    counts = np.zeros(size, dtype=np.int64)
    for p, start in zip(parts, offsets):
        np.add.at(counts, global_of[start:start + len(p.counts)], p.counts)
    if keep_order:
        index = np.concatenate([global_of[start + p.index] for p, start in zip(parts, offsets)])
    else:   # canonical: each distinct record repeated by its count
        index = np.repeat(np.arange(size, dtype=index_dtype(size)), counts)
    source = str(path)
    keys = [p.keys for p in parts]
    for p in parts:
        p.keys = None
    return _constrained(source, distinct, index.astype(index_dtype(size), copy=False),
                        sum(p.rows_read for p in parts), spec, show_values, registry_sha256(parts), keys)
