"""The records policy in a release: before the selection, release the number of records.

``declared_public``: nothing to do, n is the count of plausible records (published exactly).
``dp_count``: m = DP count of the plausible records (OpenDP, ``privacy.records.epsilon``), and
the table is resized to m records (uniform subsample, or uniform pads). The derivation of the
guarantee through filter -> count -> resize is in :mod:`dpbundle.mechanisms.records`.
"""
from __future__ import annotations


from dpbundle.mechanisms.noise import Randomness
from dpbundle.mechanisms.records import RESIZE_PURPOSE, dp_record_count, resize_plan

from dpbundle.release.data.prepare import Prepared
from dpbundle.release.spec.load import Spec


def release_records(prepared: Prepared, spec: Spec, rand: Randomness) -> Prepared:
    """The prepared table whose ``n`` may be published under the spec's records policy.

    Draws (into ``rand``'s transcript) the DP count and the resize seed under ``dp_count``;
    returns ``prepared`` unchanged under ``declared_public``."""
    if spec.records_policy == "declared_public":
        return prepared
    if prepared.resize is not None:
        raise ValueError("the records policy was already applied to this table")
    m = dp_record_count(prepared.n, spec.epsilon_count, rand)
    plan = resize_plan(prepared.n, m, len(spec.column_names), rand.rng(RESIZE_PURPOSE))
    return prepared.replaced(n=m, resize=plan)
