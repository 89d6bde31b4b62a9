"""The run-time helpers of rewritten code: a branch on a traced value as ``cond``
equations, a loop on a traced condition as ``while_loop`` equations.

The rewrite (:mod:`difgen.frontend.control.transformer`) turns the user's ``if``,
``while``, ``a if c else b``, ``and``/``or``/``not`` into calls of :func:`if_`,
:func:`while_`, :func:`ifexp`, :func:`and_`, :func:`or_` and :func:`not_` (through
the global :data:`~difgen.frontend.control.transformer.HELPERS`). Each computes
exactly what the original does when the predicate is known (it calls the branch
that is taken); when it is traced, it traces both branches, or the loop's condition
and body, as sub-graphs (:func:`difgen.core.tracer.tracing_branch`) and binds one
``cond`` (or ``while_loop``) per value they give. Messages name ``where``, the
user's line.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from difgen import budget
from difgen.core.builder import Builder, current_builder
from difgen.core.conversions import TracedBranch, as_constant
from difgen.core.ir import Atom, Graph, Lit, SubGraph, Var, dce
from difgen.core.primitive import PRIMITIVES
from difgen.core.tracer import BranchBuilder, Tracer, bind, bind_name, tracing_branch
from difgen.errors import DifgenError, TraceError
from difgen.frontend.control.invariants import hoist


class Undefined:
    """The value of a variable one branch assigns and the other leaves unbound."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name} unbound on one branch>"


def value(getter: Callable[[], Any], name: str) -> Any:
    """The current value of a variable, or :class:`Undefined` if it is unbound."""
    try:
        return getter()
    except NameError:
        return Undefined(name)


def _predicate(test: Any, where: str) -> Any:
    """``bool(test)``: a Python bool, or a traced bool scalar (NumPy's truth).

    A float is true when nonzero, so NaN is true, as ``bool(np.nan)`` is.
    """
    if not isinstance(test, Tracer) or isinstance(test.atom, Lit):
        return bool(test)
    if test.size != 1:
        raise TraceError(
            f"{where}: the truth value of an array with more than one element is "
            "ambiguous (NumPy raises ValueError); use .any() or .all()"
        )
    if test.shape != ():
        test = bind_name("reshape", test, shape=())
    if test.dtype != np.bool_:
        test = bind_name("ne", test, 0.0)
    return test


def if_(
    test: Any,
    if_true: Callable[..., Any],
    if_false: Callable[..., Any],
    values: tuple[Any, ...],
    written: tuple[Any, ...],
    where: str,
) -> Any:
    """An ``if`` statement: the taken branch, or a ``cond`` of both when traced.

    ``values`` are the current values of the variables the branches assign (each
    branch takes and returns them, or returns the function's result); ``written``
    the arrays the branches write into by item assignment, which must be traced
    arrays (difgen cannot undo a write into a plain Python or NumPy object).
    """
    pred = _predicate(test, where)
    if not isinstance(pred, Tracer):
        return (if_true if pred else if_false)(*values)
    for array in written:
        if not isinstance(array, Tracer):
            raise TraceError(
                f"{where}: a branch on a traced value writes into a "
                f"{type(array).__name__} by item assignment; difgen can branch only "
                "over writes into arrays it traces (create it with np.zeros or "
                "np.array inside the function)"
            )
    return _cond(pred, lambda: if_true(*values), lambda: if_false(*values), where)


def ifexp(
    test: Any, if_true: Callable[[], Any], if_false: Callable[[], Any], where: str
) -> Any:
    """``a if c else b``."""
    pred = _predicate(test, where)
    if not isinstance(pred, Tracer):
        return if_true() if pred else if_false()
    return _cond(pred, if_true, if_false, where)


def and_(where: str, *operands: Callable[[], Any]) -> Any:
    """``a and b and ...``: the first falsy operand, or the last."""
    result = operands[0]()
    for operand in operands[1:]:
        pred = _predicate(result, where)
        if not isinstance(pred, Tracer):
            if not pred:
                return result
            result = operand()
            continue
        result = _logical("logical_and", result, pred, operand, where)
    return result


def or_(where: str, *operands: Callable[[], Any]) -> Any:
    """``a or b or ...``: the first truthy operand, or the last."""
    result = operands[0]()
    for operand in operands[1:]:
        pred = _predicate(result, where)
        if not isinstance(pred, Tracer):
            if pred:
                return result
            result = operand()
            continue
        result = _logical("logical_or", result, pred, operand, where)
    return result


def _logical(
    name: str, before: Any, pred: Tracer, operand: Callable[[], Any], where: str
) -> Any:
    """``before and operand()`` (or ``or``) on a traced truth value ``before``.

    Between truth values it is ``logical_and``/``logical_or`` with no branch: tracing
    evaluates both sides either way, and a boolean operand has no derivative. Other
    values keep Python's semantics: the ``cond`` of the operand and ``before``.
    """
    if isinstance(before, Tracer) and before.dtype == np.bool_:
        value = operand()
        if isinstance(value, (bool, np.bool_)) or (
            isinstance(value, Tracer) and value.dtype == np.bool_ and value.size == 1
        ):
            other = _predicate(value, where)
            return bind_name(name, pred, other)
    keep = _constant_thunk(before)
    if name == "logical_and":
        return _cond(pred, operand, keep, where)
    return _cond(pred, keep, operand, where)


