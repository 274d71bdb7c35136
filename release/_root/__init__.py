"""dpbundle: auditable differentially private open-data releases.

``dpbundle.release`` produces a signed bundle, ``dpbundle.audit`` verifies one, and
``dpbundle.mechanisms`` holds the DP building blocks. This file is the top-level package
(``pyproject.toml`` maps ``dpbundle`` to this folder, so the repository keeps its layout); it
imports nothing heavy: ``import dpbundle; dpbundle.__version__``.
"""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("dpbundle")
except PackageNotFoundError:  # pragma: no cover - a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
