"""Signature, return annotation and docstring of each emitted operator.

These depend on a module's config (input shape, contexts, batch, ``sparse``), so they
live here rather than in :mod:`difgen.operators`, which must not import config. Both
backends call them, so the two emit the same contract.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from difgen import naming, precision
from difgen.config import ModuleSpec
from difgen.derive.checks import IndexCheck
from difgen.operators import (
    OPERATORS,
    Operator,
    Shape,
    is_sparse,
    result_shape,
    seed_shape,
    sparse_shape,
)
from difgen.primitives.integers import INT_OPS
from difgen.targets.parts import NOTHING, SPARSE, Uses

SPARSE_TYPE = "sp.csr_array"
"""A sparse result's type (:data:`difgen.targets.parts.SPARSE` is what it uses)."""


def sparse_out(op: Operator, spec: ModuleSpec) -> bool:
    """Whether the operator fills a given CSR array's ``data`` in place (``out=``):
    its last result is sparse, in every emission (building a new CSR array costs
    SciPy 50-100 µs, more than computing a small pattern's nonzeros)."""
    return op.takes_out and is_sparse(op.results[-1], spec)


def signature_uses(op: Operator, spec: ModuleSpec) -> Uses:
    """What :func:`signature` names besides NumPy: SciPy's sparse module when a
    result (or ``out``) is a CSR array."""
    return SPARSE if any(is_sparse(k, spec) for k in op.results) else NOTHING


def annotation(shape: Shape) -> str:
    """Scalars are Python floats; arrays are float64 NumPy arrays (in a float32
    module: ``np.float32`` scalars and float32 arrays)."""
    if precision.is_float32():
        return "np.float32" if shape == () else precision.array_type()
    return "float" if shape == () else "NDArray[np.float64]"


def float_name() -> str:
    """The module global holding the module's float dtype, which the checks of
    float arguments compare with."""
    return naming.F32 if precision.is_float32() else naming.F64


_DATA = {"int64": ("int", "np.int64"), "bool": ("bool", "np.bool_")}
"""Context dtypes other than float64: (Python scalar type, NumPy scalar type)."""


def context_annotation(shape: Shape, dtype: str) -> str:
    """Float contexts as :func:`annotation`; integer and boolean contexts are arrays
    of their dtype (a 0-d one may be passed as a Python int or bool)."""
    if dtype not in _DATA:
        return annotation(shape)
    scalar, numpy_type = _DATA[dtype]
    array = f"NDArray[{numpy_type}]"
    return f"{scalar} | {array}" if shape == () else array


def signature(op: Operator, spec: ModuleSpec, ys: Shape) -> tuple[str, str]:
    """(parameter list, return annotation) of the emitted function."""
    xs, batch = spec.input.shape, spec.batch
    params = [f"{naming.INPUT}: {annotation(xs)}"]
    params += [f"{s}: {annotation(seed_shape(s, xs, ys, batch))}" for s in op.seeds]
    params += [
        f"{c.name}: {context_annotation(c.shape, c.dtype)}" for c in spec.contexts
    ]
    shapes = [result_shape(k, xs, ys, batch) for k in op.results]
    sparse = is_sparse(op.results[-1], spec)
    if op.takes_out and shapes[-1] != () and not sparse:
        params.append(f"{naming.OUT}: {precision.array_type()} | None = None")
    if sparse_out(op, spec):
        params.append(f"{naming.OUT}: {SPARSE_TYPE} | None = None")
    annotations = [
        SPARSE_TYPE if is_sparse(k, spec) else annotation(s)
        for k, s in zip(op.results, shapes)
    ]
    returns = (
        annotations[0] if len(annotations) == 1 else f"tuple[{', '.join(annotations)}]"
    )
    return ", ".join(params), returns


