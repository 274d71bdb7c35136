"""The published DP model (``publish: model`` in the spec): the selected candidate's fitted model
as a JSON document, and the model rebuilt from it.

Publishing the model costs no budget: it is the output of the generator's DP measurement that
the selection already accounts for (everything in it is computed from noisy measurements and
public information). It does let the public re-derive data.csv: with the model, the published
n, the configuration, the spec's synthetic constraints and the beacon-bound seeds
(:mod:`.seeds`), sampling, constraint filtering and the projection are re-run and must give the
released file byte for byte.

Numbers are JSON numbers written by Python's ``repr`` of float64 (shortest round-trip form), so
the rebuilt tables are bit-identical to the fitted ones and so is every sample drawn from them.

Model kinds:

``bayesian_network`` (PrivBayes, mst_pure): ``domain`` (values per column), ``network`` in
sampling order, each ``{"attribute": j, "parents": [[p, level], ...]}`` (a parent's codes merged
as ``c >> level``), and ``conditionals``: one table per node, rows = parent configurations in
mixed radix (first parent most significant), columns = the attribute's values; rows are
probability vectors (non-negative, positive sum; sampling normalises them). Sampling: for each
node in order, ``u = rng.random(m)`` and the first value whose cumulative probability exceeds
``u`` (``PrivBayesModel.sample``).

``marginals_gum`` (privsyn): ``domain``, ``oneways`` (one distribution per column),
``marginals`` (``{"columns": [a, b], "p": flat cell distribution, first column most
significant}``), ``selected``, ``gum_rounds``, ``gum_alpha``; sampling is the Gradually Update
Method of ``mechanisms/privsyn.py`` (``gum``) with the rng passed in.

``adaptive_gum`` (aim_pure): ``domain``, ``oneways``, ``marginals`` (``{"columns": [...],
"p": ...}``, 2..6 distinct columns each, each column set once, first column most significant),
``rounds`` (in order, ``{"columns", "epsilon_select", "epsilon_measure"}``: the marginal each
round chose and the two epsilons it handed to OpenDP), ``epsilon_1way`` (the 1-way
marginals' epsilon), ``gum_rounds``, ``gum_alpha``; sampling is ``marginals_gum``'s (the rounds
are the public log the audit checks against the budget rule; sampling does not read them).

``sampler`` (optional, top level): the sampler version the released sample was drawn with
(``mechanisms/sampling.py``): 2 draws the counts of record types (``sample_counts`` of a model
kind that has it; the others sample rows as in version 1); 3 (a kind without ``sample_counts``
and n above 4,194,304 records) draws a base of 4,194,304 records as 2 would and scales it to n;
absent means 1.

``raked`` (PrivBayes with ``oneway``): a ``base`` model (a kind above) whose samples are raked
to published one-way ``shares`` (one list per column, or null for a column not raked) with
``method`` and ``rounds`` (``mechanisms/oneway.py``: ``RakedModel.sample``, with the synthetic
constraints' keep mask as in the iteration).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .sampling import ROW_SAMPLER, SAMPLERS, model_sampler, set_model_sampler

__all__ = ["MODEL_FORMAT", "PublishError", "model_document", "model_from_document",
           "publishable", "register_kind"]

MODEL_FORMAT = "dpbundle-model/1"

# Bounds on the numbers of a model document that set how long sampling takes (a document is
# untrusted input: ``gum_rounds: 10**9`` would sample for months). The release never writes more.
MAX_GUM_ROUNDS = 1000      # PrivSyn's own range for its gum_rounds hyperparameter (0..1000)


class PublishError(ValueError):
    """A model that cannot be published, or a model document that cannot be rebuilt."""


# kind -> (to_public(model) -> dict, from_public(dict) -> model, is_instance(model) -> bool)
_KINDS: dict[str, tuple[Callable[[Any], dict], Callable[[dict], Any], Callable[[Any], bool]]] = {}


def register_kind(kind: str, to_public: Callable[[Any], dict], from_public: Callable[[dict], Any],
                  is_instance: Callable[[Any], bool]) -> None:
    """Register how a model kind is written and rebuilt."""
    _KINDS[kind] = (to_public, from_public, is_instance)


def _kind_of(model: Any) -> str | None:
    for kind, (_, _, is_instance) in _KINDS.items():
        if is_instance(model):
            return kind
    return None


def publishable(generator_type: str) -> bool:
    """Whether models of ``generator_type`` can be published (the spec validator asks)."""
    return generator_type in PUBLISHABLE_GENERATORS


def model_document(model: Any, *, generator: dict, epsilon: float,
                   columns: Sequence[str]) -> dict:
    """The JSON document of a fitted model (schemas/model.schema.json)."""
    kind = _kind_of(model)
    if kind is None:
        raise PublishError(f"a model of type {type(model).__name__} cannot be published")
    body = _KINDS[kind][0](model)
    doc = {"format": MODEL_FORMAT, "kind": kind, "generator": dict(generator),
           "epsilon_generation": float(epsilon), "columns": list(columns), **body}
    version = model_sampler(model)
    if version != ROW_SAMPLER:   # absent: version 1, as in documents made before version 2
        doc["sampler"] = version
    return doc


def model_from_document(doc: dict) -> Any:
    """The model rebuilt from its document; PublishError if the document is unusable."""
    if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT:
        raise PublishError(f"not a {MODEL_FORMAT} document")
    kind = doc.get("kind")
    if kind not in _KINDS:
        raise PublishError(f"unknown model kind {kind!r}; known: {sorted(_KINDS)}")
    version = doc.get("sampler", ROW_SAMPLER)
    if version not in SAMPLERS or isinstance(version, bool):
        raise PublishError(f"unknown sampler version {_show(version)}; known: {list(SAMPLERS)}")
    try:
        return set_model_sampler(_KINDS[kind][1](doc), version)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise PublishError(f"model document of kind {kind!r} is unusable: {e}") from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _show(v: Any) -> str:
    """A value for a message, cut short (a document may hold anything)."""
    text = repr(v)
    return text if len(text) <= 80 else text[:80] + "..."


# ------------------------------------------------------------------ bayesian_network


def _bn_to_public(model: Any) -> dict:
    return {
        "domain": [int(k) for k in model.domain],
        "network": [{"attribute": int(node.attribute),
                     "parents": [[int(j), int(lv)] for j, lv in node.parents]}
                    for node in model.network],
        "conditionals": [np.asarray(c, dtype=np.float64).tolist() for c in model.conditionals],
    }


def _bn_from_public(doc: dict) -> Any:
    from .privbayes import NetworkNode, PrivBayesModel

    network = [NetworkNode(int(node["attribute"]), tuple((int(j), int(lv)) for j, lv in node["parents"]))
               for node in doc["network"]]
    tables = [np.asarray(t, dtype=np.float64) for t in doc["conditionals"]]
    if any(t.ndim != 2 for t in tables):
        raise ValueError("every conditional table must be a matrix")
    return PrivBayesModel([int(k) for k in doc["domain"]], network, tables)


def _is_bn(model: Any) -> bool:
    from .privbayes import PrivBayesModel

    return type(model).__name__ in ("PrivBayesModel", "PureMSTModel") and isinstance(model, PrivBayesModel)


register_kind("bayesian_network", _bn_to_public, _bn_from_public, _is_bn)


# ------------------------------------------------------------------ raked (oneway)


def _raked_to_public(model: Any) -> dict:
    inner = model.model
    kind = _kind_of(inner)
    if kind is None or kind == "raked":
        raise PublishError(f"a raked {type(inner).__name__} cannot be published")
    return {"method": model.method, "rounds": int(model.rounds),
            "shares": [None if sh is None else np.asarray(sh, dtype=np.float64).tolist()
                       for sh in model.shares],
            "base": {"kind": kind, **_KINDS[kind][0](inner)}}


def _raked_from_public(doc: dict) -> Any:
    from .oneway import DEFAULT_ROUNDS, RakedModel

    base = doc["base"]
    if base.get("kind") not in _KINDS or base.get("kind") == "raked":
        raise ValueError(f"unknown base model kind {base.get('kind')!r}")
    rounds = doc["rounds"]
    if not _is_int(rounds) or not 0 <= rounds <= DEFAULT_ROUNDS:
        raise ValueError(f"rounds must be an integer in 0..{DEFAULT_ROUNDS} (the raking rounds the "
                         f"release uses), got {_show(rounds)}")
    inner = _KINDS[base["kind"]][1](base)
    shares = [None if sh is None else np.asarray(sh, dtype=np.float64) for sh in doc["shares"]]
    return RakedModel(inner, shares, method=str(doc["method"]), rounds=int(rounds))


def _is_raked(model: Any) -> bool:
    return type(model).__name__ == "RakedModel" and hasattr(model, "shares")


register_kind("raked", _raked_to_public, _raked_from_public, _is_raked)


# ------------------------------------------------------------------ marginals_gum (privsyn)


def _gum_to_public(model: Any) -> dict:
    return {"domain": [int(k) for k in model.domain],
            "oneways": [np.asarray(p, dtype=np.float64).tolist() for p in model.oneways],
            "marginals": [{"columns": [int(c) for c in cols],
                           "p": np.asarray(p, dtype=np.float64).tolist()}
                          for cols, p in model.marginals],
            "selected": [[int(a), int(b)] for a, b in model.selected],
            "gum_rounds": int(model.gum_rounds), "gum_alpha": float(model.gum_alpha)}


def _gum_from_public(doc: dict) -> Any:
    from .privsyn import PrivSynModel

    rounds, alpha = doc["gum_rounds"], doc["gum_alpha"]
    if not _is_int(rounds) or not 0 <= rounds <= MAX_GUM_ROUNDS:
        raise ValueError(f"gum_rounds must be an integer in 0..{MAX_GUM_ROUNDS}, got {_show(rounds)}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < float(alpha) <= 1:
        raise ValueError(f"gum_alpha must be a number in (0, 1], got {_show(alpha)}")
    domain = tuple(int(k) for k in doc["domain"])
    oneways = [np.asarray(p, dtype=np.float64) for p in doc["oneways"]]
    if len(oneways) != len(domain) or any(len(p) != k for p, k in zip(oneways, domain)):
        raise ValueError("one one-way distribution per column, of its domain's size")
    marginals, pairs = [], set()
    for mg in doc["marginals"]:
        cols = tuple(int(c) for c in mg["columns"])
        if len(cols) != 2 or cols[0] == cols[1] or tuple(sorted(cols)) in pairs:
            raise ValueError(f"every marginal is over two distinct columns, each pair once; got {cols}")
        pairs.add(tuple(sorted(cols)))
        p = np.asarray(mg["p"], dtype=np.float64)
        if any(not 0 <= c < len(domain) for c in cols) or p.size != int(np.prod([domain[c] for c in cols])):
            raise ValueError(f"marginal over columns {cols} does not fit the domain")
        marginals.append((cols, p))
    return PrivSynModel(domain, oneways, marginals, int(doc["gum_rounds"]), float(doc["gum_alpha"]),
                        [tuple(int(x) for x in pair) for pair in doc["selected"]])


def _is_gum(model: Any) -> bool:
    return type(model).__name__ == "PrivSynModel"


register_kind("marginals_gum", _gum_to_public, _gum_from_public, _is_gum)


# ------------------------------------------------------------------ adaptive_gum (aim_pure)

MAX_MARGINAL_COLUMNS = 6   # aim_pure's own range for its max_size hyperparameter (2..6)


def _is_epsilon(v: Any) -> bool:
    """A finite float > 0 (an epsilon handed to OpenDP)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < float(v) < float("inf")


