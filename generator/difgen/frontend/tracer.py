"""The tracer: runs unmodified NumPy code on :class:`Tracer` values and records a Graph.

NumPy dispatches to tracers through ``__array_ufunc__``, ``__array_function__`` and
the Python operators; the creation functions that NumPy does not dispatch
(``np.array`` of traced scalars, ``np.zeros`` before item assignment) are caught by
running the user's code with ``np`` bound to a tracing namespace
(:mod:`difgen.frontend.namespace`). Operations on constants only are evaluated at
once, so constants fold while tracing, and identical equations are shared (CSE).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator, Sequence

import numpy as np

import difgen
from difgen.errors import TraceError
from difgen.ir import Atom, Eqn, Graph, Lit, Params, Var
from difgen.primitives import PRIMITIVES, Primitive
from difgen.simplify import simplify

_DIFGEN_DIR = os.path.dirname(os.path.abspath(difgen.__file__))
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


BUILDERS: list["Builder"] = []


class Builder:
    """Collects the equations of one graph under construction."""

    def __init__(self) -> None:
        self.eqns: list[Eqn] = []
        self.cache: dict[tuple[Any, ...], Var] = {}
        self.producer: dict[Var, Eqn] = {}

    def add(self, prim: Primitive, atoms: list[Atom], params: dict[str, Any]) -> Var:
        frozen = Params.of(params)
        key = (prim.name, tuple(atoms), frozen)
        if key in self.cache:
            return self.cache[key]
        try:
            shape, dtype = prim.out_aval([(a.shape, a.dtype) for a in atoms], params)
        except (ValueError, IndexError, TypeError) as exc:
            shapes = ", ".join(str(a.shape) for a in atoms)
            raise TraceError(f"{user_location()}: {prim.name} of shapes {shapes}: {exc}") from None
        out = Var(tuple(int(n) for n in shape), dtype)
        eqn = Eqn(prim, tuple(atoms), frozen, out)
        self.eqns.append(eqn)
        self.cache[key] = out
        self.producer[out] = eqn
        return out


def user_location() -> str:
    """``file:line`` of the innermost frame outside difgen and NumPy."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not (path.startswith(_DIFGEN_DIR) or path.startswith(_NUMPY_DIR)):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "<unknown>"


def as_constant(value: Any) -> np.ndarray:
    """A non-traced operand as a float64 (or bool) array."""
    arr = np.asarray(value)
    if arr.dtype == object:
        raise TraceError(f"{user_location()}: cannot use {type(value).__name__} here")
    return arr if arr.dtype == np.bool_ else arr.astype(np.float64)


def bind(prim: Primitive, *args: Any, **params: Any) -> Any:
    """Apply ``prim``: evaluate at once on constants, otherwise record an equation."""
    from difgen.frontend.numpy_api import lift

    args = tuple(lift(a) for a in args)
    builder = next(
        (a.builder for a in args if isinstance(a, Tracer) and a.is_var), None
    )
    if builder is None:
        values = [
            a.atom.value if isinstance(a, Tracer) else as_constant(a) for a in args
        ]
        with np.errstate(all="ignore"):
            return np.asarray(prim.impl(*values, **params))
    atoms: list[Atom] = [
        a.atom if isinstance(a, Tracer) else Lit(as_constant(a)) for a in args
    ]
    shortcut = simplify(prim, atoms, params, builder)
    if shortcut is not None:
        return Tracer(builder, shortcut) if isinstance(shortcut, Var) else shortcut
    return Tracer(builder, builder.add(prim, atoms, params))


def _binop(name: str, reverse: bool = False) -> Callable[[Tracer, Any], Any]:
    prim = PRIMITIVES[name]

    def method(self: Tracer, other: Any) -> Any:
        return bind(prim, other, self) if reverse else bind(prim, self, other)

    return method


def _branch_error(kind: str) -> Callable[..., Any]:
    def method(self: Tracer, *args: Any) -> Any:
        raise TraceError(
            f"{user_location()}: {kind} of a traced value: the value depends on the "
            "input, which difgen does not know at build time. A branch on it "
            "(`if`, `while`, `and`/`or`) cannot be traced: use "
            "np.where(cond, a, b). Use NumPy functions (np.sin, not math.sin), and "
            "create arrays you assign into with np.zeros/np.empty."
        )

    return method


