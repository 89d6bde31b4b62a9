"""The trace in progress: the stack of graph builders and the mode of the equations
recorded now.

A :class:`Builder` collects the equations of one graph (shared when identical: CSE);
:func:`tracing` opens a trace, :func:`innermost` is the one way a trace becomes the
innermost, :func:`current_builder` is it. :func:`relaxed` marks the equations
recorded in a block as derivative computations; :data:`WATCHERS` are called every
:data:`WATCH_EVERY` equations. The sub-traces of branches and loops, whose values
cross into the enclosing traces, are :class:`difgen.core.tracer.BranchBuilder`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from difgen.core.ir import Atom, Eqn, Params, Var
from difgen.core.location import user_location
from difgen.core.primitive import Primitive
from difgen.errors import TraceError

BUILDERS: list[Builder] = []
_RELAXED: list[bool] = [False]


@contextlib.contextmanager
def relaxed(on: bool = True) -> Iterator[None]:
    """Within the block, equations are recorded as derivative computations, which
    may use the identities that hold for finite values only (``0 * x = 0``).

    The AD transforms wrap their rules in it; re-issuing a recorded equation
    restores that equation's own mode (``with relaxed(eqn.relaxed)``).
    """
    _RELAXED.append(on)
    try:
        yield
    finally:
        _RELAXED.pop()


def is_relaxed() -> bool:
    """Whether equations recorded now are derivative computations."""
    return _RELAXED[-1]


WATCH_EVERY = 128
"""Every this many equations a builder records, the innermost watcher runs."""


WATCHERS: list[Callable[[], None]] = []  # the frontend's: see control.watching_loops


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
            raise TraceError(
                f"{user_location()}: {prim.name} of shapes {shapes}: {exc}"
            ) from None
        out = Var(tuple(int(n) for n in shape), dtype)
        eqn = Eqn(prim, tuple(atoms), frozen, out, is_relaxed())
        self.eqns.append(eqn)
        self.cache[key] = out
        self.producer[out] = eqn
        if WATCHERS and len(self.eqns) % WATCH_EVERY == 0:
            WATCHERS[-1]()
        return out


@contextlib.contextmanager
def innermost(builder: Builder) -> Iterator[Builder]:
    """``builder`` is the innermost trace while the block runs (the one way a trace
    is opened: :func:`tracing` and :func:`tracing_branch` both go through it)."""
    BUILDERS.append(builder)
    try:
        yield builder
    finally:
        BUILDERS.pop()


@contextlib.contextmanager
def tracing(
    avals: Sequence[tuple[tuple[int, ...], str]],
) -> Iterator[tuple[Builder, tuple[Var, ...]]]:
    """A new trace, innermost while the block runs: its builder and input Vars."""
    inputs = tuple(Var(tuple(shape), dtype) for shape, dtype in avals)
    with innermost(Builder()) as builder:
        yield builder, inputs


def current_builder() -> Builder:
    """The builder of the innermost trace in progress."""
    if not BUILDERS:
        raise RuntimeError("no trace in progress")
    return BUILDERS[-1]
