"""The user's signature around difgen's flat model (docs/design.md, "Structured
arguments").

Derivation and printing know one flat float64 input ``x`` and one output array.
A module whose config lists ``inputs`` (several arguments, trees of arrays), whose
function returns a tuple, a dict or ``(value, aux)``, is traced through
:class:`FlatFunction`: it cuts ``x`` into the user's arguments (slices and reshapes
of the traced ``x``, so the generated code indexes ``x``), calls the function and
lays its result end to end (:mod:`difgen.structure`). The :class:`Interface` it
finds (the trees of the inputs, the output and aux) is what the generated module's
public operators take and return around the flat ones
(:mod:`difgen.render.structured`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from difgen import structure
from difgen.config import ModuleSpec
from difgen.core.tracer import Tracer
from difgen.errors import ConfigError, TraceError
from difgen.frontend.namespace import TRACING_NUMPY
from difgen.frontend.tracing import definition
from difgen.structure import Leaf, Node, Tree


@dataclass(frozen=True)
class Interface:
    """The structure of a module's arguments and results."""

    names: tuple[str, ...]
    """The differentiated arguments' parameter names."""
    trees: tuple[Tree, ...]
    """Their trees, NamedTuple and dataclass classes resolved."""
    output: Tree
    aux: Tree | None = None
    """``has_aux = true``: the tree of the aux value."""
    flat: bool = False

    @property
    def input(self) -> Tree:
        """The differentiated arguments as one tree (a tuple of several)."""
        return structure.tuple_of(self.trees)

    @property
    def wrapped(self) -> bool:
        """Whether the public operators wrap the flat ones: the arguments or the
        result are not one bare array each, or there is an aux value."""
        if self.aux is not None:
            return True
        if self.flat:
            return False
        return (
            len(self.trees) > 1
            or self.names != ("x",)
            or not isinstance(self.trees[0], Leaf)
            or not isinstance(self.output, Leaf)
        )


def is_structured(spec: ModuleSpec) -> bool:
    """Whether the config asks for the structured interface itself."""
    return bool(spec.inputs) or spec.has_aux or spec.flat


def resolve_classes(spec: ModuleSpec, load: Callable[[str], Any]) -> ModuleSpec:
    """``spec`` with the NamedTuple and dataclass classes of its input trees
    (``type = "models.py:Params"``) imported by ``load`` and their field order
    taken from the class; a ConfigError at the ``type`` key when the class is not
    one, or its fields are not the tree's."""
    if not any(
        isinstance(i.tree, Node) and i.tree.type_ref for i in spec.inputs
    ):  # nothing to import
        return spec
    inputs = []
    for index, item in enumerate(spec.inputs):
        tree = item.tree
        if isinstance(tree, Node) and tree.type_ref:
            tree = _resolve(spec, index, tree, load(tree.type_ref))
        inputs.append(dataclasses.replace(item, tree=tree))
    return dataclasses.replace(spec, inputs=tuple(inputs))


def _resolve(spec: ModuleSpec, index: int, tree: Node, cls: Any) -> Node:
    def fail(message: str) -> ConfigError:
        return ConfigError(
            spec.config_path,
            spec.line_of(f"inputs.{index}.type"),
            f"inputs[{index}].type {tree.type_ref!r}: {message}",
        )

    if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
        kind, fields = "namedtuple", [str(f) for f in cls._fields]
    elif isinstance(cls, type) and dataclasses.is_dataclass(cls):
        kind, fields = "dataclass", [f.name for f in dataclasses.fields(cls)]
    else:
        raise fail("expected a NamedTuple or a dataclass class")
    if sorted(fields) != sorted(str(k) for k in tree.keys):
        raise fail(
            f"its fields are {fields}, but the tree gives {sorted(map(str, tree.keys))}"
        )
    children = dict(zip(tree.keys, tree.children))
    return Node(
        kind,
        tuple(fields),
        tuple(children[f] for f in fields),
        type_name=cls.__name__,
        type_ref=tree.type_ref,
        cls=cls,
    )


class _Found(NamedTuple):
    output: Tree
    aux: Tree | None


