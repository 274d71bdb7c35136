"""Printing help is cheap (issue 24): importing the CLI and printing ``--help`` for the root and
for every command and subcommand imports none of the heavy libraries (numerics, data frames,
schemas, rendering, DP, cryptography, dask, templates). Those are imported by a command's body
when it runs. A behaviour test, not a timing test: benchmarks/bench_cli_startup.py times it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

HEAVY = ("numpy", "pandas", "jsonschema", "weasyprint", "opendp", "scipy", "cryptography", "dask",
         "jinja2")

# Run in a fresh interpreter: the test process has imported everything already. Prints, as JSON,
# every help invocation in order with its exit code and the heavy modules it imported first.
SCRIPT = textwrap.dedent("""
    import contextlib, io, json, sys

    HEAVY = %r
    steps = []

    def note(what, code):
        seen = {m for s in steps for m in s["imported"]}
        now = sorted(h for h in HEAVY if h in sys.modules and h not in seen)
        steps.append({"help": what, "exit": code, "imported": now})

    def run(what, call):
        out = io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                call()
            except SystemExit as exc:
                code = exc.code
        note(what, code)

    from dpbundle.release.cli.main import app
    note("import dpbundle.release.cli.main", 0)
    from dpbundle.audit.cli import main as audit_main
    note("import dpbundle.audit.cli", 0)

    import typer.main

    def paths(cmd, prefix):
        yield prefix
        for name in sorted(getattr(cmd, "commands", {})):
            yield from paths(cmd.commands[name], prefix + [name])

    for path in paths(typer.main.get_command(app), []):
        run(" ".join(["dpbundle", *path, "--help"]),
            lambda: app(args=[*path, "--help"], prog_name="dpbundle"))
    run("python -m dpbundle.audit --help", lambda: sys.exit(audit_main(["--help"])))
    print(json.dumps(steps))
""") % (HEAVY,)


def _steps() -> list[dict]:
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=False,
                         env={**os.environ, "COLUMNS": "100", "TERM": "dumb"}, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_help_imports_no_heavy_library():
    steps = _steps()
    helps = [s["help"] for s in steps]
    for expected in ("dpbundle --help", "dpbundle audit --help", "dpbundle release --help",
                     "dpbundle selftest --help", "dpbundle spec explain --help",
                     "dpbundle ledger mark --help", "python -m dpbundle.audit --help"):
        assert expected in helps
    assert [s["help"] for s in steps if s["exit"] != 0] == []
    heavy = [f"{s['help']}: {', '.join(s['imported'])}" for s in steps if s["imported"]]
    assert heavy == [], "printing help imported heavy libraries (first imported by):\n" + "\n".join(heavy)