class Tracer:
    """A traced array (or a constant in a traced array's clothes)."""

    __array_priority__ = 1000

    def __init__(self, builder: Builder, atom: Atom) -> None:
        self.builder = builder
        self.atom = atom

    # -- what the value looks like
    @property
    def is_var(self) -> bool:
        return isinstance(self.atom, Var)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.atom.shape

    @property
    def ndim(self) -> int:
        return len(self.atom.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.atom.shape, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.atom.dtype)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"Tracer({self.atom.dtype}{list(self.shape)})"

    # -- NumPy dispatch
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kw: Any) -> Any:
        from difgen.frontend.numpy_api import handle_ufunc

        return handle_ufunc(ufunc, method, inputs, kw)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        from difgen.frontend.numpy_api import handle_function

        return handle_function(func, args, kwargs)

    # -- operators
    __add__ = _binop("add")
    __radd__ = _binop("add", reverse=True)
    __sub__ = _binop("sub")
    __rsub__ = _binop("sub", reverse=True)
    __mul__ = _binop("mul")
    __rmul__ = _binop("mul", reverse=True)
    __truediv__ = _binop("div")
    __rtruediv__ = _binop("div", reverse=True)
    __pow__ = _binop("pow")
    __rpow__ = _binop("pow", reverse=True)
    __lt__ = _binop("lt")
    __le__ = _binop("le")
    __gt__ = _binop("gt")
    __ge__ = _binop("ge")
    __eq__ = _binop("eq")  # type: ignore[assignment]
    __ne__ = _binop("ne")  # type: ignore[assignment]
    __and__ = _binop("logical_and")
    __rand__ = _binop("logical_and", reverse=True)
    __or__ = _binop("logical_or")
    __ror__ = _binop("logical_or", reverse=True)
    __hash__ = object.__hash__

    def __invert__(self) -> Any:
        return bind(PRIMITIVES["logical_not"], self)

    def __matmul__(self, other: Any) -> Any:
        return np.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return np.matmul(other, self)

    def __neg__(self) -> Any:
        return bind(PRIMITIVES["neg"], self)

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        return bind(PRIMITIVES["abs"], self)

    __bool__ = _branch_error("bool()")
    __float__ = _branch_error("float()")
    __int__ = _branch_error("int()")
    __index__ = _branch_error("use as an index")
    __complex__ = _branch_error("complex()")
    item = _branch_error(".item()")
    tolist = _branch_error(".tolist()")

    # -- indexing
    def __getitem__(self, index: Any) -> Any:
        from difgen.frontend.indexing import freeze_index

        return bind(PRIMITIVES["getitem"], self, index=freeze_index(index, self.shape))

    def __setitem__(self, index: Any, value: Any) -> None:
        from difgen.frontend.indexing import freeze_index

        frozen = freeze_index(index, self.shape)
        new = bind(PRIMITIVES["set_index"], self, value, index=frozen)
        self.atom = new.atom if isinstance(new, Tracer) else Lit(np.asarray(new))

    # -- ndarray methods, each the NumPy function of the same name
    @property
    def T(self) -> Any:
        return np.transpose(self)

    def reshape(self, *shape: Any, order: str = "C") -> Any:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return np.reshape(self, shape)

    def ravel(self) -> Any:
        return np.ravel(self)

    flatten = ravel

    def copy(self) -> Any:
        return Tracer(self.builder, self.atom)  # a new name: item assignment rebinds

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        if np.dtype(dtype) != np.float64:
            raise TraceError(f"{user_location()}: only float64 arrays can be traced")
        return self

    def transpose(self, *axes: Any) -> Any:
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return np.transpose(self, axes or None)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Any:
        return np.sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Any:
        return np.mean(self, axis=axis, keepdims=keepdims)

    def prod(self, axis: Any = None, keepdims: bool = False) -> Any:
        return np.prod(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Any:
        return np.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Any:
        return np.min(self, axis=axis, keepdims=keepdims)

    def var(self, axis: Any = None, keepdims: bool = False) -> Any:
        return np.var(self, axis=axis, keepdims=keepdims)

    def std(self, axis: Any = None, keepdims: bool = False) -> Any:
        return np.std(self, axis=axis, keepdims=keepdims)

    def cumsum(self, axis: Any = None) -> Any:
        return np.cumsum(self, axis=axis)

    def cumprod(self, axis: Any = None) -> Any:
        return np.cumprod(self, axis=axis)

    def dot(self, other: Any) -> Any:
        return np.dot(self, other)

    def clip(self, lo: Any = None, hi: Any = None) -> Any:
        return np.clip(self, lo, hi)

    def swapaxes(self, a: int, b: int) -> Any:
        return np.swapaxes(self, a, b)

    def squeeze(self, axis: Any = None) -> Any:
        return np.squeeze(self, axis=axis)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
        return np.diagonal(self, offset, axis1, axis2)

    def trace(self, offset: int = 0) -> Any:
        return np.trace(self, offset)


def _install_scalar_methods() -> None:
    """Ufuncs over object arrays of tracers call ``element.sin()`` and the like."""
    for name in ("sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh "
                 "arctanh exp expm1 log log1p sqrt cbrt sign").split():  # fmt: skip
        setattr(Tracer, name, lambda self, _p=PRIMITIVES[name]: bind(_p, self))
    Tracer.conjugate = lambda self: self  # type: ignore[attr-defined]
    Tracer.absolute = Tracer.__abs__  # type: ignore[attr-defined]


_install_scalar_methods()


def trace(
    fn: Callable[..., Any], avals: Sequence[tuple[tuple[int, ...], str]]
) -> Graph:
    """Trace ``fn`` on inputs of the given (shape, dtype) into a Graph.

    >>> g = trace(lambda x: np.sin(x) * 2.0, [((), "float64")])
    >>> [e.primitive.name for e in g.eqns]
    ['sin', 'mul']
    """
    from difgen.frontend.namespace import tracing_numpy

    builder = Builder()
    inputs = tuple(Var(tuple(shape), dtype) for shape, dtype in avals)
    args = [Tracer(builder, v) for v in inputs]
    BUILDERS.append(builder)
    try:
        with tracing_numpy(fn):
            result = fn(*args)
    finally:
        BUILDERS.pop()
    return finish(builder, inputs, result)


def current_builder() -> Builder:
    """The builder of the innermost trace in progress."""
    if not BUILDERS:
        raise RuntimeError("no trace in progress")
    return BUILDERS[-1]


def finish(builder: Builder, inputs: tuple[Var, ...], result: Any) -> Graph:
    """Close a trace: outputs become atoms, and unused equations are dropped."""
    from difgen.frontend.numpy_api import lift
    from difgen.passes import dce

    results = result if isinstance(result, tuple) else (result,)
    outputs: list[Atom] = []
    for value in results:
        value = lift(value)
        if isinstance(value, Tracer):
            outputs.append(value.atom)
        else:
            outputs.append(Lit(as_constant(value)))
    return dce(Graph(inputs, tuple(outputs), tuple(builder.eqns)))
