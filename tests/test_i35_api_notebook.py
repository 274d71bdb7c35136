"""Issue 35, the Python API in a notebook: release() shows nothing in a Jupyter cell (no Rich live
display, no table) and says what a user must see through ``warnings``; the bundle's HTML view
says verified after verify(); ``metrics`` puts the reported value's noise beside it."""
from __future__ import annotations

import csv
import io
import math
import warnings

import pytest


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    from dpbundle.release.api import release

    out = tmp_path_factory.mktemp("i35-notebook") / "B"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = release(example="persons", out=out, stop_probability=0)
    yield b
    b.close()


def test_release_in_jupyter_shows_nothing_and_warns_through_warnings(tmp_path, capfd, monkeypatch):
    """Rich takes a notebook for a display: its consoles would show tables and live status lines
    in the cell (through IPython, with an 'install ipywidgets' warning each). The API's consoles
    never do; the PRIVATE transcript's location comes as a DpbundleWarning."""
    import rich.console

    from dpbundle.release.api import DpbundleWarning, release

    monkeypatch.setattr(rich.console, "_is_jupyter", lambda: True)
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        b = release(example="persons", out=tmp_path / "B", stop_probability=0)
    b.close()
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""
    ours = [w for w in caught if issubclass(w.category, DpbundleWarning)]
    assert any("PRIVATE" in str(w.message) and str(b.transcript_path.name) in str(w.message) for w in ours)
    assert [str(w.message) for w in ours] == list(dict.fromkeys(b.warnings))
    assert not [w for w in caught if "ipywidgets" in str(w.message)]


def test_the_html_view_says_verified_after_verify(bundle):
    assert "not verified" in bundle._repr_html_()
    report = bundle.verify(f"{bundle.path}.demo-key.pub")
    assert report.verdict == "verified", report.to_json()[:3000]
    html = bundle._repr_html_()
    assert "not verified" not in html and "verified by verify()" in html


def test_the_html_view_gives_another_verdict_as_it_is(bundle):
    report = bundle.verify()            # no key: never "verified"
    assert report.verdict != "verified"
    html = bundle._repr_html_()
    assert f"verify() verdict: {report.verdict}" in html and "verified by" not in html


def test_metrics_puts_the_values_noise_beside_it(bundle):
    frame = bundle.metrics
    assert list(frame.columns[:8]) == ["id", "type", "dp_value", "threshold", "passed", "value_noise_std",
                                       "value_noise_mean", "noise_on"]
    table = {r["id"]: r for r in csv.DictReader(io.StringIO((bundle.path / "metrics.csv").read_text("utf-8")))}
    for _, row in frame.iterrows():
        theirs = table[row["id"]]
        assert row["noise_on"] == theirs["noise_on"]
        if theirs["value_noise_std"]:
            assert row["value_noise_std"] == pytest.approx(float(theirs["value_noise_std"]), rel=1e-6)
        else:
            assert math.isnan(row["value_noise_std"])
    fit = frame[frame["id"] == "income_model"].iloc[0]
    assert fit["noise_on"] == "inside_fit"
    assert fit["value_noise_std"] < fit["noise_std"] / 10     # the fit's loss noise is not the value's