def _describe(kind: str, spec: ModuleSpec, ys: Shape) -> str:
    """A result kind and its shape, as the docstring's ``Returns`` part lists it."""
    xs = spec.input.shape
    if is_sparse(kind, spec):
        part = (
            f" ({spec.triangle} triangle)"
            if kind == "hessian" and spec.triangle
            else ""
        )
        return f"{kind} {sparse_shape(kind, xs, ys)}{part} as CSR"
    return f"{kind} {result_shape(kind, xs, ys, spec.batch)}"


def docstring(op: Operator, spec: ModuleSpec, ys: Shape) -> str:
    """One line on what it computes and the shapes involved."""
    shapes = ", ".join(_describe(k, spec, ys) for k in op.results)
    batched = spec.batch > 1 and any(s in ("dx", "dy") for s in op.seeds)
    extra = f"; batch of {spec.batch} seeds" if batched else ""
    return f"{op.doc}. Returns {shapes}{extra}."


def argument_checks(
    op: Operator,
    spec: ModuleSpec,
    ys: Shape,
    skip: AbstractSet[str] = frozenset(),
    numpy_floats: bool = False,
) -> list[str]:
    """The statements that check (and convert) an operator's arguments.

    Each argument is checked against its hard-coded shape on the fast path (one
    type, shape and dtype comparison); anything else goes through the module's
    helpers, which convert lists, ints and other real arrays to float64 and raise
    TypeError (complex, object) or ValueError (shape) naming the argument. ``out``
    is checked where it is written (:func:`difgen.targets.numpy.epilogue.returns`).
    With ``numpy_floats`` (vector code) a float argument becomes an ``np.float64``,
    so that its arithmetic is NumPy's.
    """
    xs, batch = tuple(spec.input.shape), spec.batch
    arguments = [(naming.INPUT, xs)]
    arguments += [(s, tuple(seed_shape(s, xs, ys, batch))) for s in op.seeds]
    arguments += [(c.name, tuple(c.shape)) for c in spec.contexts]
    dtypes = {c.name: c.dtype for c in spec.contexts}
    lines = []
    for name, shape in arguments:
        if name in skip:  # the body checks it (see Function.checked)
            continue
        dtype = dtypes.get(name, "float64")
        lines += _exact_check(op.name, name, shape, dtype, numpy_floats)
    return lines


def float_arguments(op: Operator, spec: ModuleSpec, ys: Shape) -> bool:
    """Whether any argument of ``op`` is one float (shape ``()``, float64)."""
    xs, batch = tuple(spec.input.shape), spec.batch
    shapes = [xs, *(tuple(seed_shape(s, xs, ys, batch)) for s in op.seeds)]
    floats = precision.FLOAT_DTYPES
    shapes += [tuple(c.shape) for c in spec.contexts if c.dtype in floats]
    return any(shape == () for shape in shapes)


def label(function: str, name: str) -> str:
    """How the argument checks' errors name an argument: the operator first.

    >>> label("gradient", "x")
    "'gradient: x'"
    """
    return repr(f"{function}: {name}")


def _exact_check(
    function: str,
    name: str,
    shape: Shape,
    dtype: str = "float64",
    numpy_floats: bool = False,
) -> list[str]:
    """Check and convert one argument of a hard-coded shape (and dtype); a float
    into an ``np.float64`` for NumPy code (``numpy_floats``), else a float. In a
    float32 module every float argument is float32 (an ``np.float32`` scalar)."""
    if dtype not in precision.FLOAT_DTYPES:
        return data_check(function, name, shape, dtype)
    said = label(function, name)
    if shape == () and numpy_floats and precision.is_float32():
        return [
            f"if type({name}) is not np.float32:",
            f"    {name} = {naming.AS_FLOAT32}({said}, {name})",
        ]
    if shape == () and numpy_floats:
        return [
            f"if type({name}) is not np.float64:",
            f"    {name} = {naming.AS_FLOAT64}({said}, {name})",
        ]
    if shape == ():
        return [
            f"if not isinstance({name}, float):",
            f"    {name} = {naming.AS_SCALAR}({said}, {name})",
        ]
    return [
        (
            f"if type({name}) is not {naming.NDARRAY} or {name}.shape != "
            f"{shape!r} or {name}.dtype is not {float_name()}:"
        ),
        f"    {name} = {naming.AS_ARRAY}({said}, {name}, {shape!r})",
    ]


