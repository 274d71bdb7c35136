"""Re-derivation is byte-identical across the supported dependency range (docs/reproducibility.md).

``tests/data/rederive-golden/`` holds, for three published-model kinds, the public files of a
pre-registered release with ``publish: model`` that the public re-derivation reads (model.json,
seeds.json, spec.json, metrics.json, budget.json, preregistration.json), and ``golden.json`` the
SHA-256 of the data.csv that release wrote. The bundles were made once, by
``python tests/test_rederive_golden.py --regenerate`` (the same release as
tests/test_preregistration.py's ``published`` fixture), and must never be regenerated to make
this test pass: a different hash means that a dependency (NumPy above all: its ``Generator``
methods may change their algorithms in any feature release, NEP 19) or dpbundle's code changed
what the published model and seeds produce, so bundles already released would fail their public
audit. ``golden.json``'s ``numpy_streams`` pins each NumPy method the re-derivation calls,
so that such a failure names the method. A last test pins how a spec's YAML is read (PyYAML's
YAML 1.1), on which spec.json and the pre-registered spec SHA-256 depend.

``.ci/check-range.sh`` runs this file in fresh environments at the lowest and the highest
versions that pyproject.toml allows.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "rederive-golden"
GOLDEN = GOLDEN_DIR / "golden.json"
# What the public re-derivation reads (audit/rederive.py); data.csv itself is not stored.
FILES = ("model.json", "seeds.json", "spec.json", "metrics.json", "budget.json", "preregistration.json")
CASES = ("privbayes", "privbayes-oneway", "privsyn")   # model kinds bayesian_network, raked, marginals_gum


def _golden() -> dict:
    return json.loads(GOLDEN.read_text("utf-8"))


def _versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{p} {version(p)}" for p in ("numpy", "opendp", "pandas", "pyyaml"))


# ------------------------------------------------------------------ the re-derivation


def _seed(secret: str, beacon: str, purpose: str, k: int) -> int:
    """docs/preregistration.md, "The derivation", written out again (not imported)."""
    msg = b"\x1f".join([b"dpbundle-seed/1", beacon.encode("utf-8"), purpose.encode("utf-8"),
                        str(k).encode("ascii")])
    return int.from_bytes(hmac.new(bytes.fromhex(secret), msg, hashlib.sha256).digest(), "big")


def rederive(folder: Path) -> bytes:
    """data.csv from a folder of the public files, as the public audit's re-derivation does it."""
    from dpbundle.audit.labels import build_view
    from dpbundle.audit.replay import csv_bytes, sample_and_project
    from dpbundle.mechanisms.published import model_from_document

    doc = {name: json.loads((folder / name).read_text("utf-8")) for name in FILES}
    view = build_view(doc["spec.json"])
    model = model_from_document(doc["model.json"])
    secret, beacon = doc["seeds.json"]["secret"], doc["seeds.json"]["beacon"]["value"]
    uses: dict[str, int] = {}

    def rng_for(purpose: str) -> np.random.Generator:
        k = uses.get(purpose, 0)
        uses[purpose] = k + 1
        return np.random.Generator(np.random.PCG64(_seed(secret, beacon, purpose, k)))

    codes = sample_and_project(model, int(doc["metrics.json"]["n"]), doc["spec.json"]["configuration"],
                               view, rng_for)
    return csv_bytes(view, codes)


@pytest.mark.parametrize("case", CASES)
def test_rederived_data_csv_has_the_golden_sha256(case, tmp_path):
    want = _golden()["bundles"][case]
    got = rederive(GOLDEN_DIR / case)
    assert hashlib.sha256(got).hexdigest() == want["sha256"], (
        f"{case}: the re-derived data.csv ({len(got)} bytes) is not the released one "
        f"({want['bytes']} bytes, made with numpy {_golden()['made_with']['numpy']}); with "
        f"{_versions()}. A dependency changed what the published model and seeds produce: see "
        "docs/reproducibility.md (and test_numpy_generator_streams for the method)")
    assert len(got) == want["bytes"] and got.count(b"\n") == want["rows"] + 1

    # The public audit's own check agrees: the same bytes as data.csv pass `rederivation`.
    from dpbundle.audit.bundle_io import open_bundle
    from dpbundle.audit.context import AuditContext
    from dpbundle.audit.rederive import check_rederivation

    bundle = tmp_path / case
    shutil.copytree(GOLDEN_DIR / case, bundle)
    (bundle / "data.csv").write_bytes(got)
    r = check_rederivation(AuditContext(open_bundle(bundle)))
    assert r.result == "pass", (r.problems, r.detail)


