"""The ``dp_edges`` alternatives in a release: after the records policy's count and before the
selection, draw each one's inner edges on the plausible records (:mod:`dpbundle.mechanisms.edges`:
the quantile scores, their sensitivity and the sequential draws), and resolve the spec with them.

Every ``dp_edges`` alternative of the spec draws (whether or not the selection picks it): its
epsilon is part of the release's total from the start, and the edges are published in spec.json.
The values scored are those of the plausible records (after the raw constraints, before the
records policy's resize), derived and clipped as the alternative bins them; the prepared table
keeps them exactly (its atoms tell the candidates apart, :func:`~dpbundle.release.data.binning.grid_signature`).
"""
from __future__ import annotations

import numpy as np

from dpbundle.mechanisms.edges import PURPOSE, candidate_grid, dp_edges, full_edges
from dpbundle.mechanisms.noise import Randomness

from dpbundle.release.data.binning import clipped_values
from dpbundle.release.data.prepare import Prepared
from dpbundle.release.spec.load import Spec

__all__ = ["release_edges"]


def release_edges(prepared: Prepared, spec: Spec, rand: Randomness) -> Spec:
    """The resolved spec (:meth:`Spec.with_edges`): every ``dp_edges`` alternative's edges drawn
    through ``rand`` (OpenDP report-noisy-max, one draw per inner edge, in column then alternative
    order); ``spec`` itself when it has none."""
    if not spec.undrawn_edges:
        return spec
    drawn: dict[tuple[str, str], list[float]] = {}
    for col in spec.model.columns:
        for alt in col.alternatives:
            if alt.dp_edges is None:
                continue
            values = clipped_values(spec, col.name, alt.id, prepared.distinct)
            keep = ~np.isnan(values)
            inner = dp_edges(values[keep], candidate_grid(alt.clip, alt.dp_edges.step), int(alt.dp_edges.bins),
                             float(alt.dp_edges.epsilon), rand, purpose=PURPOSE.format(col.name, alt.id),
                             counts=np.asarray(prepared.counts)[keep])
            drawn[(col.name, alt.id)] = full_edges(alt.clip, alt.dp_edges.step, inner)
    return spec.with_edges(drawn)