# ---------------------------------------------------------------- points variants
def _points_arguments(
    op: Operator, spec: ModuleSpec, ys: Shape
) -> tuple[list[tuple[str, Shape]], list[tuple[str, Shape]]]:
    """(per-point arguments, shared arguments), each with its one-point shape.

    ``x`` is per point unless ``input.per_point = false``, the seeds are per point,
    a context is per point when its config says ``per_point = true``; the others
    are one value shared by every point.
    """
    xs, batch = tuple(spec.input.shape), spec.batch
    per_point = [(naming.INPUT, xs)] if spec.input.per_point else []
    per_point += [(s, tuple(seed_shape(s, xs, ys, batch))) for s in op.seeds]
    per_point += [(c.name, tuple(c.shape)) for c in spec.contexts if c.per_point]
    shared = [] if spec.input.per_point else [(naming.INPUT, xs)]
    shared += [(c.name, tuple(c.shape)) for c in spec.contexts if not c.per_point]
    return per_point, shared


def points_over_some(spec: ModuleSpec) -> bool:
    """Whether a points module shares ``x`` between points or takes int64 or bool
    data per point: its points variants check their per-point arguments with
    :data:`naming.POINTS_COUNT`, whose errors name the argument that set the
    number of points (modules without either keep their text)."""
    return spec.points and (
        not spec.input.per_point
        or any(c.per_point and c.dtype != "float64" for c in spec.contexts)
    )


def _first_per_point(op: Operator, spec: ModuleSpec) -> str:
    """The argument that sets the number of points of ``op``'s points variant."""
    if spec.input.per_point:
        return naming.INPUT
    if op.seeds:
        return op.seeds[0]
    return next(c.name for c in spec.contexts if c.per_point)


def _points_annotation(shape: Shape, dtype: str) -> str:
    """A per-point argument's annotation: an array of its dtype."""
    if dtype in _DATA:
        return f"NDArray[{_DATA[dtype][1]}]"
    return precision.array_type()


def points_signature(
    op: Operator, spec: ModuleSpec, ys: Shape, with_out: bool = True
) -> tuple[str, str]:
    """(parameter list, return annotation) of an operator's points variant.

    The parameters keep their names and order, so keyword calls carry over from
    the one-point operator; every result is an array with the points in front,
    written into ``out`` when it is given (one array, or a tuple of one per
    result); ``with_out`` False: the block function's, without ``out``.
    """
    xs = tuple(spec.input.shape)
    array = precision.array_type()
    x_type = array if spec.input.per_point else annotation(xs)
    params = [f"{naming.INPUT}: {x_type}"]
    params += [f"{s}: {array}" for s in op.seeds]
    params += [
        f"{c.name}: "
        + (
            _points_annotation(tuple(c.shape), c.dtype)
            if c.per_point
            else context_annotation(tuple(c.shape), c.dtype)
        )
        for c in spec.contexts
    ]
    results = [array] * len(op.results)
    returns = results[0] if len(results) == 1 else f"tuple[{', '.join(results)}]"
    if with_out:
        params.append(f"{naming.OUT}: {returns} | None = None")
    return ", ".join(params), returns


def _with_points(shape: Shape) -> str:
    """``(4, 3)`` -> ``"(k, 4, 3)"``: a shape with the points axis in front."""
    return (
        "(" + ", ".join(["k", *(str(n) for n in shape)]) + (",)" if not shape else ")")
    )