def _constant_thunk(result: Any) -> Callable[[], Any]:
    """A branch giving ``result``, a value from before the branch."""
    return lambda: result


def not_(operand: Any, where: str) -> Any:
    """``not a``: a traced bool for a traced ``a``."""
    pred = _predicate(operand, where)
    if not isinstance(pred, Tracer):
        return not pred
    return bind_name("logical_not", pred)


def while_(
    test: Callable[..., Any],
    body: Callable[..., Any],
    values: tuple[Any, ...],
    written: tuple[int, ...],
    where: str,
    names: tuple[str, ...],
) -> tuple[Any, ...]:
    """A ``while`` loop: Python's loop while the condition is known at build time;
    from the first traced condition on, one ``while_loop`` per loop variable.

    ``values`` are the loop variables (what the body assigns or writes into);
    ``written`` the positions of those it writes into by item assignment: the array
    objects from before the loop receive the loop's result, as NumPy writes in place.
    """
    state = values
    while True:
        pred = _predicate(test(*state), where)
        if isinstance(pred, Tracer):
            break
        if not pred:
            return state
        state = tuple(body(*state))
    final = _loop(test, body, state, where, names, implicit=_IMPLICIT[-1])
    result = list(final)
    for i in written:
        before = values[i]
        if isinstance(before, Tracer) and isinstance(result[i], Tracer):
            before.write(result[i])
            result[i] = before
    return tuple(result)


def root_loop(
    test: Callable[..., Any],
    body: Callable[..., Any],
    state: tuple[Any, ...],
    residual: Callable[..., Any],
    where: str,
) -> tuple[Any, ...]:
    """A solver's loop (``scipy.optimize.brentq``, ``newton``, ``fixed_point``
    traced by :mod:`difgen.frontend.optimize_api`): as :func:`while_`, and once the
    condition is traced a ``while_loop`` differentiated implicitly whatever the
    module's setting, on ``residual(*state)``, which is zero at the solution."""
    while True:
        pred = _predicate(test(*state), where)
        if isinstance(pred, Tracer):
            break
        if not pred:
            return state
        state = tuple(body(*state))
    return _loop(test, body, state, where, (), residual=residual)


LOOP_MIN_TRIPS = 32
"""A ``for`` loop over a build-time ``range`` of at least this many items is traced
once, as a ``while_loop`` on a traced index; a shorter one unrolls (each iteration
traced natively), which is best for it: no loop in the generated code, and every
iteration simplified with its own constants."""

UNROLL_EQUATIONS = 4096
"""A loop long enough (:data:`LOOP_MIN_TRIPS`) still unrolls when unrolling traces
fewer than this many equations (its first iteration's equations times its trip
count): unrolled code runs faster (no interpreted loop, no tape) and its module is
still small; past it, the module and the build would grow with the trip count.
``python -m benchmarks.scale --only euler`` measures both sides: module size,
build time and evaluation against the number of steps."""

_UNROLLING = [False]

IMPLICIT_MODES = ("off", "on", "auto")
_IMPLICIT = ["off"]


@contextlib.contextmanager
def implicit_loops(mode: str) -> Iterator[None]:
    """Trace with ``while`` loops on a traced condition differentiated implicitly:
    ``"on"`` every one (a loop whose exit test is not a tolerance on a residual is
    refused), ``"auto"`` those whose exit test is one (each named in a build note),
    ``"off"`` none (the derivative of the iterations taken)."""
    if mode not in IMPLICIT_MODES:
        raise ValueError(f"unknown implicit mode {mode!r}")
    _IMPLICIT.append(mode)
    try:
        yield
    finally:
        _IMPLICIT.pop()


def _implicit_loop(
    mode: str, cond: Graph, body: Graph, n_state: int, where: str
) -> bool:
    """Whether the loop is differentiated implicitly (refused or noted as ``mode``
    says): its exit test must compare a residual's size with a tolerance."""
    if mode == "off":
        return False
    from difgen.ad.implicit import recognised

    if not recognised(cond, body, n_state):
        if mode == "on":
            raise TraceError(
                f"{where}: implicit = true, but the exit test of this `while` loop "
                "is not recognised as a tolerance on a residual (`abs(r) > tol`, "
                "`np.max(np.abs(r)) > tol`, `np.linalg.norm(r) > tol`, "
                "`np.any(np.abs(r) > tol)`, or a variable the body computes so, "
                "alone or joined by `and`, with r computed from the loop's "
                "variables and "
                'tol not); write the test that way, or use implicit = "auto" to '
                "differentiate this loop through its iterations"
            )
        return False
    message = (
        f"{where}: the `while` loop is differentiated implicitly (the "
        "implicit-function derivative at its final state, no tape)"
    )
    if message not in budget.notes():
        budget.note(message)
    return True


_UNROLLED: list[dict[str, tuple[int, int]]] = []
"""Where :func:`counting_unrolled` records unrolled loops (innermost last)."""


@contextlib.contextmanager
def counting_unrolled() -> Iterator[dict[str, tuple[int, int]]]:
    """Record each static ``for`` loop traced iteration by iteration in the block:
    its place (``file.py:12``) -> (iterations, equations traced by them), the
    larger of a loop traced twice (progress reports name a loop that makes most
    of a large graph)."""
    found: dict[str, tuple[int, int]] = {}
    _UNROLLED.append(found)
    try:
        yield found
    finally:
        _UNROLLED.remove(found)


