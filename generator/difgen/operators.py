"""DI's operator set: what each operator takes and returns, shared by all backends.

An operator is a list of *results* (``value``, ``jvp``, ``vjp``, ``derivative``...)
computed from the input, the contexts and its *seeds* (``dx``, ``dy``, ``v``). A
backend supplies the expressions of each result; this module fixes the signatures,
the shapes and the docstrings, so both backends emit the same contract.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from difgen.config import ModuleSpec
from difgen.emit import naming

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Operator:
    """One generated function: its seed arguments and its results, in order."""

    name: str
    seeds: tuple[str, ...]
    results: tuple[str, ...]
    doc: str

    @property
    def takes_out(self) -> bool:
        """``out=`` is offered by the single-result array operators (DESIGN.md table)."""
        return self.results[-1] in _OUT_RESULTS and len(self.results) <= 2


_OUT_RESULTS = {"derivative", "gradient", "jacobian", "second_derivative", "hessian"}

_TABLE = [
    ("f", (), ("value",), "The function itself"),
    ("pushforward", ("dx",), ("jvp",), "Pushforward (JVP): J(x) @ dx"),
    ("value_and_pushforward", ("dx",), ("value", "jvp"), "f(x) and J(x) @ dx"),
    ("pullback", ("dy",), ("vjp",), "Pullback (VJP): dy @ J(x)"),
    ("value_and_pullback", ("dy",), ("value", "vjp"), "f(x) and dy @ J(x)"),
    ("derivative", (), ("derivative",), "Derivative df/dx of a scalar input"),
    ("value_and_derivative", (), ("value", "derivative"), "f(x) and df/dx"),
    ("gradient", (), ("gradient",), "Gradient of a scalar output"),
    ("value_and_gradient", (), ("value", "gradient"), "f(x) and its gradient"),
    ("jacobian", (), ("jacobian",), "Jacobian, shaped y.shape + x.shape"),
    ("value_and_jacobian", (), ("value", "jacobian"), "f(x) and its Jacobian"),
    ("second_derivative", (), ("second_derivative",), "Second derivative d2f/dx2"),
    ("value_derivative_and_second_derivative", (),
     ("value", "derivative", "second_derivative"), "f(x), df/dx and d2f/dx2"),
    ("hvp", ("v",), ("hvp",), "Hessian-vector product H(x) @ v"),
    ("hessian", (), ("hessian",), "Hessian, shaped x.shape + x.shape"),
    ("value_gradient_and_hessian", (), ("value", "gradient", "hessian"),
     "f(x), its gradient and its Hessian"),
]  # fmt: skip

OPERATORS: dict[str, Operator] = {
    name: Operator(name, seeds, results, doc) for name, seeds, results, doc in _TABLE
}


def result_shape(kind: str, xs: Shape, ys: Shape, batch: int) -> Shape:
    """Shape of one result kind."""
    lead: Shape = (batch,) if batch > 1 else ()
    return {
        "value": ys,
        "jvp": lead + ys,
        "vjp": lead + xs,
        "derivative": ys,
        "second_derivative": ys,
        "gradient": xs,
        "hvp": xs,
        "jacobian": ys + xs,
        "hessian": xs + xs,
    }[kind]


def seed_shape(seed: str, xs: Shape, ys: Shape, batch: int) -> Shape:
    """Shape of a seed argument."""
    lead: Shape = (batch,) if batch > 1 else ()
    return {"dx": lead + xs, "dy": lead + ys, "v": xs}[seed]


SPARSE_KINDS = ("jacobian", "hessian")
SPARSE_TYPE = "sp.csr_array"


def is_sparse(kind: str, spec: ModuleSpec) -> bool:
    """Whether a result is emitted as a SciPy CSR array (``sparse = true``)."""
    return spec.sparse and kind in SPARSE_KINDS


def sparse_shape(kind: str, xs: Shape, ys: Shape) -> Shape:
    """The 2-D shape of a sparse jacobian (y.size, x.size) or hessian (x.size, x.size)."""
    size = lambda s: int(np.prod(s, dtype=np.int64))  # noqa: E731
    return (size(ys), size(xs)) if kind == "jacobian" else (size(xs), size(xs))


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
    annotations = [
        SPARSE_TYPE if is_sparse(k, spec) else annotation(s)
        for k, s in zip(op.results, shapes)
    ]
    returns = (
        annotations[0] if len(annotations) == 1 else f"tuple[{', '.join(annotations)}]"
    )
    return ", ".join(params), returns


def _describe(kind: str, spec: ModuleSpec, ys: Shape) -> str:
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
