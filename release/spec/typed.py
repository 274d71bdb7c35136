"""The typed spec: immutable objects that mirror ``schemas/spec.schema.json``.

:class:`SpecModel` is built once from a validated spec document (``Spec.model``, made by
:func:`dpbundle.release.spec.load.validate_spec`); every stage after the spec package reads these
objects, never the document. The JSON Schema stays the user-facing contract;
``tests/test_spec_model.py`` checks that every property of the schema is a field here and that
every spec that validates builds a model which gives its document back.

Conventions, the same for every class:

* one frozen dataclass per JSON object of the schema; a field is named as its key;
* a field is ``None`` when its key is absent (no schema property may be ``null``), so the
  defaults stay where they were decided (the properties below, and the stages);
* values are kept as written (an epsilon ``0.1`` stays the float 0.1, an integer stays an
  integer; the budget's exact arithmetic reads the declared decimals); arrays become tuples and
  objects of free keys (``map``, ``grid``, ``group_bins``, ...) a :class:`FrozenMap`, so nothing
  can be changed after validation;
* :meth:`Node.to_document` gives the JSON object back, its keys in the order they were written
  (``key_order``), so ``SpecModel.from_document(doc).to_document() == doc`` key for key.

Everything here is picklable (the sweep ships the spec to its worker processes).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from fractions import Fraction
from functools import cached_property
from typing import Any, Callable, NamedTuple

from dpbundle.mechanisms import exact
from dpbundle.mechanisms.records import DEFAULT_COUNT_EPSILON, DEFAULT_POLICY

from dpbundle.release.spec.columns import category_text, removed_by

__all__ = ["FrozenMap", "freeze", "thaw", "SpecModelError", "Node", "Period", "ReleaseMeta",
           "InputColumn", "Inputs", "Condition", "Constraint", "Source", "Alternative",
           "ReleasedColumn", "Generator", "Projection", "GroupCut", "GroupBins",
           "DerivedThreshold", "Criterion", "Faithfulness", "FacePrivacy", "Records",
           "PreSelection", "Selection", "Privacy", "SpecModel", "DEFAULT_LABEL_STYLE",
           "as_constraint"]

#: The label style of a spec that names none, by spec format version (``dpbundle_spec``): version 1
#: specs keep the labels of the 2024 births release (published bundles, and their audits, depend
#: on them); version 2 specs, the current format, get the statistical-office style.
DEFAULT_LABEL_STYLE = {1: "births-2024", 2: "office"}


class SpecModelError(ValueError):
    """A document that does not have the shape of the schema (validation rules this out)."""


# --------------------------------------------------------------------------- frozen JSON values


class FrozenMap(Mapping):
    """An immutable, hashable, picklable mapping that keeps its insertion order."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping | Any = ()) -> None:
        object.__setattr__(self, "_items", dict(items))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FrozenMap is immutable")

    def __getitem__(self, key: Any) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({self._items!r})"

    def __reduce__(self):
        return FrozenMap, (tuple(self._items.items()),)


