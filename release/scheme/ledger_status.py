"""The statuses of a ledger spend that the command line names (``dpbundle ledger list
--unfinished``, the default of ``ledger mark --status``): here, without the ledger's imports, so
that printing help stays cheap. :mod:`dpbundle.release.scheme.ledger` re-exports them."""

__all__ = ["NEVER_RELEASED", "UNFINISHED"]

UNFINISHED = "started"
NEVER_RELEASED = "spent, never released"
