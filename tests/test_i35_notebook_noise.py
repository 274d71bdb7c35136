"""Issue 35: the notebook's criteria chart uses the noise on the value (metrics.csv's
value_noise_std), never a fit's loss-coefficient noise_std, and calls a check weak only when the
datasheet does."""
from __future__ import annotations

import csv
import io

from dpbundle.templates.notebook import criteria_noise
from i35_datasheet_util import PRECHANGE, context_of


def test_a_fit_uses_the_value_noise_not_the_loss_noise():
    rows = [{"id": "regression", "threshold": 30, "dp_value": 16.3, "noise_std": 161.0, "noise_on": "inside_fit",
             "mechanism": "functional_mechanism", "value_noise_std": 4.48, "passed": True},
            {"id": "kway", "threshold": 0.01, "dp_value": 0.0015, "noise_std": 0.00086, "noise_on": "value",
             "mechanism": "laplace", "passed": True},
            {"id": "unknown_fit", "threshold": 1, "dp_value": 0.2, "noise_std": 40.0, "noise_on": "inside_fit",
             "mechanism": "functional_mechanism", "passed": True}]
    got = {r["id"]: r for r in criteria_noise(rows)}
    assert abs(got["regression"]["noise"] - 4.48 / 30) < 1e-12 and not got["regression"]["weak"]
    assert abs(got["kway"]["noise"] - 0.086) < 1e-12
    assert got["unknown_fit"]["noise"] is None and not got["unknown_fit"]["weak"]


def test_weak_agrees_with_the_datasheet_on_a_real_bundle():
    for name in ("births", "persons"):
        rows = list(csv.DictReader(io.StringIO((PRECHANGE / f"{name}-bundle" / "metrics.csv").read_text())))
        weak = {r["id"] for r in criteria_noise(rows) if r["weak"]}
        ctx = context_of(name)
        assert weak == {c["id"] for c in ctx["criteria"] if c["weak"]}, name
