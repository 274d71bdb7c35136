"""A hand-built bundle for the audit tests (written per docs/internals.md "Bundle", signed with
``cryptography`` Ed25519), independent of release/."""
from __future__ import annotations

import copy as copylib
import csv
import hashlib
import io
import json
import math
import secrets
from pathlib import Path

import numpy as np
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT = Path(__file__).resolve().parents[1]
SPEC_PATH = ROOT / "examples" / "births.yaml"

CONFIG = {
    "columns": {"birth_month": "month", "mother_age": "coarse", "parity": "coarse",
                "gestation_week": "coarse", "birth_sex": "sex", "birth_weight": "100g"},
    "generator": {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.25, "theta": 30},
    "projection": {"min_count": 2},
}

LABELS = {
    "birth_month": [str(m) for m in range(1, 13)],
    "mother_age": ["<18", "18-19", "20-24", "25-29", "30-34", "35-39", "40-42", "43-44", "44<"],
    "parity": ["1", "2-3", "4-6", "7-10", "10<"],
    "gestation_week": ["<29", "29-31", "32-33", "34-36", "37-41", "41<"],
    "birth_sex": ["M", "F"],
    "birth_weight": ["<1500"] + [f"{w}-{w + 99}" for w in range(1500, 4500, 100)] + ["4499<"],
}
NUMBERS = {
    "birth_month": [float(m) for m in range(1, 13)],
    "mother_age": [18, 18.5, 22, 27, 32, 37, 41, 43.5, 44],
    "parity": [1, 2.5, 5, 8.5, 10],
    "gestation_week": [29, 30, 32.5, 35, 39, 41],
    "birth_sex": [0, 1],
    "birth_weight": [1500] + [w + 49.5 for w in range(1500, 4500, 100)] + [4499],
}
NAMES = list(LABELS)