def _counted_unrolled(
    where: str,
    body: Callable[..., Any],
    items: Any,
    state: tuple[Any, ...],
    before: Any,
) -> tuple[Any, ...]:
    """:func:`_unrolled`, its iterations and equations recorded (when counting)."""
    if not _UNROLLED:
        return _unrolled(body, items, state, before)
    trips = 0

    def counted() -> Iterator[Any]:
        nonlocal trips
        for item in items:
            trips += 1
            yield item

    start = len(current_builder().eqns)
    result = _unrolled(body, counted(), state, before)
    count = (trips, len(current_builder().eqns) - start)
    for found in _UNROLLED:
        found[where] = max(found.get(where, (0, 0)), count, key=lambda c: c[1])
    return result


@contextlib.contextmanager
def unrolling() -> Iterator[None]:
    """Trace with every static ``for`` loop unrolled, whatever its length (reverse
    over reverse cannot go through a loop's adjoint)."""
    _UNROLLING.append(True)
    try:
        yield
    finally:
        _UNROLLING.pop()


def for_(
    body: Callable[..., Any],
    call: Any,
    args: tuple[Any, ...],
    values: tuple[Any, ...],
    written: tuple[int, ...],
    where: str,
    names: tuple[str, ...],
) -> tuple[Any, ...]:
    """A ``for target in call(*args)`` loop: the loop variables, then the target.

    ``body(item, *state)`` runs one iteration; ``values`` are the loop variables
    (what the body assigns or writes into), then the target's value before the loop
    (what it keeps when there is no iteration). Over the builtin ``range`` of at
    least :data:`LOOP_MIN_TRIPS` items known at build time, the first iteration runs
    natively (Python numbers in the state become traced values with their dtype),
    and the others are traced once on symbolic loop variables and a traced int64
    index, as one ``while_loop`` on ``index < stop``. A body that cannot be traced so
    (it uses the index as a Python int, changes a variable's shape or structure, ...)
    runs natively, every iteration traced in turn, and the build says so once
    (:func:`difgen.budget.note`). Anything else iterates natively.
    """
    state, before = tuple(values[:-1]), values[-1]
    if call is not range:
        return _sequence_for(body, call, args, values, written, where, names)
    if any(isinstance(a, Tracer) and not isinstance(a.atom, Lit) for a in args):
        *looped, index = _traced_range(body, args, state, where, names)
        return (*_write_back_loop(looped, values, written), index)
    items = range(*args)
    if (
        len(items) < LOOP_MIN_TRIPS
        or not state
        or _UNROLLING[-1]
        or "while_loop" not in PRIMITIVES
    ):
        return _counted_unrolled(where, body, items, state, before)
    if any(not isinstance(state[i], Tracer) for i in written):
        _unrolled_note(
            where, len(items), "it writes into an array difgen does not trace"
        )
        return _counted_unrolled(where, body, items, state, before)
    before_first = len(current_builder().eqns)
    state = tuple(body(items[0], *state))
    rest = items[1:]
    per_iteration = len(current_builder().eqns) - before_first
    if per_iteration * len(items) < UNROLL_EQUATIONS:  # small enough unrolled
        return _counted_unrolled(where, body, rest, state, items[0])
    try:
        final = _index_loop(
            body, rest.start, rest.stop, rest.step, state, where, names
        )[1:]
    except TracedBranch as exc:
        from difgen.frontend.control.rewrite import is_rewritten

        if type(exc) is not TracedBranch or not is_rewritten(exc.code):
            raise  # a function to rewrite first: the trace starts again
        _unrolled_note(where, len(items), _reason(exc))
        return _counted_unrolled(where, body, rest, state, items[0])
    except TraceError as exc:
        _unrolled_note(where, len(items), _reason(exc))
        return _counted_unrolled(where, body, rest, state, items[0])
    except DifgenError:
        raise
    except Exception as exc:  # noqa: BLE001  (the user's body on a traced index)
        _unrolled_note(where, len(items), f"{type(exc).__name__}: {exc}")
        return _counted_unrolled(where, body, rest, state, items[0])
    return (*_write_back_loop(final, values, written), items[-1])


def sequence(iterable: Any) -> Any:
    """What a ``for`` loop iterates over, when it is not a call (``for w in ws``)."""
    return iterable


@dataclass
class _Column:
    """One sequence of a loop over static sequences: the items as Python sees them
    (``native``), and as one array indexed by the loop's traced index (``stacked``,
    a constant or a traced array; None for ``enumerate``'s count, ``start`` on)."""

    native: list[Any]
    stacked: Any = None
    start: int = 0

    def item(self, index: Any) -> Any:
        if self.stacked is None:
            return index + self.start
        table = self.stacked
        if not isinstance(table, Tracer):
            table = Tracer(current_builder(), Lit(table))
        return table[index]


class _Differs(Exception):
    """The items of a sequence cannot be one array: the loop stays unrolled."""


class _Native(Exception):
    """Not a static sequence (an iterator, a dict...): Python iterates over it."""


