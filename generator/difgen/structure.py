"""Trees of arrays: the structure of a function's arguments and results.

difgen differentiates one flat float64 vector ``x``; a user's function takes
several arguments, dicts of parameter arrays, tuples, NamedTuples and dataclasses,
and returns tuples, dicts or ``(value, aux)``. A :data:`Tree` describes such a
value: its leaves (a shape and a dtype each) and its nodes (dict, tuple, list,
NamedTuple, dataclass), in a fixed order, the one of ``jax.tree_util``: dict keys
sorted, sequences in order, a NamedTuple's or dataclass's fields in declaration
order. The leaves laid end to end, each raveled in C order, are the flat vector,
as ``jax.flatten_util.ravel_pytree`` lays them out.

>>> tree = describe({"W": np.zeros((3, 2)), "b": np.zeros(2)})
>>> [(path_text("params", p), start, stop) for p, _, start, stop in layout(tree)]
[("params['W']", 0, 6), ("params['b']", 6, 8)]
>>> flat = ravel(tree, {"W": np.ones((3, 2)), "b": np.array([2.0, 3.0])})
>>> flat.shape
(8,)
>>> unravel(tree, flat)["b"]
array([2., 3.])

A tree with one leaf is laid out as that leaf itself: its flat form keeps the
leaf's shape (:func:`flat_shape`), so a module of one array input and one array
output is the module difgen has always generated.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from difgen.errors import DifgenError

KINDS = ("dict", "tuple", "list", "namedtuple", "dataclass")
"""The node kinds of a tree."""

LEAF_DTYPES = ("float64",)
"""The dtypes of a differentiated leaf (a field of :class:`Leaf`, so that others
can follow)."""


class StructureError(DifgenError, TypeError):
    """A value that does not have the structure a tree describes (or none at all)."""


@dataclass(frozen=True)
class Leaf:
    """An array of fixed shape: a leaf of a tree."""

    shape: tuple[int, ...]
    dtype: str = "float64"

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Node:
    """A container of trees.

    ``keys`` are the dict keys (sorted), the field names of a NamedTuple or a
    dataclass, or the positions ``0, 1, ...`` of a tuple or a list, in flatten
    order; ``children`` the trees under them. ``type_name`` is the class name of a
    NamedTuple or a dataclass, ``type_ref`` where the config found it
    (``"models.py:Params"``) and ``cls`` the class itself once known (it builds the
    traced argument; it is not part of the tree's identity).
    """

    kind: str
    keys: tuple[str | int, ...]
    children: tuple[Tree, ...]
    type_name: str = ""
    type_ref: str = ""
    cls: type | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown node kind {self.kind!r}; expected {KINDS}")
        if len(self.keys) != len(self.children):
            raise ValueError("a node needs one key per child")


Tree = Leaf | Node
"""A leaf or a node."""

Path = tuple[str | int, ...]
"""The keys from a tree's root down to one of its leaves."""


def leaves(tree: Tree, path: Path = ()) -> Iterator[tuple[Path, Leaf]]:
    """Every leaf with its path, in flatten order."""
    if isinstance(tree, Leaf):
        yield path, tree
        return
    for key, child in zip(tree.keys, tree.children):
        yield from leaves(child, path + (key,))


def size(tree: Tree) -> int:
    """The number of elements of the flat vector."""
    return sum(leaf.size for _, leaf in leaves(tree))


def layout(tree: Tree) -> list[tuple[Path, Leaf, int, int]]:
    """(path, leaf, start, stop) of each leaf's slice of the flat vector."""
    rows, start = [], 0
    for path, leaf in leaves(tree):
        rows.append((path, leaf, start, start + leaf.size))
        start += leaf.size
    return rows


def single_leaf(tree: Tree) -> Leaf | None:
    """The leaf of a tree that is one bare leaf, else None."""
    return tree if isinstance(tree, Leaf) else None


def flat_shape(tree: Tree) -> tuple[int, ...]:
    """The shape of the flat form: a bare leaf keeps its shape, any other tree is
    one vector of all its elements."""
    return tree.shape if isinstance(tree, Leaf) else (size(tree),)


def path_text(name: str, path: Path) -> str:
    """A leaf's path as the user would index it: ``params['W']``, ``state[0]``.

    >>> path_text("params", ("layer", 1))
    "params['layer'][1]"
    """
    return name + "".join(f"[{key!r}]" for key in path)


def children_of(tree: Node, value: Any, where: str) -> list[Any]:
    """The children of ``value`` under the keys of ``tree``, in flatten order;
    StructureError naming ``where`` when ``value`` is not such a container."""
    if tree.kind == "dict":
        if not isinstance(value, Mapping):
            raise StructureError(
                f"{where}: expected a dict with keys {list(tree.keys)}, got "
                f"{type(value).__name__}"
            )
        missing = [k for k in tree.keys if k not in value]
        extra = [k for k in value if k not in tree.keys]
        if missing or extra:
            said = []
            if missing:
                said.append(f"missing {', '.join(map(repr, missing))}")
            if extra:
                said.append(f"unexpected {', '.join(map(repr, extra))}")
            raise StructureError(
                f"{where}: expected a dict with keys {list(tree.keys)}; "
                + "; ".join(said)
            )
        return [value[k] for k in tree.keys]
    if tree.kind in ("tuple", "list"):
        if not isinstance(value, (tuple, list)) or len(value) != len(tree.keys):
            got = (
                f"a {type(value).__name__} of length {len(value)}"
                if isinstance(value, (tuple, list))
                else type(value).__name__
            )
            raise StructureError(
                f"{where}: expected a {tree.kind} of length {len(tree.keys)}, got {got}"
            )
        return list(value)
    fields = [str(k) for k in tree.keys]
    absent = [name for name in fields if not hasattr(value, name)]
    if absent or isinstance(value, (Mapping, np.ndarray, float, int)):
        raise StructureError(
            f"{where}: expected a {tree.type_name or tree.kind} with fields "
            f"{fields}, got {type(value).__name__}"
            + (f" without {', '.join(absent)}" if absent else "")
        )
    return [getattr(value, name) for name in fields]


def build(tree: Node, children: Sequence[Any]) -> Any:
    """The container of ``tree``'s kind holding ``children`` (its class for a
    NamedTuple or a dataclass: known, or a plain tuple / dict when it is not)."""
    if tree.kind == "dict":
        return dict(zip(tree.keys, children))
    if tree.kind == "tuple":
        return tuple(children)
    if tree.kind == "list":
        return list(children)
    if tree.cls is None:
        raise StructureError(
            f"the class {tree.type_name or tree.type_ref} of this {tree.kind} is not "
            "known: name it (type = ...) so difgen can build it"
        )
    return tree.cls(**dict(zip((str(k) for k in tree.keys), children)))


def map_leaves(
    tree: Tree, fn: Callable[[Path, Leaf, int, int], Any], start: int = 0
) -> Any:
    """The tree's structure with ``fn(path, leaf, start, stop)`` at each leaf."""

    def walk(node: Tree, path: Path, offset: int) -> tuple[Any, int]:
        if isinstance(node, Leaf):
            return fn(path, node, offset, offset + node.size), offset + node.size
        out = []
        for key, child in zip(node.keys, node.children):
            value, offset = walk(child, path + (key,), offset)
            out.append(value)
        return build(node, out), offset

    return walk(tree, (), start)[0]


def flatten(tree: Tree, value: Any, name: str = "value") -> list[Any]:
    """The leaves of ``value`` in flatten order, after checking that ``value``
    has the nodes of ``tree`` (leaf shapes are checked by :func:`ravel`)."""

    def walk(node: Tree, item: Any, path: Path) -> Iterator[Any]:
        if isinstance(node, Leaf):
            yield item
            return
        for key, child, sub in zip(
            node.keys, node.children, children_of(node, item, path_text(name, path))
        ):
            yield from walk(child, sub, path + (key,))

    return list(walk(tree, value, ()))


def ravel(tree: Tree, value: Any, name: str = "value") -> np.ndarray:
    """``value`` as the flat float64 vector (a bare leaf: the array itself)."""
    arrays = []
    for (path, leaf), item in zip(leaves(tree), flatten(tree, value, name)):
        array = _leaf_array(item, path_text(name, path))
        if array.shape != leaf.shape:
            raise StructureError(
                f"{path_text(name, path)}: expected shape {leaf.shape}, got "
                f"shape {array.shape}"
            )
        arrays.append(array)
    if isinstance(tree, Leaf):
        return arrays[0]
    if not arrays:
        return np.zeros(0)
    return np.concatenate([a.ravel() for a in arrays])


def unravel(tree: Tree, flat: Any) -> Any:
    """The tree of arrays that :func:`ravel` made ``flat`` from, as views of it.

    ``flat`` may be a NumPy array or a traced one: slicing and reshaping are all
    it takes, so in a traced function the generated code indexes ``x``.
    """
    if isinstance(tree, Leaf):
        return flat
    return map_leaves(tree, lambda _, leaf, a, b: flat[a:b].reshape(leaf.shape))


def _leaf_array(value: Any, where: str) -> np.ndarray:
    if isinstance(value, (bool, np.bool_)):
        raise StructureError(f"{where}: expected a float64 array or number, got bool")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        array = np.asarray(None)
    if array.dtype.kind not in "iuf" or (
        array.dtype.kind == "f" and not np.can_cast(array.dtype, np.float64)
    ):
        raise StructureError(
            f"{where}: expected a float64 array or number, got "
            f"{type(value).__name__}"
            + (f" of dtype {array.dtype}" if isinstance(value, np.ndarray) else "")
        )
    return array.astype(np.float64, copy=False)


def describe(value: Any, name: str = "value") -> Tree:
    """The tree of an example value: float64 (or real-number) arrays, Python
    floats and ints are leaves of their shape; dicts (keys sorted; string keys),
    tuples, lists, NamedTuples and dataclass instances are nodes.

    A StructureError names the part of ``value`` difgen cannot differentiate (a
    string, a bool, a complex number, None, an empty container).

    >>> describe((1.0, np.zeros(3)))
    Node(kind='tuple', keys=(0, 1), children=(Leaf(shape=(), dtype='float64'), \
Leaf(shape=(3,), dtype='float64')), type_name='', type_ref='')
    """
    return _describe(value, name, ())


def is_container(value: Any) -> bool:
    """Whether ``value`` is a container that :func:`describe` walks (a dict or
    other mapping, tuple, list, NamedTuple or dataclass instance), not a leaf."""
    return isinstance(value, (Mapping, tuple, list)) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    )