# ------------------------------------------------------------------ the NumPy methods it uses


def _streams() -> dict[str, bytes]:
    """Every ``Generator`` method (and float reduction) the re-derivation uses, with the kinds of
    arguments it passes (mechanisms/privbayes.py, privsyn.py, oneway.py, projection.py), as
    little-endian bytes; and those only the enclave replay needs (mechanisms/records.py's resize,
    criteria/condmeans.py's subsampling)."""
    out: dict[str, bytes] = {}

    def g(i: int) -> np.random.Generator:
        return np.random.Generator(np.random.PCG64(_seed("ab" * 32, "golden", "stream", i)))

    out["PCG64.random_raw"] = g(0).bit_generator.random_raw(4096).astype("<u8").tobytes()
    r = g(1)
    out["random(m)"] = r.random(5000).astype("<f8").tobytes()
    out["random()"] = np.array([r.random() for _ in range(64)]).astype("<f8").tobytes()
    out["random(m, float32)"] = g(2).random(5000, dtype=np.float32).astype("<f4").tobytes()
    r = g(3)
    out["permutation(n)"] = b"".join(r.permutation(n).astype("<i8").tobytes()
                                     for n in (1, 2, 7, 1000, 65_537, 300_000))
    r = g(4)
    out["integers(0, R)"] = np.array([int(r.integers(0, R)) for R in (1, 2, 3, 1000, 2**31 + 11, 2**40 + 3)]
                                     * 8, dtype="<i8").tobytes()
    out["integers(0, K, size)"] = b"".join(g(5).integers(0, K, size=s).astype("<i8").tobytes()
                                           for K, s in ((1, 3), (2, 1000), (37, 5000), (100_003, 777),
                                                        (2**63, 4)))
    r = g(6)
    p = np.array([0.5, 0.25, 0.125, 0.0625, 0.0625])
    q = np.arange(1, 41, dtype=np.float64)
    out["multinomial(R, p)"] = b"".join(r.multinomial(R, pp).astype("<i8").tobytes()
                                        for R, pp in ((1, p), (7, p), (1000, p), (39, q / q.sum()),
                                                      (100_000, q / q.sum())))
    r = g(7)
    pool = np.arange(10_000, dtype=np.int64)
    out["choice(replace=False)"] = b"".join(r.choice(pool[:n], size=k, replace=False).astype("<i8").tobytes()
                                            for n, k in ((1, 1), (10, 3), (10_000, 5), (10_000, 150),
                                                         (10_000, 4000), (10_000, 10_000)))
    r = g(8)
    parts = []
    for n in (1, 2, 9, 1000, 50_000):
        a = np.arange(n, dtype=np.int64)
        r.shuffle(a)
        parts.append(a.astype("<i8").tobytes())
    out["shuffle(a)"] = b"".join(parts)
    out["random((k, d))"] = g(10).random((333, 6)).astype("<f8").tobytes()
    # only the enclave replay (seeds from the private transcript): conditional means' subsampling
    ent = [int(v) for v in g(11).integers(0, 2**63, size=4)]
    out["SeedSequence(spawn_key)"] = b"".join(
        np.random.PCG64(np.random.SeedSequence(ent, spawn_key=node)).random_raw(8).astype("<u8").tobytes()
        for node in ((0, 5000), (0, 2500), (2500, 5000), (1250, 2500)))
    r = g(12)
    colors = np.array([0, 5, 1, 300, 2, 77, 1000, 3], dtype=np.int64)
    out["multivariate_hypergeometric"] = b"".join(
        r.multivariate_hypergeometric(colors, k).astype("<i8").tobytes() for k in (0, 1, 7, 694, 1388))
    x = g(9).random(300_001)
    out["float sum"] = np.array([x[:n].sum() for n in (3, 8, 127, 128, 129, 1000, 100_000, 300_001)]
                                + [(x[:1000] * 3.7).reshape(10, 100).sum(axis=1).sum()]).astype("<f8").tobytes()
    out["float cumsum"] = np.cumsum(x[:10_000]).astype("<f8").tobytes()
    return out


def test_numpy_generator_streams():
    want = _golden()["numpy_streams"]
    got = {name: hashlib.sha256(b).hexdigest() for name, b in _streams().items()}
    changed = sorted(name for name in want if got.get(name) != want[name])
    assert not changed, (f"with {_versions()}, these NumPy methods draw other numbers than with "
                         f"numpy {_golden()['made_with']['numpy']}: {changed} (docs/reproducibility.md)")
    assert set(got) == set(want)


# ------------------------------------------------------------------ the spec's YAML 1.1


