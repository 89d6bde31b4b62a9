"""The C target's sparse results: a CSR ``out=`` checked in C, and results gathered
out of elementwise loops computed at their own elements only.

One config (tests/support/c_sparse_functions.py) is built and compiled once for this file;
every compiled operator is compared with the module's Python operators (its
fallback, the NumPy emission) and, for derivatives, with central differences.
"""

from __future__ import annotations

import re
import types
from typing import Any

import numpy as np
import pytest
import scipy.sparse
from test_c_loops import _close
from test_c_target import _outcome, _same, _same_outcome, trace_c_build

import c_sparse_functions as F
from compiled import Built
from oracle import central_jacobian
from surface_harness import same

MODULES = {
    # name: (function, input shape, operators, extra config)
    "stencil": ("stencil", [200], ["jacobian", "value_and_jacobian"], "sparse = true"),
    "chain": ("chain", [5], ["jacobian"], "sparse = true"),
    "anisotropic": ("anisotropic", [128], ["jacobian"], "sparse = true"),
    "dense_points": ("stencil", [32], ["jacobian"], "points = true"),
    "gathered": ("gathered", [F.N], ["f", "jacobian", "pushforward", "pullback"], ""),
    "banded": ("banded", [30], ["gradient", "hessian", "hvp"], ""),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return trace_c_build(tmp_path_factory, "c_sparse_functions", MODULES)


def _source(built: Built, name: str) -> str:
    return (built.directory / "out" / f"{name}__c.c").read_text()


def _point(name: str) -> np.ndarray:
    return np.random.default_rng(3).uniform(0.5, 2.0, MODULES[name][1])


def _spy(module: Any, kind: str = "jacobian") -> list[Any]:
    """Rebind the extension's helpers with a CSR check that records its calls
    (and checks as the module's own wrapper does): the calls the C check left
    to Python."""
    calls: list[Any] = []
    indices = getattr(module, f"{kind.upper()}_INDICES")
    indptr = getattr(module, f"{kind.upper()}_INDPTR")
    shape = module.jacobian(_point_for(module)).shape

    def check(out: Any) -> Any:
        calls.append(out)
        return module._check_csr_out(out, indices, indptr, shape)

    def wrap(data: Any) -> Any:
        return scipy.sparse.csr_array((data, indices, indptr), shape=shape)

    extension = module.jacobian.__self__
    extension._bind(
        {
            "_as_array": module._as_array,
            "_as_scalar": module._as_scalar,
            "_check_out": module._check_out,
            kind: wrap,
            f"{kind}.out": check,
        }
    )
    return calls


def _point_for(module: Any) -> np.ndarray:
    size = module.JACOBIAN_INDPTR.size - 1
    return np.random.default_rng(3).uniform(0.5, 2.0, size)


def _rebuilt(csr: Any, index_dtype: Any) -> Any:
    """A CSR array of the same pattern built by SciPy from copies, with its index
    arrays of ``index_dtype`` (SciPy keeps int64 given int64, int32 given int32)."""
    out = scipy.sparse.csr_array(
        (csr.data.copy(), csr.indices.copy(), csr.indptr.copy()), shape=csr.shape
    )
    out.indices = out.indices.astype(index_dtype)
    out.indptr = out.indptr.astype(index_dtype)
    return out


@pytest.mark.parametrize("name", ["stencil", "chain"])
def test_csr_out_accepted_in_c(built: Built, name: str) -> None:
    """A CSR array the operator returned, and SciPy rebuilds of it with int64 and
    int32 indices, are filled in place without calling the Python check."""
    compiled, python = built.compiled(name), built.python(name)
    assert 'dg_csr_data(dg_argv[1], "jacobian.out", &dg_jacobian_pattern)' in (
        _source(built, name)
    )
    x = _point(name)
    returned = compiled.jacobian(x)
    candidates = [
        returned,
        _rebuilt(returned, np.int64),
        _rebuilt(returned, np.int32),
    ]
    assert candidates[2].indices.dtype == np.int32
    calls = _spy(compiled)
    for out in candidates:
        data = out.data
        y = x * 1.1
        assert compiled.jacobian(y, out=out) is out
        assert out.data is data
        _same(out, python.jacobian(y))
    value, jac = (
        compiled.value_and_jacobian(x, out=candidates[1])
        if (name == "stencil")
        else (None, compiled.jacobian(x, out=candidates[1]))
    )
    assert jac is candidates[1]
    if value is not None:
        _same(value, python.value_and_jacobian(x)[0])
    assert calls == []  # the C check accepted every one of them


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The stencil module as difgen writes a pattern too large for int32 indices:
    int64 constants and C tables (the dtype chosen by ``index_itemsize``)."""
    from difgen.targets.c import extension as c_code
    from difgen.targets.numpy import printer as vector_code

    with pytest.MonkeyPatch.context() as patch:
        for owner in (vector_code, c_code):
            patch.setattr(owner, "index_itemsize", lambda shape, nnz: 8)
        return trace_c_build(
            tmp_path_factory, "c_sparse_functions", {"stencil": MODULES["stencil"]}
        )


def _edited(csr: Any, part: str, where: int, dtype: Any) -> Any:
    """A rebuild of ``csr`` with indices of ``dtype`` and one entry of ``part``
    (``indices`` or ``indptr``) at ``where`` changed by one."""
    out = _rebuilt(csr, dtype)
    values = getattr(out, part)
    values[where] += 1 if values[where] == 0 else -1
    return out


@pytest.mark.parametrize("width", [4, 8])
def test_csr_out_index_widths(built: Built, wide: Built, width: int) -> None:
    """The pattern constants are int32 (SciPy's own choice for these sizes), or
    int64 past int32's range; the C compares an out of either index width with
    them, accepting exactly what the Python check accepts: one index changed at
    the first, a middle or the last entry of ``indices`` or ``indptr`` is refused
    with the Python message, in both widths."""
    source = built if width == 4 else wide
    compiled, python = source.compiled("stencil"), source.python("stencil")
    c_type = "npy_int32" if width == 4 else "npy_int64"
    assert f"static const {c_type} dg_jacobian_pattern_indices[" in (
        _source(source, "stencil")
    )
    x = _point("stencil")
    returned = compiled.jacobian(x)
    assert returned.indices.dtype.itemsize == returned.indptr.dtype.itemsize == width
    assert python.jacobian(x).indices.dtype == returned.indices.dtype
    calls = _spy(compiled)
    for dtype in (np.int32, np.int64):
        out = _rebuilt(returned, dtype)
        assert compiled.jacobian(x * 1.1, out=out) is out
        _same(out, python.jacobian(x * 1.1))
    assert calls == []
    for part in ("indices", "indptr"):
        for where in (0, returned.indptr.size // 2, -1):
            for dtype in (np.int32, np.int64):
                bad = _edited(returned, part, where, dtype)
                before = bad.data.copy()
                got = _outcome(compiled.jacobian, x, out=bad)
                assert got[0] is ValueError, (part, where, dtype, got)
                _same_outcome(got, _outcome(python.jacobian, x, out=bad))
                np.testing.assert_array_equal(bad.data, before)


def _refused(csr: Any) -> list[tuple[str, Any]]:
    """Objects a CSR out= must be refused as (label, object)."""
    read_only = csr.copy()
    read_only.data.flags.writeable = False
    other_pattern = csr.copy()
    other_pattern.indices = other_pattern.indices.copy()
    other_pattern.indices[[0, 1]] = other_pattern.indices[[1, 0]]
    short_indptr = csr.copy()
    short_indptr.indptr = short_indptr.indptr[:-1].copy()
    n = csr.shape[0]
    return [
        ("wrong shape", scipy.sparse.csr_array(np.eye(n + 1))),
        ("wrong pattern", scipy.sparse.csr_array(np.eye(n))),
        ("swapped indices", other_pattern),
        ("short indptr", short_indptr),
        ("float32 data", csr.astype(np.float32)),
        ("read-only data", read_only),
        ("CSC array", scipy.sparse.csc_array(csr)),
        ("COO array", scipy.sparse.coo_array(csr)),
        ("dense array", csr.toarray()),
        ("None-like", 3.0),
        (
            "lists",
            types.SimpleNamespace(
                format="csr",
                shape=csr.shape,
                data=csr.data.copy(),
                indices=csr.indices.tolist(),
                indptr=csr.indptr.tolist(),
            ),
        ),
        (
            "no indices",
            types.SimpleNamespace(format="csr", shape=csr.shape, data=csr.data.copy()),
        ),
        (
            "list shape",
            types.SimpleNamespace(
                format="csr",
                shape=list(csr.shape),
                data=csr.data.copy(),
                indices=csr.indices,
                indptr=csr.indptr,
            ),
        ),
    ]


@pytest.mark.parametrize("name", ["stencil", "chain"])
def test_csr_out_refused_as_python(built: Built, name: str) -> None:
    """Every object the Python operators refuse (or accept: a namespace of lists
    of the right pattern) has the same outcome, message and result, compiled."""
    compiled, python = built.compiled(name), built.python(name)
    x = _point(name)
    for label, bad in _refused(python.jacobian(x)):
        got = _outcome(compiled.jacobian, x, out=bad)
        expected = _outcome(python.jacobian, x, out=_copy(bad))
        if label in ("wrong shape", "float32 data", "read-only data", "dense array"):
            assert expected[0] is ValueError, (label, expected)
        _same_outcome(
            got if got[0] != "ok" else ("ok", got[1].data),
            expected if expected[0] != "ok" else ("ok", expected[1].data),
        )


def _copy(value: Any) -> Any:
    """The same object again for the Python operator (the compiled one may have
    filled the first)."""
    if isinstance(value, types.SimpleNamespace):
        return types.SimpleNamespace(**vars(value))
    return value


def test_gathered_result_computed_on_demand(built: Built) -> None:
    """f's result is a gather out of a concatenation of elementwise values: the C
    computes it at the gathered elements only (repeated ones once), grouping by
    the 0/1 weights, and agrees with the NumPy emission, NaN and inf included."""
    source = _source(built, "gathered")
    f_source = source[source.index("dg_op_f(") : source.index("dg_op_jacobian(")]
    assert "elements only" in f_source
    stored = re.findall(r"\] = (dg_e\d+);", f_source)
    assert max(stored.count(name) for name in stored) >= 3  # 3 is read 3 times
    compiled, python = built.compiled("gathered"), built.python("gathered")
    rng = np.random.default_rng(5)
    x = rng.uniform(0.2, 1.5, F.N)
    v = rng.standard_normal(F.N)
    w = rng.standard_normal(F.PICKED.size)
    specials = x.copy()
    # weights 0, 1, 2.5 repeat along x: inf at a zero weight is NaN in NumPy
    specials[:8] = [np.inf, np.nan, -np.inf, -np.inf, 0.0, -0.0, np.inf, -1.0]
    specials[8:12] = [1e300, -1e-300, np.nan, np.inf]
    specials[F.N - 2 :] = [np.inf, 0.0]
    with np.errstate(all="ignore"):
        for point in (x, specials):
            _close(compiled.f(point), python.f(point))
            _close(compiled.jacobian(point), python.jacobian(point))
            _close(compiled.pushforward(point, v), python.pushforward(point, v))
            _close(compiled.pullback(point, w), python.pullback(point, w))
    _close(compiled.f(x), F.gathered(x))
    expected = central_jacobian(F.gathered, x)
    got = compiled.jacobian(x)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(compiled.pullback(x, w), w @ expected, atol=1e-5)


def test_sparse_jacobian_computed_on_demand(built: Built) -> None:
    """The colored sparse jacobian's CSR data (a gather out of the colors'
    compressed columns) is computed at its nonzeros only, equal to the NumPy
    emission, NaN and inf included, and to central differences."""
    source = _source(built, "stencil")
    assert "elements only" in source
    compiled, python = built.compiled("stencil"), built.python("stencil")
    x = _point("stencil")
    special = x.copy()
    special[[0, 7, 101, 150]] = [np.nan, np.inf, -np.inf, -0.0]
    with np.errstate(all="ignore"):
        for point in (x, special):
            _close(compiled.jacobian(point), python.jacobian(point))
            _close(compiled.value_and_jacobian(point), python.value_and_jacobian(point))
    expected = central_jacobian(F.stencil, x)
    np.testing.assert_allclose(compiled.jacobian(x).toarray(), expected, atol=1e-6)


def test_dense_hessian_zeros_filled_first(built: Built) -> None:
    """A dense hessian computed on demand: its structural zeros are one memset,
    then the band's groups; equal to the NumPy emission (NaN and inf included)
    and to differences of the gradient."""
    source = _source(built, "banded")
    hessian = source[source.index("dg_op_hessian(") :]
    assert "elements only" in hessian
    assert "memset(dg_r0, 0, sizeof(double) * 900);" in hessian
    compiled, python = built.compiled("banded"), built.python("banded")
    x = np.random.default_rng(9).uniform(-1.0, 1.5, 30)
    special = x.copy()
    special[[0, 13, 29]] = [np.nan, np.inf, -0.0]
    with np.errstate(all="ignore"):
        for point in (x, special):
            _close(compiled.hessian(point), python.hessian(point))
            _close(compiled.hvp(point, x), python.hvp(point, x))
    expected = central_jacobian(compiled.gradient, x)
    np.testing.assert_allclose(compiled.hessian(x), expected, rtol=1e-6, atol=1e-4)


def test_demand_analysis_groups_and_budgets() -> None:
    """The analysis on a small graph: one group per expression shape, equal
    elements computed once, constants 0 and 1 as literals; past its budget it
    declines (the result is then computed as usual)."""
    from difgen.frontend.tracing import trace
    from difgen.targets.c import demand as c_demand
    from difgen.targets.c import loops as c_loops

    picked = np.array([0, 4, 4, 5, 9, 1])

    def fn(x: Any) -> Any:
        return np.concatenate([x * np.array([0.0, 1.0, 2.0, 1.0, 0.0]), x + 1.0])[
            picked
        ]

    graph = trace(fn, [((5,), "float64")])
    out = graph.outputs[0]
    demand = c_loops.demand_of(graph, out, {})
    assert demand is not None
    targets = np.sort(np.concatenate([g.targets.ravel() for g in demand.groups]))
    np.testing.assert_array_equal(targets, np.arange(picked.size))
    # element 4 of the concatenation is read twice: computed once, stored twice
    assert [g.targets.tolist() for g in demand.groups if g.targets.shape[1] > 1] == [
        [[1, 2]]
    ]
    # weights 0 and 1 are literals of their own groups; 2.0 is the one other
    literals = {item[1] for g in demand.groups for item in g.skeleton if item[0] == "c"}
    assert {np.float64(v).tobytes() for v in (0.0, 1.0)} <= literals
    with pytest.MonkeyPatch.context() as patch:  # the analysis reads its budget there
        patch.setattr(c_demand, "PUSH_NODES", 3)
        patch.setattr(c_demand, "PUSH_NODES_PER_ELEMENT", 0)
        assert c_loops.demand_of(graph, out, {}) is None


@pytest.mark.parametrize(
    ("name", "first"),
    [
        ("stencil", r"dg_fill\(dg_r0, 1200, 10\.0\);"),
        ("anisotropic", r"memcpy\(dg_r0, dg_jacobian_t\d+, sizeof\(double\) \* 576\);"),
    ],
)
def test_constants_when_finite_written_first(
    built: Built, name: str, first: str
) -> None:
    """A stencil jacobian's couplings (``10.0 + a * 0.0 + b * 0.0``) are
    constants whenever the values read are finite: the C tests that, writes the
    constants first (one value filled when it is most nonzeros, else a table of
    them copied) and computes the rest. Equal bit for bit to the NumPy emission
    at negative states (zero products of either sign), and, through the loops of
    every element, where one state is NaN, inf, -inf or so large that ``a * a``
    overflows; the sign of zero too, with one state -0.0."""
    source = _source(built, name)
    jacobian = source[source.index("dg_op_jacobian(") :]
    assert re.search(r"if \(dg_nonfinite\d+ == 0\) {", jacobian)
    assert re.search(first, jacobian)
    compiled, python = built.compiled(name), built.python(name)
    size = MODULES[name][1][0]
    rng = np.random.default_rng(11)
    points = [rng.uniform(-2.0, 2.0, size), -rng.uniform(0.5, 2.0, size)]
    for k, special in enumerate([np.nan, np.inf, -np.inf, 1e200, -1e200, -0.0, 1e-200]):
        point = rng.uniform(-2.0, 2.0, size)
        point[(37 * k) % (size // 2)] = special
        points.append(point)
    for point in points:
        with np.errstate(all="ignore"):
            expected = python.jacobian(point)
            got = compiled.jacobian(point)
            out = compiled.jacobian(point * 0.5)
            compiled.jacobian(point, out=out)
        for data in (got.data, out.data):
            same(data, expected.data)
        if name == "stencil":
            with np.errstate(all="ignore"):
                value, jac = compiled.value_and_jacobian(point)
                expected_value, expected_jac = python.value_and_jacobian(point)
            same(jac.data, expected.data)
            same(expected_jac.data, expected.data)
            same(value, expected_value)
    with np.errstate(all="ignore"):
        assert np.isnan(compiled.jacobian(points[2]).data).sum() > 2  # couplings
    x = rng.uniform(0.5, 2.0, size)
    np.testing.assert_allclose(
        compiled.jacobian(x).toarray(),
        central_jacobian(getattr(F, MODULES[name][0]), x),
        atol=1e-6,
    )


def _evaluate(
    skeleton: tuple[Any, ...], names: list[str], leaves: Any, reads: dict[int, Any]
) -> Any:
    """A skeleton's values at ``leaves`` (values of its ``v`` nodes, along the
    last axis) for each element (first axis: its per-element constants)."""
    ufuncs = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
    values: list[Any] = []
    for k, item in enumerate(skeleton):
        if item[0] == "v":
            values.append(leaves[item[1]])
        elif item[0] == "c":
            if item[1] is None:
                values.append(reads[k][:, None])
            else:
                values.append(np.frombuffer(item[1], np.float64)[0])
        elif item[0] == "s":
            total = values[item[1][0]]
            for c in item[1][1:]:
                total = total + values[c]
            values.append(total)
        elif names[item[1]] == "neg":
            values.append(np.negative(values[item[2][0]]))
        else:
            values.append(ufuncs[names[item[1]]](*(values[c] for c in item[2])))
    return values[-1]


def test_finite_constant_is_exact_for_every_finite_value() -> None:
    """Random expressions over two values read and constants (signed zeros, 1,
    10, inf, NaN): where ``finite_constant`` names a constant, the expression
    takes exactly that double (sign of zero included) at every combination of
    finite values tried, from +-0.0 to +-1.7e308; and it does name one for the
    couplings of a sparse jacobian (``10.0 + (a * 0.0 + b * 0.0) - 0.0``)."""
    from difgen.targets.c import loops as c_loops

    names = ["add", "sub", "mul", "div", "neg"]

    class Eqn:
        def __init__(self, name: str) -> None:
            self.primitive = types.SimpleNamespace(name=name)
            self.params = ()

    eqns = [Eqn(n) for n in names]
    numbers = np.array([0.0, -0.0, 1.0, 10.0, -2.5, np.inf, np.nan])
    consts = [v.tobytes() for v in numbers]
    finite = np.array([0.0, -0.0, 5e-324, -1e-300, 1.5, -3.0, 1e300, -1.7e308])
    grid = np.array(np.meshgrid(finite, finite)).reshape(2, -1)
    rng = np.random.default_rng(2)
    named = 0
    for _ in range(3000):
        skeleton: list[Any] = [("v", 0), ("v", 1)]
        reads: dict[int, Any] = {}
        for _ in range(int(rng.integers(1, 6))):
            if rng.random() < 0.2:  # constants of the group's three elements
                reads[len(skeleton)] = rng.choice(numbers[:5], 3)
                skeleton.append(("c", None))
            elif rng.random() < 0.4:
                skeleton.append(("c", consts[int(rng.integers(len(consts)))]))
            op = int(rng.integers(len(names)))
            picks = rng.integers(len(skeleton), size=2)
            kids = (int(picks[0]),) if names[op] == "neg" else tuple(map(int, picks))
            if rng.random() < 0.1:
                skeleton.append(("s", tuple(map(int, picks))))
            else:
                skeleton.append(("e", op, kids))
        group = c_loops.DemandGroup(tuple(skeleton), np.zeros((3, 1)), reads)
        value = c_loops.finite_constant(group, eqns)
        if value is None:
            continue
        named += 1
        with np.errstate(all="ignore"):
            got = _evaluate(tuple(skeleton), names, grid, reads)
        shape = (3, grid.shape[1])
        expected = np.broadcast_to(np.asarray(value)[:, None], shape).copy()
        same(np.broadcast_to(got, shape).copy(), expected)
    assert named > 100
    ten, zero = np.float64(10.0).tobytes(), np.float64(0.0).tobytes()
    minus, inf = np.float64(-0.0).tobytes(), np.float64(np.inf).tobytes()
    product = [("v", 0), ("c", zero), ("e", 2, (0, 1))]  # a * 0.0: item 2
    cases = [  # (items after the product, the constant or None)
        ([("c", minus), ("e", 0, (3, 2))], None),  # -0.0 + a * 0.0
        ([("c", zero), ("e", 0, (3, 2))], zero),  # +0.0 + a * 0.0
        ([("e", 1, (2, 1))], None),  # a * 0.0 - 0.0
        ([("e", 1, (1, 2))], zero),  # 0.0 - a * 0.0
        ([("c", ten), ("e", 3, (2, 3)), ("e", 0, (3, 4))], ten),  # 10 + a*0/10
        ([("c", inf), ("e", 2, (2, 3)), ("c", ten), ("e", 0, (5, 4))], None),
        ([("e", 2, (0, 0)), ("e", 2, (3, 1)), ("c", ten), ("e", 0, (5, 4))], None),
        ([("c", ten), ("s", (3, 2, 2))], ten),  # 10 + a*0 + a*0, moved terms
    ]
    for tail, expected_value in cases:
        group = c_loops.DemandGroup(tuple(product + tail), np.zeros((1, 1)), {})
        value = c_loops.finite_constant(group, eqns)
        assert (None if value is None else value.tobytes()) == expected_value, tail
    coupling = (
        ("c", ten), ("v", 0), ("c", zero), ("e", 2, (1, 2)), ("v", 1),
        ("e", 2, (4, 2)), ("e", 0, (3, 5)), ("e", 0, (0, 6)), ("e", 1, (7, 2)),
    )  # fmt: skip
    group = c_loops.DemandGroup(coupling, np.zeros((1, 1)), {})
    value = c_loops.finite_constant(group, eqns)
    assert value is not None and value.tobytes() == ten


def test_constants_when_finite_in_the_points_loop(built: Built) -> None:
    """A dense stencil jacobian computed on demand, with its constants-when-finite
    test, inside the C points loop: every row equals the compiled one-point
    jacobian and the NumPy emission bit for bit, rows with NaN, inf, -0.0 and an
    overflowing ``a * a`` included."""
    source = _source(built, "dense_points")
    assert re.search(r"if \(dg_nonfinite\d+ == 0\) {", source)
    compiled, python = built.compiled("dense_points"), built.python("dense_points")
    X = np.random.default_rng(4).uniform(-2.0, 2.0, (300, 32))
    X[5, 3], X[7, 0], X[9, 1], X[11, 4] = np.nan, np.inf, -0.0, 1e200
    with np.errstate(all="ignore"):
        rows = compiled.jacobian_points(X)
        one = np.array([compiled.jacobian(x) for x in X])
        numpy_rows = np.array([python.jacobian(x) for x in X])
        numpy_points = python.jacobian_points(X)
    same(rows, one)
    same(one, numpy_rows)
    same(numpy_points, numpy_rows)
    assert np.isnan(rows[5]).any() and not np.isnan(rows[6]).any()
