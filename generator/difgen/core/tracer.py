"""The graph builder: :class:`Tracer` values, ``bind``, and the trace in progress.

This is the bottom of difgen's layering (with :mod:`difgen.core.ir` and
:mod:`difgen.core.primitive`): the primitive tables, the NumPy frontend, the
transforms and the passes all build graphs through :func:`bind`, and nothing here
imports them. Operations on constants only are evaluated at once, so constants fold
while tracing; :mod:`difgen.core.simplify` applies algebraic identities; identical
equations are shared (CSE).

NumPy reaches a tracer through ``__array_ufunc__`` and ``__array_function__``. What
each NumPy function means is the frontend's business (:mod:`difgen.frontend.numpy_api`),
one layer up, so the frontend registers its two handlers with
:func:`~difgen.core.dispatch.use_numpy_dispatch` when it is imported, and installs
the ndarray methods that are NumPy functions (``x.sum()`` is ``np.sum(x)``,
``x.T``...) with :func:`use_array_methods` (:mod:`difgen.frontend.array_methods`;
JAX's NumPy layer installs its array methods on the core tracer the same way).
Python operators need no frontend: they bind primitives by name. How a tracer
follows NumPy's views is :mod:`difgen.core.views`.

Beside this module: the trace stack and the plain :class:`~difgen.core.builder.
Builder` (:mod:`difgen.core.builder`), where NumPy's calls go
(:mod:`difgen.core.dispatch`) and the conversions between Python values and the
trace (:mod:`difgen.core.conversions`). Here: the sub-traces of branches and loops
(:class:`BranchBuilder`, :func:`tracing_branch`), :func:`bind`, lifting, and the
:class:`Tracer`.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import numpy as np

from difgen.core.builder import (
    BUILDERS,
    WATCHERS,
    Builder,
    current_builder,
    innermost,
    is_relaxed,
)
from difgen.core.conversions import (
    _as_ndarray,
    _bool,
    _branch_error,
    _constant_lit,
    _index_error,
    as_constant,
)
from difgen.core.dispatch import _Dispatch
from difgen.core.indexing import freeze_index
from difgen.core.ir import Atom, FrozenArray, Graph, Lit, Var, dce
from difgen.core.location import user_location
from difgen.core.primitive import PRIMITIVES, Primitive
from difgen.core.simplify import simplify
from difgen.core.views import View, derived, is_basic, is_element
from difgen.errors import TraceError

_VERSIONS = itertools.count(1)  # write counts: unique, so a restored array re-derives

# NumPy without its stubs, for calls on tracers: a Tracer reaches NumPy functions
# through __array_function__, which NumPy's stubs cannot express (they accept
# array-likes only), so calls whose arguments may be tracers (or forward a user's
# *args and **kwargs) go through this alias. At run time it is NumPy itself.
xp: Any = np


class BranchBuilder(Builder):
    """The trace of one branch of a branch on a traced value (a ``cond``'s sub-graph).

    The branch's code reads values of the enclosing traces through Python closures:
    :func:`bind` *captures* each such value as an input of the branch (``captures``
    maps the outer Var to the branch's input Var). An array object of an enclosing
    trace written inside the branch is *journaled*: its outer value is restored when
    the branch ends, and the ``cond`` result is written into it afterwards, so both
    branches start from the same state and NumPy's in-place semantics hold.
    """

    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where
        self.captures: dict[Var, Var] = {}
        self.owners: dict[Var, Builder] = {}
        self.journal: dict[int, tuple[Tracer, Atom, Builder]] = {}
        self.closed = False

    def capture(self, var: Var, owner: Builder) -> Var:
        """The branch's input standing for ``var`` of the enclosing trace ``owner``."""
        inner = self.captures.get(var)
        if inner is None:
            inner = Var(var.shape, var.dtype)
            self.captures[var] = inner
            self.owners[var] = owner
        return inner

    def adopt(self, value: Any) -> Any:
        """``value`` as a value of this branch: enclosing tracers are captured."""
        if not isinstance(value, Tracer) or value.builder is self:
            return value
        atom = value.atom  # (a view re-derives here, possibly in this branch)
        if value.builder is self or not isinstance(atom, Var):
            return value
        _check_open(value.builder)
        return Tracer(self, self.capture(atom, value.builder))

    def record_write(self, tracer: Tracer) -> None:
        """Journal an enclosing array object before its first write in the branch."""
        if id(tracer) not in self.journal:
            self.journal[id(tracer)] = (tracer, tracer.atom, tracer.builder)
        tracer.builder = self

    def restore(self) -> None:
        """Give every journaled array object its value from before the branch."""
        for tracer, atom, builder in self.journal.values():
            tracer._atom, tracer.builder = atom, builder
            tracer.version = next(_VERSIONS)


def _check_open(builder: Builder) -> None:
    """Refuse a value of a branch's trace used after the branch ended."""
    if isinstance(builder, BranchBuilder) and builder.closed:
        raise TraceError(
            f"{user_location()}: a value computed inside a branch on a traced value "
            f"(the branch at {builder.where}) is used outside it; assign it to a "
            "variable in both branches instead (keeping it in a list or an "
            "attribute hides it from difgen)"
        )


@contextlib.contextmanager
def tracing_branch(where: str) -> Iterator[BranchBuilder]:
    """A sub-trace for a branch or a loop step on a traced value (``where`` its
    source line), innermost while the block runs.

    When the block ends, however it ends, the branch is closed (its values may no
    longer be used outside it, see :func:`_check_open`) and every array object of an
    enclosing trace it wrote is given back its value from before the branch.
    """
    branch = BranchBuilder(where)
    try:
        with innermost(branch):
            yield branch
    finally:
        branch.closed = True
        branch.restore()


def finish(builder: Builder, inputs: tuple[Var, ...], result: Any) -> Graph:
    """Close a trace: outputs become atoms, and unused equations are dropped."""
    results = result if isinstance(result, tuple) else (result,)
    outputs: list[Atom] = []
    for value in results:
        value = lift(value)
        if isinstance(value, Tracer):
            outputs.append(value.atom)
        else:
            outputs.append(Lit(as_constant(value)))
    return dce(Graph(inputs, tuple(outputs), tuple(builder.eqns)))


# ------------------------------------------------------------------ binding


def bind(prim: Primitive, *args: Any, **params: Any) -> Any:
    """Apply ``prim``: evaluate at once on constants, otherwise record an equation."""
    args = tuple(lift(a) for a in args)
    builder = next(
        (a.builder for a in args if isinstance(a, Tracer) and a.is_var), None
    )
    top = BUILDERS[-1] if BUILDERS else None
    if builder is not None and isinstance(top, BranchBuilder):
        args = tuple(top.adopt(a) for a in args)
        builder = top
    elif builder is not None:
        for a in args:
            if isinstance(a, Tracer) and isinstance(a.builder, BranchBuilder):
                _check_open(a.builder)
    if builder is None:
        values = [
            # no builder: every tracer among the arguments is a constant (a Lit)
            cast(Lit, a.atom).value if isinstance(a, Tracer) else as_constant(a)
            for a in args
        ]
        with np.errstate(all="ignore"):
            return np.asarray(prim.impl(*values, **params))
    atoms: list[Atom] = [
        a.atom if isinstance(a, Tracer) else _constant_lit(a) for a in args
    ]
    shortcut = simplify(prim, atoms, params, builder, _bind_atoms, is_relaxed())
    if shortcut is not None:
        return Tracer(builder, shortcut) if isinstance(shortcut, Var) else shortcut
    return Tracer(builder, builder.add(prim, atoms, params))


def bind_name(name: str, *args: Any, **params: Any) -> Any:
    """:func:`bind` of the registered primitive called ``name``."""
    return bind(PRIMITIVES[name], *args, **params)


def _bind_atoms(
    builder: Builder, name: str, atoms: Sequence[Atom | np.ndarray], params: Any
) -> Var | np.ndarray:
    """``bind`` for the identities: atoms in, an atom's value (Var or array) out."""
    args = [
        (
            Tracer(builder, a)
            if isinstance(a, Var)
            else np.asarray(a.value if isinstance(a, Lit) else a)
        )
        for a in atoms
    ]
    out = bind(PRIMITIVES[name], *args, **params)
    if isinstance(out, Tracer):
        return out.atom if isinstance(out.atom, Var) else np.asarray(out.atom.value)
    return np.asarray(out)


def constant(value: np.ndarray) -> Tracer:
    """A constant in a tracer's clothes, in the innermost trace (mutable by item
    assignment, which ``np.zeros(n)`` followed by ``out[i] = ...`` needs)."""
    return Tracer(current_builder(), Lit(value))


# ------------------------------------------------------------------ lifting
def contains_tracer(obj: Any) -> bool:
    """Whether a (nested) list, tuple or object array holds a tracer."""
    if isinstance(obj, Tracer):
        return True
    if isinstance(obj, (list, tuple)) or (
        isinstance(obj, np.ndarray) and obj.dtype == object
    ):
        return any(contains_tracer(o) for o in obj)
    return False


def _leaves(obj: Any) -> tuple[tuple[int, ...], list[Any]]:
    if isinstance(obj, (list, tuple)) or (
        isinstance(obj, np.ndarray) and obj.dtype == object
    ):
        subs = [_leaves(o) for o in obj]
        shapes = {s for s, _ in subs}
        if len(shapes) > 1:
            raise TraceError(f"{user_location()}: np.array of a ragged nested sequence")
        inner = shapes.pop() if shapes else ()
        return (len(subs), *inner), [leaf for _, leaves in subs for leaf in leaves]
    return (), [obj]


def lift(value: Any, force: bool = False) -> Any:
    """Lists and object arrays holding tracers become one traced array node.

    Scalars are packed by one ``pack`` equation; arrays are stacked (through NumPy,
    which dispatches to the frontend) and reshaped to the nesting.
    """
    if isinstance(value, Tracer):
        return value
    if not (force or contains_tracer(value)):
        return value
    outer, leaves = _leaves(value)
    leaf_shapes = {tuple(np.shape(leaf)) for leaf in leaves}
    if len(leaf_shapes) > 1:
        raise TraceError(f"{user_location()}: np.array of arrays with different shapes")
    leaf_shape = leaf_shapes.pop() if leaf_shapes else ()
    if leaf_shape == ():
        return bind_name("pack", *leaves, shape=tuple(outer))
    stacked = np.stack(leaves, axis=0)
    return np.reshape(stacked, (*outer, *leaf_shape))


# ------------------------------------------------------------ NumPy dispatch


_ARRAY_METHODS: set[str] = set()


def use_array_methods(methods: dict[str, Any]) -> None:
    """Install a frontend's ndarray methods (``x.sum()``, ``x.T``...) on Tracer.

    Like the handlers of :func:`use_numpy_dispatch` they are NumPy's API, which is
    the frontend's business; an attribute of the tracer's own is never replaced.
    """
    for name, method in methods.items():
        if name in vars(Tracer) and name not in _ARRAY_METHODS:
            raise ValueError(f"Tracer.{name} is the tracer's own, not an array method")
        setattr(Tracer, name, method)
        _ARRAY_METHODS.add(name)


def is_runtime(value: Any) -> bool:
    """Whether ``value`` is a traced (not constant) array."""
    return isinstance(value, Tracer) and isinstance(value.atom, Var)


def is_runtime_int(value: Any) -> bool:
    """Whether ``value`` is a traced int64 array (an index or count known at run
    time)."""
    return is_runtime(value) and value.dtype == np.int64


def has_runtime_index(index: Any) -> bool:
    """Whether an index holds a traced item (an index array or a mask)."""
    items = index if isinstance(index, tuple) else (index,)
    return any(is_runtime(item) for item in items)


# ------------------------------------------------------------------ tracers
def _binop(name: str, reverse: bool = False) -> Callable[[Tracer, Any], Any]:
    def method(self: Tracer, other: Any) -> Any:
        if is_runtime_int(self) or is_runtime_int(other):
            a, b = (other, self) if reverse else (self, other)
            return _Dispatch.integer(name, a, b)
        prim = PRIMITIVES.get(name)
        if prim is None:  # // of floats
            raise TraceError(
                f"{user_location()}: the operator {name} of traced float values is "
                "not supported"
            )
        return bind(prim, other, self) if reverse else bind(prim, self, other)

    return method


class Tracer:
    """A traced array (or a constant in a traced array's clothes).

    A tracer is one NumPy array *object*: item assignment and in-place operators
    change it (so ``y = x; y += 1`` changes ``x`` too, as in NumPy), and a tracer
    made by a NumPy operation that returns a view (basic indexing, reshape,
    transpose...) keeps seeing its base: it is re-derived when read after the base
    was written, and a write into it is written into the base.
    """

    __array_priority__ = 1000

    def __init__(self, builder: Builder, atom: Atom) -> None:
        self.builder = builder
        self._atom = atom
        self.version = 0
        self.view: View | None = None
        # set on a value a branch on a traced value chose among views of arrays
        # from before it: (where, [(base, its version then)]). NumPy's result would
        # still be a view, which difgen cannot follow, so a later write into it or
        # into those bases is refused rather than silently diverging.
        self.chosen: tuple[str, list[tuple[Tracer, int]]] | None = None

    @property
    def atom(self) -> Atom:
        """The current value: re-derived first if this is a view of a written base."""
        if self.chosen is not None:
            self._check_chosen()
        view = self.view
        if view is not None and view.version != view.base.version:
            fresh = view.derive(view.base)
            self._atom = fresh.atom if isinstance(fresh, Tracer) else Lit(fresh)
            if isinstance(fresh, Tracer):
                self.builder = fresh.builder
            view.version = view.base.version
        return self._atom

    def _check_chosen(self, writing: bool = False) -> None:
        """Refuse what NumPy would do through a view a traced branch chose."""
        assert self.chosen is not None
        where, bases = self.chosen
        if writing or any(base.version != version for base, version in bases):
            raise TraceError(
                f"{user_location()}: this value was chosen by the branch on a "
                f"traced value at {where} among views of an array, and "
                + ("is written into" if writing else "that array was written since")
                + "; NumPy's view would follow the write and difgen's copy cannot: "
                "take a .copy() in the branch"
            )

    def write(self, value: Any) -> None:
        """Replace this array's whole content with ``value`` (same shape), in place.

        A view writes into its base at the positions it views, as NumPy does.
        """
        if self.chosen is not None:
            self._check_chosen(writing=True)
        value = lift(value)
        shape = tuple(np.shape(value))
        if shape != self.shape:
            raise TraceError(
                f"{user_location()}: cannot write a value of shape {shape} into an "
                f"array of shape {self.shape} in place"
            )
        new = value.atom if isinstance(value, Tracer) else Lit(as_constant(value))
        if new.dtype != self.atom.dtype:
            raise TraceError(
                f"{user_location()}: writing {new.dtype} values into a "
                f"{self.atom.dtype} array in place would cast them"
            )
        view = self.view
        if view is None:
            top = BUILDERS[-1] if BUILDERS else None
            if isinstance(top, BranchBuilder) and self.builder is not top:
                top.record_write(self)
            self._atom = new
            self.version = next(_VERSIONS)
            return
        if not view.writable:
            raise TraceError(
                f"{user_location()}: writing into a read-only view (made at "
                f"{view.where}); NumPy raises 'assignment destination is read-only'"
            )
        base = view.base
        positions = view.positions()
        flat = bind_name(
            "set_index",
            xp.reshape(base, (base.size,)),
            xp.reshape(Tracer(self.builder, new), (positions.size,)),
            index=(FrozenArray(positions.reshape(-1).astype(np.int64)),),
        )
        base.write(xp.reshape(flat, base.shape))

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
        return _Dispatch.ufunc(ufunc, method, inputs, kw)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _Dispatch.function(func, args, kwargs)

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
    __mod__ = _binop("remainder")
    __rmod__ = _binop("remainder", reverse=True)
    __lt__ = _binop("lt")
    __le__ = _binop("le")
    __gt__ = _binop("gt")
    __ge__ = _binop("ge")
    __eq__ = _binop("eq")
    __ne__ = _binop("ne")
    __floordiv__ = _binop("floordiv")
    __rfloordiv__ = _binop("floordiv", reverse=True)
    __and__ = _binop("logical_and")
    __rand__ = _binop("logical_and", reverse=True)
    __or__ = _binop("logical_or")
    __ror__ = _binop("logical_or", reverse=True)
    __hash__ = object.__hash__

    def __invert__(self) -> Any:
        return bind_name("logical_not", self)

    def __matmul__(self, other: Any) -> Any:
        return xp.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return xp.matmul(other, self)

    def __neg__(self) -> Any:
        if is_runtime_int(self):
            return _Dispatch.integer("sub", 0, self)
        return bind_name("neg", self)

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        if is_runtime_int(self):
            return _Dispatch.integer("maximum", self, -self)
        return bind_name("abs", self)

    __bool__ = _bool
    __array__ = _as_ndarray
    __float__ = _branch_error(
        "float() (or storing into an element of an array difgen does not trace)",
        float,
    )
    __int__ = _branch_error("int() (or storing into an integer array)", int)

    def __index__(self) -> int:
        if WATCHERS and not isinstance(self.atom, Lit):
            WATCHERS[-1]()  # range(n) of an int context: a loop, once rewritten
        return cast(int, _index_error(self))

    __complex__ = _branch_error("complex()", complex)
    item = _branch_error(".item()", lambda value, *args: value.item(*args))
    tolist = _branch_error(".tolist()", lambda value: value.tolist())

    # -- indexing
    def __getitem__(self, index: Any) -> Any:
        if has_runtime_index(index):
            return _Dispatch.getitem(self, index)
        static = _static_index(index)
        frozen = freeze_index(static, self.shape)
        result = bind_name("getitem", self, index=frozen)
        if is_basic(static) and not is_element(static, self.ndim):
            # NumPy returns a view (an element read is a scalar copy: ``a[0], a[1]
            # = a[1], a[0]`` swaps)
            return view_of(self, result, lambda a: a[static])
        return result

    def __setitem__(self, index: Any, value: Any) -> None:
        if has_runtime_index(index):
            _Dispatch.setitem(self, index, value)
            return
        frozen = freeze_index(_static_index(index), self.shape)
        self.write(bind_name("set_index", self, value, index=frozen))

    def _inplace(self, result: Any) -> Tracer:
        self.write(result)
        return self

    def __iadd__(self, other: Any) -> Tracer:
        return self._inplace(self + other)

    def __isub__(self, other: Any) -> Tracer:
        return self._inplace(self - other)

    def __imul__(self, other: Any) -> Tracer:
        return self._inplace(self * other)

    def __itruediv__(self, other: Any) -> Tracer:
        return self._inplace(self / other)

    def __ipow__(self, other: Any) -> Tracer:
        return self._inplace(self**other)

    def __imod__(self, other: Any) -> Tracer:
        return self._inplace(self % other)

    def __imatmul__(self, other: Any) -> Tracer:
        return self._inplace(self @ other)

    # -- a new array object, a dtype conversion (the ndarray methods that forward
    # to NumPy's functions are installed by the frontend: use_array_methods)
    def copy(self, order: str = "C") -> Any:
        return Tracer(self.builder, self.atom)  # a new array object, not a view

    def astype(self, dtype: Any, *args: Any, copy: bool = True, **kwargs: Any) -> Any:
        if np.dtype(dtype) != self.dtype:
            return _Dispatch.astype(self, dtype)
        return self.copy() if copy else self


def view_of(
    source: Any, result: Any, op: Callable[[Any], Any], writable: bool = True
) -> Any:
    """``result = op(source)`` is a NumPy view of ``source``: make the tracer know it
    (:mod:`difgen.core.views`).

    A result folded to a plain array (``source`` a constant) becomes a constant
    tracer, so later writes into the base still show through it.
    """
    if not isinstance(source, Tracer):
        return result
    if not isinstance(result, Tracer):
        result = Tracer(source.builder, Lit(np.asarray(result)))
    result.view = derived(source, op, writable)
    return result


def _static_index(index: Any) -> Any:
    """``index`` with constant tracers replaced by their values; traced ones refused."""
    items = index if isinstance(index, tuple) else (index,)
    static = []
    for item in items:
        if isinstance(item, Tracer):
            if isinstance(item.atom, Var):
                raise TraceError(
                    f"{user_location()}: indexing with a traced value; indices must "
                    "be constants known at build time"
                )
            item = item.atom.value
        static.append(item)
    return tuple(static) if isinstance(index, tuple) else static[0]
