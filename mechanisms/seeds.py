"""Post-processing seeds bound to a pre-registered secret and a public beacon value.

A steward pre-registers a commitment ``c = SHA-256("dpbundle-seed-commitment/1" || salt || secret)``
to a 256-bit secret before the private run (``dpbundle preregister``). At release time it passes
a public value that did not exist then (a randomness-beacon round, a lottery draw, a closing
index: whatever the record said it would be). The seed of every *bound* post-processing step is

    seed(purpose, k) = int(HMAC-SHA256(secret, "dpbundle-seed/1" | beacon | purpose | k))

(``|`` a 0x1f separator, ``k`` the k-th request of that purpose within one attempt, 0-based).
The bundle publishes ``secret`` and ``salt`` after the run: anyone checks ``c`` and re-derives
the seeds, so the publisher could not have tried seeds until it liked the sample.

Only steps that post-process DP outputs are bound (``BOUND_PREFIXES``: sampling the model, with
sampler version 3's scaling of its base, the face-privacy projection). Steps whose privacy analysis needs hidden randomness (the resize of
the records policy, the resize inside conditional means: a coupling argument over their random
choices) keep seeds from ``secrets``. Every attempt gets the same bound seeds; that is sound:
for each fixed seed every attempt is the same epsilon-DP mechanism run with fresh OpenDP noise,
so the private selection's guarantee holds for each seed, hence for the (data-independent) seed
drawn. The DP noise itself comes from OpenDP and OS randomness and stays verifiable only inside
the enclave (replay from the private transcript).
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

__all__ = ["BOUND_PREFIXES", "SeedBinding", "commitment", "new_secret", "is_bound_purpose"]

SECRET_BYTES = 32
BOUND_PREFIXES = ("sample round ", "sample scale", "projection")
_SEP = b"\x1f"
_HEX64 = re.compile(r"[0-9a-f]{64}")


def new_secret() -> tuple[str, str]:
    """(secret, salt): two fresh 256-bit values from the OS, as 64 hex characters each."""
    return secrets.token_hex(SECRET_BYTES), secrets.token_hex(SECRET_BYTES)


def _bytes(hex64: str, what: str) -> bytes:
    if not isinstance(hex64, str) or not _HEX64.fullmatch(hex64):
        raise ValueError(f"{what} must be 64 lowercase hex characters")
    return bytes.fromhex(hex64)


def commitment(secret: str, salt: str) -> str:
    """SHA-256 hex of ``"dpbundle-seed-commitment/1" || salt || secret`` (both as bytes)."""
    return hashlib.sha256(b"dpbundle-seed-commitment/1" + _bytes(salt, "salt")
                          + _bytes(secret, "secret")).hexdigest()


def is_bound_purpose(purpose: str) -> bool:
    """True for the post-processing steps whose seeds are bound (see the module docstring)."""
    return purpose.startswith(BOUND_PREFIXES)


@dataclass(frozen=True)
class SeedBinding:
    """The secret and the beacon value from which bound seeds are derived."""

    secret: str
    beacon: str

    def __post_init__(self) -> None:
        _bytes(self.secret, "secret")
        if not isinstance(self.beacon, str) or not self.beacon.strip():
            raise ValueError("the beacon value must be a non-empty string")
        if len(self.beacon) > 4096:
            raise ValueError("the beacon value must be at most 4096 characters")

    def seed(self, purpose: str, k: int) -> int:
        """The 256-bit seed of the ``k``-th request of ``purpose`` within an attempt."""
        msg = _SEP.join([b"dpbundle-seed/1", self.beacon.encode("utf-8"),
                         purpose.encode("utf-8"), str(int(k)).encode("ascii")])
        return int.from_bytes(hmac.new(_bytes(self.secret, "secret"), msg, hashlib.sha256).digest(),
                              "big")