def _column(seq: Any) -> _Column:
    """A sequence's items and their stacked array (:class:`_Differs` if they
    cannot be one: different shapes or types, nested items, no items)."""
    if isinstance(seq, Tracer):
        if seq.shape == ():
            raise _Native
        return _Column(list(seq), seq)
    if isinstance(seq, np.ndarray) and seq.dtype != object:
        if seq.ndim == 0:
            raise _Native
        if seq.dtype not in (np.float64, np.int64, np.float32, np.int32):
            raise _Differs(f"its items have dtype {seq.dtype}")
        wide = np.int64 if seq.dtype.kind == "i" else np.float64
        return _Column(list(seq), seq.astype(wide))
    if not isinstance(seq, (list, tuple)) or not seq:
        raise _Native
    items = list(seq)
    if any(isinstance(v, (list, tuple, dict)) for v in items):
        raise _Native  # nested items (a list of (W, b) pairs): Python's loop
    kinds = {_kind(v) for v in items}
    if len(kinds) != 1 or None in kinds:
        raise _Differs("its items differ in shape or type")
    if any(isinstance(v, Tracer) for v in items):
        stacked = np.stack(
            [v if isinstance(v, Tracer) else np.asarray(v) for v in items]
        )
        return _Column(items, stacked)
    kind = kinds.pop()
    dtype = np.int64 if kind is not None and kind[0] == "i" else np.float64
    return _Column(items, np.stack([np.asarray(v, dtype=dtype) for v in items]))


def _kind(value: Any) -> tuple[str, tuple[int, ...]] | None:
    """An item's type for stacking: ints, floats (numbers or arrays) by shape."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, Tracer):
        return ("i" if value.dtype == np.int64 else "f", tuple(value.shape))
    if isinstance(value, (int, np.integer)):
        return ("i", ())
    if isinstance(value, (float, np.floating)):
        return ("f", ())
    if isinstance(value, np.ndarray) and value.dtype.kind in "if":
        return (value.dtype.kind, value.shape)
    return None


def _columns(call: Any, args: tuple[Any, ...]) -> tuple[list[_Column], bool] | None:
    """The sequences of ``call(*args)`` (``enumerate``, ``zip`` or one sequence)
    and whether its items are tuples; None for any other iterable (:class:`_Differs`
    when one of them cannot be stacked)."""
    if call is enumerate and 1 <= len(args) <= 2:
        start = args[1] if len(args) == 2 else 0
        if not _python_int(start):
            return None
        inner = _column(args[0])
        count = list(range(start, start + len(inner.native)))
        return [_Column(count, None, int(start)), inner], True
    if call is zip and args:
        return [_column(a) for a in args], True
    if call is sequence and len(args) == 1:
        return [_column(args[0])], False
    return None


def _stacked(
    call: Any, args: tuple[Any, ...], native: Any
) -> tuple[list[_Column], bool] | None:
    """:func:`_columns` of the loop's iterable, or of what another call gave
    (``x.reshape(40, 2)``, ``np.linspace(...)``); None: iterated natively."""
    try:
        found = _columns(call, args)
        if found is None and call not in (enumerate, zip, sequence):
            found = [_column(native)], False
    except _Native:
        return None
    return found


def _sequence_for(
    body: Callable[..., Any],
    call: Any,
    args: tuple[Any, ...],
    values: tuple[Any, ...],
    written: tuple[int, ...],
    where: str,
    names: tuple[str, ...],
) -> tuple[Any, ...]:
    """``for target in seq``, ``enumerate(seq)``, ``zip(a, b, ...)`` over static
    sequences: a loop on a traced index into their stacked items when they can be
    stacked and the body traces once (as :func:`for_` does for a ``range``),
    else unrolled, with a build note saying why."""
    state, before = tuple(values[:-1]), values[-1]
    native = call(*args)
    try:
        found = _stacked(call, args, native)
    except _Differs as exc:
        found = None
        items = list(native)
        if len(items) >= LOOP_MIN_TRIPS and state and not _UNROLLING[-1]:
            _sequence_note(
                where, len(items), "the body differs between iterations", str(exc)
            )
        return _unrolled(body, items, state, before)
    if found is None:
        return _unrolled(body, native, state, before)
    columns, tupled = found
    trips = min(len(c.native) for c in columns)
    items = list(zip(*(c.native for c in columns))) if tupled else columns[0].native
    items = items[:trips]
    if (
        trips < LOOP_MIN_TRIPS
        or not state
        or _UNROLLING[-1]
        or "while_loop" not in PRIMITIVES
    ):
        return _unrolled(body, items, state, before)
    if any(not isinstance(state[i], Tracer) for i in written):
        _sequence_note(
            where,
            trips,
            "the body differs between iterations",
            "it writes into an array difgen does not trace",
        )
        return _unrolled(body, items, state, before)
    before_first = len(current_builder().eqns)
    state = tuple(body(items[0], *state))
    per_iteration = len(current_builder().eqns) - before_first
    if per_iteration * trips < UNROLL_EQUATIONS:  # small enough unrolled
        return _unrolled(body, items[1:], state, items[0])

    def indexed(index: Any, *variables: Any) -> Any:
        picked = tuple(c.item(index) for c in columns)
        return body(picked if tupled else picked[0], *variables)

    try:
        final = _index_loop(indexed, 1, trips, 1, state, where, names)[1:]
    except TracedBranch as exc:
        from difgen.frontend.control.rewrite import is_rewritten

        if type(exc) is not TracedBranch or not is_rewritten(exc.code):
            raise
        _sequence_note(where, trips, _why(exc), _reason(exc))
        return _unrolled(body, items[1:], state, items[0])
    except TraceError as exc:
        _sequence_note(where, trips, _why(exc), _reason(exc))
        return _unrolled(body, items[1:], state, items[0])
    except DifgenError:
        raise
    except Exception as exc:  # noqa: BLE001  (the user's body on a traced item)
        why = "the body differs between iterations"
        _sequence_note(where, trips, why, f"{type(exc).__name__}: {exc}")
        return _unrolled(body, items[1:], state, items[0])
    return (*_write_back_loop(final, values, written), items[-1])


def _why(exc: BaseException) -> str:
    """Why a loop over a sequence stays unrolled, in the build note's words."""
    if "keeps its shape" in str(exc) or "changes the structure" in str(exc):
        return "the state changes shape"
    return "the body differs between iterations"


