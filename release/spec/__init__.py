"""The release spec: reading (``yaml_text``), loading and validation (``load``), the checks of the
criteria parts (``criteria_checks``), the coding of released columns (``coding``) and
``dpbundle spec explain`` (``explain``).

``from dpbundle.release.spec import load_spec`` (the name before the package existed) still
works: attributes not found here are looked up in :mod:`dpbundle.release.spec.load`.
"""


from dpbundle.release._compat import forward_attributes

__getattr__ = forward_attributes(__name__, "load")