def points_docstring(op: Operator, spec: ModuleSpec, ys: Shape) -> str:
    """What the points variant computes, its arguments' and results' shapes."""
    xs = spec.input.shape
    per_point, _ = _points_arguments(op, spec, ys)
    names = ", ".join(name for name, _ in per_point)
    shapes = ", ".join(
        f"{k} {_with_points(result_shape(k, xs, ys, spec.batch))}" for k in op.results
    )
    shared = "" if spec.input.per_point else f" Shared by every point: {naming.INPUT}."
    return f"{op.doc}, at k points. Per point: {names}.{shared} Returns {shapes}."


def points_argument_checks(op: Operator, spec: ModuleSpec, ys: Shape) -> list[str]:
    """The argument checks of a points variant.

    The first per-point argument (``x`` unless it is shared) may have any number
    of points ``k`` (0 included); the rest of its shape is exact. Every other
    per-point argument must have exactly ``k`` points, and shared arguments are
    checked as in the one-point operator.
    """
    per_point, shared = _points_arguments(op, spec, ys)
    function = naming.points(op.name)
    dtypes = {c.name: c.dtype for c in spec.contexts}
    if points_over_some(spec):
        return _points_like_checks(function, per_point, shared, dtypes)
    name, shape = per_point[0]
    lines = [
        (
            f"if type({name}) is not {naming.NDARRAY} or len({name}.shape) != "
            f"{len(shape) + 1} or {name}.shape[1:] != {shape!r} or {name}.dtype "
            f"is not {float_name()}:"
        ),
        f"    {name} = {naming.AS_POINTS}({label(function, name)}, {name}, {shape!r})",
        f"{naming.NPOINTS} = {name}.shape[0]",
    ]
    for name, shape in per_point[1:]:
        full = f"({naming.NPOINTS}, {', '.join(str(n) for n in shape)})"
        if not shape:
            full = f"({naming.NPOINTS},)"
        lines += [
            (
                f"if type({name}) is not {naming.NDARRAY} or {name}.shape != {full} "
                f"or {name}.dtype is not {float_name()}:"
            ),
            (
                f"    {name} = {naming.AS_POINTS}({label(function, name)}, {name}, "
                f"{shape!r}, {naming.NPOINTS})"
            ),
        ]
    for name, shape in shared:
        lines += _exact_check(function, name, shape, dtypes[name])
    return lines


def _dtype_test(name: str, dtype: str) -> str:
    """The fast path's dtype comparison of an argument of ``dtype``."""
    if dtype in _DATA:
        return f"{name}.dtype.type is not {_DATA[dtype][1]}"
    return f"{name}.dtype is not {float_name()}"


def _points_like_checks(
    function: str,
    per_point: Sequence[tuple[str, Shape]],
    shared: Sequence[tuple[str, Shape]],
    dtypes: dict[str, str],
) -> list[str]:
    """:func:`points_argument_checks` of a module that :func:`points_over_some`:
    each per-point argument of its dtype, the later ones with as many points as
    the first, named in their error."""
    first = per_point[0][0]
    lines = []
    for i, (name, shape) in enumerate(per_point):
        dtype = dtypes.get(name, "float64")
        if i == 0:
            test = (
                f"len({name}.shape) != {len(shape) + 1} or "
                f"{name}.shape[1:] != {shape!r}"
            )
            count, like = "None", "None"
        else:
            dims = ", ".join([naming.NPOINTS, *(str(n) for n in shape)])
            test = f"{name}.shape != ({dims}{',' if not shape else ''})"
            count, like = naming.NPOINTS, repr(first)
        said = label(function, name)
        points = f"{naming.POINTS_COUNT}({said}, {name}, {shape!r}, {count}, {like})"
        dims = ", ".join([points, *(str(n) for n in shape)])
        full = f"({dims})" if shape else f"({dims},)"
        helper = {"int64": naming.AS_INTS, "bool": naming.AS_BOOLS}.get(
            dtype, naming.AS_ARRAY
        )
        lines += [
            (
                f"if type({name}) is not {naming.NDARRAY} or {test} or "
                f"{_dtype_test(name, dtype)}:"
            ),
            f"    {name} = {helper}({said}, {name}, {full})",
        ]
        if i == 0:
            lines.append(f"{naming.NPOINTS} = {name}.shape[0]")
    for name, shape in shared:
        lines += _exact_check(function, name, shape, dtypes.get(name, "float64"))
    return lines


