"""The IR: a typed SSA graph with static shapes, evaluable, printable, transformable.

>>> from difgen.frontend import trace
>>> g = trace(lambda x: (x * 2.0).sum(), [((3,), "float64")])
>>> print(g)
{ lambda a:f64[3] .
  let b:f64[3] = mul a 2.0
      c:f64[] = reduce_sum[axes=(0,)] b
  in (c) }
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from difgen.core.primitive import Primitive

Shape = tuple[int, ...]

_DTYPE_SHORT = {"float64": "f64", "bool": "bool", "int64": "i64"}


@dataclass(frozen=True, eq=False)
class Var:
    """A value computed by the graph; compared by identity."""

    shape: Shape
    dtype: str = "float64"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


_DTYPE_NAMES: dict[np.dtype[Any], str] = {}  # str(dtype) is slow in NumPy


@dataclass(frozen=True, eq=False)
class Lit:
    """A constant array baked into the graph (read-only copy)."""

    value: np.ndarray
    _key: bytes = field(repr=False, default=b"")
    # str(dtype) is slow in NumPy and the identities ask for it on every operand
    _dtype: str = field(repr=False, default="")

    def __post_init__(self) -> None:
        value = np.array(self.value)
        if value.dtype.kind == "f" or (value.dtype.kind == "i" and value.ndim == 0):
            value = value.astype(np.float64)
        _freeze_into(self, value)
        name = _DTYPE_NAMES.get(value.dtype)
        if name is None:
            name = _DTYPE_NAMES.setdefault(value.dtype, str(value.dtype))
        object.__setattr__(self, "_dtype", name)

    @property
    def shape(self) -> Shape:
        return tuple(self.value.shape)

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def ndim(self) -> int:
        return self.value.ndim

    @property
    def size(self) -> int:
        return int(self.value.size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lit) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)


Atom = Var | Lit


def _freeze_into(holder: Any, value: np.ndarray) -> None:
    """Store a read-only ``value`` and the bytes that hash and compare it."""
    value.setflags(write=False)
    object.__setattr__(holder, "value", value)
    key = value.dtype.str.encode() + repr(value.shape).encode() + value.tobytes()
    object.__setattr__(holder, "_key", key)


class Params(tuple):
    """Static parameters of an equation: a sorted, hashable tuple of (name, value)."""

    @classmethod
    def of(cls, mapping: dict[str, Any]) -> Params:
        if not mapping and cls is Params:  # most equations: one shared empty tuple
            return NO_PARAMS
        return cls(sorted((k, _freeze(v)) for k, v in mapping.items()))

    def as_dict(self) -> dict[str, Any]:
        return dict(self)


NO_PARAMS = Params()


@dataclass(frozen=True)
class FrozenArray:
    """A hashable constant array used in params (fancy indices, masks)."""

    value: np.ndarray
    _key: bytes = field(repr=False, default=b"")

    def __post_init__(self) -> None:
        value = np.array(self.value)
        _freeze_into(self, value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FrozenArray) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return np.array2string(self.value, separator=", ").replace("\n", "")


def _freeze(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return FrozenArray(value)
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, slice):
        return ("slice", value.start, value.stop, value.step)
    return value


@dataclass(frozen=True, eq=False)
class Eqn:
    """``out = primitive(*inputs, **params)``.

    ``relaxed`` marks an equation made by a derivative rule: only there may the
    identities that hold for finite values alone (``0 * x = 0``, ``x / x = 1``)
    apply. The user's own computation is strict, so NaN and inf go through it as
    NumPy would send them (see :mod:`difgen.core.simplify`).
    """

    primitive: Primitive
    inputs: tuple[Atom, ...]
    params: Params
    out: Var
    relaxed: bool = False


@dataclass(frozen=True, eq=False)
class Graph:
    """A function from ``inputs`` to ``outputs`` as a list of equations in SSA form."""

    inputs: tuple[Var, ...]
    outputs: tuple[Atom, ...]
    eqns: tuple[Eqn, ...]

    def __str__(self) -> str:
        return format_graph(self)

    def evaluate(self, *args: Any) -> tuple[np.ndarray, ...]:
        """Run the graph with NumPy (the reference interpreter)."""
        return evaluate(self, args)


def evaluate(graph: Graph, args: Sequence[Any]) -> tuple[np.ndarray, ...]:
    """Evaluate ``graph`` on NumPy arrays with each primitive's ``impl``."""
    if len(args) != len(graph.inputs):
        raise ValueError(f"graph takes {len(graph.inputs)} inputs, got {len(args)}")
    env: dict[Var, Any] = {}
    for var, arg in zip(graph.inputs, args):
        env[var] = np.asarray(arg, dtype=var.dtype).reshape(var.shape)

    def read(atom: Atom) -> Any:
        return atom.value if isinstance(atom, Lit) else env[atom]

    for eqn in graph.eqns:
        env[eqn.out] = eqn.primitive.impl(
            *map(read, eqn.inputs), **eqn.params.as_dict()
        )
    return tuple(np.asarray(read(out)) for out in graph.outputs)


