"""The closure rule's version rules: a bundle looks exactly like a bundle of the dpbundle version
its manifest claims (docs/audit.md, "The closure rule").

- 0.3 and later: every file 0.3 writes (:data:`~.closure.FILES_0_3`).
- 0.2: every file 0.2.0 wrote (:data:`~.closure.FILES_0_2`, as tests/data/prechange holds them),
  and no file or field only 0.3 writes (the checksum list's signatures, the ledger's earlier
  epsilons and composed epsilon).
- before 0.2: nothing that only 0.2 or later writes (codebook.csv, registry-entry.yaml, the
  checksum list's signatures, manifest.json's ``versions``, a Data Package v2 ``$schema``): a
  bundle made by 0.2 or 0.3 that claims an older version fails here.
"""
from __future__ import annotations

from .checks_integrity import made_since
from .closure import FIELDS_SINCE_0_3, FILES_0_2, FILES_0_3
from .context import AuditContext
from .report import CheckResult

__all__ = ["check_versions", "FILES_SINCE_0_2"]

FILES_SINCE_0_2 = ("codebook.csv", "registry-entry.yaml", "SHA256SUMS.sig", "SHA256SUMS.sshsig")


def _claim(version) -> str:
    return f"manifest.json claims dpbundle {version!r}"


def check_versions(ctx: AuditContext, r: CheckResult) -> None:
    """The version rules above; each failure names the file or field and the claimed version."""
    manifest = ctx.json("manifest.json")
    version = manifest.get("dpbundle_version") if isinstance(manifest, dict) else None
    have = set(ctx.bundle.files)
    if not made_since(manifest, (0, 2)):
        _older_than_0_2(ctx, manifest, version, have, r)
        return
    since_0_3 = made_since(manifest, (0, 3))
    for name in (FILES_0_3 if since_0_3 else FILES_0_2):
        if name not in have:
            r.fail(f"{name}: missing, but every bundle of that version has it ({_claim(version)})")
    if since_0_3:
        return
    for name in sorted(set(FILES_0_3) - set(FILES_0_2)):
        if name in have:
            r.fail(f"{name}: only dpbundle 0.3 and later write it, but {_claim(version)}")
    for file, field in FIELDS_SINCE_0_3:
        head, _, key = field.partition(".")
        block = ctx.json(file).get(head)
        if isinstance(block, dict) and key in block:
            r.fail(f"{file}: {field}: only dpbundle 0.3 and later write it, but {_claim(version)}")


def _older_than_0_2(ctx: AuditContext, manifest: dict, version, have: set, r: CheckResult) -> None:
    """A bundle claiming a version before 0.2 holds nothing only 0.2 or later writes."""
    for name in FILES_SINCE_0_2:
        if name in have:
            r.fail(f"{name}: only dpbundle 0.2 and later write it, but {_claim(version)} (a bundle "
                   "cannot claim an older version than the one that made it)")
    if "versions" in manifest:
        r.fail(f"manifest.json: versions: only dpbundle 0.2 and later write it, but {_claim(version)}")
    package = ctx.json("datapackage.json") if "datapackage.json" in have else {}
    if isinstance(package, dict) and "$schema" in package:
        r.fail(f"datapackage.json: a Data Package v2 ($schema), which only dpbundle 0.2 and later write, "
               f"but {_claim(version)}")