def _sequence_note(where: str, trips: int, why: str, detail: str) -> None:
    """Say once per build that the loop over a sequence at ``where`` stays
    unrolled, and why."""
    message = (
        f"{where}: unrolled: {why} (the `for` loop over {trips} items of a "
        f"sequence could not be traced once on a traced index: {detail})"
    )
    if message not in budget.notes():
        budget.note(message)


def _write_back_loop(
    final: Any, values: tuple[Any, ...], written: tuple[int, ...]
) -> list[Any]:
    """The arrays from before the loop that it writes into receive its result, as
    NumPy writes in place."""
    result = list(final)
    for i in written:
        start = values[i]
        if isinstance(start, Tracer) and isinstance(result[i], Tracer):
            start.write(result[i])
            result[i] = start
    return result


def _unrolled(
    body: Callable[..., Any], items: Any, state: tuple[Any, ...], before: Any
) -> tuple[Any, ...]:
    """Python's loop: each iteration run (and traced) in turn."""
    last = before
    for item in items:
        state = tuple(body(item, *state))
        last = item
    return (*state, last)


def _index_loop(
    body: Callable[..., Any],
    start: Any,
    stop: Any,
    step: int,
    state: tuple[Any, ...],
    where: str,
    names: tuple[str, ...],
) -> tuple[Any, ...]:
    """``body`` over ``range(start, stop, step)`` as one loop on a traced index:
    the index after the loop, then the loop variables.

    The loop counts in float64 (a graph's scalar constants are float64, and every
    count below 2**53 is exact), and the body sees the count as int64, the type of
    Python's ``range`` items in NumPy arithmetic and indexing. ``start`` and
    ``stop`` are Python ints or traced int64 scalars (an int context)."""
    first, last = (
        v.astype(np.float64) if isinstance(v, Tracer) else float(v)
        for v in (start, stop)
    )
    ints = {k for k, v in enumerate(state) if _python_int(v)}
    labels = ("index", *names)

    def test(index: Any, *_: Any) -> Any:
        return index < last if step > 0 else index > last

    def step_body(index: Any, *variables: Any) -> tuple[Any, ...]:
        given = [
            v.astype(np.int64) if k in ints else v for k, v in enumerate(variables)
        ]
        item = index.astype(np.int64)
        out = list(body(item, *given))
        # an integer the body passes through (the item, a variable unchanged) is
        # carried as the float it came from: no int64 left where none is computed
        floats = {id(item): index, **{id(given[k]): variables[k] for k in ints}}
        for k in ints:
            same = floats.get(id(out[k]))
            out[k] = (
                _carried_int(out[k], where, labels[k + 1]) if same is None else same
            )
        return (index + float(step), *out)

    carried = [float(v) if k in ints else v for k, v in enumerate(state)]
    final = list(_loop(test, step_body, (first, *carried), where, labels))
    for k in ints:
        final[k + 1] = final[k + 1].astype(np.int64)
    return tuple(final)


def _traced_range(
    body: Callable[..., Any],
    args: tuple[Any, ...],
    state: tuple[Any, ...],
    where: str,
    names: tuple[str, ...],
) -> tuple[Any, ...]:
    """``for`` over a ``range`` whose start or stop is known at run time only (an
    int context): one loop, nothing peeled (it may run no iteration), the target's
    final value the last index (Python keeps the one before the loop when there is
    no iteration)."""
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    for arg in (start, stop):
        if isinstance(arg, Tracer) and (arg.dtype != np.int64 or arg.shape != ()):
            raise TraceError(
                f"{where}: range() of a {arg.dtype}{list(arg.shape)} value; it takes "
                "integers (an int64 scalar context)"
            )
    if isinstance(step, Tracer) and not isinstance(step.atom, Lit):
        raise TraceError(
            f"{where}: a range whose step is known at run time only is not "
            "supported; its sign must be known at build time"
        )
    step = operator.index(step)
    if step == 0:
        raise TraceError(f"{where}: range() arg 3 must not be zero")
    final = _index_loop(body, start, stop, step, state, where, names)
    index = (final[0] - float(step)).astype(np.int64)
    return (*final[1:], index)


