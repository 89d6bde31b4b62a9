"""The operator set of DI (DifferentiationInterface.jl): one table, the single source.

An operator is a list of *results* (``value``, ``jvp``, ``vjp``, ``derivative``...)
computed from the input, the contexts and its *seeds* (``dx``, ``dy``, ``v``). Each
row of :data:`TABLE` holds every fact about one generated function, so config
validation, the signatures (:mod:`difgen.targets.signatures`) and both backends read
the same facts and no other module lists operators. A backend supplies the
expressions of each result; this module fixes the names, the shapes and the rules.

It imports nothing from difgen, so every module, :mod:`difgen.config` included, can
import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Operator:
    """One generated function and every fact about it.

    No field has a default: a row that forgets a fact fails when this module is
    imported, instead of silently taking a value nobody chose.
    """

    name: str
    seeds: tuple[str, ...]
    """Seed arguments after ``x``, in order."""
    results: tuple[str, ...]
    """Result kinds, returned in this order (as a tuple when there are several)."""
    doc: str
    """First sentence of the generated docstring."""
    always_emitted: bool
    """Emitted in every module whether or not ``operators`` lists it (only ``f``)."""
    scalar_input: bool
    """Needs ``input.shape = []`` (config rejects it for array inputs)."""
    scalar_output: bool
    """Needs ``f`` to return a scalar (checked once tracing knows the output)."""
    sparse: bool
    """With ``sparse = true`` its last result is a SciPy CSR array."""
    takes_out: bool
    """Offers ``out=`` to receive its last result when that is an array."""


TABLE: tuple[Operator, ...] = (
    Operator(
        "f",
        (),
        ("value",),
        "The function itself",
        always_emitted=True,
        scalar_input=False,
        scalar_output=False,
        sparse=False,
        takes_out=False,
    ),
    Operator(
        "pushforward",
        ("dx",),
        ("jvp",),
        "Pushforward (JVP): J(x) @ dx",
        always_emitted=False,
        scalar_input=False,
        scalar_output=False,
        sparse=False,
        takes_out=False,
    ),
    Operator(
        "value_and_pushforward",
        ("dx",),
        ("value", "jvp"),
        "f(x) and J(x) @ dx",
        always_emitted=False,
        scalar_input=False,
        scalar_output=False,
        sparse=False,
        takes_out=False,
    ),
    Operator(
        "pullback",
        ("dy",),
        ("vjp",),
        "Pullback (VJP): dy @ J(x)",
        always_emitted=False,
        scalar_input=False,
        scalar_output=False,
        sparse=False,
        takes_out=False,
    ),
    Operator(
        "value_and_pullback",
        ("dy",),
        ("value", "vjp"),
        "f(x) and dy @ J(x)",
        always_emitted=False,
        scalar_input=False,
        scalar_output=False,
        sparse=False,
        takes_out=False,
    ),
    Operator(
        "derivative",
        (),
        ("derivative",),
        "Derivative df/dx of a scalar input",
        always_emitted=False,
        scalar_input=True,
        scalar_output=False,
        sparse=False,
        takes_out=True,
    ),
    Operator(
        "value_and_derivative",
        (),
        ("value", "derivative"),
        "f(x) and df/dx",
        always_emitted=False,
        scalar_input=True,
        scalar_output=False,
        sparse=False,
        takes_out=True,
    ),
    Operator(
        "gradient",
        (),
        ("gradient",),
        "Gradient of a scalar output",
        always_emitted=False,
        scalar_input=False,
        scalar_output=True,
        sparse=False,
        takes_out=True,
    ),
    Operator(
        "value_and_gradient",
        (),
        ("value", "gradient"),
        "f(x) and its gradient",
        always_emitted=False,
        scalar_input=False,
        scalar_output=True,
        sparse=False,
        takes_out=True,
    ),
    Operator(
        "jacobian",
        (),
        ("jacobian",),
        "Jacobian, shaped y.shape + x.shape",
        always_emitted=False,
        scalar_input=False,
        scalar_output=False,
        sparse=True,
        takes_out=True,
    ),
    Operator(
        "value_and_jacobian",
        (),
        ("value", "jacobian"),
        "f(x) and its Jacobian",
        always_emitted=False,
        scalar_input=False,
        scalar_output=False,
        sparse=True,
        takes_out=True,
    ),
    Operator(
        "second_derivative",
        (),
        ("second_derivative",),
        "Second derivative d2f/dx2",
        always_emitted=False,
        scalar_input=True,
        scalar_output=False,
        sparse=False,
        takes_out=True,
    ),
    Operator(
        "value_derivative_and_second_derivative",
        (),
        ("value", "derivative", "second_derivative"),
        "f(x), df/dx and d2f/dx2",
        always_emitted=False,
        scalar_input=True,
        scalar_output=False,
        sparse=False,
        takes_out=False,
    ),
    Operator(
        "hvp",
        ("v",),
        ("hvp",),
        "Hessian-vector product H(x) @ v",
        always_emitted=False,
        scalar_input=False,
        scalar_output=True,
        sparse=False,
        takes_out=False,
    ),
    Operator(
        "hessian",
        (),
        ("hessian",),
        "Hessian, shaped x.shape + x.shape",
        always_emitted=False,
        scalar_input=False,
        scalar_output=True,
        sparse=True,
        takes_out=True,
    ),
    Operator(
        "value_gradient_and_hessian",
        (),
        ("value", "gradient", "hessian"),
        "f(x), its gradient and its Hessian",
        always_emitted=False,
        scalar_input=False,
        scalar_output=True,
        sparse=True,
        takes_out=False,
    ),
)
"""Every operator in canonical order: the order of the functions in a module."""

OPERATORS: dict[str, Operator] = {op.name: op for op in TABLE}
"""The rows of :data:`TABLE` by name."""

REQUESTABLE: tuple[str, ...] = tuple(op.name for op in TABLE if not op.always_emitted)
"""The names a config's ``operators`` may list (``f`` is always emitted)."""

SPARSE_KINDS = frozenset(op.results[-1] for op in TABLE if op.sparse)
"""Result kinds emitted as CSR arrays with ``sparse = true``: jacobian, hessian."""


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


def sparse_shape(kind: str, xs: Shape, ys: Shape) -> tuple[int, int]:
    """The 2-D shape of a sparse jacobian (y.size, x.size) or hessian (x.size, x.size).

    >>> sparse_shape("jacobian", (4,), (2, 3))
    (6, 4)
    """
    rows = ys if kind == "jacobian" else xs
    return (math.prod(rows), math.prod(xs))


class SparseFlag(Protocol):
    """What :func:`is_sparse` reads of a module's spec."""

    @property
    def sparse(self) -> bool: ...


def is_sparse(kind: str, spec: SparseFlag) -> bool:
    """Whether a result is emitted as a SciPy CSR array (``sparse = true``)."""
    return spec.sparse and kind in SPARSE_KINDS