def _adaptive_to_public(model: Any) -> dict:
    body = _gum_to_public(model)
    del body["selected"]
    body["rounds"] = [{"columns": [int(c) for c in r.columns], "epsilon_select": float(r.epsilon_select),
                       "epsilon_measure": float(r.epsilon_measure)} for r in model.rounds]
    body["epsilon_1way"] = float(model.epsilon_1way)
    return body


def _column_set(cols: Any, d: int, what: str) -> tuple[int, ...]:
    """The column indices of a marginal or a round: 2..MAX_MARGINAL_COLUMNS distinct columns of
    0..d-1 (ValueError naming ``what`` otherwise)."""
    if not isinstance(cols, list) or not all(_is_int(c) for c in cols):
        raise ValueError(f"{what}: columns must be a list of column indices, got {_show(cols)}")
    if not 2 <= len(cols) <= MAX_MARGINAL_COLUMNS or len(set(cols)) != len(cols) \
            or any(not 0 <= c < d for c in cols):
        raise ValueError(f"{what}: columns must be 2..{MAX_MARGINAL_COLUMNS} distinct columns of "
                         f"0..{d - 1}, got {_show(cols)}")
    return tuple(int(c) for c in cols)


def _adaptive_from_public(doc: dict) -> Any:
    from .aim import AdaptiveModel, Round

    rounds, alpha = doc["gum_rounds"], doc["gum_alpha"]
    if not _is_int(rounds) or not 0 <= rounds <= MAX_GUM_ROUNDS:
        raise ValueError(f"gum_rounds must be an integer in 0..{MAX_GUM_ROUNDS}, got {_show(rounds)}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < float(alpha) <= 1:
        raise ValueError(f"gum_alpha must be a number in (0, 1], got {_show(alpha)}")
    if not _is_epsilon(doc["epsilon_1way"]):
        raise ValueError(f"epsilon_1way must be a finite number > 0, got {_show(doc['epsilon_1way'])}")
    domain = tuple(int(k) for k in doc["domain"])
    d = len(domain)
    if any(k < 1 for k in domain):
        raise ValueError(f"every column of the domain has at least one value, got {_show(list(domain))}")
    oneways = [np.asarray(p, dtype=np.float64) for p in doc["oneways"]]
    if len(oneways) != d or any(p.ndim != 1 or len(p) != k for p, k in zip(oneways, domain)):
        raise ValueError("one one-way distribution per column, of its domain's size")
    marginals, sets = [], set()
    for i, mg in enumerate(doc["marginals"]):
        cols = _column_set(mg["columns"], d, f"marginals[{i}]")
        if frozenset(cols) in sets:
            raise ValueError(f"marginals[{i}]: the column set {sorted(cols)} has more than one marginal")
        sets.add(frozenset(cols))
        p = np.asarray(mg["p"], dtype=np.float64)
        if p.ndim != 1 or p.size != int(np.prod([domain[c] for c in cols])):
            raise ValueError(f"marginals[{i}]: p over columns {list(cols)} is not one flat list of "
                             f"{int(np.prod([domain[c] for c in cols]))} cells")
        marginals.append((cols, p))
    log = []
    for t, r in enumerate(doc["rounds"]):
        cols = _column_set(r["columns"], d, f"rounds[{t}]")
        sel, meas = r["epsilon_select"], r["epsilon_measure"]
        if not (_is_epsilon(sel) and _is_epsilon(meas)):
            raise ValueError(f"rounds[{t}]: epsilon_select and epsilon_measure must be finite numbers "
                             f"> 0, got {_show(sel)} and {_show(meas)}")
        log.append(Round(cols, float(sel), float(meas)))
    return AdaptiveModel(domain=domain, oneways=oneways, marginals=marginals, gum_rounds=int(rounds),
                         gum_alpha=float(alpha), selected=[], rounds=log,
                         epsilon_1way=float(doc["epsilon_1way"]))


def _is_adaptive(model: Any) -> bool:
    return type(model).__name__ == "AdaptiveModel" and hasattr(model, "rounds")


register_kind("adaptive_gum", _adaptive_to_public, _adaptive_from_public, _is_adaptive)

PUBLISHABLE_GENERATORS = frozenset({"privbayes", "mst_pure", "privsyn", "aim_pure"})