@dataclass(frozen=True)
class PointsArguments:
    """The arguments of a points variant as its body passes them on."""

    per_point: tuple[str, ...]
    """Arguments with the points axis in front: ``x``, the seeds, per-point contexts
    (the others are contexts shared by every point)."""
    layout: tuple[str, ...]
    """The per-point float arrays (not scalars, not int64 or bool data, which
    index rather than stream) whose points axis goes innermost in memory when
    there are more than ``layout_size`` points.

    NumPy runs its inner loop along the last axis of a C-ordered array: on
    ``(k, 10)`` arrays that is 10 elements per loop where Fortran order gives
    loops of k (``python -m benchmarks.calibration`` times a block of the
    Rosenbrock gradient in both orders)."""
    layout_size: int
    """The most elements of one point among ``layout``'s arrays (0 if none)."""


def points_arguments(op: Operator, spec: ModuleSpec, ys: Shape) -> PointsArguments:
    """The per-point and the re-laid-out arguments of ``op``'s points variant."""
    per_point, _ = _points_arguments(op, spec, ys)
    data = {c.name for c in spec.contexts if c.dtype != "float64"}
    arrays = [(name, shape) for name, shape in per_point if shape and name not in data]
    return PointsArguments(
        tuple(name for name, _ in per_point),
        tuple(name for name, _ in arrays),
        max((math.prod(shape) for _, shape in arrays), default=0),
    )


def data_check(function: str, name: str, shape: Shape, dtype: str) -> list[str]:
    """The check of an int64 or bool context: exactly that dtype on the fast path;
    otherwise the module's helper converts other integer (or boolean) arrays and
    refuses floats with a TypeError, since rounding an index would be a guess."""
    numpy_type = _DATA[dtype][1]
    helper = naming.AS_INTS if dtype == "int64" else naming.AS_BOOLS
    return [
        (
            f"if type({name}) is not {naming.NDARRAY} or {name}.shape != "
            f"{shape!r} or {name}.dtype.type is not {numpy_type}:"
        ),
        f"    {name} = {helper}({label(function, name)}, {name}, {shape!r})",
    ]


def data_helpers(
    spec: ModuleSpec, checks: Sequence[IndexCheck] = (), numpy_floats: bool = False
) -> list[str]:
    """Sources of the argument-check helpers of int64 and bool contexts, only in
    modules that have such contexts, of the index check, only in modules that
    check run-time indices, and of the float check of vector code, only in modules
    whose vector code takes a float (so every other module's text is unchanged)."""
    dtypes = {c.dtype for c in spec.contexts}
    sources = []
    if "int64" in dtypes:
        sources.append(
            _AS_INTS.replace("AS_INTS", naming.AS_INTS).replace("VALUES", naming.VALUES)
        )
    if "bool" in dtypes:
        sources.append(
            _AS_BOOLS.replace("AS_BOOLS", naming.AS_BOOLS).replace(
                "VALUES", naming.VALUES
            )
        )
    if points_over_some(spec):
        sources.append(
            _POINTS_COUNT.replace("POINTS_COUNT", naming.POINTS_COUNT).replace(
                "VALUES", naming.VALUES
            )
        )
    if points_over_some(spec) and spec.emit == "c":
        firsts = {
            naming.points(name): _first_per_point(OPERATORS[name], spec)
            for name in ("f", *spec.operators)
        }
        sources.append(
            _AS_POINTS_C.replace("AS_POINTS_C", naming.AS_POINTS_C)
            .replace("POINTS_COUNT", naming.POINTS_COUNT)
            .replace("AS_ARRAY", naming.AS_ARRAY)
            .replace("POINTS_FIRST", naming.POINTS_FIRST)
            .replace("FIRSTS", repr(firsts))
        )
    if checks:
        sources.append(_CHECK_INDEX.replace("CHECK_INDEX", naming.CHECK_INDEX))
    if numpy_floats and precision.is_float32():
        sources.append(
            _AS_FLOAT32.replace("AS_FLOAT32", naming.AS_FLOAT32).replace(
                "AS_SCALAR", naming.AS_SCALAR
            )
        )
    elif numpy_floats:
        sources.append(
            _AS_FLOAT64.replace("AS_FLOAT64", naming.AS_FLOAT64).replace(
                "AS_SCALAR", naming.AS_SCALAR
            )
        )
    return sources


