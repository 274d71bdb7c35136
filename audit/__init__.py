"""Independent verification of dpbundle bundles, and reading them from Python.

``open_bundle(path)`` opens a bundle for reading (:mod:`dpbundle.audit.api`);
``dpbundle audit`` runs every check (:mod:`dpbundle.audit.runner`).
"""
from .api import BundleReadError, ReleasedBundle, open_bundle

__all__ = ["BundleReadError", "ReleasedBundle", "open_bundle"]
