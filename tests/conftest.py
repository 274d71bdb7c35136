"""Shared, generic fixtures. Keep this file small: feature-specific fixtures belong in the test modules."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import settings

# Property tests must not fail on timing: the machine may be shared (2 cores), so no deadline.
settings.register_profile("dpbundle", deadline=None)
settings.load_profile("dpbundle")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT / "examples" / "data"  # public NVSS samples, see its README.md


@pytest.fixture(scope="session", autouse=True)
def _private_dir(tmp_path_factory):
    """Default transcripts go to $DPBUNDLE_PRIVATE_DIR: a temporary one, never the real home
    (session-scoped so that module-scoped release fixtures, subprocesses included, see it)."""
    import os

    old = os.environ.get("DPBUNDLE_PRIVATE_DIR")
    path = tmp_path_factory.mktemp("private")
    os.environ["DPBUNDLE_PRIVATE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("DPBUNDLE_PRIVATE_DIR", None)
    else:
        os.environ["DPBUNDLE_PRIVATE_DIR"] = old


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The project's root directory (the folder holding pyproject.toml)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def births_spec_path() -> Path:
    return REPO_ROOT / "examples" / "births.yaml"


@pytest.fixture(scope="session")
def births_spec(births_spec_path):
    """examples/births.yaml loaded and validated (a `dpbundle.release.spec.load.Spec`)."""
    from dpbundle.release.spec.load import load_spec

    return load_spec(births_spec_path)


@pytest.fixture(scope="session")
def _births_doc_session(births_spec_path) -> dict:
    return yaml.safe_load(births_spec_path.read_text("utf-8"))


@pytest.fixture
def births_doc(_births_doc_session) -> dict:
    """A fresh, mutable copy of examples/births.yaml as a plain dict (parsed independently with yaml.safe_load)."""
    return copy.deepcopy(_births_doc_session)


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """examples/data: public NVSS samples shipped with the repository (skipped if absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"public test data not available: {SHARED_DATA} does not exist")
    return SHARED_DATA


@pytest.fixture(scope="session")
def nvss_160k_path(shared_data_dir) -> Path:
    path = shared_data_dir / "nvss2019_singleton_160k.csv.gz"
    if not path.is_file():
        pytest.skip(f"public test data not available: {path} does not exist")
    return path


@pytest.fixture(scope="session")
def nvss_160k_frame(nvss_160k_path):
    """The 160k NVSS sample as a pandas DataFrame (read once per session)."""
    import pandas as pd

    return pd.read_csv(nvss_160k_path)


def small_births_doc(epsilon_splits: list[float]) -> dict:
    """examples/births.yaml narrowed to a small space: mother_age coarse/years, the first
    alternative of every other column, PrivBayes theta 4 with the given epsilon_split values."""
    doc = yaml.safe_load((REPO_ROOT / "examples" / "births.yaml").read_text("utf-8"))
    for col in doc["columns"]:
        if col["name"] == "mother_age":
            col["alternatives"] = [a for a in col["alternatives"] if a["id"] in ("coarse", "years")]
        elif len(col["alternatives"]) > 1:
            col["alternatives"] = col["alternatives"][:1]
    doc["generators"][0]["grid"] = {"epsilon_split": list(epsilon_splits), "theta": [4]}
    return doc
