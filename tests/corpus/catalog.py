"""The corpus as data: every function with its metadata, read from the family files.

Each family file (``optimization.py``, ``odes.py``…) is plain NumPy code with a
``CASES`` dict beside its functions, so the functions stay what their authors would
write and the harness never has to be imported into them. This module turns those
dicts into :class:`Case` values, draws sample points, and lists the NumPy names each
function uses (read from its source, not written by hand, so it cannot go stale).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).parent
FAMILIES = {
    "optimization": "optimization",
    "odes": "odes",
    "losses": "losses",
    "physics": "physics",
    "stencils": "stencils",
    "linear algebra": "linear_algebra",
    "loops": "loops",
}
"""Family label -> module name (file ``tests/corpus/<module>.py``)."""

BACKENDS = ("sympy", "trace")
MODES = {"sympy": ("auto",), "trace": ("forward", "reverse")}
"""The modes each backend is built in. The sympy backend differentiates
symbolically and does not read ``mode``, so one build covers it."""


@dataclass(frozen=True)
class Context:
    """One non-differentiated argument: name, shape, dtype and how to sample it."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float64"
    sampler: str = "uniform"


@dataclass(frozen=True)
class Case:
    """One corpus function and how the harness calls it."""

    name: str
    family: str
    module: str
    fn: Callable[..., Any]
    input_shape: tuple[int, ...]
    contexts: tuple[Context, ...] = ()
    xlim: tuple[float, float] = (-1.0, 1.0)
    xsample: str = "uniform"
    ctxlim: tuple[float, float] = (-1.0, 1.0)
    backends: tuple[str, ...] = BACKENDS
    uses: tuple[str, ...] = field(default=())

    @property
    def path(self) -> Path:
        """The family file that defines the function."""
        return HERE / f"{self.module}.py"

    @property
    def lines(self) -> range:
        """The source lines of the function in its file (for refusal messages)."""
        source, start = inspect.getsourcelines(self.fn)
        return range(start, start + len(source))

    def point(self, seed: int) -> tuple[Any, list[Any]]:
        """A reproducible sample ``(x, contexts)``; scalars as Python floats."""
        rng = np.random.default_rng(seed)
        if self.xsample == "uniform":
            x = rng.uniform(*self.xlim, size=self.input_shape)
        else:
            x = sample(self.xsample, rng, self.input_shape, self.ctxlim)
        ctx = [sample(c.sampler, rng, c.shape, self.ctxlim) for c in self.contexts]
        ctx = [
            c.astype(np.int64) if s.dtype == "int64" else c
            for c, s in zip(ctx, self.contexts)
        ]
        ctx = [float(c) if np.ndim(c) == 0 else c for c in ctx]
        return (float(x) if x.ndim == 0 else x), ctx


_ATOMS = np.array([[0.0, 0.0, 0.0], [1.1, 0.3, 0.2], [1.6, 1.3, 0.4], [2.7, 1.5, 1.3]])
"""Base positions of a small non-planar molecule: atoms stay apart and angles and
dihedrals stay away from 0 and pi, where their derivatives blow up."""


def sample(
    kind: str,
    rng: np.random.Generator,
    shape: tuple[int, ...],
    lim: tuple[float, float],
) -> np.ndarray:
    """A sample array of ``shape`` drawn the way ``kind`` says."""
    n = shape[0] if shape else 1
    if kind == "uniform":
        return rng.uniform(*lim, size=shape)
    if kind == "lorenz":
        return np.array([10.0, 28.0, 8.0 / 3.0])
    if kind == "binary":
        return rng.integers(0, 2, size=shape).astype(float)
    if kind == "classes3":
        return np.resize(np.arange(3), shape)[rng.permutation(n)].astype(float)
    if kind == "onehot3":
        return np.eye(3)[rng.integers(0, 3, size=n)]
    if kind == "wide":
        return rng.uniform(-3.0, 3.0, size=shape)
    if kind == "sign":
        return rng.choice([-1.0, 1.0], size=shape)
    if kind == "counts":
        return rng.integers(0, 5, size=shape).astype(float)
    if kind == "ones":
        return 1.0 + rng.uniform(-0.1, 0.1, size=shape)
    if kind == "positive":
        return rng.uniform(0.5, 2.0, size=shape)
    if kind in ("spd3", "spd4"):
        b = rng.normal(size=shape)
        return b @ b.T + shape[0] * np.eye(shape[0])
    if kind == "edges4":
        return np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]], dtype=float)
    if kind == "triples4":
        return np.array([[0, 1, 2], [1, 2, 3]], dtype=float)
    if kind == "pairs3":
        return np.array([[0, 1], [1, 2], [0, 2]], dtype=float)
    if kind.startswith("atoms"):
        return _ATOMS[: shape[0], : shape[1]] + rng.uniform(-0.1, 0.1, size=shape)
    raise ValueError(f"unknown sampler {kind!r}")


def numpy_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The NumPy functions, array methods and operators ``fn``'s source uses."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = _dotted(node)
            if chain is None or not chain.startswith("np."):
                names.add("." + node.attr)  # an array method or attribute
            elif not isinstance(node.value, ast.Attribute) or chain.count(".") > 1:
                names.add(chain)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in _BUILTINS:
                names.add(node.func.id + "()")
        elif isinstance(node, ast.BinOp):
            names.add(_OPS.get(type(node.op), type(node.op).__name__))
        elif isinstance(node, ast.AugAssign):
            names.add(_OPS.get(type(node.op), type(node.op).__name__) + "=")
        elif isinstance(node, ast.Subscript):
            names.add("[]=" if isinstance(node.ctx, ast.Store) else "[]")
        elif isinstance(node, ast.For):
            names.add("for")
    # np.linalg.norm also yields its prefix np.linalg: keep the longest names only
    return tuple(
        sorted(n for n in names if not any(m.startswith(n + ".") for m in names))
    )


_BUILTINS = ("abs", "min", "max", "sum", "pow", "float", "reversed", "enumerate")
"""Builtins worth listing: they take traced values."""

_OPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.MatMult: "@",
    ast.Mod: "%",
    ast.FloorDiv: "//",
}


def _dotted(node: ast.AST) -> str | None:
    """``np.linalg.norm`` for that attribute chain; None if it starts elsewhere."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _case(family: str, module_name: str, name: str, meta: dict[str, Any]) -> Case:
    module = importlib.import_module(module_name)
    fn = getattr(module, name)
    contexts = tuple(Context(*c) for c in meta.get("ctx", ()))
    return Case(
        name=name,
        family=family,
        module=module_name,
        fn=fn,
        input_shape=tuple(meta["x"]),
        contexts=contexts,
        xlim=meta.get("xlim", (-1.0, 1.0)),
        xsample=meta.get("xsample", "uniform"),
        ctxlim=meta.get("ctxlim", (-1.0, 1.0)),
        backends=tuple(meta.get("backends", BACKENDS)),
        uses=numpy_names(fn),
    )


def load_cases() -> list[Case]:
    """Every corpus function, family by family, in file order."""
    cases = []
    for family, module_name in FAMILIES.items():
        module = importlib.import_module(module_name)
        cases += [_case(family, module_name, n, m) for n, m in module.CASES.items()]
    return cases


CASES = load_cases()
BY_NAME = {case.name: case for case in CASES}
assert len(BY_NAME) == len(CASES), "corpus function names must be unique"
