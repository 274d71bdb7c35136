"""``dpbundle keygen``: a new Ed25519 signing key pair for release bundles."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from dpbundle.release.bundle.passphrase_env import PASSPHRASE_ENV


def cli_keygen(
    out: Annotated[Path, typer.Option(
        "--out", help="Path prefix: writes PATH.key (private key, mode 0600) and PATH.pub (public key); "
        "a missing folder is created (mode 0700).")],
    passphrase_file: Annotated[Optional[Path], typer.Option(
        "--passphrase-file",
        help=f"Encrypt the private key with the first line of this file (else with ${PASSPHRASE_ENV} if set).")] = None,
) -> None:
    """Create an Ed25519 key pair for signing release bundles.

    Writes PATH.key (PKCS#8 PEM, readable only by you; encrypted when a passphrase is given) and
    PATH.pub (the public key to publish next to the bundles). Refuses to overwrite existing files.
    The passphrase is never taken as a command-line value: use --passphrase-file or the
    environment variable DPBUNDLE_KEY_PASSPHRASE.

    Example:

        dpbundle keygen --out keys/births-2024 --passphrase-file births.pass
    """
    from dpbundle.release.bundle.keys import (KeyFileError, _make_key_directory, load_public_key,
                                              public_key_fingerprint, read_passphrase, write_keypair)

    try:
        passphrase = read_passphrase(passphrase_file)
        created = _make_key_directory(Path(out).parent)
        key_path, pub_path = write_keypair(out, passphrase)
    except KeyFileError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    fingerprint = public_key_fingerprint(load_public_key(pub_path))
    if created:
        typer.echo(f"created directory {created} (mode 0700)")
    typer.echo(f"private key: {key_path} ({'passphrase-protected' if passphrase else 'NOT passphrase-protected'}; keep it secret)")
    typer.echo(f"public key:  {pub_path}")
    typer.echo(f"fingerprint: {fingerprint}  (SHA-256 of the raw Ed25519 public key)")