def _python_int(value: Any) -> bool:
    """A Python (or NumPy) integer, which the loop carries as an exact float64 (a
    graph's scalar constants are float64) and the body sees as int64."""
    return isinstance(value, (int, np.integer)) and not isinstance(
        value, (bool, np.bool_)
    )


def _carried_int(value: Any, where: str, name: str) -> Any:
    """An integer loop variable after an iteration, as the loop carries it."""
    if _python_int(value):
        return float(value)
    if isinstance(value, Tracer) and value.dtype == np.int64:
        return value.astype(np.float64)
    raise TraceError(
        f"{where}: the loop changes `{name}` from an integer to "
        f"{type(value).__name__}; a loop variable keeps its type"
    )


def _reason(exc: BaseException) -> str:
    """A refusal's message without its location (the note names the loop's)."""
    text = str(exc)
    head, sep, rest = text.partition(": ")
    return rest if sep and ":" in head and " " not in head else text


def _unrolled_note(where: str, trips: int, reason: str) -> None:
    """Say once per build that the loop at ``where`` stays unrolled, and why."""
    message = (
        f"{where}: the `for` loop of {trips} iterations stays unrolled (its body "
        f"could not be traced once on a traced index: {reason})"
    )
    if message not in budget.notes():
        budget.note(message)


def _loop(
    test: Callable[..., Any],
    body: Callable[..., Any],
    state: tuple[Any, ...],
    where: str,
    names: tuple[str, ...],
    implicit: str = "off",
    residual: Callable[..., Any] | None = None,
) -> tuple[Any, ...]:
    """Trace the condition and the body on symbolic loop variables; bind the loop
    (marked ``implicit`` when :func:`_implicit_loop` says so, or when the caller
    gives the ``residual`` whose root the loop finds: a solver's)."""
    if "while_loop" not in PRIMITIVES:
        raise TraceError(f"{where}: while_loop is not registered (import difgen.ad)")
    leaves, tree = _flatten(state)
    slots: list[int] = []
    inits: list[Atom] = []
    for i, leaf in enumerate(leaves):
        atom = _as_atom(leaf.atom if isinstance(leaf, Tracer) else leaf)
        if atom is not None:
            slots.append(i)
            inits.append(atom)
    label = [
        names[i] if i < len(names) and tree is not None else f"#{i}"
        for i in range(len(leaves))
    ]
    cond_trace = _trace_step(test, leaves, tree, slots, inits, where, True)
    body_trace = _trace_step(body, leaves, tree, slots, inits, where, False)
    if body_trace.tree != tree:
        raise TraceError(
            f"{where}: the body of a loop on a traced condition changes the structure "
            "of its variables (a tuple's length, a list into a tuple...)"
        )
    (pred,) = cond_trace.leaves
    pred_atom = _as_atom(pred)
    if pred_atom is None or pred_atom.shape != () or pred_atom.dtype != "bool":
        raise TraceError(f"{where}: the loop condition must be a scalar truth value")
    outs: list[Atom] = []
    for slot, init in zip(slots, inits):
        out = _as_atom(body_trace.leaves[slot])
        if out is None or (out.shape, out.dtype) != (init.shape, init.dtype):
            got = "a non-array" if out is None else f"{out.dtype}{list(out.shape)}"
            raise TraceError(
                f"{where}: the loop on a traced condition changes `{label[slot]}` "
                f"from {init.dtype}{list(init.shape)} to {got}; a loop variable "
                "keeps its shape and dtype"
            )
        outs.append(out)
    for i, (a, b) in enumerate(zip(leaves, body_trace.objects)):
        if i not in slots and a is not b and not isinstance(a, Undefined):
            raise TraceError(
                f"{where}: the loop on a traced condition changes `{label[i]}`, a "
                f"{type(a).__name__}; difgen can loop over arrays and numbers only"
            )
    traces = [cond_trace, body_trace]
    if residual is not None:
        traces.append(_trace_step(residual, leaves, tree, slots, inits, where, False))
    for trace in traces:
        if trace.builder.journal:
            raise TraceError(
                f"{where}: the loop on a traced condition writes into an array from "
                "before the loop through another name; write into the loop's own "
                "variable"
            )
    consts: dict[Var, Builder] = {}
    for trace in traces:
        for outer, owner in trace.builder.owners.items():
            consts.setdefault(outer, owner)
    cond_graph = _step_graph(cond_trace, [pred_atom], list(consts))
    body_graph = _step_graph(body_trace, outs, list(consts))
    operands = [
        (
            Tracer(current_builder(), a)
            if isinstance(a, Lit)
            else _outer_tracer(a, leaves, slots, inits)
        )
        for a in inits
    ]
    const_args = [Tracer(owner, var) for var, owner in consts.items()]
    marked: dict[str, Any] = {}
    if residual is not None:
        (value,) = traces[2].leaves
        root = _as_atom(value)
        if root is None or root.dtype != "float64":
            raise TraceError(f"{where}: the solver's function must return floats")
        rgraph = _step_graph(traces[2], [root], list(consts))
        marked = {"implicit": True, "residual": SubGraph(rgraph, where)}
    elif _implicit_loop(implicit, cond_graph, body_graph, len(slots), where):
        marked = {"implicit": True}
    else:  # what the constants alone give is computed once, before the loop
        (cond_graph, body_graph), const_args = hoist(
            [cond_graph, body_graph], len(slots), const_args
        )
    results = list(leaves)
    for j, slot in enumerate(slots):
        results[slot] = bind(
            PRIMITIVES["while_loop"],
            *operands,
            *const_args,
            cond=SubGraph(cond_graph, where),
            body=SubGraph(body_graph, where),
            n_state=len(slots),
            index=j,
            **marked,
        )
    return tuple(_unflatten(tree, iter(results))) if tree is not None else (results[0],)