def test_spec_yaml_is_read_as_yaml_1_1():
    """A spec's values, hence spec.json and the pre-registered spec SHA-256, depend on PyYAML
    reading YAML 1.1 (a YAML 1.2 reader gives strings or other numbers for most of these)."""
    from dpbundle.release.spec.yaml_text import load_yaml

    doc, _ = load_yaml("a: yes\nb: Off\nc: NO\nd: 0777\ne: 012\nf: 0b101\ng: 0x1f\nh: 1_000\n"
                       "i: 1:30\nj: 1:20:30.5\nk: 1e3\nl: 1.0e+3\nm: .inf\nn: ~\no: 2019-01-01\n")
    assert doc == {"a": True, "b": False, "c": False, "d": 511, "e": 10, "f": 5, "g": 31, "h": 1000,
                   "i": 90, "j": 4830.5, "k": "1e3", "l": 1000.0, "m": float("inf"), "n": None,
                   "o": "2019-01-01"}   # dates stay strings: the spec loader drops that resolver
    assert [type(doc[k]) for k in "adkl"] == [bool, int, str, float]


# ------------------------------------------------------------------ making the golden files (once)


def _regenerate() -> None:  # pragma: no cover - run by hand, once: see the module docstring
    """Release one pre-registered bundle with ``publish: model`` per case and keep its public
    files and data.csv's SHA-256 (as tests/test_preregistration.py's ``published`` fixture)."""
    import datetime
    import os
    import tempfile
    from importlib.metadata import version

    import yaml
    from typer.testing import CliRunner

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import audit_fixtures as fx

    from dpbundle.release.cli.main import app

    gens = {"privbayes": {"type": "privbayes", "flavour": "theta",
                          "grid": {"epsilon_split": [0.5], "theta": [4]}},
            "privbayes-oneway": {"type": "privbayes", "flavour": "theta",
                                 "grid": {"epsilon_split": [0.5], "theta": [4], "oneway": ["measure"]}},
            "privsyn": {"type": "privsyn"}}
    runner = CliRunner()

    def run(*args):
        res = runner.invoke(app, [str(a) for a in args])
        assert res.exit_code == 0, res.output

    golden = {"about": "SHA-256 of the data.csv of each release here (tests/test_rederive_golden.py "
                       "made them once; never regenerate them to make the test pass)",
              "made_with": {p: version(p) for p in ("dpbundle", "numpy", "opendp", "pandas", "pyyaml")}
              | {"python": sys.version.split()[0],
                 "date": datetime.date.today().isoformat()},
              "bundles": {}, "numpy_streams": {}}
    with tempfile.TemporaryDirectory() as t:
        t = Path(t)
        os.environ["DPBUNDLE_PRIVATE_DIR"] = str(t / "private")
        data = fx.example_registry(t / "registry.csv", 20_000, 27)  # > 8,192 rows a round
        run("keygen", "--out", t / "k")
        for case, gen in gens.items():
            doc = yaml.safe_load(fx.fast_spec(t / "fast.yaml").read_text())
            doc["publish"] = "model"
            doc["generators"] = [gen]
            spec = t / f"{case}.yaml"
            spec.write_text(yaml.safe_dump(doc, sort_keys=False))
            run("preregister", spec, "--key", t / "k.key", "--out", t / f"{case}.rec.json",
                "--beacon-source", "a fixed test value", "--secret-out", t / f"{case}.s.json")
            run("release", spec, data, "--out", t / case, "--key", t / "k.key",
                "--ledger", t / f"{case}.ledger.jsonl", "--transcript", t / f"{case}.t.jsonl",
                "--preregistration", t / f"{case}.rec.json", "--beacon", f"golden beacon {case}",
                "--preregistration-secret", t / f"{case}.s.json")
            dest = GOLDEN_DIR / case
            dest.mkdir(parents=True, exist_ok=True)
            for name in FILES:
                shutil.copy(t / case / name, dest / name)
            released = (t / case / "data.csv").read_bytes()
            assert rederive(dest) == released
            golden["bundles"][case] = {"sha256": hashlib.sha256(released).hexdigest(),
                                       "bytes": len(released), "rows": released.count(b"\n") - 1,
                                       "model_kind": json.loads((dest / "model.json").read_text())["kind"]}
    golden["numpy_streams"] = {name: hashlib.sha256(b).hexdigest() for name, b in _streams().items()}
    GOLDEN.write_text(json.dumps(golden, indent=2) + "\n", "utf-8")
    print(f"wrote {GOLDEN_DIR}")


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] != ["--regenerate"]:
        sys.exit("usage: python tests/test_rederive_golden.py --regenerate  (once; see the docstring)")
    _regenerate()