def structure(graph: Graph) -> tuple[Any, ...]:
    """A structural key: equal for graphs that differ only in Var identities.

    Params compare by value, so a sub-graph param (:class:`SubGraph`) compares by its
    own structure: equal branches make equal equations, which CSE shares.
    """
    index: dict[Var, int] = {v: i for i, v in enumerate(graph.inputs)}

    def key(atom: Atom) -> Any:
        return ("lit", atom) if isinstance(atom, Lit) else index[atom]

    types = tuple((v.shape, v.dtype) for v in graph.inputs)
    eqns = []
    for eqn in graph.eqns:
        eqns.append((eqn.primitive.name, tuple(map(key, eqn.inputs)), eqn.params))
        index[eqn.out] = len(index)
    return types, tuple(eqns), tuple(map(key, graph.outputs))


@dataclass(frozen=True, eq=False)
class SubGraph:
    """A graph carried as an equation's param (a branch of ``cond``).

    Compared and hashed by structure, so CSE, the purity check (two traces compared)
    and the fingerprint of :func:`difgen.passes.optimize` see equal branches as equal.
    ``where`` (the user's ``file:line``) is for messages only: it takes no part in
    comparison, so moving code does not change a graph's identity.
    """

    graph: Graph
    where: str = ""

    @property
    def key(self) -> tuple[Any, ...]:
        cached = self.__dict__.get("_key")
        if cached is None:
            cached = structure(self.graph)
            object.__setattr__(self, "_key", cached)
        return cached

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubGraph) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        body = format_graph(self.graph).replace("\n", "\n    ")
        return body


def dce(graph: Graph) -> Graph:
    """Drop equations whose outputs nothing uses (one backward sweep)."""
    live: set[Var] = {v for v in graph.outputs if isinstance(v, Var)}
    kept: list[Eqn] = []
    for eqn in reversed(graph.eqns):
        if eqn.out in live:
            kept.append(eqn)
            live.update(a for a in eqn.inputs if isinstance(a, Var))
    return Graph(graph.inputs, graph.outputs, tuple(reversed(kept)))


def _names() -> Iterator[str]:
    for length in itertools.count(1):
        for chars in itertools.product("abcdefghijklmnopqrstuvwxyz", repeat=length):
            yield "".join(chars)


def _type(atom: Atom) -> str:
    dims = ",".join(map(str, atom.shape))
    return f"{_DTYPE_SHORT.get(atom.dtype, atom.dtype)}[{dims}]"


def _format_lit(lit: Lit) -> str:
    if lit.value.ndim == 0:
        return repr(lit.value.item())
    if lit.value.size <= 6:
        return np.array2string(lit.value, separator=",").replace("\n", "")
    return f"const:{_type(lit)}"


def _format_param(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 4 and value[0] == "slice":
        parts = ["" if v is None else str(v) for v in value[1:]]
        return ":".join(parts[:2]) + (f":{parts[2]}" if value[3] is not None else "")
    if isinstance(value, tuple):
        inner = ", ".join(_format_param(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def format_graph(graph: Graph) -> str:
    """Print a graph like a jaxpr: one equation per line, variables named a, b, c..."""
    names: dict[Var, str] = {}
    fresh = _names()

    def name(atom: Atom) -> str:
        if isinstance(atom, Lit):
            return _format_lit(atom)
        if atom not in names:
            names[atom] = next(fresh)
        return names[atom]

    binders = " ".join(f"{name(v)}:{_type(v)}" for v in graph.inputs)
    lines = [f"{{ lambda {binders} ."]
    for i, eqn in enumerate(graph.eqns):
        params = eqn.params.as_dict()
        pstr = ""
        if params:
            pstr = (
                "["
                + ", ".join(f"{k}={_format_param(v)}" for k, v in params.items())
                + "]"
            )
        args = " ".join(name(a) for a in eqn.inputs)
        lhs = f"{name(eqn.out)}:{_type(eqn.out)}"
        prefix = "  let " if i == 0 else "      "
        lines.append(f"{prefix}{lhs} = {eqn.primitive.name}{pstr} {args}".rstrip())
    outs = ", ".join(name(o) for o in graph.outputs)
    lines.append(f"  in ({outs}) }}")
    return "\n".join(lines)
