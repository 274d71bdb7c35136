"""Issue 35: the classification criterion's weak evidence said before any spend (``spec validate``
and ``sweep``): the noise inside the fit simulated on the data (the datasheet's rule), and the
coefficients a threshold lets fall to 0."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from dpbundle.release.cli.main import app
from dpbundle.release.data.example import write_example
from dpbundle.release.data.prepare import prepare
from dpbundle.release.scheme.weak_evidence import (collapse_warnings_on_data, collapsible, fit_warnings_on_data,
                                                   noise_notes, noise_warnings_on_data)
from dpbundle.release.spec.load import load_spec, validate_spec

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("i35-weak") / "persons.csv"
    write_example(out, rows=20_000, seed=7, name="persons")
    return out


@pytest.fixture(scope="module")
def persons_doc() -> dict:
    return load_spec(ROOT / "examples" / "persons.yaml").document()


def _model(doc: dict) -> dict:
    return next(c for c in doc["acceptance"] if c["id"] == "income_model")


def _only_model(doc: dict, **changes) -> dict:
    """The persons spec with income_model changed (accuracy criterion dropped: it refers to it)."""
    doc = copy.deepcopy(doc)
    doc["acceptance"] = [c for c in doc["acceptance"] if c["id"] != "income_accuracy"]
    _model(doc).update(changes)
    return doc


def test_collapsible_takes_the_smallest_effects_below_the_threshold():
    coefs = {"a": 0.5, "b": -0.2, "c": 0.9, "d": 0.05}
    assert collapsible(coefs, 1.0) == [("d", 0.05), ("b", -0.2), ("a", 0.5)]
    assert collapsible(coefs, 0.05) == []
    assert [n for n, _ in collapsible(coefs, 0.3)] == ["d", "b"]


def test_the_loose_threshold_is_said_before_the_spend(persons_doc, registry):
    """At the example's 1.5, the hours effect (the largest single numeric one) can vanish; at a
    threshold below every effect's size, nothing can and nothing is said."""
    spec = validate_spec(_only_model(persons_doc))
    prepared = prepare(registry, spec)
    lines = collapse_warnings_on_data(spec, prepared)
    assert len(lines) == 1 and lines[0].startswith("acceptance[3] (income_model): threshold 1.5")
    assert "hours " in lines[0] and "would still pass" in lines[0]
    tight = validate_spec(_only_model(persons_doc, threshold=0.1))
    assert collapse_warnings_on_data(tight, prepare(registry, tight)) == []


def test_weak_noise_inside_the_fit_is_said_before_the_spend(persons_doc, registry):
    """With a tiny epsilon the fit's noise swamps the threshold (weak, by the datasheet's rule);
    with a large one it does not."""
    weak = validate_spec(_only_model(persons_doc, epsilon=0.01))
    lines = fit_warnings_on_data(weak, prepare(registry, weak), limit=4)
    assert len(lines) == 1 and "noise inside the fit" in lines[0] and "weak evidence" in lines[0]
    doc = _only_model(persons_doc, epsilon=3.0)
    doc["privacy"]["epsilon_generation"] = 1.0          # keep the total within the cap
    strong = validate_spec(doc)
    assert fit_warnings_on_data(strong, prepare(registry, strong), limit=4) == []


def test_without_data_spec_validate_points_to_the_data_checks(persons_doc):
    notes = noise_notes(validate_spec(copy.deepcopy(persons_doc)))
    hit = [n for n in notes if n.startswith("acceptance[3] (income_model)")]
    assert len(hit) == 1 and "spec validate --data" in hit[0] and "sweep" in hit[0]


def test_spec_validate_with_data_prints_it(persons_doc, registry, tmp_path):
    spec_path = tmp_path / "spec.yaml"
    import yaml

    spec_path.write_text(yaml.safe_dump(_only_model(persons_doc, epsilon=0.01), sort_keys=False), "utf-8")
    r = CliRunner().invoke(app, ["spec", "validate", str(spec_path), "--data", str(registry)], terminal_width=400)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "acceptance[3] (income_model): the noise inside the fit" in text
    assert "acceptance[3] (income_model): threshold 1.5" in text


def test_sweep_prints_it_before_the_runs(persons_doc, registry):
    """The sweep's pre-run warning (release/sweep/plan.py) is the same list."""
    from dpbundle.release.sweep.plan import _warn_weak_evidence

    spec = validate_spec(_only_model(persons_doc))
    prepared = prepare(registry, spec)
    console = Console(record=True, width=400)
    _warn_weak_evidence(spec, prepared, console)
    text = console.export_text()
    assert "acceptance[3] (income_model): threshold 1.5" in text
    assert noise_warnings_on_data(spec, prepared)[-1].split(":")[0] in text