def _outer_tracer(
    atom: Atom, leaves: list[Any], slots: list[int], inits: list[Atom]
) -> Any:
    """The tracer holding loop variable ``atom`` before the loop."""
    for slot, init in zip(slots, inits):
        if init is atom and isinstance(leaves[slot], Tracer):
            return leaves[slot]
    raise TraceError("internal: a loop variable lost its tracer")


@dataclass
class _Step:
    builder: BranchBuilder
    inputs: list[Var]
    leaves: list[Any]
    tree: Any
    objects: list[Any]


def _trace_step(
    fn: Callable[..., Any],
    leaves: list[Any],
    tree: Any,
    slots: list[int],
    inits: list[Atom],
    where: str,
    is_test: bool,
) -> _Step:
    """Run ``fn`` (the loop's condition or body) on symbolic loop variables."""
    inputs = [Var(a.shape, a.dtype) for a in inits]
    with tracing_branch(where) as builder:
        args = list(leaves)
        for slot, var in zip(slots, inputs):
            args[slot] = Tracer(builder, var)
        state = _unflatten(tree, iter(args)) if tree is not None else (args[0],)
        result = fn(*state)
        if is_test:
            result = _predicate(result, where)
        objects, out_tree = _flatten(result)
        out = [_leaf(builder, v) for v in objects]
    return _Step(builder, inputs, out, out_tree, objects)


def _step_graph(step: _Step, outs: list[Atom], consts: list[Var]) -> Graph:
    """The condition or body as a graph of (loop variables, constants)."""
    extra = [step.builder.captures.get(v) or Var(v.shape, v.dtype) for v in consts]
    return dce(Graph((*step.inputs, *extra), tuple(outs), tuple(step.builder.eqns)))


# ------------------------------------------------------------- tracing branches
@dataclass
class _Branch:
    """One traced branch: its result's leaves (atoms of the branch, or Python
    values), their structure, and the final atoms of the arrays it wrote."""

    builder: BranchBuilder
    leaves: list[Any]
    tree: Any
    objects: list[Any]
    written: dict[int, tuple[Tracer, Atom]] = field(default_factory=dict)


def _flatten(value: Any) -> tuple[list[Any], Any]:
    """Leaves and structure of nested tuples and lists."""
    if isinstance(value, (tuple, list)) and not isinstance(value, Tracer):
        leaves: list[Any] = []
        trees = []
        for item in value:
            sub, tree = _flatten(item)
            leaves += sub
            trees.append(tree)
        return leaves, (type(value), tuple(trees))
    return [value], None


def _unflatten(tree: Any, leaves: Iterator[Any]) -> Any:
    if tree is None:
        return next(leaves)
    kind, subtrees = tree
    return kind(_unflatten(t, leaves) for t in subtrees)


def _trace_branch(run: Callable[[], Any], where: str) -> _Branch:
    """Run one branch in its own trace; restore what it wrote from outside."""
    with tracing_branch(where) as builder:
        result = run()
        objects, tree = _flatten(result)
        leaves = [_leaf(builder, v) for v in objects]
        written = {
            key: (tracer, builder.adopt(tracer).atom)
            for key, (tracer, _, _) in builder.journal.items()
        }
    return _Branch(builder, leaves, tree, objects, written)


def _leaf(builder: BranchBuilder, value: Any) -> Any:
    """A branch result as an atom of the branch (tracers), else as it is."""
    if isinstance(value, Tracer):
        return builder.adopt(value).atom
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def _as_atom(value: Any) -> Atom | None:
    """A Python number or float/bool NumPy array as a constant atom (else None)."""
    if isinstance(value, (Var, Lit)):
        return value
    if _number(value) or (isinstance(value, np.ndarray) and value.dtype.kind in "fb"):
        return Lit(as_constant(value))
    return None


def _cond(
    pred: Tracer, if_true: Callable[[], Any], if_false: Callable[[], Any], where: str
) -> Any:
    """Trace both branches and merge their results with one ``cond`` per value."""
    if "cond" not in PRIMITIVES:
        raise TraceError(f"{where}: cond is not registered (import difgen.ad)")
    true = _trace_branch(if_true, where)
    false = _trace_branch(if_false, where)
    if true.tree != false.tree:
        raise TraceError(
            f"{where}: the two branches of a branch on a traced value give results "
            "of different structure (a tuple of different length, a list and a "
            "tuple...); difgen needs the same structure from both"
        )
    merged = [
        _merge(pred, true, false, t, f, where, i)
        for i, (t, f) in enumerate(zip(true.leaves, false.leaves))
    ]
    _write_back(pred, true, false, where)
    for i, (a, b) in enumerate(zip(true.objects, false.objects)):
        if a is b and isinstance(a, Tracer):
            merged[i] = a  # the same array object in both: it stays that object
        elif isinstance(merged[i], Tracer):
            _mark_views(merged[i], (a, b), where)
    return _unflatten(true.tree, iter(merged))


