"""The release spec: reading (``yaml_text``), loading and validation (``load``), the checks of the
criteria parts (``criteria_checks``), the coding of released columns (``coding``) and
``dpbundle spec explain`` (``explain``).

``from dpbundle.release.spec import load_spec`` (the name before the package existed) still
works: attributes not found here are looked up in :mod:`dpbundle.release.spec.load`.
"""


def __getattr__(name: str):
    import importlib

    if name.startswith("__"):
        raise AttributeError(name)
    try:  # a module of this package not imported yet
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
    try:
        return getattr(importlib.import_module(f"{__name__}.load"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
