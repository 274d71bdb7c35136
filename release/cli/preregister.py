"""``dpbundle preregister``: publish a signed record of the spec, key and seed commitment before
the private run (the record itself: :mod:`dpbundle.release.preregistration`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

# names of the record's module still importable from here, looked up when asked for (the module
# imports cryptography and jsonschema: never to print help)
_REEXPORTED = ("PREREG_FORMAT", "Preregistration", "PreregistrationError", "default_secret_path",
               "write_preregistration")


def __getattr__(name: str):
    if name in _REEXPORTED:
        from dpbundle.release import preregistration

        return getattr(preregistration, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def cli_preregister(
    spec: Annotated[Path, typer.Argument(help="The release spec to fix before the private run.")],
    key: Annotated[Path, typer.Option("--key", "-k", help="The Ed25519 private key that will sign the bundle (from `dpbundle keygen`).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The record to publish: writes OUT and OUT.sig.")],
    beacon_source: Annotated[str, typer.Option("--beacon-source", help="Where and when the public value that binds the seeds will be taken; it must not exist yet (e.g. 'drand quicknet round of 2027-01-15 12:00 UTC, https://api.drand.sh').")],
    configs: Annotated[Optional[Path], typer.Option("--configs", "-c", help="The narrowed configuration list the release will use (narrowed.yaml from `dpbundle sweep`).", show_default=False)] = None,
    secret_out: Annotated[Optional[Path], typer.Option("--secret-out", help="Where to write the PRIVATE secret (default: the private directory, as for transcripts).", show_default=False)] = None,
    passphrase_file: Annotated[Optional[Path], typer.Option("--passphrase-file", help="File holding the key's passphrase (or set DPBUNDLE_KEY_PASSPHRASE).", show_default=False)] = None,
    allow_other_spec: Annotated[bool, typer.Option("--allow-other-spec", help="Register a --configs list swept on another version of the spec (the release will need --allow-other-spec too).")] = False,
) -> None:
    """Pre-register a release: publish, before the private run, what it will be.

    Writes a signed record of the spec's SHA-256 (thresholds, epsilons, cap, configuration
    space), the narrowed list's SHA-256, the public key, the dpbundle version, and a
    commitment to a secret seed; and the secret itself, PRIVATE, into the private directory.
    Publish OUT and OUT.sig now. Run the release later with --preregistration OUT and the
    public value named by --beacon-source: it refuses a spec, list or key that differs, and
    the bundle lets anyone check that the post-processing seeds came from the committed secret
    and that value, which did not exist when the record was published.

    Example:

        dpbundle preregister spec.yaml --key steward.key --out births.prereg.json \\
            --beacon-source "drand quicknet, first round after 2027-01-15 12:00 UTC"
    """
    from dpbundle.release.bundle import keys
    from dpbundle.release.cli.common import fail_input, load_spec_or_exit
    from dpbundle.release.common.safe_io import KEY_BYTES, PASSPHRASE_BYTES, regular_file_problem, text_problem
    from dpbundle.release.preregistration import PreregistrationError, write_preregistration

    for value, what in ((beacon_source, "--beacon-source"), (out, "--out"), (secret_out, "--secret-out")):
        problem = text_problem(value, what) if value is not None else None
        if problem:
            fail_input(problem)
    s = load_spec_or_exit(spec)
    if s.retries == "resample":
        from dpbundle.release.preregistration import RESAMPLE_NOT_PREREGISTERED

        fail_input(f"{spec}: {RESAMPLE_NOT_PREREGISTERED}")
    for path, what, limit in ((key, "signing key", KEY_BYTES), (passphrase_file, "passphrase file", PASSPHRASE_BYTES)):
        problem = regular_file_problem(path, what, limit) if path is not None and Path(path).exists() else None
        if problem:
            fail_input(problem)
    try:
        private_key = keys.load_private_key(key, keys.read_passphrase(passphrase_file))
    except keys.KeyFileError as exc:
        fail_input(f"cannot load the signing key: {exc}")
    if configs is not None and not Path(configs).exists():
        fail_input(f"{configs}: no such file (--configs)")
    try:
        rec, sig, secret = write_preregistration(s, private_key, out, beacon_source=beacon_source,
                                                 configs=configs, secret_out=secret_out,
                                                 allow_other_spec=allow_other_spec)
    except (PreregistrationError, ValueError) as exc:
        fail_input(str(exc))
    doc = json.loads(rec.read_text("utf-8"))
    typer.echo(f"pre-registration record: {rec} and {sig.name} (publish both now)")
    typer.echo(f"spec_sha256:     {doc['spec_sha256']}")
    typer.echo(f"seed commitment: {doc['seed_commitment']['value']}")
    typer.echo(f"PRIVATE secret:  {secret} (mode 0600; keep it until the release, never publish it "
               "before)")
