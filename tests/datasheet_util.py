"""Build the datasheet's inputs (:class:`PublicFiles`) from a test release dict (the keyword
arguments of ``write_bundle``), without writing a bundle."""
from __future__ import annotations

from dpbundle.release.bundle import keys
from dpbundle.release.bundle.write import _as_coding, public_spec
from dpbundle.templates.datasheet import Meta, PublicFiles, build_context


def public_files(rel: dict, *, spec: dict | None = None, budget: dict | None = None,
                 files=("data.csv", "metrics.csv"), created: str = "2026-11-22",
                 version: str = "0.2.0") -> PublicFiles:
    key = keys.generate_private_key()
    spec = public_spec(spec if spec is not None else rel["spec"])
    columns = tuple(_as_coding(c) for c in rel["columns"])
    descriptions = {c.get("name"): c.get("description", "") for c in spec.get("columns") or []}
    meta = Meta(created=created, dpbundle_version=version, fingerprint=keys.public_key_fingerprint(key),
                public_key_pem=keys.public_key_pem(key), commitment="c" * 64, files=tuple(files))
    return PublicFiles(spec=spec, configuration=rel["configuration"], configuration_id=rel["configuration_id"],
                       metrics=rel["metrics"], budget=budget if budget is not None else rel["budget"],
                       datapackage={}, columns=columns,
                       units={c.get("name"): str(c.get("unit") or "") for c in spec.get("columns") or []},
                       descriptions=descriptions, codes=rel["codes"], meta=meta)


def context_of(rel: dict, **kw) -> dict:
    return build_context(public_files(rel, **kw))
