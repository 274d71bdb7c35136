"""dpbundle.release.bundle: see docs/internals.md for the modules of this stage.

``from dpbundle.release.bundle import X`` (the name before the package existed) still works:
attributes not found here are looked up in :mod:`dpbundle.release.bundle.write`.
"""


from dpbundle.release._compat import forward_attributes

__getattr__ = forward_attributes(__name__, "write")
