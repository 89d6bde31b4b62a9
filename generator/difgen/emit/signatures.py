"""Signature, return annotation and docstring of each emitted operator.

These depend on a module's config (input shape, contexts, batch, ``sparse``), so they
live here rather than in :mod:`difgen.operators`, which must not import config. Both
backends call them, so the two emit the same contract.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from difgen import naming
from difgen.config import ModuleSpec
from difgen.operators import (
    SPARSE_KINDS,
    Operator,
    Shape,
    result_shape,
    seed_shape,
    sparse_shape,
)

SPARSE_TYPE = "sp.csr_array"


def is_sparse(kind: str, spec: ModuleSpec) -> bool:
    """Whether a result is emitted as a SciPy CSR array (``sparse = true``)."""
    return spec.sparse and kind in SPARSE_KINDS


def sparse_out(op: Operator, spec: ModuleSpec) -> bool:
    """Whether the operator fills a given CSR array's ``data`` in place (``out=``):
    its last result is sparse and the module is compiled (``emit = "c"``), where
    building a new CSR array would cost more than computing its nonzeros."""
    return op.takes_out and spec.emit == "c" and is_sparse(op.results[-1], spec)


def annotation(shape: Shape) -> str:
    """Scalars are Python floats; arrays are float64 NumPy arrays."""
    return "float" if shape == () else "NDArray[np.float64]"


def signature(op: Operator, spec: ModuleSpec, ys: Shape) -> tuple[str, str]:
    """(parameter list, return annotation) of the emitted function."""
    xs, batch = spec.input.shape, spec.batch
    params = [f"{naming.INPUT}: {annotation(xs)}"]
    params += [f"{s}: {annotation(seed_shape(s, xs, ys, batch))}" for s in op.seeds]
    params += [f"{c.name}: {annotation(c.shape)}" for c in spec.contexts]
    shapes = [result_shape(k, xs, ys, batch) for k in op.results]
    sparse = is_sparse(op.results[-1], spec)
    if op.takes_out and shapes[-1] != () and not sparse:
        params.append(f"{naming.OUT}: NDArray[np.float64] | None = None")
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
        return f"{kind} {sparse_shape(kind, xs, ys)} as CSR"
    return f"{kind} {result_shape(kind, xs, ys, spec.batch)}"


def docstring(op: Operator, spec: ModuleSpec, ys: Shape) -> str:
    """One line on what it computes and the shapes involved."""
    shapes = ", ".join(_describe(k, spec, ys) for k in op.results)
    batched = spec.batch > 1 and any(s in ("dx", "dy") for s in op.seeds)
    extra = f"; batch of {spec.batch} seeds" if batched else ""
    return f"{op.doc}. Returns {shapes}{extra}."


def argument_checks(
    op: Operator, spec: ModuleSpec, ys: Shape, skip: AbstractSet[str] = frozenset()
) -> list[str]:
    """The statements that check (and convert) an operator's arguments.

    Each argument is checked against its hard-coded shape on the fast path (one
    type, shape and dtype comparison); anything else goes through the module's
    helpers, which convert lists, ints and other real arrays to float64 and raise
    TypeError (complex, object) or ValueError (shape) naming the argument. ``out``
    is checked where it is written (:func:`difgen.backends.epilogue.returns`).
    """
    xs, batch = tuple(spec.input.shape), spec.batch
    arguments = [(naming.INPUT, xs)]
    arguments += [(s, tuple(seed_shape(s, xs, ys, batch))) for s in op.seeds]
    arguments += [(c.name, tuple(c.shape)) for c in spec.contexts]
    lines = []
    for name, shape in arguments:
        if name in skip:  # the body checks it (see Function.checked)
            continue
        if shape == ():
            lines += [
                f"if not isinstance({name}, float):",
                f"    {name} = {naming.AS_SCALAR}({name!r}, {name})",
            ]
        else:
            lines += [
                (
                    f"if type({name}) is not {naming.NDARRAY} or {name}.shape != "
                    f"{shape!r} or {name}.dtype is not {naming.F64}:"
                ),
                f"    {name} = {naming.AS_ARRAY}({name!r}, {name}, {shape!r})",
            ]
    return lines
