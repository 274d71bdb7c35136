"""Failures of one attempt of the private selection.

An attempt may fail for a reason that is a function of DP outputs only: the sampled rows cannot
satisfy the synthetic constraints, IPF does not converge on noisy marginals, a privately chosen
model is too large to sample. Such a failure is post-processing of the attempt's DP releases, so
the selection scores the attempt 0 (failed) and goes on; the reason goes only into the private
transcript. Any other exception (a bug, a full disk, a spec problem that validation missed)
depends on the private data in unknown ways: the release aborts with a generic message.
"""
from __future__ import annotations

__all__ = ["AttemptFailure"]


class AttemptFailure(RuntimeError):
    """An attempt that cannot finish for a reason that depends only on DP outputs."""
