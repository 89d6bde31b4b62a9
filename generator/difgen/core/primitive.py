"""The primitive declaration and the registry every family table adds to.

A primitive is declared once, with everything each stage needs:

- ``impl``: NumPy evaluation (the reference interpreter, and constant folding);
- ``shape_rule``: output (shape, dtype) from input (shape, dtype); elementwise rows get
  NumPy broadcasting, others by default run ``impl`` on zero-strided dummies, which is
  exact (rows whose dummies would be costly, like ``matmul``, give a rule);
- ``emit``: its vectorized NumPy source form, ``emit(args, params) -> str`` (or a list
  of statements assigning ``OUT``);
- ``jvp``: ``jvp(out, primals, tangents, **params) -> tangent`` written in plain NumPy
  on tracer values (a tangent of ``None`` is a symbolic zero);
- ``transpose``: linear primitives only, ``transpose(ct, *inputs, **params)`` returns
  one cotangent per input (``None`` where the input is not linear), inputs that are
  linear arrive as :class:`Linear` markers;
- ``batch``: ``batch(args, batched, k, **params)`` evaluates the primitive when the
  inputs flagged in ``batched`` carry an extra leading axis of size ``k``, returning
  the result with that axis in front (the vmap rule). Elementwise rows and rows whose
  params are ``axes``/``axis`` get one by default
  (:func:`difgen.core.batching.default_batch_rule`);
- ``sympy``: evaluation on object arrays of SymPy expressions (default: ``impl``);
- ``differentiable``: False for selectors (comparisons), whose outputs carry no tangent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from difgen.core.location import user_location
from difgen.errors import TraceError

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
    emit: Callable[[list[str], dict[str, Any]], Any]
    jvp: Callable[..., Any] | None = None
    transpose: Callable[..., Any] | None = None
    sympy: Callable[..., Any] | None = None
    shape_rule: Callable[..., Aval] | None = None
    batch: Callable[..., Any] | None = None
    linear: bool = False
    differentiable: bool = True
    elementwise: bool = False

    def __repr__(self) -> str:
        return f"{self.name}_p"

    def out_aval(self, avals: list[Aval], params: dict[str, Any]) -> Aval:
        """Shape and dtype of the output for inputs of the given shapes and dtypes."""
        if self.shape_rule is not None:
            return self.shape_rule(*avals, **params)
        if self.elementwise:
            try:
                shape = tuple(np.broadcast_shapes(*(s for s, _ in avals)))
            except ValueError:
                shapes = " ".join(str(tuple(s)) for s, _ in avals)
                raise TraceError(
                    f"{user_location()}: operands could not be broadcast together "
                    f"with shapes {shapes} (in {self.name})"
                ) from None
            dtype = "float64" if self.differentiable else "bool"
            return shape, dtype
        dummies = [dummy(shape, dtype) for shape, dtype in avals]
        with np.errstate(all="ignore"):
            out = np.asarray(self.impl(*dummies, **params))
        dtype = "bool" if out.dtype == np.bool_ else "float64"
        return tuple(out.shape), dtype

    def lower_sympy(self, *args: Any, **params: Any) -> Any:
        """Evaluate on object arrays of SymPy expressions."""
        fn = self.sympy if self.sympy is not None else self.impl
        return fn(*args, **params)



def dummy(shape: Shape, dtype: str) -> np.ndarray:
    """A zero-strided stand-in array of this shape and dtype (for shape rules)."""
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