def _describe(value: Any, name: str, path: Path) -> Tree:
    where = path_text(name, path)
    if not is_container(value):
        return Leaf(tuple(_leaf_array(value, where).shape))
    cls: type | None
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):
        named: Any = type(value)
        keys: tuple[str | int, ...] = tuple(named._fields)
        items = list(value)
        kind, cls = "namedtuple", type(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        keys = tuple(f.name for f in dataclasses.fields(value))
        items = [getattr(value, str(k)) for k in keys]
        kind, cls = "dataclass", type(value)
    elif isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise StructureError(f"{where}: dict keys must be strings")
        keys = tuple(sorted(value))
        items = [value[k] for k in keys]
        kind, cls = "dict", None
    elif isinstance(value, (tuple, list)):
        keys = tuple(range(len(value)))
        items = list(value)
        kind, cls = ("tuple" if isinstance(value, tuple) else "list"), None
    if not items:
        raise StructureError(f"{where}: an empty {kind} has nothing to differentiate")
    children = tuple(
        _describe(item, name, path + (key,)) for key, item in zip(keys, items)
    )
    return Node(
        kind,
        keys,
        children,
        type_name=cls.__name__ if cls is not None else "",
        cls=cls,
    )


def tuple_of(trees: Sequence[Tree]) -> Tree:
    """Several arguments as one tree: a tuple of them (JAX's ``argnums`` tuple);
    one argument is its own tree."""
    if len(trees) == 1:
        return trees[0]
    return Node("tuple", tuple(range(len(trees))), tuple(trees))


def literal(tree: Tree, class_names: Mapping[str, str] | None = None) -> str:
    """The tree as the Python literal a generated module walks at run time:
    ``("leaf", shape, start, stop)``, ``("dict", keys, children)``,
    ``("tuple", ...)``, ``("list", ...)``, ``("class", fields, children,
    ClassName)`` (the module defines the class).

    >>> literal(describe({"b": np.zeros(2), "a": 1.0}))
    "('dict', ('a', 'b'), (('leaf', (), 0, 1), ('leaf', (2,), 1, 3)))"
    """
    names = class_names or {}

    def walk(node: Tree, offset: int) -> tuple[str, int]:
        if isinstance(node, Leaf):
            stop = offset + node.size
            return f"('leaf', {node.shape!r}, {offset}, {stop})", stop
        parts = []
        for child in node.children:
            text, offset = walk(child, offset)
            parts.append(text)
        inner = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        keys = repr(tuple(node.keys))
        if node.kind in ("namedtuple", "dataclass"):
            cls = names.get(node.type_name, node.type_name)
            return f"('class', {keys}, {inner}, {cls})", offset
        return f"({node.kind!r}, {keys}, {inner})", offset

    return walk(tree, 0)[0]


def classes(tree: Tree) -> list[Node]:
    """The NamedTuple and dataclass nodes of a tree, each class name once."""
    found: dict[str, Node] = {}

    def walk(node: Tree) -> None:
        if isinstance(node, Node):
            for child in node.children:
                walk(child)
            if node.kind in ("namedtuple", "dataclass"):
                found.setdefault(node.type_name, node)

    walk(tree)
    return list(found.values())