def freeze(value: Any) -> Any:
    """A JSON value made immutable: objects -> :class:`FrozenMap`, arrays -> tuples."""
    if isinstance(value, Mapping):
        return FrozenMap((k, freeze(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain JSON value of a frozen one (:func:`freeze` reversed: dicts and lists)."""
    if isinstance(value, Node):
        return value.to_document()
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


# --------------------------------------------------------------------------- the node machinery


def _one(cls: type) -> dict:
    return {"node": cls, "shape": "one", "load": cls.from_document, "dump": thaw}


def _many(cls: type) -> dict:
    return {"node": cls, "shape": "many", "dump": thaw,
            "load": lambda v: tuple(cls.from_document(x) for x in _array(v, cls))}


def _map_of(cls: type) -> dict:
    return {"node": cls, "shape": "map", "dump": thaw,
            "load": lambda v: FrozenMap((k, cls.from_document(x)) for k, x in _object(v, cls).items())}


def _array(value: Any, cls: type) -> list:
    if not isinstance(value, (list, tuple)):
        raise SpecModelError(f"{cls.__name__}: expected an array, got {type(value).__name__}")
    return list(value)


def _object(value: Any, cls: type) -> Mapping:
    if not isinstance(value, Mapping):
        raise SpecModelError(f"{cls.__name__}: expected an object, got {type(value).__name__}")
    return value


def _req(**meta: Any) -> Any:
    """A required key."""
    return field(metadata=meta)


def _opt(**meta: Any) -> Any:
    """An optional key (None when absent)."""
    return field(default=None, metadata=meta)


@dataclass(frozen=True)
class Node:
    """Base of the typed spec objects: a frozen dataclass whose fields are the keys of one JSON
    object of the spec. ``key_order``: the keys as written (for :meth:`to_document`)."""

    key_order: tuple[str, ...] = field(default=(), compare=False, repr=False, kw_only=True)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The JSON keys of this object (its fields but ``key_order``)."""
        return tuple(f.name for f in fields(cls) if f.name != "key_order")

    @classmethod
    def from_document(cls, doc: Mapping) -> "Node":
        """Build from the JSON object ``doc`` (validated against the schema)."""
        doc = _object(doc, cls)
        own = {f.name: f for f in fields(cls) if f.name != "key_order"}
        unknown = [k for k in doc if k not in own]
        if unknown:
            raise SpecModelError(f"{cls.__name__}: unknown field(s) {', '.join(map(repr, unknown))}")
        load: Callable[[Any], Any]
        kwargs = {}
        for key, value in doc.items():
            load = own[key].metadata.get("load", freeze)
            kwargs[key] = load(value)
        try:
            return cls(**kwargs, key_order=tuple(doc))
        except TypeError as exc:  # a required key is missing
            raise SpecModelError(f"{cls.__name__}: {exc}") from None

    def to_document(self) -> dict:
        """The JSON object (plain dicts and lists), keys in the order written; an object made
        without a document gives its present keys in field order."""
        order = self.key_order or tuple(k for k in self.keys() if getattr(self, k) is not None)
        specs = self.__dataclass_fields__
        return {k: specs[k].metadata.get("dump", thaw)(getattr(self, k)) for k in order}


# --------------------------------------------------------------------------- release metadata


@dataclass(frozen=True)
class Period(Node):
    start: str = _req()
    end: str = _req()


@dataclass(frozen=True)
class ReleaseMeta(Node):
    """``release``: the datasheet's metadata."""

    title: str = _req()
    publisher: str = _req()
    contact: str = _req()
    licence: str = _req()
    description: str = _req()
    unit_of_privacy: str = _req()
    period: Period | None = _opt(**_one(Period))
    feedback: str | None = _opt()
    version: str | None = _opt()
    source_kind: str | None = _opt()
    thresholds_set_by: str | None = _opt()
    motivation: str | None = _opt()
    mandate: str | None = _opt()
    maintenance: str | None = _opt()
    citation: str | None = _opt()
    simulated: bool | None = _opt()

    @property
    def is_simulated(self) -> bool:
        """``simulated``: the records come from a simulated registry (default False)."""
        return self.simulated is True


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class Special(Node):
    """``input.columns[].special[]``: a cell text of an integer or float column that is a value of
    its own (not a number, not missing), released with its own label after the bins."""

    value: str | int = _req()
    label: str = _req()
    kind: str = _req()

    @property
    def text(self) -> str:
        """The cell text (an integer as its decimal text)."""
        return str(self.value)


@dataclass(frozen=True)
class InputColumn(Node):
    """One column of the input CSV (``input.columns[]``)."""

    name: str = _req()
    type: str = _req()
    min: int | float | str | None = _opt()
    max: int | float | str | None = _opt()
    header: str | None = _opt()
    categories: tuple[str | int, ...] | None = _opt()
    missing: tuple[str | int, ...] | None = _opt()
    special: tuple[Special, ...] | None = _opt(**_many(Special))
    description: str | None = _opt()

    @property
    def specials(self) -> tuple[Special, ...]:
        """The column's special values (none: an empty tuple)."""
        return tuple(self.special or ())

    def special_code(self, i: int) -> float:
        """The typed value of special value ``i``: max + 1 + i (above every number allowed)."""
        return float(self.max) + 1.0 + i

    @property
    def csv_header(self) -> str:
        """The column's header text in the CSV file (its ``header``, default its ``name``)."""
        return str(self.header if self.header is not None else self.name)

    @cached_property
    def category_texts(self) -> tuple[str, ...]:
        """The declared categories as texts (integer codes as their decimal text)."""
        return tuple(category_text(c) or str(c) for c in self.categories or ())


@dataclass(frozen=True)
class Inputs(Node):
    """``input``: the columns of the CSV and the shared missing-value markers."""

    columns: tuple[InputColumn, ...] = _req(**_many(InputColumn))
    missing_values: tuple[str, ...] | None = _opt()

    @cached_property
    def by_name(self) -> FrozenMap:
        """name -> :class:`InputColumn` (a name declared twice: the last one)."""
        return FrozenMap((c.name, c) for c in self.columns)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.by_name)

    @cached_property
    def special_limits(self) -> FrozenMap:
        """name -> ``max`` of every number column with special values (typed above it)."""
        return FrozenMap((c.name, float(c.max)) for c in self.columns if c.specials)

    def column(self, name: str) -> InputColumn:
        return self.by_name[name]

    def missing_markers(self, column: InputColumn) -> list[str]:
        """Every cell text that means 'missing' in ``column``: ``missing_values`` + its own ``missing``."""
        own = [category_text(m) or str(m) for m in column.missing or ()]
        return list(dict.fromkeys(list(self.missing_values or ()) + own))


# --------------------------------------------------------------------------- constraints


class Condition(NamedTuple):
    """One condition ``[column, op, value]`` of a constraint (a list value: a tuple)."""

    column: str
    op: str
    value: Any


def _conditions(value: Any) -> tuple[Condition, ...]:
    out = []
    for item in _array(value, Condition):
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            raise SpecModelError(f"Condition: expected [column, op, value], got {item!r}")
        out.append(Condition(item[0], item[1], freeze(item[2])))
    return tuple(out)


@dataclass(frozen=True)
class Constraint(Node):
    """A raw or synthetic constraint: ``{name, when: [[column, op, value], ...]}`` or
    ``{name, any_missing: true}``."""

    name: str = _req()
    any_missing: bool | None = _opt()
    when: tuple[Condition, ...] | None = _opt(load=_conditions)

    @property
    def conditions(self) -> tuple[Condition, ...]:
        return self.when or ()


def as_constraint(constraint: "Constraint | Mapping") -> Constraint:
    """A :class:`Constraint`, from itself or from its document form ``{name, when | any_missing}``."""
    return constraint if isinstance(constraint, Constraint) else Constraint.from_document(constraint)


# --------------------------------------------------------------------------- released columns


@dataclass(frozen=True)
class Source(Node):
    """``columns[].source``: the input column and how the released value is derived from it."""

    column: str = _req()
    derive: str | None = _opt()
    reference: str | None = _opt()
    scale: int | float | None = _opt()
    offset: int | float | None = _opt()


@dataclass(frozen=True)
class DpEdges(Node):
    """``dp_edges`` of an alternative: ``bins`` bins whose ``bins - 1`` inner edges the release
    draws under DP (quantiles, :mod:`dpbundle.mechanisms.edges`) among the grid ``clip[0] + i *
    step`` inside the clip range, at a total of ``epsilon``."""

    bins: int = _req()
    epsilon: int | float = _req()
    step: int | float | None = _opt()


@dataclass(frozen=True)
class Alternative(Node):
    """One alternative of a released column: binned (``edges``, ``unit_bins`` or ``dp_edges``,
    ``clip``) or categorical (``categories``, ``map``, ``default``); ``labels`` and ``values``
    override. A ``dp_edges`` alternative has ``edges`` only once the release drew them (the
    resolved spec, :meth:`dpbundle.release.spec.model.Spec.with_edges`, and spec.json)."""

    id: str = _req()
    clip: tuple[int | float, int | float] | None = _opt()
    edges: tuple[int | float, ...] | None = _opt()
    dp_edges: DpEdges | None = _opt(**_one(DpEdges))
    unit_bins: tuple[int, int] | None = _opt()
    categories: tuple[str, ...] | None = _opt()
    map: FrozenMap | None = _opt()
    default: str | None = _opt()
    labels: tuple[str, ...] | None = _opt()
    values: tuple[int | float, ...] | None = _opt()
    ordered: bool | None = _opt()

    @property
    def categorical(self) -> bool:
        return self.categories is not None

    @property
    def categories_ordered(self) -> bool:
        """Are the released values in their natural order? Bins always are; categories when the
        alternative says ``ordered: true`` (what datapackage.json's ``categoriesOrdered`` states;
        no computation changes: criteria and constraints treat categories as categories)."""
        return not self.categorical or self.ordered is True

    @property
    def undrawn(self) -> bool:
        """A ``dp_edges`` alternative whose edges are not drawn yet (no bins to read)."""
        return self.dp_edges is not None and self.edges is None

    def bins(self) -> list[tuple[Any, Any]] | None:
        """The [lower, upper) bins of a binned alternative (None for categories and for
        :attr:`undrawn` ``dp_edges``)."""
        if self.edges is not None:
            e = self.edges
            return list(zip(e[:-1], e[1:]))
        if self.unit_bins is not None:
            a, b = self.unit_bins
            return [(v, v + 1) for v in range(a, b + 1)]
        return None


@dataclass(frozen=True)
class ReleasedColumn(Node):
    """``columns[]``: one released column and its alternative transformations."""

    name: str = _req()
    source: Source = _req(**_one(Source))
    alternatives: tuple[Alternative, ...] = _req(**_many(Alternative))
    description: str | None = _opt()
    unit: str | None = _opt()
    label_style: str | None = _opt()

    @property
    def alternative_ids(self) -> list[str]:
        return [a.id for a in self.alternatives]

    def alternative(self, alt_id: str) -> Alternative | None:
        """The alternative with id ``alt_id`` (None when there is none)."""
        return next((a for a in self.alternatives if a.id == alt_id), None)


# --------------------------------------------------------------------------- generators, projection, group bins


@dataclass(frozen=True)
class Generator(Node):
    """``generators[]``: a generator type and its hyperparameter grid (name -> values)."""

    type: str = _req()
    flavour: str | None = _opt()
    grid: FrozenMap | None = _opt()

    def grid_lists(self) -> dict[str, list]:
        """The grid as plain JSON (hyperparameter -> list of values; {} without a grid)."""
        return thaw(self.grid) if self.grid is not None else {}


@dataclass(frozen=True)
class Projection(Node):
    min_count: tuple[int, ...] = _req()


@dataclass(frozen=True)
class GroupCut(Node):
    """``{edges, labels}``: group edges on a column's released numbers, one label per group."""

    edges: tuple[int | float, ...] = _req()
    labels: tuple[str, ...] = _req()


@dataclass(frozen=True)
class GroupBins(Node):
    """``group_bins.<column>``: one cut for every alternative (``edges``, ``labels``), or
    ``per_alternative`` cuts (an alternative not listed groups by its own bins)."""

    edges: tuple[int | float, ...] | None = _opt()
    labels: tuple[str, ...] | None = _opt()
    per_alternative: FrozenMap | None = _opt(**_map_of(GroupCut))


# --------------------------------------------------------------------------- acceptance


@dataclass(frozen=True)
class DerivedThreshold(Node):
    """``threshold: {derive: laplace_false_positive, stakeholder, false_positive, assumed_min_count}``."""

    derive: str = _req()
    stakeholder: int | float = _req()
    false_positive: int | float = _req()
    assumed_min_count: int | float = _req()


def _threshold(value: Any) -> Any:
    return DerivedThreshold.from_document(value) if isinstance(value, Mapping) else value


@dataclass(frozen=True)
class Criterion(Node):
    """``acceptance[]``: one acceptance criterion. ``id``, ``type``, ``epsilon``, ``threshold``
    and ``description`` are common to every type; the others are the types' own parameters
    (docs/spec.md, ``dpbundle spec explain --type TYPE``). :meth:`to_document` is the entry the
    criteria of :mod:`dpbundle.mechanisms.criteria` take (``make_criterion``)."""

    id: str = _req()
    type: str = _req()
    epsilon: int | float = _req()
    threshold: int | float | DerivedThreshold = _req(node=DerivedThreshold, shape="one",
                                                     load=_threshold, dump=thaw)
    description: str | None = _opt()
    max_k: int | None = _opt()
    clip: int | float | None = _opt()
    smoothing: int | float | None = _opt()
    target: str | None = _opt()
    by: tuple[str | None | tuple[str, ...], ...] | None = _opt()
    columns: tuple[str, ...] | None = _opt()
    bounds: tuple[int | float, int | float] | None = _opt()
    features: tuple[str, ...] | None = _opt()
    fit: str | None = _opt()
    include_intercept: bool | None = _opt()
    reference: str | None = _opt()
    positive: str | int | tuple[str | int, ...] | None = _opt()
    report: str | None = _opt()
    quantiles: tuple[int | float, ...] | None = _opt()
    margin_share: int | float | None = _opt()
    margin_plus: int | None = _opt()
    special: str | None = _opt()


@dataclass(frozen=True)
class Faithfulness(Node):
    """``faithfulness``: the cost rules of the faithfulness criterion's matching."""

    exact: tuple[str, ...] = _req()
    adjacent: tuple[str, ...] = _req()
    max_adjacent: int = _req()
    nominal: tuple[str, ...] | None = _opt()
    max_nominal: int | None = _opt()
    max_differing: int | None = _opt()
    exact_if_contains: FrozenMap | None = _opt()


@dataclass(frozen=True)
class FacePrivacy(Node):
    quasi_identifiers: tuple[tuple[str, ...], ...] | None = _opt()


# --------------------------------------------------------------------------- privacy


@dataclass(frozen=True)
class Records(Node):
    """``privacy.records``: how the number of records is released."""

    policy: str | None = _opt()
    epsilon: int | float | None = _opt()


@dataclass(frozen=True)
class PreSelection(Node):
    """``privacy.pre_selection[]``: a measurement made once before the selection loop."""

    purpose: str = _req()
    epsilon: int | float = _req()


@dataclass(frozen=True)
class Selection(Node):
    stop_probability: int | float | None = _opt()
    retries: str | None = _opt()


@dataclass(frozen=True)
class Privacy(Node):
    """``privacy``: the epsilons, the records policy and the selection's stop probability."""

    epsilon_cap: int | float = _req()
    epsilon_generation: int | float | None = _opt()
    definition: str | None = _opt()
    rho_generation: int | float | None = _opt()
    delta: int | float | None = _opt()
    records: Records | None = _opt(**_one(Records))
    pre_selection: tuple[PreSelection, ...] | None = _opt(**_many(PreSelection))
    selection: Selection | None = _opt(**_one(Selection))
    private_data_sha256: tuple[str, ...] | None = _opt()
    acknowledge_weak_guarantee: bool | None = _opt()

    @property
    def records_policy(self) -> str:
        """``dp_count`` (default) or ``declared_public``."""
        policy = self.records.policy if self.records is not None else None
        return policy if policy is not None else DEFAULT_POLICY

    @property
    def epsilon_count_exact(self) -> Fraction:
        """The DP count's epsilon as declared (0 under ``declared_public``)."""
        if self.records_policy == "declared_public":
            return Fraction(0)
        eps = self.records.epsilon if self.records is not None else None
        return exact.dec(eps if eps is not None else DEFAULT_COUNT_EPSILON)

    @property
    def pre_selection_items(self) -> tuple[PreSelection, ...]:
        return self.pre_selection or ()

    @property
    def stop_probability(self) -> float:
        gamma = self.selection.stop_probability if self.selection is not None else None
        return float(gamma if gamma is not None else 0.0)

    @property
    def private_fingerprints(self) -> tuple[str, ...]:
        return self.private_data_sha256 or ()


# --------------------------------------------------------------------------- the whole spec


@dataclass(frozen=True)
class SpecModel(Node):
    """A validated release spec, typed (see the module doc)."""

    dpbundle_spec: int = _req()
    release: ReleaseMeta = _req(**_one(ReleaseMeta))
    input: Inputs = _req(**_one(Inputs))
    columns: tuple[ReleasedColumn, ...] = _req(**_many(ReleasedColumn))
    generators: tuple[Generator, ...] = _req(**_many(Generator))
    projection: Projection = _req(**_one(Projection))
    acceptance: tuple[Criterion, ...] = _req(**_many(Criterion))
    privacy: Privacy = _req(**_one(Privacy))
    label_style: str | None = _opt()
    raw_constraints: tuple[Constraint, ...] | None = _opt(**_many(Constraint))
    synthetic_constraints: tuple[Constraint, ...] | None = _opt(**_many(Constraint))
    group_bins: FrozenMap | None = _opt(**_map_of(GroupBins))
    faithfulness: Faithfulness | None = _opt(**_one(Faithfulness))
    face_privacy: FacePrivacy | None = _opt(**_one(FacePrivacy))
    publish: str | tuple[str, ...] | None = _opt()

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> ReleasedColumn:
        """The released column ``name`` (KeyError when there is none)."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def label_style_of(self, column: ReleasedColumn) -> str:
        """The label style of ``column``'s open bins: its own ``label_style``, else the spec's,
        else the default of the spec's format version."""
        return column.label_style or self.label_style or DEFAULT_LABEL_STYLE[self.dpbundle_spec]

    @property
    def publish_items(self) -> tuple[str, ...]:
        value = self.publish or ()
        return (value,) if isinstance(value, str) else tuple(value)

    @property
    def all_raw_constraints(self) -> tuple[Constraint, ...]:
        """The raw constraints (() when none)."""
        return self.raw_constraints or ()

    @property
    def all_synthetic_constraints(self) -> tuple[Constraint, ...]:
        """The synthetic constraints (() when none)."""
        return self.synthetic_constraints or ()

    @cached_property
    def removed_categories(self) -> FrozenMap:
        """Input column name -> the category texts a raw constraint always removes
        (:func:`dpbundle.release.spec.columns.removed_categories`, the one rule)."""
        declared = {c.name: c.category_texts for c in self.input.columns if c.type == "category"}
        return FrozenMap(removed_by(declared, (c.when for c in self.all_raw_constraints)))

    def criterion(self, criterion_id: str) -> Criterion:
        for c in self.acceptance:
            if c.id == criterion_id:
                return c
        raise KeyError(criterion_id)

    @property
    def epsilon_evaluation_exact(self) -> Fraction:
        """The sum of the criteria's epsilons, as declared."""
        return exact.total(c.epsilon for c in self.acceptance)
