"""``emit = "c"`` on array graphs: C loops against the vector (NumPy) emission.

One config (tests/support/c_loops_functions.py) is built and compiled once per session;
each module is imported from the build directory (its extension replaces the
operators) and as a lone copy of the ``.py`` (the Python fallback, which for loop
operators is the vector emission). The loops perform the same operations in the same
order, except that sums, products and matmul accumulate in index order where NumPy
sums pairwise or BLAS blocks, and the C library's transcendentals may differ from
NumPy's SIMD loops in the last bit: results agree to ``RTOL`` of the result's scale.
NaN and inf are identical.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse
from test_c_target import trace_c_build

import c_loops_functions as F
import difgen
from compiled import Built
from oracle import central_jacobian

RTOL = 1e-12
"""Relative to the largest magnitude of the result (reassociated sums)."""

MODULES = {
    "fused": (
        "fused",
        [400],
        ["f", "gradient", "value_and_gradient", "hvp"],
        'contexts = [{ name = "c", shape = [400] }, { name = "s", shape = [] }]',
    ),
    "matrix": ("matrix", [600], ["f", "gradient"], ""),
    "structural": ("structural", [480], ["f", "gradient"], ""),
    "products": (
        "products",
        [30],
        ["f", "gradient", "jacobian"],
        (
            'contexts = [{ name = "A", shape = [200, 30] }, '
            '{ name = "B", shape = [200, 200] }]'
        ),
    ),
    "brusselator": (
        "brusselator",
        [200],
        ["jacobian", "value_and_jacobian"],
        "sparse = true",
    ),
    "rosenbrock": (
        "rosenbrock",
        [100],
        ["hessian", "value_gradient_and_hessian"],
        "",
    ),
    "nan_semantics": ("nan_semantics", [400], ["f", "gradient"], ""),
    "roots_and_zeros": ("roots_and_zeros", [400], ["f", "gradient"], ""),
    "sorted_sum": ("sorted_sum", [400], ["f", "gradient"], ""),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return trace_c_build(tmp_path_factory, "c_loops_functions", MODULES)


def _args(name: str, x: np.ndarray | None = None) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    size = MODULES[name][1][0]
    args: dict[str, Any] = {"x": rng.uniform(0.2, 1.3, size) if x is None else x}
    if name == "fused":
        args.update(c=rng.standard_normal(size), s=0.7)
    if name == "products":
        args.update(
            A=rng.standard_normal((200, 30)) * 0.2, B=rng.standard_normal((200, 200))
        )
    return args


def _call(module: Any, op: str, args: dict[str, Any], **extra: Any) -> Any:
    x, *ctx = args.values()
    if op == "hvp":
        return getattr(module, op)(x, np.linspace(-1, 1, x.size), *ctx, **extra)
    return getattr(module, op)(x, *ctx, **extra)


def _close(got: Any, expected: Any) -> None:
    """Equal up to reassociation; NaN where NaN, inf where inf; same types."""
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected):
            _close(g, e)
        return
    assert type(got) is type(expected), (type(got), type(expected))
    if scipy.sparse.issparse(expected):
        np.testing.assert_array_equal(got.indices, expected.indices)
        np.testing.assert_array_equal(got.indptr, expected.indptr)
        got, expected = got.data, expected.data
    g, e = np.asarray(got), np.asarray(expected)
    assert g.shape == e.shape and g.dtype == e.dtype
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
    np.testing.assert_array_equal(np.isinf(g) * np.sign(g), np.isinf(e) * np.sign(e))
    finite = np.isfinite(e)
    scale = max(1.0, float(np.max(np.abs(e[finite]), initial=0.0)))
    np.testing.assert_allclose(g[finite], e[finite], rtol=0, atol=RTOL * scale)


LOOP_MODULES = [n for n in MODULES if n != "sorted_sum"]


@pytest.mark.parametrize("name", LOOP_MODULES)
def test_loops_equal_vector_emission(built: Built, name: str) -> None:
    """Every operator compiled as loops (none left in Python), equal to the
    NumPy emission."""
    compiled, python = built.compiled(name), built.python(name)
    assert compiled.PYTHON_OPERATORS == ()
    assert "C loops over" in (built.directory / "out" / f"{name}__c.c").read_text()
    args = _args(name)
    for op in MODULES[name][2]:
        _close(_call(compiled, op, args), _call(python, op, args))


@pytest.mark.parametrize("name", ["fused", "matrix", "structural", "products"])
def test_gradient_against_central_differences(built: Built, name: str) -> None:
    compiled = built.compiled(name)
    args = _args(name)
    x, *ctx = args.values()
    numeric = central_jacobian(lambda v: getattr(F, name)(v, *ctx), x)
    np.testing.assert_allclose(
        compiled.gradient(x, *ctx), np.reshape(numeric, x.shape), rtol=1e-5, atol=1e-6
    )


def test_dense_hessian_against_differences(built: Built) -> None:
    """Computed in the result buffer (the reshape of its scatter), not copied."""
    compiled = built.compiled("rosenbrock")
    x = _args("rosenbrock")["x"]
    numeric = central_jacobian(lambda v: compiled.value_gradient_and_hessian(v)[1], x)
    np.testing.assert_allclose(compiled.hessian(x), numeric, rtol=1e-6, atol=1e-4)
    source = (built.directory / "out" / "rosenbrock__c.c").read_text()
    assert "a result copied" not in source


def test_hvp_and_sparse_jacobian_against_differences(built: Built) -> None:
    args = _args("fused")
    x, c, s = args.values()
    v = np.linspace(-1, 1, x.size)
    grad = built.compiled("fused").gradient
    numeric = (grad(x + 1e-6 * v, c, s) - grad(x - 1e-6 * v, c, s)) / 2e-6
    got = built.compiled("fused").hvp(x, v, c, s)
    np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-5)
    u = _args("brusselator")["x"]
    dense = built.compiled("brusselator").jacobian(u).toarray()
    np.testing.assert_allclose(dense, central_jacobian(F.brusselator, u), atol=1e-6)


def test_nan_inf_propagate_as_numpy(built: Built) -> None:
    """max/min with NaN, 0 * inf, log(0), inf: the loops give NumPy's values."""
    compiled, python = built.compiled("nan_semantics"), built.python("nan_semantics")
    base = np.linspace(0.3, 2.0, 400)
    for special in ([np.nan], [0.0], [np.inf], [-np.inf], [0.0, np.nan], [-0.0]):
        x = base.copy()
        x[7 : 7 + len(special)] = special
        for op in ("f", "gradient"):
            with np.errstate(all="ignore"):
                _close(getattr(compiled, op)(x), getattr(python, op)(x))


