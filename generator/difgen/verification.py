"""``difgen verify``: check a generated module numerically against the traced function.

The check a user runs in CI after upgrading NumPy or difgen: it needs only the
config, the user's function and the generated files.

For each module, at ``points`` random points (default 3):

- ``x`` and every float context are drawn uniformly from the module's
  ``verify_domain = [low, high]`` (default [-1, 1]; a context's own
  ``verify_domain`` wins for it), int64 contexts uniformly among the integers of
  their ``range = [lo, hi]`` (zeros without one: they are mostly indices, and 0 is
  the one index valid for every non-empty axis), booleans at random; every seed
  (``dx``, ``dy``, ``v``; with ``batch = k`` they have a leading axis of k) is
  drawn from [-1, 1]. Or ``verify_points = "file.py:sampler"`` names a function
  of the user's that gives the points: ``sampler(count, rng)`` returns ``count``
  points, each ``x`` or a tuple ``(x, *contexts)`` (contexts it leaves out are
  drawn as above). The generator is NumPy's ``default_rng([seed, crc32(module
  name)])``: the same points on every run and every machine, different for each
  module.
- Warnings (NumPy's RuntimeWarnings of a log at 0, an overflow) are captured, from
  the reference interpreter and from the generated code alike: an operator's own
  warnings are reported only with its failure, where they may say why.
- Each module runs under a time limit (its ``timeout`` key, else ``timeout``,
  :data:`TIMEOUT` by default): an operator that never returns (a loop whose
  tolerance its dtype cannot reach) fails the module with a message naming it.
- Every operator of the module (``f`` included) is called once; each result is
  compared with a reference computed from the *traced graph* of the function, run
  by the reference interpreter (:meth:`difgen.core.ir.Graph.evaluate`), which
  shares no code with the generated module:

  - values (``value``) with the graph's value;
  - first derivatives (``jvp``, ``vjp``, ``derivative``, ``gradient``,
    ``jacobian``) with central differences of the graph, ``(f(x + h v) - f(x - h
    v)) / 2h`` with ``h = 2**-17``, along every basis direction when ``x`` has at
    most :data:`FULL_BASIS` elements and along :data:`PROBES` random directions
    otherwise (a ``vjp`` or ``gradient`` is compared through its inner products
    with the directions, a ``jacobian`` through ``J @ v``);
  - second derivatives (``second_derivative``, ``hvp``, ``hessian``) with second
    central differences, ``w' H v`` from four evaluations with ``h = 2**-13``; a
    hessian entry by entry when ``x`` has at most :data:`FULL_HESSIAN` elements.

  Sparse (CSR) results are compared as ``.toarray()``, reshaped to the dense
  shape.
- Kinks (``sort``, ``abs``, ``maximum``, a ``where``): a stencil that straddles
  one mixes the two sides, so a correct derivative can miss its reference there.
  A result past its tolerance is compared again against more references, and
  each direction (or entry) keeps the reference closest to it: the differences
  with the steps divided by 4, 16, 64 and 256 (second order: 4 and 16, as rounding
  grows like ``eps / h**2``); then, for a second derivative, first differences
  of the module's own first-order operator without a seed (``gradient`` for a
  ``hvp`` or ``hessian``, ``derivative`` for a ``second_derivative``), which
  this same check ties to the graph and which straddles fewer kinks at its
  smaller step (the way ``jax.test_util.check_grads`` checks order 2). A
  correct result matches once its stencil lies on one side of every kink; a
  wrong one stays off against every reference.

- The error of a result is ``max |generated - reference| / max(1, max |reference|)``
  over its entries: relative for results of magnitude above 1, absolute below.
  Where the reference is not finite the generated value must be the same (NaN
  where NaN, the same infinity), else the error is infinite. The worst error over
  the points is compared with the tolerance of the result's order,
  :data:`TOLERANCES` (times ``factor``): finite differences are only that
  accurate, while a wrong derivative is typically off by order 1.
- A float32 module is called with float32 arguments (the drawn values rounded to
  float32; the references are computed in float64 at the rounded values) and
  compared at :data:`FLOAT32_TOLERANCES`; its results must be float32.
- With ``points = true``, each ``<operator>_points`` is called once on all the
  points stacked (per-point contexts stacked too, shared ones drawn once) and
  compared row by row with its one-point operator, which the checks above tie to
  the function: the error must stay within :data:`POINTS_TOLERANCE`.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from difgen import naming
from difgen.config import ModuleSpec
from difgen.core.ir import Graph
from difgen.hashing import source_hash
from difgen.operators import OPERATORS, is_sparse, result_shape, seed_shape
from difgen.write import inspect_file

FULL_BASIS = 32
"""Inputs with at most this many elements are checked along every basis vector."""

FULL_HESSIAN = 12
"""Hessians of inputs with at most this many elements are checked entry by entry."""

PROBES = 3
"""Random directions (or pairs of them, for a hessian) for larger inputs."""

H_FIRST = 2.0**-17
"""Step of the first central difference (about the cube root of float64's epsilon)."""

H_SECOND = 2.0**-13
"""Step of the second central difference (about its fourth root)."""

REFINED_STEPS = {"first": 4, "second": 2}
"""How many times the step is divided by 4 for a result past its tolerance (a
stencil straddling a kink); the smallest steps, ``2**-25`` and ``2**-17``, keep
the rounding of the differences well below :data:`TOLERANCES`."""

FIRST_ORDER_OF = {
    "hvp": "gradient",
    "hessian": "gradient",
    "second_derivative": "derivative",
}
"""The first-order result whose differences can check a second-order one."""

ORDER = {
    "value": "value",
    "jvp": "first",
    "vjp": "first",
    "derivative": "first",
    "gradient": "first",
    "jacobian": "first",
    "second_derivative": "second",
    "hvp": "second",
    "hessian": "second",
}
"""The order of each result kind of :mod:`difgen.operators`."""

TOLERANCES = {"value": 1e-8, "first": 1e-5, "second": 1e-3}
"""The largest error accepted for each order (before ``factor``)."""

FLOAT32_TOLERANCES = {"value": 1e-4, "first": 1e-4, "second": 1e-3}
"""The same for a float32 module (``input.dtype = "float32"``), before ``factor``.

Its arguments are drawn as for a float64 module and rounded to float32, and the
references are computed in float64 at those very (rounded) arguments, so the error
measured is the module's own float32 arithmetic. One float32 operation rounds by
up to 6e-8 (half of float32's epsilon, 1.2e-7); a result that combines a few
hundred of them, each magnified by the condition of the function, is typically off
by 1e-6 to 1e-5 relative to its scale, so 1e-4 leaves room for sums over large
inputs and ill-conditioned steps while a wrong derivative, off by order 1, still
fails by far. Second order keeps float64's 1e-3, which the finite differences of
the reference (not the module) set. A float32 module must also return float32
results: a result of another dtype is an error (infinite)."""

TIMEOUT = 300.0
"""Seconds for one module's verification unless its ``timeout`` key says more."""

DEFAULT_DOMAIN = (-1.0, 1.0)
"""Where ``x`` and the float contexts are drawn without ``verify_domain``."""

POINTS_TOLERANCE = 1e-9
"""A points variant against the loop of its one-point operator (before ``factor``):
the same arithmetic up to rounding (reductions, matrix products, the sympy
backend's simplified forms), so far tighter than the finite-difference bounds."""

POINTS_TOLERANCE_FLOAT32 = 1e-5
"""The same for a float32 module: its points variants are the batched graph's
vector code, whose sums and products may round in another order than the
one-point operator's (a few float32 epsilons of the result's scale), and the C
points loops are the one-point loops; a wrong row is off by order 1."""

Array = np.ndarray
Shape = tuple[int, ...]


@dataclass(frozen=True)
class ResultCheck:
    """The worst error of one result of an operator over all points."""

    kind: str
    error: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.error <= self.tolerance


@dataclass(frozen=True)
class OperatorCheck:
    """One operator: the worst error of each of its results."""

    operator: str
    results: tuple[ResultCheck, ...]
    warnings: tuple[str, ...] = ()
    """The warnings the generated operator raised, kept only when it failed."""

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def worst(self) -> ResultCheck:
        """The result closest to (or furthest past) its tolerance."""
        return max(self.results, key=lambda r: r.error / r.tolerance)


@dataclass(frozen=True)
class ModuleVerification:
    """One module: its operators' errors, or why it could not be checked."""

    name: str
    path: Path
    operators: tuple[OperatorCheck, ...] = ()
    problem: str | None = None
    """Why the module could not be checked (missing, foreign, import failed)."""
    stale: bool = False
    """The file's SOURCE_HASH is not the function's: errors are expected."""
    emission: str = ""
    """emit = "c": whether the compiled operators ran, or the Python fallback (why)."""
    sampled: str = ""
    """Where the points were drawn: ``"x in [-1, 1]"``, or the sampler's name."""
    declared: bool = False
    """Whether the config says where to sample (a ``verify_domain`` or
    ``verify_points``): a failure without one may only be the default domain."""

    @property
    def passed(self) -> bool:
        return self.problem is None and all(op.passed for op in self.operators)

    @property
    def hint(self) -> str:
        """Advice for a failure at the default domain that looks like one of the
        domain (a result not finite where its reference is, or the reverse; a
        failed operator that warned), else empty."""
        if self.passed or self.declared or self.problem is not None:
            return ""
        failed = [op for op in self.operators if not op.passed]
        if not any(op.warnings or math.isinf(op.worst.error) for op in failed):
            return ""
        return (
            "the points were drawn in [-1, 1]: if the function is defined or "
            "smooth only on part of it (log, sqrt, 1/x), declare where to sample "
            "with verify_domain = [low, high] (or verify_points = "
            '"file.py:sampler") in its [[module]]'
        )


def verify_module(
    spec: ModuleSpec,
    path: Path,
    graph: Graph,
    points: int = 3,
    seed: int = 0,
    factor: float = 1.0,
    sampler: Sampler | None = None,
) -> ModuleVerification:
    """Check the module at ``path`` against ``graph``, the traced function, at
    points drawn as the module's config says, or given by ``sampler`` (its
    ``verify_points``, loaded)."""
    found = inspect_file(path)
    if not found.state.ours:
        problem = "missing" if found.state.value == "missing" else found.detail
        if found.state.value != "missing":
            problem = f"not written by difgen: {problem}"
        return ModuleVerification(spec.name, path, problem=problem)
    stale = found.source_hash != source_hash(spec, graph)
    try:
        module = _import_file(path)
    except Exception as exc:  # noqa: BLE001 (a broken file, SciPy missing: a finding)
        return ModuleVerification(
            spec.name, path, problem=f"importing it raised {type(exc).__name__}: {exc}"
        )
    rng = np.random.default_rng([seed, zlib.crc32(spec.name.encode())])
    drawn = [None] * points if sampler is None else _sampled(spec, sampler, points, rng)
    worst: dict[tuple[str, str], float] = {}
    said: dict[str, list[str]] = {}
    names = ("f", *spec.operators)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference's, the stencils' steps
        for given in drawn:
            point = _Point(spec, graph, rng, given)
            for name in names:
                for kind, error in point.check(module, name, factor):
                    key = (name, kind)
                    worst[key] = max(worst.get(key, 0.0), error)
                for message in point.warned.pop(name, ()):
                    if message not in said.setdefault(name, []):
                        said[name].append(message)
    checks = tuple(
        _operator_check(
            name,
            tuple(
                ResultCheck(kind, worst[(name, kind)], tolerance(spec, kind) * factor)
                for kind in OPERATORS[name].results
            ),
            said.get(name, ()),
        )
        for name in names
    )
    if spec.points:
        ys = tuple(graph.outputs[0].shape)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            checks += tuple(
                _points_check(module, spec, ys, name, points, rng, factor)
                for name in names
            )
    return ModuleVerification(
        spec.name,
        path,
        checks,
        stale=stale,
        emission=_emission(module),
        sampled=_where_sampled(spec),
        declared=spec.verify.domain is not None or spec.verify.points is not None,
    )


Sampler = Callable[[int, np.random.Generator], Any]
"""A ``verify_points`` function: ``sampler(count, rng)`` -> ``count`` points."""


def _operator_check(
    name: str, results: tuple[ResultCheck, ...], said: Sequence[str]
) -> OperatorCheck:
    """An operator's check, with its warnings only when it failed."""
    check = OperatorCheck(name, results)
    if check.passed or not said:
        return check
    return OperatorCheck(name, results, tuple(said))


def _where_sampled(spec: ModuleSpec) -> str:
    """Where the points of ``spec`` come from, as verify's report says it."""
    if spec.verify.points is not None:
        return f"points from {spec.verify.points}"
    low, high = spec.verify.domain or DEFAULT_DOMAIN
    return f"x in [{low:g}, {high:g}]"


def _sampled(
    spec: ModuleSpec, sampler: Sampler, count: int, rng: np.random.Generator
) -> list[tuple[Array, ...]]:
    """The sampler's points, each as ``(x, *contexts)`` float64 or int arrays of
    the configured shapes; a wrong one raises :class:`SamplerError`."""
    where = spec.verify.points
    try:
        found = list(sampler(count, rng))
    except Exception as exc:  # noqa: BLE001 (the user's code may raise anything)
        raise SamplerError(
            f"{where}({count}, rng) raised {type(exc).__name__}: {exc}"
        ) from None
    if len(found) != count:
        raise SamplerError(f"{where}({count}, rng) returned {len(found)} points")
    shapes = [tuple(spec.input.shape), *(tuple(c.shape) for c in spec.contexts)]
    dtypes = ["float64", *(c.dtype for c in spec.contexts)]
    points = []
    for index, item in enumerate(found):
        parts = tuple(item) if isinstance(item, (tuple, list)) else (item,)
        if not 1 <= len(parts) <= len(shapes):
            raise SamplerError(
                f"{where}: point {index} has {len(parts)} parts; expected x and at "
                f"most {len(shapes) - 1} contexts"
            )
        arrays = []
        for part, shape, dtype in zip(parts, shapes, dtypes):
            value = np.asarray(part, dtype=np.float64 if "float" in dtype else dtype)
            if value.shape != shape:
                raise SamplerError(
                    f"{where}: point {index} has an array of shape {value.shape} "
                    f"where the module takes {shape}"
                )
            arrays.append(value)
        points.append(tuple(arrays))
    return points


class SamplerError(Exception):
    """A ``verify_points`` function failed or returned points of the wrong form."""


def tolerance(spec: ModuleSpec, kind: str) -> float:
    """The tolerance of result ``kind`` (before ``factor``) in this module's dtype."""
    table = FLOAT32_TOLERANCES if spec.input.dtype == "float32" else TOLERANCES
    return table[ORDER[kind]]


def _emission(module: ModuleType) -> str:
    """What an ``emit = "c"`` module runs: its extension, or the Python fallback."""
    compiled = getattr(module, "COMPILED", None)
    if compiled is None:
        return ""
    if compiled:
        text = f"compiled: {getattr(module, 'C_MODULE', '?')} (C)"
        python = getattr(module, "PYTHON_OPERATORS", ())
        if python:  # operators with a primitive that has no C loop form
            text += f"; in Python (no C form): {', '.join(python)}"
        return text
    reason = getattr(module, "C_FALLBACK_REASON", "")
    return f"NOT compiled: the Python fallback was verified ({reason})"


def _points_check(
    module: ModuleType,
    spec: ModuleSpec,
    ys: Shape,
    name: str,
    points: int,
    rng: np.random.Generator,
    factor: float,
) -> OperatorCheck:
    """``<name>_points`` at ``points`` random points against the loop of ``name``."""
    op = OPERATORS[name]
    xs = tuple(spec.input.shape)
    lead = (points,) if spec.input.per_point else ()
    low, high = spec.verify.domain or DEFAULT_DOMAIN
    args = [rng.uniform(low, high, (*lead, *xs))]
    args += [
        rng.uniform(-1.0, 1.0, (points, *seed_shape(s, xs, ys, spec.batch)))
        for s in op.seeds
    ]
    per_point = [spec.input.per_point] + [True] * len(op.seeds)
    per_point += [c.per_point for c in spec.contexts]
    args += [
        _context(
            ((points,) if c.per_point else ()) + tuple(c.shape),
            c.dtype,
            rng,
            _context_domain(spec, c.name, c.dtype),
        )
        for c in spec.contexts
    ]
    float32 = spec.input.dtype == "float32"

    def plain(value: Array) -> Any:
        """An argument as the module takes it (float32 values in a float32 one)."""
        if float32 and value.dtype == np.float64:
            return value.astype(np.float32)[()]
        return _plain_data(value)

    out = _operator(module, naming.points(name))(*(plain(a) for a in args))
    stacked = out if len(op.results) > 1 else (out,)
    loop = []
    for i in range(points):
        one = [plain(a[i] if p else a) for a, p in zip(args, per_point)]
        single = _operator(module, name)(*one)
        loop.append(single if len(op.results) > 1 else (single,))
    tolerance = POINTS_TOLERANCE_FLOAT32 if float32 else POINTS_TOLERANCE
    return OperatorCheck(
        naming.points(name),
        tuple(
            ResultCheck(
                kind,
                (
                    math.inf  # a float32 module's results are float32
                    if float32 and np.asarray(stacked[j]).dtype != np.float32
                    else _rows_error(stacked[j], [r[j] for r in loop])
                ),
                tolerance * factor,
            )
            for j, kind in enumerate(op.results)
        ),
    )


def _rows_error(stacked: Any, rows: Sequence[Any]) -> float:
    """The worst :func:`error` of a stacked result's rows; inf if the number of rows
    is not the number of points."""
    value = np.asarray(stacked, dtype=np.float64)
    if value.ndim == 0 or len(value) != len(rows):
        return math.inf
    return max((error(v, r) for v, r in zip(value, rows)), default=0.0)


def error(generated: Any, reference: Any) -> float:
    """``max |generated - reference| / max(1, max |reference|)``; inf on mismatch.

    >>> error(np.array([1.0, 200.0]), np.array([1.0, 201.0]))
    0.004975124378109453
    >>> error(np.array([np.nan]), np.array([np.nan])), error(1.0, np.inf)
    (0.0, inf)
    """
    gen = np.asarray(generated, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    if gen.shape != ref.shape:
        return math.inf
    finite = np.isfinite(gen) & np.isfinite(ref)
    same = (gen == ref) | (np.isnan(gen) & np.isnan(ref))
    if np.any(~finite & ~same):
        return math.inf
    if not finite.any():
        return 0.0
    diff = float(np.max(np.abs(gen[finite] - ref[finite])))
    scale = max(1.0, float(np.max(np.abs(ref[finite]))))
    return diff / scale


def sample_point(spec: ModuleSpec, draw: int = 0) -> tuple[Array, list[Array]]:
    """A deterministic point ``(x, contexts)`` drawn as :func:`verify_module` draws
    its points (uniform in the module's ``verify_domain``, :func:`_context` for
    contexts), for build-time checks: ``draw`` numbers the points of one module."""
    rng = np.random.default_rng([draw, zlib.crc32(spec.name.encode())])
    low, high = spec.verify.domain or DEFAULT_DOMAIN
    x = rng.uniform(low, high, tuple(spec.input.shape))
    return x, [
        _context(c.shape, c.dtype, rng, _context_domain(spec, c.name, c.dtype))
        for c in spec.contexts
    ]


def _context_domain(
    spec: ModuleSpec, name: str, dtype: str
) -> tuple[float, float] | None:
    """Where context ``name`` is drawn: its own interval, else (floats) the
    module's ``verify_domain``; None for the defaults of :func:`_context`."""
    own = spec.verify.context_domain(name)
    if own is not None or dtype != "float64":
        return own
    return spec.verify.domain


def _context(
    shape: Shape,
    dtype: str,
    rng: np.random.Generator,
    domain: tuple[float, float] | None = None,
) -> Array:
    """A random context: floats uniform in ``domain`` (default [-1, 1]), random
    booleans, integers uniform among those of ``domain`` (both ends included), or
    zeros without one (integers are mostly indices, and 0 is the one index valid
    for every non-empty axis)."""
    if dtype == "bool":
        return rng.random(tuple(shape)) < 0.5
    if dtype == "int64":
        if domain is None:
            return np.zeros(tuple(shape), dtype=np.int64)
        first, last = math.ceil(domain[0]), math.floor(domain[1])
        if first > last:  # a float interval holding no integer: its low end
            return np.full(tuple(shape), math.floor(domain[0]), dtype=np.int64)
        return rng.integers(first, last, tuple(shape), endpoint=True, dtype=np.int64)
    low, high = domain or DEFAULT_DOMAIN
    return rng.uniform(low, high, tuple(shape))


class _Stencil:
    """Finite differences at one point and one step: of the traced graph, or (for
    second order) first differences of a first-order operator of the module."""

    def __init__(
        self,
        point: _Point,
        refinement: int,
        first: Callable[[Array], Array] | None = None,
    ):
        self.point = point
        self.refinement = refinement
        """The steps are divided by ``4 ** refinement``."""
        self.first = first
        """The module's gradient or derivative as a function of ``x`` (the
        contexts bound), whose differences give second derivatives; or None."""
        self._along: list[Array] | None = None

    def d1(self, v: Array) -> Array:
        """Central difference of f along ``v``: about ``J @ v``."""
        h, x, f = H_FIRST / 4**self.refinement, self.point.x, self.point.f
        difference: Array = f(x + h * v) - f(x - h * v)
        return difference / (2 * h)

    def d2(self, v: Array, w: Array) -> Array:
        """About ``w' H v`` (per output element)."""
        x, f = self.point.x, self.point.f
        if self.first is not None:
            h = H_FIRST / 4**self.refinement
            slope = (self.first(x + h * v) - self.first(x - h * v)) / (2 * h)
            contracted: Array = np.tensordot(slope, w, axes=np.ndim(w))
            return contracted
        h = H_SECOND / 4**self.refinement
        difference: Array = (
            f(x + h * v + h * w)
            - f(x + h * v - h * w)
            - f(x - h * v + h * w)
            + f(x - h * v - h * w)
        )
        return difference / (4 * h * h)

    def along_directions(self) -> list[Array]:
        """``J @ v`` by central differences for each direction (computed once)."""
        if self._along is None:
            self._along = [self.d1(v) for v in self.point.directions]
        return self._along


Reference = Callable[[_Stencil], list[Array]]
"""A result's references, one per direction or entry, from one stencil."""


def _operator(module: ModuleType, name: str) -> Any:
    """The operator ``name`` over the flat input: a structured module's flat
    operator (``_gradient_flat``) when it has one, else the operator itself."""
    return getattr(module, f"_{name}_flat", None) or getattr(module, name)


class _Point:
    """One random point: the arguments, and references computed from the graph."""

    def __init__(
        self,
        spec: ModuleSpec,
        graph: Graph,
        rng: np.random.Generator,
        given: tuple[Array, ...] | None = None,
    ):
        self.spec = spec
        self.graph = graph
        self.rng = rng
        self.xs: Shape = tuple(spec.input.shape)
        self.ys: Shape = tuple(graph.outputs[0].shape)
        self.float32 = spec.input.dtype == "float32"
        low, high = spec.verify.domain or DEFAULT_DOMAIN
        given = given or ()
        x = given[0] if given else rng.uniform(low, high, self.xs)
        self.x = self.rounded(x)
        self.contexts = [
            self.rounded(
                given[1 + i]
                if 1 + i < len(given)
                else _context(
                    c.shape, c.dtype, rng, _context_domain(spec, c.name, c.dtype)
                )
            )
            for i, c in enumerate(spec.contexts)
        ]
        self.warned: dict[str, list[str]] = {}
        """Each operator's warnings at this point (from the generated code)."""
        self.directions = _directions(self.xs, rng)
        self._stencils: dict[tuple[int, int], _Stencil] = {}
        self._pairs: list[tuple[Array, Array]] | None = None
        self._first: dict[str, Callable[[Array], Array] | None] = {}

    def rounded(self, value: Array) -> Array:
        """A drawn float argument of a float32 module rounded to float32 (kept as
        float64, which holds it exactly, for the references); others as drawn."""
        if self.float32 and value.dtype == np.float64:
            return value.astype(np.float32).astype(np.float64)
        return value

    def argument(self, value: Array) -> Any:
        """An argument as the module takes it: float32 values for a float32
        module, else a Python float for a float scalar (:func:`_plain_data`)."""
        if self.float32 and value.dtype == np.float64:
            return value.astype(np.float32)[()]
        return _plain_data(value)

    def f(self, x: Array) -> Array:
        """The traced function at ``x`` (the reference interpreter)."""
        return np.asarray(self.graph.evaluate(x, *self.contexts)[0], dtype=np.float64)

    def stencil(
        self, refinement: int, first: Callable[[Array], Array] | None = None
    ) -> _Stencil:
        """The graph's differences at a step, or with ``first``, those of a
        first-order operator of the module (cached per step and source)."""
        key = (refinement, id(first))
        if key not in self._stencils:
            self._stencils[key] = _Stencil(self, refinement, first)
        return self._stencils[key]

    def first_order(
        self, module: ModuleType, kind: str
    ) -> Callable[[Array], Array] | None:
        """Result ``kind`` (a gradient or derivative) of the module at any ``x``,
        from its first operator without a seed that returns it; None if none."""
        if kind not in self._first:
            self._first[kind] = None
            for name in self.spec.operators:
                op = OPERATORS[name]
                if not op.seeds and kind in op.results:
                    self._first[kind] = self._bound(_operator(module, name), op, kind)
                    break
        return self._first[kind]

    def _bound(self, operator: Any, op: Any, kind: str) -> Callable[[Array], Array]:
        """``operator``'s result ``kind`` as a function of ``x`` alone."""
        index = op.results.index(kind) if len(op.results) > 1 else None

        def first(x: Array) -> Array:
            out = operator(self.argument(x), *map(self.argument, self.contexts))
            return np.asarray(out if index is None else out[index], dtype=np.float64)

        return first

    def check(
        self, module: ModuleType, name: str, factor: float = 1.0
    ) -> Iterator[tuple[str, float]]:
        """Call one operator; yield ``(result kind, error)`` for each result."""
        op = OPERATORS[name]
        batch = self.spec.batch
        seeds = {
            s: self.rounded(
                self.rng.uniform(-1.0, 1.0, seed_shape(s, self.xs, self.ys, batch))
            )
            for s in op.seeds
        }
        args = [self.x, *(seeds[s] for s in op.seeds), *self.contexts]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = _operator(module, name)(*map(self.argument, args))
        self.warned[name] = [f"{w.category.__name__}: {w.message}" for w in caught]
        results = out if len(op.results) > 1 else (out,)
        for kind, value in zip(op.results, results):
            if self.float32 and np.asarray(value).dtype != np.float32:
                yield kind, math.inf  # a float32 module's results are float32
                continue
            dense = self.dense(kind, value)
            if kind == "value":
                yield kind, error(dense, self.f(self.x))
                continue
            generated, reference = self.pairs(kind, dense, seeds)
            bound = tolerance(self.spec, kind) * factor
            yield kind, self.refined(generated, reference, kind, module, bound)

    def refined(
        self,
        generated: list[Array],
        reference: Reference,
        kind: str,
        module: ModuleType,
        tolerance: float,
    ) -> float:
        """The error against the first stencil's references; while past
        ``tolerance``, each item keeps the closest reference of the further
        stencils (smaller steps, then a first-order operator's differences)."""
        order = ORDER[kind]
        stencils = [self.stencil(r) for r in range(1 + REFINED_STEPS[order])]
        first_kind = FIRST_ORDER_OF.get(kind)
        first = None if first_kind is None else self.first_order(module, first_kind)
        if self.float32:  # float32 rounding over a step of 2**-17 is 1e-2: no use
            first = None
        if first is not None:
            steps = range(1 + REFINED_STEPS["first"])
            stencils += [self.stencil(r, first) for r in steps]
        best = reference(stencils[0])
        worst = error(np.stack(generated), np.stack(best))
        for stencil in stencils[1:]:
            if worst <= tolerance:
                break
            candidates = reference(stencil)
            best = [
                new if error(g, new) < error(g, old) else old
                for g, old, new in zip(generated, best, candidates)
            ]
            worst = error(np.stack(generated), np.stack(best))
        return worst

    def dense(self, kind: str, value: Any) -> Array:
        """A result as a float64 array of its dense shape (CSR via ``toarray``)."""
        shape = result_shape(kind, self.xs, self.ys, self.spec.batch)
        if is_sparse(kind, self.spec):
            dense = np.asarray(value.toarray(), dtype=np.float64)
            if kind == "hessian" and self.spec.triangle is not None:
                dense = dense + dense.T - np.diag(np.diag(dense))  # the whole
            return dense.reshape(shape)
        return np.asarray(value, dtype=np.float64)

    def pairs(
        self, kind: str, value: Array, seeds: dict[str, Array]
    ) -> tuple[list[Array], Reference]:
        """What a derivative result is compared through (one item per direction,
        batch row or entry) and how its references are computed from a stencil."""
        one, batch = np.ones(()), self.spec.batch
        if kind == "derivative":
            return [value], lambda s: [s.d1(one)]
        if kind == "second_derivative":
            return [value], lambda s: [s.d2(one, one)]
        if kind == "jvp":
            dxs = [seeds["dx"]] if batch == 1 else list(seeds["dx"])
            rows = [value] if batch == 1 else list(value)
            return rows, lambda s: [s.d1(dx) for dx in dxs]
        if kind == "vjp":
            dys = [seeds["dy"]] if batch == 1 else list(seeds["dy"])
            rows = [value] if batch == 1 else list(value)
            generated = [np.vdot(row, v) for row in rows for v in self.directions]
            return generated, lambda s: [
                np.vdot(dy, jv) for dy in dys for jv in s.along_directions()
            ]
        if kind == "gradient":
            generated = [np.vdot(value, v) for v in self.directions]
            return generated, lambda s: s.along_directions()
        if kind == "jacobian":
            axes = len(self.xs)
            generated = [np.tensordot(value, v, axes=axes) for v in self.directions]
            return generated, lambda s: s.along_directions()
        if kind == "hvp":
            generated = [np.vdot(value, w) for w in self.directions]
            return generated, lambda s: [s.d2(seeds["v"], w) for w in self.directions]
        if kind == "hessian":
            return self.hessian_pairs(value)
        raise ValueError(f"no reference for result kind {kind!r}")

    def hessian_pairs(self, value: Array) -> tuple[list[Array], Reference]:
        """Every entry for small inputs, else ``w' H v`` for random pairs (drawn
        once, so that every stencil is asked the same)."""
        n = math.prod(self.xs)
        matrix = value.reshape(n, n)
        if n <= FULL_HESSIAN:
            basis = list(_basis(self.xs))
            pairs = [(i, j) for i, j in itertools.product(range(n), repeat=2)]
            return [matrix[i, j] for i, j in pairs], lambda s: [
                s.d2(basis[j], basis[i]) for i, j in pairs
            ]
        if self._pairs is None:
            vs = [self.rng.uniform(-1.0, 1.0, self.xs) for _ in range(2 * PROBES)]
            self._pairs = list(zip(vs[:PROBES], vs[PROBES:]))
        pairs_v = self._pairs
        generated = [w.ravel() @ matrix @ v.ravel() for v, w in pairs_v]
        return generated, lambda s: [s.d2(v, w) for v, w in pairs_v]


def _plain(value: Array) -> Any:
    """A scalar argument as a Python float (what the generated code expects)."""
    return float(value) if np.ndim(value) == 0 else value


def _plain_data(value: Array) -> Any:
    """:func:`_plain`, but a scalar int64 or bool stays an int or a bool."""
    if np.ndim(value) == 0 and np.asarray(value).dtype.kind in "biu":
        return np.asarray(value).item()
    return _plain(value)


def _basis(shape: Shape) -> Iterator[Array]:
    """The standard basis of arrays of ``shape``."""
    n = math.prod(shape)
    for i in range(n):
        e = np.zeros(n)
        e[i] = 1.0
        yield e.reshape(shape)


def _directions(shape: Shape, rng: np.random.Generator) -> Sequence[Array]:
    """The basis for small inputs, else :data:`PROBES` random directions."""
    if math.prod(shape) <= FULL_BASIS:
        return list(_basis(shape))
    return [rng.uniform(-1.0, 1.0, shape) for _ in range(PROBES)]


_counter = itertools.count()


def _import_file(path: Path) -> ModuleType:
    """Import a generated module from its file under a fresh private name.

    It is registered in ``sys.modules`` only while it executes, so verifying never
    leaves it (or a stale copy of it) importable by name.
    """
    name = f"_difgen_verify_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with warnings.catch_warnings():  # a C fallback is reported, not warned about
            warnings.simplefilter("ignore", RuntimeWarning)
            spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module
