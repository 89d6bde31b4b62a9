"""Gathers and scatter-adds through an int64 index argument, in the C loops
(docs/design.md, section 10).

``x[idx]`` with an int64 context ``idx`` is ``gather[index=(..., ('dyn', 0), ...)]``
and its transpose (reverse mode) a ``scatter_add_dyn``, NumPy's ``np.add.at``. The
C loops take them when the index is one run-time operand along one axis (every
other item a full slice) and that operand is an argument of the operator: the
argument prologue converts it as it converts an int64 argument that is only cast
(:mod:`difgen.targets.c.ints`: exactly int64 on the fast path, else the module's
``_as_ints``, whose errors are the Python operator's), and the loops read it as
doubles, exact for every index NumPy could accept (an axis is far shorter than
2**53). Any other run-time index (computed, several operands, after an
Ellipsis) keeps its operator in vector code.

NumPy's semantics, from the C: a negative index counts from the end, and one out of
bounds raises ``IndexError`` with the message of the module's own index check
(``"idx: index 5 is out of bounds for axis 0 with size 5"``, the first bad index
in the argument's order), the call returning NULL; the scatter-add adds repeated
positions once each, in the index's order, from zeros, as ``np.add.at`` does (the
same sums, bit for bit). The steps keep the GIL (they may raise).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen.core.ir import Eqn, Lit, Var
from difgen.core.primitive import INDEXED, LoopForm
from difgen.derive.checks import enforced_checks
from difgen.targets.c.glue import PREFIX
from difgen.targets.c.nest import c_number
from difgen.targets.c.program import NoLoopForm, Store

_FULL = ("slice", None, None, None)


@dataclass(frozen=True)
class Axis:
    """A one-axis run-time index of an equation: the array indexed has shape
    ``(pre..., size, post...)`` (``outer`` and ``inner`` elements around the axis
    ``axis``), the index operand (input ``slot``) has ``count`` elements."""

    slot: int
    axis: int
    outer: int
    size: int
    count: int
    inner: int


def one_axis(eqn: Eqn) -> Axis | None:
    """The equation's index as :class:`Axis`, or None for an equation that is no
    gather or scatter-add through one run-time operand along one axis."""
    form = eqn.primitive.c_loop
    if not isinstance(form, LoopForm) or form.kind not in INDEXED:
        return None
    if len(eqn.inputs) != 2:
        return None
    gather = form.kind == "gather"
    index = tuple(eqn.params.as_dict()["index"])
    shape = tuple(eqn.inputs[0].shape if gather else eqn.out.shape)
    dyn = [k for k, item in enumerate(index) if item == ("dyn", 0)]
    if len(dyn) != 1 or any(i != _FULL for k, i in enumerate(index) if k != dyn[0]):
        return None
    axis = dyn[0]
    if axis >= len(shape):
        return None
    idx = eqn.inputs[1]
    count = int(np.prod(idx.shape, dtype=np.int64))
    region = (*shape[:axis], *idx.shape, *shape[axis + 1 :])
    if tuple(eqn.inputs[0].shape if not gather else eqn.out.shape) != region:
        return None  # a broadcast value: vector code
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1 :], dtype=np.int64))
    return Axis(1, axis, outer, int(shape[axis]), count, inner)


def _element(store: Any, position: str) -> str:
    return store.name if store.shape == () else f"{store.name}[{position}]"


def _reader(p: Any, atom: Any) -> Callable[[str], str]:
    """The C text of ``atom``'s element at a flat position (C text): a number, a
    scalar, or an array contiguous in memory (a table, a stored value, a view at
    consecutive positions of one)."""
    if isinstance(atom, Lit) or atom in p.consts:
        value = np.asarray(
            atom.value if isinstance(atom, Lit) else p.consts[atom], dtype=np.float64
        )
        if value.size == 1:
            number = c_number(value.ravel()[0])
            return lambda _: number
        table = p.tables.doubles(value)
        return lambda at: f"{table}[{at}]"
    value = p.reading(p.values[atom])
    if isinstance(value, Store):
        name = value.name
        if value.shape == ():
            return lambda _: name
        return lambda at: f"{name}[{at}]"
    table = getattr(value, "table", None)
    base = getattr(value, "base", None)
    if table is not None and isinstance(base, Store):
        flat = np.asarray(table).reshape(-1)
        if flat.size and np.array_equal(flat, flat[0] + np.arange(flat.size)):
            start, name = int(flat[0]), base.name
            return lambda at: f"{name}[{start} + {at}]"
    raise NoLoopForm("a run-time index of a value not contiguous in memory")


def _argument(name: str) -> str:
    """The argument's name of an input's C name (``dg_p_idx``: ``idx``)."""
    return name.removeprefix(f"{PREFIX}p_")


def print_indexed(p: Any, eqn: Eqn) -> None:
    """The C of a gather or scatter-add planned as a step (see the module
    docstring), appended to the printer ``p``'s lines."""
    found = one_axis(eqn)
    assert found is not None, eqn
    idx = eqn.inputs[found.slot]
    value = p.values.get(idx) if isinstance(idx, Var) else None
    if not isinstance(value, Store):
        raise NoLoopForm("a run-time index that is no argument")
    p.reading(value)
    src = _reader(p, eqn.inputs[0])
    store = p._array(eqn.out)
    j, i, o, t = (p._fresh(s) for s in ("j", "i", "o", "t"))
    d = p._fresh("d")
    n, m, inner = found.size, found.count, found.inner
    read = value.name if value.shape == () else f"{value.name}[{j}]"
    name = _argument(value.name)
    # the axis the user's code indexes (the module's own check says it), not the
    # axis of the derivative's array (a batch of tangents puts one before it)
    axes = {c.axis for c in enforced_checks() if c.context == name and c.size == n}
    axis = axes.pop() if len(axes) == 1 else found.axis
    label = f"{name}: index %lld is out of bounds for axis {axis} with size {n}"
    if idx in p.program.in_range:  # a loop's counter, in bounds at every trip
        p.lines.append(
            f"/* {eqn.primitive.name} along axis {found.axis}, the index proved "
            f"in [-{n}, {n}) at build time */"
        )
    else:
        p.calls_numpy = True  # the check raises: the GIL is held
        p.lines += [
            f"/* {eqn.primitive.name} through {name} along axis {found.axis} */",
            f"for (npy_intp {j} = 0; {j} < {m}; {j}++) {{",
            f"    double {d} = {read};",
            f"    if (!({d} >= -{n}.0 && {d} < {n}.0)) {{",
            f'        PyErr_Format(PyExc_IndexError, "{label}", (long long){d});',
            f"        goto {PREFIX}fail;",
            "    }",
            "}",
        ]
    form = eqn.primitive.c_loop
    if isinstance(form, LoopForm) and form.kind == "gather":
        dst = f"({o} * {m} + {j}) * {inner} + {t}"
        srcpos = f"({o} * {n} + {i}) * {inner} + {t}"
        body = f"{_element(store, dst)} = {src(srcpos)};"
    else:
        p.lines.append(f"memset({store.name}, 0, sizeof(double) * {eqn.out.size});")
        dst = f"({o} * {n} + {i}) * {inner} + {t}"
        srcpos = f"({o} * {m} + {j}) * {inner} + {t}"
        body = f"{store.name}[{dst}] += {src(srcpos)};"
    p.lines += [
        f"for (npy_intp {o} = 0; {o} < {found.outer}; {o}++) {{",
        f"    for (npy_intp {j} = 0; {j} < {m}; {j}++) {{",
        f"        npy_intp {i} = (npy_intp){read};",
        f"        if ({i} < 0) {i} += {n};",
        f"        for (npy_intp {t} = 0; {t} < {inner}; {t}++) {body}",
        "    }",
        "}",
    ]
    p.values[eqn.out] = store
