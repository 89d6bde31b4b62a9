"""The printer's calls into NumPy: a transcendental over many elements as NumPy's
own ufunc loop, a large matmul as NumPy's ``dot`` (BLAS), each on arrays that wrap
the operands' memory (docs/design.md, section 10). Functions of the
:class:`~difgen.targets.c.printer.Printer` writing them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from difgen import precision
from difgen.core.ir import Lit
from difgen.targets.c import glue
from difgen.targets.c.extension import PREFIX
from difgen.targets.c.moves import affine
from difgen.targets.c.nest import eqn_text
from difgen.targets.c.program import Store, View

if TYPE_CHECKING:
    from difgen.targets.c.printer import Printer


def operand(p: Printer, atom: Any) -> tuple[str, tuple[int, ...]] | None:
    """A pointer to ``atom``'s elements and their strides (in elements), when
    they lie in memory at affine positions (an array, a strided view)."""
    shape = tuple(np.shape(atom.value)) if isinstance(atom, Lit) else atom.shape
    c_strides = tuple(int(s) // 8 for s in np.empty(shape).strides)
    if isinstance(atom, Lit) or atom in p.consts:
        value = atom.value if isinstance(atom, Lit) else p.consts[atom]
        return p.tables.doubles(value), c_strides
    v = p.reading(p.values[atom])
    if isinstance(v, Store) and v.shape == shape:
        return v.name, c_strides
    if isinstance(v, View):
        found = affine(v.table)
        if found is not None and all(s >= 0 for s in found[1]):
            return f"{v.base.name} + {found[0]}", found[1]
    return None


def _bytes(strides: tuple[int, ...]) -> tuple[int, ...]:
    """Strides in elements as NumPy's, in bytes of the module's float type."""
    item = 4 if precision.is_float32() else 8
    return tuple(item * s for s in strides)


def ufunc_call(p: Printer, eqn: Any) -> None:
    """``numpy.<ufunc>(a, out=result)`` on arrays wrapping the memory."""
    (a,) = eqn.inputs
    found = operand(p, a)
    assert found is not None  # _ufunc checked the operand's layout
    pointer, strides = found
    store = p._array(eqn.out)
    name = eqn.primitive.impl.__name__
    fn, x, y = p._fresh("u"), p._fresh("m"), p._fresh("m")
    p.calls_numpy = True
    p.lines += [
        f"/* {eqn_text(eqn)}: NumPy's {name} loop */",
        "{",
        f"    static PyObject *{fn} = NULL;",
        (
            f'    if ({fn} == NULL && ({fn} = {p.use("numpy_attr")}("{name}")) == NULL) '
            f"goto {PREFIX}fail;"
        ),
        *_wrap(x, tuple(a.shape), pointer, strides, writeable=False),
        *_wrap(y, tuple(eqn.out.shape), store.name, None, writeable=True),
        (
            f"    PyObject *{y}_r = ({x} == NULL || {y} == NULL) ? NULL : "
            f"PyObject_CallFunctionObjArgs({fn}, {x}, {y}, NULL);"
        ),
        f"    Py_XDECREF({x});",
        f"    Py_XDECREF({y});",
        f"    if ({y}_r == NULL) goto {PREFIX}fail;",
        f"    Py_DECREF({y}_r);",
        "}",
    ]
    p.values[eqn.out] = store


def _wrap(
    name: str,
    shape: tuple[int, ...],
    pointer: str,
    strides: tuple[int, ...] | None,
    writeable: bool,
) -> list[str]:
    """Lines making ``name``, an ndarray over existing memory (no copy)."""
    lines = [f"    npy_intp {name}_d[] = {glue.dims(shape)};"]
    if strides is not None:
        lines.append(f"    npy_intp {name}_s[] = {glue.dims(_bytes(strides))};")
    flags = "NPY_ARRAY_CARRAY" if writeable else "NPY_ARRAY_ALIGNED"
    lines.append(
        f"    PyObject *{name} = PyArray_New(&PyArray_Type, {len(shape)}, "
        f"{name}_d, NPY_DOUBLE, {name + '_s' if strides is not None else 'NULL'}, "
        f"(void *)({pointer}), 0, {flags}, NULL);"
    )
    return lines


def blas(p: Printer, eqn: Any, store: Store) -> None:
    """A large 1-D/2-D ``a @ b`` through NumPy's own ``dot`` (BLAS) into
    ``store``, on arrays that wrap the operands' memory (the planner chose it:
    both operands lie in memory at affine positions)."""
    a, b = eqn.inputs
    operands = [operand(p, a), operand(p, b)]
    lines = [f"/* {eqn_text(eqn)}: NumPy's dot (BLAS) */", "{"]
    names = []
    for atom, found in zip((a, b), operands):
        assert found is not None
        pointer, strides = found
        name = p._fresh("m")
        names.append(name)
        lines += [
            f"    npy_intp {name}_d[] = {glue.dims(tuple(atom.shape))};",
            f"    npy_intp {name}_s[] = {glue.dims(_bytes(strides))};",
            (
                f"    PyObject *{name} = PyArray_New(&PyArray_Type, {atom.ndim}, "
                f"{name}_d, NPY_DOUBLE, {name}_s, (void *)({pointer}), 0, "
                "NPY_ARRAY_ALIGNED, NULL);"
            ),
        ]
    out = p._fresh("m")
    lines += [
        f"    npy_intp {out}_d[] = {glue.dims(tuple(eqn.out.shape))};",
        (
            f"    PyObject *{out} = PyArray_New(&PyArray_Type, {eqn.out.ndim}, "
            f"{out}_d, NPY_DOUBLE, NULL, (void *){store.name}, 0, "
            "NPY_ARRAY_CARRAY, NULL);"
        ),
        (
            f"    PyObject *{out}_r = ({names[0]} == NULL || {names[1]} == NULL || "
            f"{out} == NULL) ? NULL : PyArray_MatrixProduct2({names[0]}, "
            f"{names[1]}, (PyArrayObject *){out});"
        ),
        f"    Py_XDECREF({names[0]});",
        f"    Py_XDECREF({names[1]});",
        f"    Py_XDECREF({out});",
        f"    if ({out}_r == NULL) goto {PREFIX}fail;",
        f"    Py_DECREF({out}_r);",
        "}",
    ]
    p.lines += lines
    p.calls_numpy = True
