"""A release as a pipeline of typed stages (``dpbundle release`` and ``api.release``)::

    ReleaseRequest -> plan -> Plan -> spend -> Spend -> select -> Selected -> write -> bundle

* :class:`ReleaseRequest` (:mod:`.request`): what the user asked, as given;
* :func:`plan` (:mod:`.planning`): every check that needs no privacy budget (output location,
  transcript, ledger path, spec, key, --configs list, pre-registration, stop probability,
  generators, the data, room, renderer); no budget is spent before it returns;
* :func:`spend` (:mod:`.spending`): the ledger entry, before the first attempt;
* :func:`select` (:mod:`.selecting`): the records policy and the private selection;
* :func:`write` (:mod:`.writing`): the signed bundle and the private transcript, atomically, or
  the selected result kept for ``--resume`` (:mod:`.resume`).

:func:`run_release` (:mod:`.driver`) composes them. Every way out states what exists
(docs/faults.md): a :class:`~.state.Run` records, as the run goes, whether the spend is in the
ledger and with which status, whether a private transcript or a kept result was written, and
whether a complete bundle is on disk; every exception that leaves :func:`run_release` is one of
:mod:`dpbundle.release.errors` with a message built from it. Ctrl-C, SIGTERM and SIGHUP become
exceptions (:class:`~.state.Signals`), deferred while the ledger is written and while what an
interrupted write left on disk is inspected, and ignored after the first one.

The consoles the release prints to are :data:`dpbundle.release.pipeline.output.console` and
``.err``. ``cli_release`` (the Typer command) lives in :mod:`dpbundle.release.cli.release`; the
name is still importable from here.
"""
from __future__ import annotations

from dpbundle.release.errors import DpbundleError
from dpbundle.release.pipeline.checks import SIZE_FACTOR
from dpbundle.release.pipeline.driver import release_stages, run_release
from dpbundle.release.pipeline.example import example_inputs
from dpbundle.release.pipeline.output import SELECTION_LINE
from dpbundle.release.pipeline.planning import Plan, plan
from dpbundle.release.pipeline.request import (EXAMPLES, MAX_EXAMPLE_ROWS, MAX_OUT_NAME, MIN_EXAMPLE_ROWS,
                                               ReleaseRequest)
from dpbundle.release.pipeline.selecting import Selected, select
from dpbundle.release.pipeline.spending import Spend, spend
from dpbundle.release.pipeline.writing import write

__all__ = ["ReleaseRequest", "Plan", "Spend", "Selected", "run_release", "release_stages", "plan", "spend",
           "select", "write", "example_inputs", "EXAMPLES", "MAX_OUT_NAME", "MIN_EXAMPLE_ROWS",
           "MAX_EXAMPLE_ROWS", "SELECTION_LINE", "SIZE_FACTOR", "CommandError", "cli_release"]

CommandError = DpbundleError   # the name this module used (dpbundle 0.2)


def __getattr__(name: str):
    """``cli_release``, the command's body, now in :mod:`dpbundle.release.cli.release` (imported
    on first use: the pipeline does not depend on the command line)."""
    if name == "cli_release":
        import importlib

        return importlib.import_module("dpbundle.release.cli.release").cli_release
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