def _mark_views(result: Tracer, chosen: tuple[Any, Any], where: str) -> None:
    """A result chosen among views of arrays from before the branch (``a if c else
    x[1]``, a row...) is a copy in difgen but a view in NumPy: mark it, so that a
    write that NumPy would see through the view is refused (Tracer.chosen)."""
    bases = [
        (v.view.base, v.view.base.version)
        for v in chosen
        if isinstance(v, Tracer) and v.view is not None
    ]
    if bases:
        result.chosen = (where, bases)


def _merge(
    pred: Tracer,
    true: _Branch,
    false: _Branch,
    t: Any,
    f: Any,
    where: str,
    index: int,
) -> Any:
    """The value after the branch of one result the branches give as ``t``, ``f``."""
    if isinstance(t, Undefined) and isinstance(f, Undefined):
        return t
    if isinstance(t, Undefined) or isinstance(f, Undefined):
        # Bound on one side only: Python could not read it after the branch on the
        # other (NameError), so that side's placeholder is never a result of valid
        # code (``for ... else`` and flags assign it on every path that reads it).
        known = _as_atom(f if isinstance(t, Undefined) else t)
        if known is None:
            return t if isinstance(t, Undefined) else f
        hole = Lit(
            np.zeros(known.shape, dtype=np.bool_ if known.dtype == "bool" else None)
        )
        t, f = (hole, f) if isinstance(t, Undefined) else (t, hole)
    if not isinstance(t, (Var, Lit)) and not isinstance(f, (Var, Lit)):
        if t is f:
            return t
        if _number(t) and _number(f) and type(t) is type(f) and t == f:
            return t
    ta, fa = _as_atom(t), _as_atom(f)
    if ta is None or fa is None:
        raise TraceError(
            f"{where}: the two branches of a branch on a traced value give "
            f"different {type(t if ta is None else f).__name__} values (result "
            f"{index}); difgen can choose between arrays and numbers only"
        )
    return _select(pred, true, false, ta, fa, where)


def _select(
    pred: Tracer, true: _Branch, false: _Branch, ta: Atom, fa: Atom, where: str
) -> Any:
    """One ``cond`` choosing between atom ``ta`` of one branch and ``fa`` of the
    other (no ``cond`` when both are the same value from before the branch)."""
    if (ta.shape, ta.dtype) != (fa.shape, fa.dtype):
        raise TraceError(
            f"{where}: the two branches of a branch on a traced value give a value "
            f"of {ta.dtype}{list(ta.shape)} and one of {fa.dtype}{list(fa.shape)}; "
            "difgen needs the same shape and dtype from both"
        )
    if isinstance(ta, Lit) and ta == fa:
        return Tracer(current_builder(), ta)
    outer_t = _outer(true.builder, ta)
    if outer_t is not None and outer_t == _outer(false.builder, fa):
        return Tracer(outer_t[1], outer_t[0])
    operands: dict[Var, Builder] = {}
    for b in (true.builder, false.builder):
        for outer, owner in b.owners.items():
            operands.setdefault(outer, owner)
    graphs = [
        _branch_graph(b, atom, list(operands))
        for b, atom in ((false.builder, fa), (true.builder, ta))
    ]
    used = [
        i for i in range(len(operands)) if any(_uses(g, g.inputs[i]) for g in graphs)
    ]
    pairs = list(operands.items())
    graphs = [
        Graph(tuple(g.inputs[i] for i in used), g.outputs, g.eqns) for g in graphs
    ]
    args = [Tracer(pairs[i][1], pairs[i][0]) for i in used]
    return bind(
        PRIMITIVES["cond"],
        pred,
        *args,
        branches=tuple(SubGraph(g, where) for g in graphs),
    )


def _outer(builder: BranchBuilder, atom: Atom) -> tuple[Var, Builder] | None:
    """The enclosing value a branch's input atom stands for (None: computed here)."""
    for outer, inner in builder.captures.items():
        if inner is atom:
            return outer, builder.owners[outer]
    return None


def _branch_graph(builder: BranchBuilder, out: Atom, operands: list[Var]) -> Graph:
    """The branch as a graph of all operands (captured or not) to ``out``."""
    inputs = tuple(builder.captures.get(v) or Var(v.shape, v.dtype) for v in operands)
    return dce(Graph(inputs, (out,), tuple(builder.eqns)))


def _uses(graph: Graph, var: Var) -> bool:
    return var in graph.outputs or any(var in e.inputs for e in graph.eqns)


def _write_back(pred: Tracer, true: _Branch, false: _Branch, where: str) -> None:
    """Arrays from before the branch that a branch wrote get the chosen value."""
    keys = list(true.written) + [k for k in false.written if k not in true.written]
    for key in keys:
        tracer = (true.written.get(key) or false.written[key])[0]
        ta = (
            true.written[key][1]
            if key in true.written
            else true.builder.adopt(tracer).atom
        )
        fa = (
            false.written[key][1]
            if key in false.written
            else false.builder.adopt(tracer).atom
        )
        tracer.write(_select(pred, true, false, ta, fa, where))
