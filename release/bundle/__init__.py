"""dpbundle.release.bundle: see docs/internals.md for the modules of this stage.

``from dpbundle.release.bundle import X`` (the name before the package existed) still works:
attributes not found here are looked up in :mod:`dpbundle.release.bundle.write`.
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
        return getattr(importlib.import_module(f"{__name__}.write"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