class FlatFunction:
    """``fn`` called on the flat input: ``FlatFunction(fn, ...)(x, *contexts)``.

    It returns the differentiated result laid end to end, and with ``part =
    "both"`` (``has_aux``) the pair of it and the aux value laid end to end. After a call,
    :attr:`found` holds the trees of the result. It unwraps to ``fn``
    (``__wrapped__``), so that tracing binds NumPy in the user's modules, and
    errors name the user's ``def`` (``__func__``).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        spec: ModuleSpec,
        trees: Sequence[Tree],
        part: str = "output",
    ) -> None:
        self.fn = fn
        self.spec = spec
        self.trees = tuple(trees)
        self.part = part
        self.found: _Found | None = None
        self.__wrapped__ = fn
        self.__func__ = fn

    def __call__(self, x: Any, *contexts: Any) -> Any:
        if len(self.trees) == 1:
            args = [structure.unravel(self.trees[0], x)]
        else:
            args = list(structure.unravel(structure.tuple_of(self.trees), x))
        result = self.fn(*args, *contexts)
        where = definition(self.fn)
        aux_tree = None
        if self.spec.has_aux:
            if not isinstance(result, (tuple, list)) or len(result) != 2:
                raise TraceError(
                    f"{where}: the module has has_aux = true, so the function must "
                    f"return a pair (value, aux); it returned {_kind(result)}"
                )
            result, aux = result
            aux_tree = _traced_tree(where, aux, "aux")
        output = _traced_tree(where, result, "the value")
        self.found = _Found(output, aux_tree)
        flat = _ravel_traced(output, result)
        if self.part == "both" and aux_tree is not None:
            return flat, _ravel_traced(aux_tree, aux)
        return flat


def _kind(value: Any) -> str:
    if isinstance(value, (Tracer, np.ndarray)):
        return "one array"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} values"
    return f"a {type(value).__name__}"


def _traced_tree(where: str, value: Any, what: str) -> Tree:
    """The tree of a traced result: leaves are traced arrays, NumPy arrays and
    numbers. A bare leaf's dtype is the pipeline's to check (a ConfigError at
    ``function``); a leaf of a container must be float64."""
    if isinstance(value, (dict, tuple, list)) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        try:
            described = structure.describe(_placeholders(value), what)
        except structure.StructureError as exc:
            raise TraceError(
                f"{where}: the function returns {exc}, which difgen cannot use"
            ) from None
        for (path, _), item in zip(
            structure.leaves(described), structure.flatten(described, value)
        ):
            _traced_leaf(where, item, structure.path_text(what, path), True)
        return described
    return _traced_leaf(where, value, what, False)


def _placeholders(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _placeholders(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):
        return type(value)(*(_placeholders(v) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_placeholders(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(
            value,
            **{
                f.name: _placeholders(getattr(value, f.name))
                for f in dataclasses.fields(value)
            },
        )
    if isinstance(value, Tracer):
        return np.zeros(value.shape)
    return value


def _traced_leaf(where: str, value: Any, what: str, float64: bool) -> Leaf:
    """The leaf of a traced array or a constant; with ``float64`` its dtype must be."""
    if isinstance(value, Tracer):
        dtype, shape = str(value.dtype), tuple(value.shape)
    else:
        try:
            array = np.asarray(value)
        except (TypeError, ValueError):
            array = np.asarray(None)
        if array.dtype.kind not in "biuf":
            raise TraceError(
                f"{where}: the function returns a {type(value).__name__}"
                f"{'' if what == 'the value' else ' as ' + what}, which difgen cannot "
                "use: it needs float64 arrays or numbers (or a tuple, list or dict "
                "of them)"
            )
        dtype = "float64" if array.dtype.kind == "f" else str(array.dtype)
        shape = array.shape
    if float64 and dtype != "float64":
        raise TraceError(
            f"{where}: the function returns {what} of dtype {dtype}; difgen "
            "differentiates float64 values (and returns float64 aux values)"
        )
    return Leaf(shape)


def _ravel_traced(tree: Tree, value: Any) -> Any:
    """The traced value laid end to end: a bare leaf as it is, else one vector."""
    items = structure.flatten(tree, value)
    if isinstance(tree, Leaf):
        return items[0]
    tnp: Any = TRACING_NUMPY
    return tnp.concatenate([tnp.reshape(tnp.asarray(v), (-1,)) for v in items])
