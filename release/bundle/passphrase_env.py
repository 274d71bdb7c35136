"""The environment variable that holds a signing key's passphrase (``dpbundle keygen``,
``release``, ``preregister``): here, without :mod:`dpbundle.release.bundle.keys`' cryptography
import, so that printing help stays cheap. ``keys`` re-exports it."""

__all__ = ["PASSPHRASE_ENV"]

PASSPHRASE_ENV = "DPBUNDLE_KEY_PASSPHRASE"
