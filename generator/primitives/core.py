"""The primitive declaration and the registry every family table adds to.

A primitive is declared once, with everything each stage needs:

- ``impl``: NumPy evaluation (the reference interpreter, and constant folding);
- ``shape_rule``: output (shape, dtype) from input (shape, dtype); by default the
  ``impl`` is run on zero-strided dummies, which is exact and cheap;
- ``emit``: its vectorized NumPy source form, ``emit(args, params) -> str``;
- ``jvp``: ``jvp(primals, tangents, **params) -> tangent`` written in plain NumPy on
  tracer values (a tangent of ``None`` is a symbolic zero);
- ``transpose``: linear primitives only, ``transpose(ct, *inputs, **params)`` returns
  one cotangent per input (``None`` where the input is not linear), inputs that are
  linear arrive as :class:`Linear` markers;
- ``sympy``: evaluation on object arrays of SymPy expressions (default: ``impl``);
- ``differentiable``: False for selectors (comparisons), whose outputs carry no tangent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

Shape = tuple[int, ...]
Aval = tuple[Shape, str]


@dataclass(frozen=True)
class Linear:
    """Marks the input a transpose rule must produce a cotangent for."""

    shape: Shape
    dtype: str = "float64"

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass(frozen=True, eq=False)
class Primitive:
    """One operation of the IR; see the module docstring for each field."""

    name: str
    impl: Callable[..., Any]
    emit: Callable[[list[str], dict[str, Any]], str]
    jvp: Callable[..., Any] | None = None
    transpose: Callable[..., Any] | None = None
    sympy: Callable[..., Any] | None = None
    shape_rule: Callable[..., Aval] | None = None
    linear: bool = False
    differentiable: bool = True
    elementwise: bool = False

    def __repr__(self) -> str:
        return f"{self.name}_p"

    def out_aval(self, avals: list[Aval], params: dict[str, Any]) -> Aval:
        """Shape and dtype of the output for inputs of the given shapes and dtypes."""
        if self.shape_rule is not None:
            return self.shape_rule(*avals, **params)
        dummies = [_dummy(shape, dtype) for shape, dtype in avals]
        with np.errstate(all="ignore"):
            out = np.asarray(self.impl(*dummies, **params))
        dtype = "bool" if out.dtype == np.bool_ else "float64"
        return tuple(out.shape), dtype

    def lower_sympy(self, *args: Any, **params: Any) -> Any:
        """Evaluate on object arrays of SymPy expressions."""
        fn = self.sympy if self.sympy is not None else self.impl
        return fn(*args, **params)


def _dummy(shape: Shape, dtype: str) -> np.ndarray:
    value = np.zeros((), dtype=np.bool_ if dtype == "bool" else np.float64)
    if dtype != "bool":
        value = value + 0.5
    return np.broadcast_to(value, shape)


PRIMITIVES: dict[str, Primitive] = {}


def register(prim: Primitive) -> Primitive:
    """Add ``prim`` to the registry (names are unique)."""
    if prim.name in PRIMITIVES:
        raise ValueError(f"primitive {prim.name!r} declared twice")
    PRIMITIVES[prim.name] = prim
    return prim


def call(fmt: str) -> Callable[[list[str], dict[str, Any]], str]:
    """An emitter from a format string: ``{0}``, ``{1}``... are the arguments."""

    def emit(args: list[str], params: dict[str, Any]) -> str:
        return fmt.format(*args, **params)

    return emit


def unbroadcast(value: Any, shape: Shape) -> Any:
    """Sum ``value`` down to ``shape`` (the transpose of NumPy broadcasting)."""
    vshape = tuple(np.shape(value))
    if vshape == tuple(shape):
        return value
    lead = len(vshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and vshape[lead + i] != 1
    )
    if axes:
        value = np.sum(value, axis=axes)
    return np.reshape(value, shape) if tuple(np.shape(value)) != tuple(shape) else value