def test_signed_zeros_and_square_roots_as_numpy(built: Built) -> None:
    """At -inf, x ** 0.5 is NaN (NumPy's sqrt), not pow's inf; the maximum of
    0.0 and -0.0 is the second (1 / m is -inf or inf)."""
    compiled, python = built.compiled("roots_and_zeros"), built.python(
        "roots_and_zeros"
    )
    base = np.linspace(0.3, 2.0, 400)
    for special, expected in (([-np.inf], np.nan), ([0.0], -np.inf), ([-0.0], np.inf)):
        x = base.copy()
        x[3] = special[0]
        with np.errstate(all="ignore"):
            value = compiled.f(x)
            np.testing.assert_array_equal(value, expected)
            _close(value, python.f(x))
            _close(compiled.gradient(x), python.gradient(x))


def test_wrong_arguments_raise_as_python(built: Built) -> None:
    compiled, python = built.compiled("fused"), built.python("fused")
    args = _args("fused")
    x, c, s = args.values()
    cases = [
        ((x[:-1], c, s), {}),
        ((x, c.reshape(20, 20), s), {}),
        ((x, c, np.ones(2)), {}),
        ((x.astype(complex), c, s), {}),
        ((x, c), {}),
        ((x, c, s), {"bogus": 1}),
        ((x, c, s), {"out": np.zeros(399)}),
        ((x, c, s), {"out": np.zeros(400, dtype=np.float32)}),
    ]
    for call_args, kwargs in cases:
        errors = []
        for module in (compiled, python):
            with pytest.raises((TypeError, ValueError)) as caught:
                module.gradient(*call_args, **kwargs)
            errors.append((type(caught.value), str(caught.value)))
        assert errors[0] == errors[1], errors
    # lists and int arrays are converted as the Python module converts them
    _close(compiled.gradient(list(x), c, s), python.gradient(x, c, s))


