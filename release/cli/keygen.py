"""``dpbundle keygen``: a new Ed25519 signing key pair for release bundles (or, with
``--from-public``, an existing public key in OpenSSH's forms)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from dpbundle.release.bundle.passphrase_env import PASSPHRASE_ENV


def cli_keygen(
    out: Annotated[Optional[Path], typer.Option(
        "--out", help="Path prefix: writes PATH.key (private key, mode 0600), PATH.pub (public key) and "
        "PATH.allowed_signers (the public key for ssh-keygen -Y verify); a missing folder is created "
        "(mode 0700).")] = None,
    passphrase_file: Annotated[Optional[Path], typer.Option(
        "--passphrase-file",
        help=f"Encrypt the private key with the first line of this file (else with ${PASSPHRASE_ENV} if set).")] = None,
    from_public: Annotated[Optional[Path], typer.Option(
        "--from-public", help="Write nothing: print this existing public key (PEM, e.g. a key made "
        "before dpbundle 0.3) as an OpenSSH line and an allowed_signers line.")] = None,
) -> None:
    """Create an Ed25519 key pair for signing release bundles.

    Writes PATH.key (PKCS#8 PEM, readable only by you; encrypted when a passphrase is given),
    PATH.pub (the public key to publish next to the bundles) and PATH.allowed_signers (the same
    key as the line `publisher namespaces="dpbundle" ssh-ed25519 ...` that
    `ssh-keygen -Y verify -f PATH.allowed_signers -I publisher -n dpbundle` reads; publish it
    too). Refuses to overwrite existing files. The passphrase is never taken as a command-line
    value: use --passphrase-file or the environment variable DPBUNDLE_KEY_PASSPHRASE.

    Example:

        dpbundle keygen --out keys/births-2024 --passphrase-file births.pass
    """
    if (out is None) == (from_public is None):
        typer.echo("error: give either --out PATH (a new key pair) or --from-public KEY.pub", err=True)
        raise typer.Exit(2)
    if from_public is not None:
        _show_public(from_public)
        return
    from dpbundle.release.bundle.keys import (KeyFileError, _make_key_directory, allowed_signers_path,
                                              read_passphrase, write_keypair)

    problem = _out_prefix_problem(Path(out))
    if problem:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    try:
        passphrase = read_passphrase(passphrase_file)
        created = _make_key_directory(Path(out).parent)
        key_path, pub_path = write_keypair(out, passphrase)
    except KeyFileError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if created:
        typer.echo(f"created directory {created} (mode 0700)")
    typer.echo(f"private key: {key_path} ({'passphrase-protected' if passphrase else 'NOT passphrase-protected'}; keep it secret)")
    typer.echo(f"public key:  {pub_path}")
    typer.echo(f"allowed_signers: {allowed_signers_path(out)}  (for ssh-keygen -Y verify)")
    _print_forms(pub_path)


def _out_prefix_problem(out: Path) -> str | None:
    """--out is a prefix for three new files: refused when it names something that exists and is
    not a regular file (``/dev/null`` would give /dev/null.key, a directory or a FIFO is surely a
    mistake, a symbolic link would write beside its target's name), or when one of the three
    files would be written through a symbolic link or onto a device, FIFO or directory."""
    import os
    import stat

    from dpbundle.release.bundle.keys import allowed_signers_path
    from dpbundle.release.common.safe_io import kind_of

    rule = ("(rule: --out is the prefix of new files; devices, FIFOs, links and directories are "
            "refused)")
    for path, what in ((out, "--out"), (Path(f"{out}.key"), "the private key"),
                       (Path(f"{out}.pub"), "the public key"), (allowed_signers_path(out), "allowed_signers")):
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            return f"{path}: {what} is {kind_of(st.st_mode)} {rule}"
    return None


def _show_public(path: Path) -> None:
    """Print an existing public key's fingerprint, OpenSSH line and allowed_signers line."""
    from dpbundle.release.bundle.keys import KeyFileError

    try:
        _print_forms(path)
    except KeyFileError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def _print_forms(pub_path: Path) -> None:
    """The public key's fingerprint, its OpenSSH line and its allowed_signers line."""
    from dpbundle.release.bundle.keys import (allowed_signers_line, load_public_key, openssh_public_key_line,
                                              public_key_fingerprint)

    key = load_public_key(Path(pub_path))
    typer.echo(f"fingerprint: {public_key_fingerprint(key)}  (SHA-256 of the raw Ed25519 public key)")
    typer.echo(f"OpenSSH:     {openssh_public_key_line(key)}")
    typer.echo(f"allowed_signers line: {allowed_signers_line(key)}")
