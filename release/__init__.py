"""dpbundle.release: the universal scheme (spec, data preparation, iteration, selection, bundle, CLI)."""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("dpbundle")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+unknown"

from ._compat import install as _install_old_names

_install_old_names()  # `import dpbundle.release.prepare` still works (see _compat.MOVED)