def test_out_dense_and_aliasing(built: Built) -> None:
    compiled, python = built.compiled("fused"), built.python("fused")
    x, c, s = _args("fused").values()
    expected = python.gradient(x, c, s)
    out = np.empty(400)
    assert compiled.gradient(x, c, s, out=out) is out
    _close(out, expected)
    # out is the argument itself: computed first, then written (as in Python)
    y = x.copy()
    assert compiled.gradient(y, c, s, out=y) is y
    _close(y, expected)
    strided = np.empty(800)[::2]  # not written directly: checked and copied
    compiled.gradient(x, c, s, out=strided)
    _close(strided, expected)


def test_csr_out_in_place(built: Built) -> None:
    compiled, python = built.compiled("brusselator"), built.python("brusselator")
    u = _args("brusselator")["x"]
    out = compiled.jacobian(u)
    data = out.data
    v = u * 1.1
    for module in (compiled, python):
        assert module.jacobian(v, out=out) is out
        assert out.data is data
        _close(out, python.jacobian(v))
        out.data[:] = 0.0
    value, jac = compiled.value_and_jacobian(v, out=out)
    assert jac is out
    _close(value, python.value_and_jacobian(v)[0])
    wrong = scipy.sparse.csr_array(np.eye(200))
    for module in (compiled, python):
        with pytest.raises(ValueError, match="sparsity pattern"):
            module.jacobian(u, out=wrong)


def test_no_loop_form_stays_in_python(built: Built) -> None:
    """np.sort has no loop form: the operators using it are the Python ones, the
    extension exports the others, the build said so and verify reports it."""
    compiled = built.compiled("sorted_sum")
    assert set(compiled.PYTHON_OPERATORS) == {"f", "gradient"}
    source = (built.directory / "out" / "sorted_sum__c.c").read_text()
    assert "dg_op_gradient" not in source
    (module,) = [m for m in built.result.modules if m.name == "sorted_sum"]
    assert any("no C loop form for sort" in n for n in module.notes), module.notes
    x = _args("sorted_sum")["x"]
    np.testing.assert_array_equal(
        compiled.gradient(x), built.python("sorted_sum").gradient(x)
    )
    report = difgen.verify(built.config, modules=["sorted_sum"])
    assert "in Python (no C form): f, gradient" in str(report)


def test_generated_c_is_deterministic_and_commented(
    built: Built, tmp_path: Path
) -> None:
    """The same config gives the same C bytes; loops name their IR equations."""
    again = tmp_path / "again"
    shutil.copytree(built.directory, again, ignore=shutil.ignore_patterns("out"))
    difgen.build(again / "difgen.toml", modules=["structural"])
    first = (built.directory / "out" / "structural__c.c").read_text()
    assert (again / "out" / "structural__c.c").read_text() == first
    assert "fused over" in first and "= reduce_sum" in first


def test_small_loop_results_are_recycled_only_when_dropped(built: Built) -> None:
    """Loop-built results of at most c_code.RECYCLE_MAX elements are recycled as the
    straight-line ones are (tests/targets/c/test_c_target.py): held ones never change.
    """
    compiled = built.compiled("fused")
    base = _args("fused")
    points = [base["x"] + 0.05 * i for i in range(5)]
    held = [_call(compiled, "value_and_gradient", {**base, "x": x}) for x in points]
    for x, result in zip(points, held):
        expected = _call(compiled, "value_and_gradient", {**base, "x": x.copy()})
        assert result[0] == expected[0]
        np.testing.assert_array_equal(result[1], expected[1])
    address = _call(compiled, "gradient", base).ctypes.data
    again = _call(compiled, "gradient", {**base, "x": points[3]})
    assert again.ctypes.data == address
    np.testing.assert_array_equal(again, held[3][1])