def _selection(check: IndexCheck, per_point: bool = False) -> str:
    """The indices a check compares: the elements of the context it reads (all of
    it, a slice of its flat elements where their positions are evenly spaced, else
    a list of them; of every point's for a ``per_point`` context), through the
    function's integer arithmetic."""
    text = _elements(check, per_point)
    for op, const, swap in check.arithmetic:
        symbol = INT_OPS[op][1]
        a, b = (str(const), text) if swap else (text, str(const))
        if symbol.startswith("np."):
            text = f"{symbol}({a}, {b})"
        else:
            text = f"({a} {symbol} {b})"
    return text


def _elements(check: IndexCheck, per_point: bool = False) -> str:
    """The elements of the context a check reads (at every point of a
    ``per_point`` one)."""
    name, positions = check.context, check.positions
    if positions is None:
        return name
    if per_point:
        name = f"{name}.reshape({naming.NPOINTS}, -1)"
        start, steps = positions[0], {b - a for a, b in itertools.pairwise(positions)}
        if len(steps) <= 1:
            step = steps.pop() if steps else 1
            stop = positions[-1] + 1
            text = f"{start}:{stop}" if step == 1 else f"{start}:{stop}:{step}"
            return f"{name}[:, {text}]"
        return f"{name}[:, {list(positions)!r}]"
    start, steps = positions[0], {b - a for a, b in itertools.pairwise(positions)}
    if len(steps) <= 1:
        step = steps.pop() if steps else 1
        stop = positions[-1] + 1
        text = f"{start}:{stop}" if step == 1 else f"{start}:{stop}:{step}"
        return f"{name}.ravel()[{text}]"
    return f"{name}.ravel()[{list(positions)!r}]"


def index_checks(checks: Sequence[IndexCheck]) -> list[str]:
    """The statements that check the run-time indices the function reads, each
    once, after the argument checks: an index out of bounds raises NumPy's
    ``IndexError`` naming the argument in every operator, also in one whose
    graph dropped the gather (the hessian of ``np.sum(x[idx])``)."""
    return [
        f"{naming.CHECK_INDEX}({c.context!r}, {_selection(c)}, {c.size}, {c.axis})"
        for c in checks
    ]


def points_index_checks(checks: Sequence[IndexCheck], spec: ModuleSpec) -> list[str]:
    """:func:`index_checks` in a points variant: a per-point context's indices
    are checked at every point (none at zero points, where there is no index)."""
    per_point = {c.name for c in spec.contexts if c.per_point}
    lines = []
    for c in checks:
        if c.context not in per_point:
            lines += index_checks([c])
            continue
        call = (
            f"{naming.CHECK_INDEX}({c.context!r}, {_selection(c, True)}, "
            f"{c.size}, {c.axis})"
        )
        lines += [f"if {naming.NPOINTS}:", f"    {call}"]
    return lines