def config_id(config: dict) -> str:
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_spec() -> dict:
    class L(yaml.SafeLoader):
        pass

    L.yaml_implicit_resolvers = {k: [(t, r) for t, r in v if t != "tag:yaml.org,2002:timestamp"]
                                 for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    spec = yaml.load(SPEC_PATH.read_text(), Loader=L)  # noqa: S506
    spec["privacy"].pop("private_data_sha256", None)
    return spec


def label_range(label: str) -> tuple[float, float]:
    """(smallest, largest) integer a released bin label stands for (open bins are infinite)."""
    if label.startswith("<"):
        return -math.inf, float(label[1:]) - 1
    if label.endswith("<"):
        return float(label[:-1]) + 1, math.inf
    if "-" in label:
        a, b = label.split("-")
        return float(a), float(b)
    return float(label), float(label)


def violates(rec: dict) -> bool:
    """The births synthetic constraints, on whole bins: 'x < v' holds when the bin's largest
    value is < v, 'x > v' when its smallest is > v. ``rec`` maps column -> label."""
    a, p, g, w = (label_range(rec[c]) for c in ("mother_age", "parity", "gestation_week", "birth_weight"))
    return ((a[1] < 23 and p[0] > 6) or (a[1] < 20 and p[0] > 3) or (g[1] < 29 and w[0] > 2999)
            or (g[1] < 34 and w[0] > 3999))


def make_rows(n_types: int = 300, seed: int = 1) -> list[list[str]]:
    """Rows of labels: n_types distinct valid records, each 2-4 times, shuffled."""
    rng = np.random.default_rng(seed)
    types = set()
    out = []
    while len(types) < n_types:
        codes = tuple(int(rng.integers(len(LABELS[c]))) for c in NAMES)
        rec = {c: LABELS[c][k] for c, k in zip(NAMES, codes)}
        if violates(rec) or codes in types:
            continue
        types.add(codes)
        for _ in range(int(rng.integers(2, 5))):
            out.append([LABELS[c][k] for c, k in zip(NAMES, codes)])
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def csv_bytes(rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(NAMES)
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")


def codes_of(rows):
    look = {c: {lab: k for k, lab in enumerate(LABELS[c])} for c in NAMES}
    return np.array([[look[c][v] for c, v in zip(NAMES, r)] for r in rows], dtype=np.int64)


def ratio_delta(s, c):
    return max(1 / s, c - 1 / (1 / c + 1 / s))


def sensitivities(spec: dict, rows) -> dict:
    """Sensitivity of each criterion, computed directly from the formulas of DESIGN.md."""
    codes = codes_of(rows)
    n = len(rows)
    out = {}
    for e in spec["acceptance"]:
        t = e["type"]
        if t in ("kway_marginals", "faithfulness"):
            out[e["id"]] = (1 / n, {"n": n})
        elif t == "regression_mae_difference":
            L, U = e["bounds"]
            out[e["id"]] = (2 * (U - L) / n, {"n": n})
        elif t == "smoothed_ratio":
            s = min(int(np.bincount(codes[:, j], minlength=len(LABELS[c])).min()) + 1
                    for j, c in enumerate(NAMES))
            out[e["id"]] = (ratio_delta(s, e["clip"]), {"n": n, "min_smoothed_synthetic_count": s})
        elif t == "conditional_means":
            L, U = e["bounds"]
            margin = math.ceil(0.01 * n) + 1
            best = n
            for col in e["by"]:
                if col is None:
                    continue
                edges = spec["group_bins"][col]["edges"]
                j = NAMES.index(col)
                nums = np.array(NUMBERS[col])[codes[:, j]]
                g = np.searchsorted(np.array(edges, float), nums, side="right")
                s = np.bincount(g, minlength=len(edges) + 1)
                best = min(best, int(np.maximum(s - margin, 1).min()))
            out[e["id"]] = ((U - L) / best, {"n": n, "margin": margin, "min_group_size": best})
        elif t == "regression_coefficients":
            d = 6  # 5 features + intercept
            out[e["id"]] = ((1 + d) ** 2, {"n": n, "d": d, "intercept_counted_in_d": True})
    return out


def derived_ratio_threshold(e: dict) -> float:
    t = e["threshold"]
    delta = ratio_delta(t["assumed_min_count"], e["clip"])
    scale = delta / e["epsilon"]
    # c0 - F^-1(1 - p) = c0 + scale * ln(2p)
    return t["stakeholder"] + scale * math.log(2 * t["false_positive"])


def metrics_rows(spec: dict, rows) -> list[dict]:
    sens = sensitivities(spec, rows)
    out = []
    for e in spec["acceptance"]:
        s, inputs = sens[e["id"]]
        if isinstance(e["threshold"], dict):
            thr, stake = derived_ratio_threshold(e), e["threshold"]["stakeholder"]
            t = e["threshold"]
            tin = {"derive": "laplace_false_positive", "stakeholder": t["stakeholder"],
                   "false_positive": t["false_positive"], "epsilon": e["epsilon"],
                   "assumed_min_count": t["assumed_min_count"], "clip": e["clip"],
                   "assumed_sensitivity": ratio_delta(t["assumed_min_count"], e["clip"])}
        else:
            thr, stake, tin = float(e["threshold"]), None, None
        scale = s / e["epsilon"]
        out.append({
            "id": e["id"], "type": e["type"], "description": e["description"],
            "threshold": thr, "stakeholder_threshold": stake, "threshold_inputs": tin,
            "dp_value": round(thr * 0.4, 7), "passed": True, "epsilon": e["epsilon"],
            "sensitivity": s, "sensitivity_inputs": inputs,
            "mechanism": "functional_mechanism" if e["type"] == "regression_coefficients" else "laplace",
            "noise_scale": scale, "noise_std": math.sqrt(2) * scale,
        })
    return out


def budget_doc(spec: dict, rows: list[dict]) -> dict:
    eps_gen = spec["privacy"]["epsilon_generation"]
    eps_eval = math.fsum(r["epsilon"] for r in rows)
    total = 2 * (eps_gen + eps_eval)
    return {
        "unit_of_privacy": spec["release"]["unit_of_privacy"],
        "neighbouring": "change one record (bounded; n public)",
        "input_metric": "change_one_distance",
        "generation": {"type": "privbayes", "epsilon": eps_gen,
                       "parts": [{"purpose": "structure", "epsilon": eps_gen * 0.25},
                                 {"purpose": "conditionals", "epsilon": eps_gen * 0.75}]},
        "evaluation": {"epsilon": eps_eval, "criteria": [{"id": r["id"], "epsilon": r["epsilon"]} for r in rows]},
        "pre_selection": [],
        "per_iteration_epsilon": eps_gen + eps_eval,
        "selection": {"method": "Liu-Talwar", "factor": 2, "stop_probability": 0.0, "threshold": 0.5},
        "total_epsilon": total,
        "total_epsilon_opendp": total,
        "epsilon_cap": spec["privacy"]["epsilon_cap"],
        "opendp_version": "0.16.0",
    }


def datapackage_doc(spec: dict) -> dict:
    return {
        "profile": "tabular-data-package", "name": "births", "title": spec["release"]["title"],
        "description": "test", "licenses": [{"name": "CC-BY-4.0"}],
        "resources": [{
            "name": "data", "path": "data.csv", "profile": "tabular-data-resource", "format": "csv",
            "mediatype": "text/csv", "encoding": "utf-8",
            "schema": {"fields": [{"name": c, "type": "string",
                                   "constraints": {"required": True, "enum": LABELS[c]}} for c in NAMES]},
        }],
    }


def minimal_pdf(lines: list[str]) -> bytes:
    """A one-page PDF with these text lines (Helvetica), extractable by pypdf."""
    def esc(s):
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    content = "BT /F1 9 Tf 40 800 Td 11 TL\n" + "".join(f"({esc(s)}) Tj T*\n" for s in lines) + "ET"
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n" % len(content.encode()) + content.encode() + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


def datasheet_lines(metrics: list[dict], budget: dict) -> list[str]:
    lines = ["Live births (test datasheet)", f"Total epsilon: {format(budget['total_epsilon'], '.6g')}"]
    for r in metrics:
        lines.append(f"{r['id']}: DP value {format(r['dp_value'], '.6g')} threshold {format(r['threshold'], '.6g')}")
    return lines


def new_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def pub_pem(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def sign_bundle(d: Path, key: Ed25519PrivateKey, commitment: str | None = None,
                n: int | None = None) -> None:
    """(Re)write manifest.json + manifest.sig over every other file of ``d``."""
    old = {}
    if (d / "manifest.json").exists():
        old = json.loads((d / "manifest.json").read_text())
    files = []
    for p in sorted(d.rglob("*")):
        rel = p.relative_to(d).as_posix()
        if p.is_file() and rel not in ("manifest.json", "manifest.sig"):
            data = p.read_bytes()
            files.append({"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    manifest = {
        "format": "dpbundle-bundle/1", "dpbundle_version": "0.1.0",
        "created": "2026-01-01T00:00:00Z",
        "n": n if n is not None else old.get("n"),
        "files": files,
        "public_key": {"algorithm": "Ed25519", "pem": pub_pem(key).decode(),
                       "fingerprint": hashlib.sha256(raw).hexdigest()},
        "transcript_commitment": {"algorithm": "sha256", "construction": "sha256(salt || transcript.jsonl)",
                                  "value": commitment or old.get("transcript_commitment", {}).get("value")
                                  or secrets.token_hex(32)},
    }
    mb = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    (d / "manifest.json").write_bytes(mb)
    (d / "manifest.sig").write_bytes(key.sign(mb))


def write_docs(d: Path, spec: dict, metrics: list[dict], budget: dict, n: int) -> None:
    (d / "metrics.json").write_text(json.dumps({"n": n, "criteria": metrics}, indent=2))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "dp_value", "threshold"])
    for r in metrics:
        w.writerow([r["id"], format(r["dp_value"], ".6g"), format(r["threshold"], ".6g")])
    (d / "metrics.csv").write_text(buf.getvalue())
    (d / "budget.json").write_text(json.dumps(budget, indent=2))
    lines = datasheet_lines(metrics, budget)
    (d / "README.pdf").write_bytes(minimal_pdf(lines))
    (d / "README.html").write_text("<html><body>" + "".join(f"<p>{s}</p>" for s in lines) + "</body></html>")


def build_bundle(d: Path, key: Ed25519PrivateKey | None = None, rows=None, seed: int = 1) -> Ed25519PrivateKey:
    """Write a complete, valid, signed bundle into directory ``d``; return the signing key."""
    key = key or new_key()
    d.mkdir(parents=True, exist_ok=True)
    spec = load_spec()
    rows = rows if rows is not None else make_rows(seed=seed)
    n = len(rows)
    (d / "data.csv").write_bytes(csv_bytes(rows))
    (d / "spec.json").write_text(json.dumps({"spec": spec, "configuration": copylib.deepcopy(CONFIG),
                                             "configuration_id": config_id(CONFIG)}, indent=2))
    (d / "datapackage.json").write_text(json.dumps(datapackage_doc(spec), indent=2))
    metrics = metrics_rows(spec, rows)
    budget = budget_doc(spec, metrics)
    write_docs(d, spec, metrics, budget, n)
    sign_bundle(d, key, n=n)
    return key


# --------------------------------------------------------------------------- shared pytest fixtures

import shutil  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """A signed bundle built by this module (module-scoped) and its publisher key file."""
    base = tmp_path_factory.mktemp("orig")
    d = base / "bundle"
    key = build_bundle(d)
    pub = base / "publisher.pub"
    pub.write_bytes(pub_pem(key))
    return d, key, pub


@pytest.fixture
def copy(original, tmp_path):
    """A fresh copy of the original bundle that a test may tamper with."""
    d, key, pub = original
    t = tmp_path / "bundle"
    shutil.copytree(d, t)
    return t, key, pub


# Thresholds that the first attempt passes on a few thousand rows (tests of the plumbing).
LOOSE = {"kway_marginals": 0.8, "smoothed_ratio": 50, "conditional_means": 1e6,
         "regression_coefficients": 1e12, "regression_mae_difference": 1e9, "faithfulness": 10,
         "classification": 1e9, "quantile": 1e9}


def fast_spec(path: Path, policy: str = "declared_public") -> Path:
    """The births spec cut to one configuration with loose thresholds, written to ``path``:
    a real release on a few thousand example rows passes its first attempt."""
    spec = load_spec()
    for col in spec["columns"]:
        col["alternatives"] = col["alternatives"][:1]
    spec["generators"] = [{"type": "privbayes", "flavour": "theta",
                           "grid": {"epsilon_split": [0.5], "theta": [4]}}]
    spec["projection"] = {"min_count": [2]}
    for e in spec["acceptance"]:
        e["threshold"] = LOOSE[e["type"]]
    spec["privacy"]["records"] = {"policy": policy}
    spec["privacy"]["epsilon_cap"] = 20.0
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def example_registry(path: Path, rows: int = 6000, seed: int = 11) -> Path:
    """The built-in simulated births registry (``dpbundle example births``) as a CSV file."""
    from dpbundle.release.data.example import example_csv

    path.write_bytes(example_csv("births", rows, seed))
    return path
