"""The built-in examples (``--example births|persons``): the packaged spec and narrowed list, a
freshly simulated registry, the size check made before simulating it, and a demo key."""
from __future__ import annotations

import tempfile
from contextlib import contextmanager
from importlib.resources import as_file, files
from pathlib import Path
from typing import Iterator, Optional

from dpbundle.release.bundle import timings
from dpbundle.release.pipeline.checks import SIZE_FACTOR
from dpbundle.release.pipeline.output import fail, say, unusable
from dpbundle.release.pipeline.request import EXAMPLES

__all__ = ["example_inputs", "check_example_size", "demo_key"]


@contextmanager
def example_inputs(name: str, rows: int | None) -> Iterator[tuple[Path, Path, Path]]:
    """The packaged example spec, its narrowed configuration list, and a freshly simulated
    registry (in a temporary directory)."""
    from dpbundle.release.data.example import ExampleError, write_example

    if name not in EXAMPLES:
        unusable(f"unknown example {name!r}; available: {', '.join(EXAMPLES)}")
    spec_name, narrowed_name = EXAMPLES[name]
    with tempfile.TemporaryDirectory(prefix="dpbundle-example-") as tmp:
        data = Path(tmp) / f"{name}-simulated.csv"
        try:
            with timings.stage("example.simulate"):
                write_example(data, rows=rows, name=name)
        except ExampleError as exc:
            unusable(f"--example {name}: {exc}; nothing was spent")
        except MemoryError:
            fail(f"not enough memory to simulate {rows:,} rows of the {name} example; choose fewer "
                 "--example-rows; nothing was spent")
        except OSError as exc:
            fail(f"cannot write the simulated registry in {tmp} ({exc.strerror or exc}); nothing was spent")
        examples = files("dpbundle.examples")
        with as_file(examples.joinpath(spec_name)) as spec_path, as_file(examples.joinpath(narrowed_name)) as narrowed:
            yield Path(spec_path), data, Path(narrowed)


def check_example_size(example: str, rows: int, configs: Optional[Path], allow: bool) -> None:
    """Before the registry is simulated: a number of rows far from the size the example's list
    was measured on is refused now (the same rule as after preparation, on the rows: simulating
    first could take minutes and gigabytes, only to be refused)."""
    if allow or configs is not None:
        return
    from dpbundle.release.sweep.run import read_list_document

    with as_file(files("dpbundle.examples").joinpath(EXAMPLES[example][1])) as narrowed:
        try:
            measured = (read_list_document(Path(narrowed)) or {}).get("measured_on") or {}
        except (OSError, ValueError):
            return
    theirs = measured.get("rows") or measured.get("n")
    if not isinstance(theirs, int) or theirs < 1 or max(rows, theirs) <= SIZE_FACTOR * min(rows, theirs):
        return
    fail(f"--example-rows {rows:,}: the example's configuration list was measured on {theirs:,} rows, "
         f"more than a factor of {SIZE_FACTOR:g} {'fewer' if rows > theirs else 'more'}. Its "
         "acceptance figures (and the stop probability derived from them) may not describe this run, "
         "which could take very many attempts.\nchoose --example-rows within that factor of the "
         "list's size, or pass --allow-other-size; nothing was simulated and nothing was spent")


def demo_key(out: Path) -> Path:
    """The demo signing key beside the bundle (made on first use): ``OUT.demo-key.key``."""
    from dpbundle.release.bundle.keys import write_keypair

    base = out.parent / f"{out.name}.demo-key"
    keyfile = base.with_name(base.name + ".key")
    if not keyfile.exists() and not keyfile.is_symlink():
        write_keypair(base)
        say(f"generated a demo signing key {keyfile} (public key {base}.pub) outside the bundle; a "
            "real release uses the steward's own key (`dpbundle keygen`).", "note: ", "yellow")
    return keyfile