_AS_INTS = '''def AS_INTS(name: str, value: object, shape: tuple[int, ...]) -> NDArray[np.int64]:
    """``value`` as an int64 array of ``shape``; TypeError or ValueError naming it.

    Floats are refused, not rounded: an index that is not an integer is a mistake.
    """
    array = VALUES(name, value)
    if array.dtype.kind not in "iu" or not np.can_cast(array.dtype, np.int64):
        raise TypeError(f"{name}: expected int64 values, got {array.dtype} values")
    if array.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got shape {array.shape}")
    return array.astype(np.int64, copy=False)'''

_AS_BOOLS = '''def AS_BOOLS(name: str, value: object, shape: tuple[int, ...]) -> NDArray[np.bool_]:
    """``value`` as a bool array of ``shape``; TypeError or ValueError naming it.

    Numbers are refused: NumPy indexes with a bool array as a mask, with an integer
    array as positions, so converting one into the other would change the meaning.
    """
    array = VALUES(name, value, bools=True)
    if array.dtype != np.bool_:
        raise TypeError(f"{name}: expected bool values, got {array.dtype} values")
    if array.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got shape {array.shape}")
    return array.astype(np.bool_, copy=False)'''


_POINTS_COUNT = '''def POINTS_COUNT(
    name: str,
    value: object,
    shape: tuple[int, ...],
    count: int | None = None,
    like: str | None = None,
) -> int:
    """The number of points of ``value``, an array of points of ``shape``: any
    number when ``count`` is None, else ``count``; ValueError naming it, and
    naming ``like``, the argument that set the number of points, when it has
    another. Its dtype is checked by the helper it is then given to."""
    array = VALUES(name, value, bools=True)
    if array.ndim != len(shape) + 1 or array.shape[1:] != shape:
        expected = "(k" + "".join(f", {n}" for n in shape) + ("," if not shape else "") + ")"
        raise ValueError(f"{name}: expected shape {expected} for k points, got shape {array.shape}")
    if count is not None and array.shape[0] != count:
        raise ValueError(
            f"{name}: has {array.shape[0]} points (shape {array.shape}), but {like} has "
            f"{count}: every per-point argument needs the same number of points"
        )
    return int(array.shape[0])'''


_AS_POINTS_C = '''POINTS_FIRST = FIRSTS
"""The argument that sets the number of points of each points variant."""


def AS_POINTS_C(
    name: str, value: object, shape: tuple[int, ...], count: int | None = None
) -> NDArray[np.float64]:
    """What the compiled points variants call for a float64 argument off their
    fast path: :func:`POINTS_COUNT`, naming the argument that set the number of
    points (``name`` is the variant and the argument: "gradient_points: y")."""
    like = None if count is None else POINTS_FIRST[name.partition(": ")[0]]
    return AS_ARRAY(name, value, (POINTS_COUNT(name, value, shape, count, like), *shape))'''


_CHECK_INDEX = '''def CHECK_INDEX(name: str, index: NDArray[np.int64], size: int, axis: int) -> None:
    """IndexError naming ``name`` unless every element of ``index`` indexes an axis
    of length ``size`` (``-size <= i < size``), the message NumPy's."""
    if index.min() < -size or index.max() >= size:
        bad = index[(index < -size) | (index >= size)][0]
        raise IndexError(
            f"{name}: index {bad} is out of bounds for axis {axis} with size {size}"
        )'''


_AS_FLOAT64 = '''def AS_FLOAT64(name: str, value: object) -> np.float64:
    """``value`` as an ``np.float64`` for vector code, whose arithmetic must be
    NumPy's (a Python float's ``1.0 / 0.0`` raises; NumPy's is inf); TypeError or
    ValueError naming it."""
    return np.float64(AS_SCALAR(name, value))'''


_AS_FLOAT32 = '''def AS_FLOAT32(name: str, value: object) -> np.float32:
    """``value`` as an ``np.float32`` for the vector code of a float32 module
    (NumPy's arithmetic, in float32); TypeError or ValueError naming it."""
    return np.float32(AS_SCALAR(name, value))'''
