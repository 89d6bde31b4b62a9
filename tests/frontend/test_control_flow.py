"""Data-dependent control flow: ``if``, ``while``, early ``return`` on traced values.

Every function of ``control_flow_cases`` is traced (its branches become ``cond``,
its loops ``while_loop``) and checked at points away from branch boundaries: values
exactly against the function, JVP against central differences, VJP by the
inner-product identity, hvp (forward over reverse, through the loops' state stacks)
against differences of the VJP, the batched jacobian and hessian against autograd
(which runs Python control flow natively) and, where JAX can express the function
(``lax.cond``; ``lax.while_loop`` in forward mode only), against JAX. Generated
modules are built for a few of them with every operator. Then the semantics at ties
and NaN, and the refusals, which name the construct, the file and the line.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import control_flow_cases as cases
from conftest import SUPPORT, operators_source
from difgen.ad import jvp, vjp, vmap
from difgen.ad.loops import SWEEP
from difgen.core.primitive import missing_fields
from difgen.errors import ConfigError, DifgenError, TraceError
from difgen.frontend import trace
from oracle import under_autograd

H = 1e-6
NAMES = sorted(cases.CASES)
POINTS = [(n, i) for n in NAMES for i in range(len(cases.CASES[n][2]))]


def graph(name: str) -> Any:
    fn, shape, _, _ = cases.CASES[name]
    return trace(fn, [(shape, "float64")])


_GRAPHS: dict[str, Any] = {}


def cached(name: str) -> Any:
    if name not in _GRAPHS:
        _GRAPHS[name] = graph(name)
    return _GRAPHS[name]


def central(fn: Any, x: np.ndarray, dx: np.ndarray) -> np.ndarray:
    return (np.asarray(fn(x + H * dx)) - np.asarray(fn(x - H * dx))) / (2 * H)


def close(a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-8) -> None:
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol, atol)


def test_the_corpus_has_forty_functions_with_control_flow() -> None:
    assert len(cases.CASES) >= 40
    for name in NAMES:
        prims = {e.primitive.name for e in cached(name).eqns}
        assert prims & {"cond", "while_loop"}, name


# ------------------------------------------------------------------ IR level
@pytest.mark.parametrize("name,i", POINTS)
def test_both_modes_and_second_order_match_differences(name: str, i: int) -> None:
    fn, shape, points, _ = cases.CASES[name]
    g = cached(name)
    x = np.asarray(points[i], dtype=float)
    rng = np.random.default_rng(i)
    dx = rng.normal(size=shape)
    close(g.evaluate(x)[0], fn(x), rtol=1e-12, atol=1e-14)
    _, dy = jvp(g).evaluate(x, dx)
    close(dy, central(fn, x, dx), rtol=1e-5, atol=1e-7)
    u = rng.normal(size=g.outputs[0].shape)
    reverse = vjp(g)
    _, ct = reverse.evaluate(x, u)
    lhs, rhs = float(np.sum(u * dy)), float(np.sum(ct * dx))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-10)
    hv = jvp(reverse, (True, False)).evaluate(x, u, dx)[-1]
    close(hv, central(lambda z: reverse.evaluate(z, u)[1], x, dx), 1e-4, 1e-6)


@pytest.mark.parametrize("name", [n for n in NAMES if cases.CASES[n][3]])
def test_batched_jacobian_and_hessian_match_autograd(name: str) -> None:
    """The jacobian as one batched pushforward (and the hessian as one batched
    hvp): seeds batch through the branches and the loops' states."""
    import autograd

    fn, shape, points, _ = cases.CASES[name]
    g = cached(name)
    x = np.asarray(points[0], dtype=float)
    n = max(x.size, 1)
    basis = np.eye(n).reshape((n, *shape))
    _, cols = vmap(jvp(g), (False, True), n).evaluate(x, basis)
    J = np.moveaxis(cols, 0, -1).reshape(g.outputs[0].shape + shape)
    grad_fn = under_autograd(fn)
    close(J, autograd.jacobian(grad_fn)(x), rtol=1e-9, atol=1e-11)
    if g.outputs[0].shape == ():
        hvp = jvp(vjp(g), (True, False))
        rows = vmap(hvp, (False, False, True), n).evaluate(x, np.array(1.0), basis)[-1]
        Hs = rows.reshape(shape + shape)
        close(Hs, autograd.hessian(grad_fn)(x), rtol=1e-7, atol=1e-9)


# ------------------------------------------------------------------------ JAX
def _jax_cases() -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    jax.config.update("jax_enable_x64", True)

    def piecewise_quadratic(x: Any) -> Any:
        return lax.cond(x[0] > 0, lambda: x[0] ** 2 + x[1], lambda: -x[0] + x[1] ** 2)

    def safe_sqrt(x: Any) -> Any:
        s = x[0] - x[1]
        r = lax.cond(s > 0, lambda: jnp.sqrt(jnp.abs(s)), lambda: 0.0 * s)
        return r + x[2] ** 2

    def nested_branches(x: Any) -> Any:
        inner = lax.cond(x[1] > 0, lambda: x[0] * x[1], lambda: x[0] - x[1] ** 2)
        return lax.cond(x[0] > 0, lambda: inner, lambda: jnp.sin(x[0] + x[1])) * x[2]

    def kepler(x: Any) -> Any:
        M, e = x[0], x[1]

        def body(state: Any) -> Any:
            E, _ = state
            step = (E - e * jnp.sin(E) - M) / (1.0 - e * jnp.cos(E))
            return E - step, step

        E, _ = lax.while_loop(lambda s: jnp.abs(s[1]) > 1e-13, body, (M, 1.0))
        return E

    def newton_sqrt(x: Any) -> Any:
        def body(state: Any) -> Any:
            y, _ = state
            y_new = 0.5 * (y + x / y)
            return y_new, jnp.max(jnp.abs(y_new - y))

        y, _ = lax.while_loop(lambda s: s[1] > 1e-12, body, (x, 1.0))
        return y

    def fixed_point(x: Any) -> Any:
        def body(state: Any) -> Any:
            y, _ = state
            y_new = x[0] * jnp.cos(y) + x[1]
            return y_new, jnp.abs(y_new - y)

        y, _ = lax.while_loop(lambda s: s[1] > 1e-13, body, (0.0 * x[0], 1.0))
        return y * x[2]

    return {
        "piecewise_quadratic": (piecewise_quadratic, True),
        "safe_sqrt": (safe_sqrt, True),
        "nested_branches": (nested_branches, True),
        "kepler": (kepler, False),
        "newton_sqrt": (newton_sqrt, False),
        "fixed_point": (fixed_point, False),
    }


JAX_NAMES = ["piecewise_quadratic", "nested_branches", "kepler", "newton_sqrt"]


@pytest.mark.parametrize("name", JAX_NAMES)
def test_against_jax(name: str) -> None:
    """lax.cond in both modes; lax.while_loop in forward mode (JAX cannot reverse
    differentiate a while_loop, so difgen's reverse mode is checked against JAX's
    forward mode by the inner product)."""
    import jax

    jfn, reverse_ok = _jax_cases()[name]
    g = cached(name)
    _, shape, points, _ = cases.CASES[name]
    for i, point in enumerate(points):
        x = np.asarray(point, dtype=float)
        dx = np.random.default_rng(20 + i).normal(size=shape)
        y, dy = jax.jvp(jfn, (x,), (dx,))
        close(g.evaluate(x)[0], np.asarray(y), rtol=1e-12, atol=1e-14)
        close(jvp(g).evaluate(x, dx)[1], np.asarray(dy), rtol=1e-10, atol=1e-12)
        u = np.random.default_rng(30 + i).normal(size=g.outputs[0].shape)
        ct = vjp(g).evaluate(x, u)[1]
        if reverse_ok:
            _, pull = jax.vjp(jfn, x)
            close(ct, np.asarray(pull(u)[0]), rtol=1e-10, atol=1e-12)
        else:
            assert float(np.sum(ct * dx)) == pytest.approx(
                float(np.sum(u * np.asarray(dy))), rel=1e-10, abs=1e-12
            )


# ------------------------------------------------------------ generated modules
SCALAR_OPS = [
    "gradient",
    "value_and_gradient",
    "jacobian",
    "pushforward",
    "pullback",
    "hvp",
    "hessian",
]
ARRAY_OPS = ["jacobian", "value_and_jacobian", "pushforward", "pullback"]
MODULES = [
    "early_return",
    "kepler",
    "adaptive_euler",
    "newton_sqrt",
    "writes_in_branch",
    "bisection_polished",
]


@pytest.mark.parametrize("name", MODULES)
def test_generated_module_computes_every_operator(module_cache: Any, name: str) -> None:
    fn, shape, points, _ = cases.CASES[name]
    g = cached(name)
    scalar = g.outputs[0].shape == ()
    mod, _text = module_cache(
        SUPPORT / "control_flow_cases.py",
        name,
        shape,
        SCALAR_OPS if scalar else ARRAY_OPS,
        backend="trace",
    )
    source = operators_source(mod)  # the template's own checks have ifs
    assert "if " in source or "while " in source
    for i, point in enumerate(points):
        x = np.asarray(point, dtype=float)
        rng = np.random.default_rng(40 + i)
        dx, u = rng.normal(size=shape), rng.normal(size=g.outputs[0].shape)
        close(mod.f(x), fn(x), rtol=1e-12, atol=1e-14)
        close(mod.pushforward(x, dx), jvp(g).evaluate(x, dx)[1], 1e-10, 1e-12)
        close(mod.pullback(x, u), vjp(g).evaluate(x, u)[1], 1e-10, 1e-12)
        J = np.asarray(mod.jacobian(x)).reshape(-1, x.size)
        close(J @ dx.ravel(), np.ravel(central(fn, x, dx)), 1e-5, 1e-7)
        if scalar:
            value, grad = mod.value_and_gradient(x)
            close(value, fn(x), rtol=1e-12, atol=1e-14)
            close(grad, mod.gradient(x), rtol=0, atol=0)
            Hs = np.asarray(mod.hessian(x)).reshape(x.size, x.size)
            close(Hs @ dx.ravel(), np.ravel(mod.hvp(x, dx)), 1e-9, 1e-11)
            hvp = jvp(vjp(g), (True, False)).evaluate(x, np.array(1.0), dx)[-1]
            close(mod.hvp(x, dx), hvp, 1e-9, 1e-11)


def test_generated_code_shows_the_users_if_and_while(module_cache: Any) -> None:
    _, text = module_cache(
        SUPPORT / "control_flow_cases.py",
        "kepler",
        (2,),
        ["gradient"],
        backend="trace",
    )
    body = text[text.index("def gradient(") :]
    assert "while " in body
    assert ": list[Any] = []" in body  # the forward sweep's stack of states
    assert "in reversed(" in body  # the backward sweep over it


def test_scalar_input_derivative_and_second_derivative(module_cache: Any) -> None:
    points = cases.CASES["exp_series"][2]
    mod, _ = module_cache(
        SUPPORT / "control_flow_cases.py",
        "exp_series",
        (),
        ["derivative", "second_derivative"],
        backend="trace",
    )
    for x in points:
        close(mod.derivative(float(x)), np.exp(x), rtol=1e-12, atol=1e-14)
        close(mod.second_derivative(float(x)), np.exp(x), rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------- semantics
def test_at_a_tie_the_derivative_is_the_taken_branchs() -> None:
    """``sinc`` at exactly 0 takes the constant branch: derivative 0 (as JAX and
    autograd give), and its value is the branch's."""
    g = cached("sinc")
    x = np.array(0.0)
    assert g.evaluate(x)[0] == 1.0
    assert jvp(g).evaluate(x, np.array(1.0))[1] == 0.0
    assert vjp(g).evaluate(x, np.array(1.0))[1] == 0.0


def nan_predicates(x):
    a = 1.0 if x[0] > 0 else 2.0  # NaN > 0 is False
    b = 3.0 if x[0] else 4.0  # bool(NaN) is True
    return a * x[1] + b * x[1]


def test_nan_predicates_follow_python() -> None:
    g = trace(nan_predicates, [((2,), "float64")])
    x = np.array([np.nan, 1.0])
    assert g.evaluate(x)[0] == nan_predicates(x) == 5.0


def test_the_safe_branch_has_no_nan_gradient() -> None:
    """Where np.where differentiates both sides (0 * inf = NaN), a real if
    differentiates the branch taken."""
    g = cached("safe_sqrt")
    x = np.array([0.1, 0.5, 0.3])  # sqrt of a negative number not taken
    ct = vjp(g).evaluate(x, np.array(1.0))[1]
    assert np.all(np.isfinite(ct))
    close(ct, [0.0, 0.0, 0.6])


def aliased_write(x):
    a = x * 1.0
    b = a  # the same array object
    if x[0] > 0:
        b[1] = 5.0
    return a


def test_a_write_in_a_branch_reaches_every_name_of_the_array() -> None:
    g = trace(aliased_write, [((3,), "float64")])
    for x in (np.array([0.5, 1.0, 2.0]), np.array([-0.5, 1.0, 2.0])):
        close(g.evaluate(x)[0], aliased_write(x), rtol=0, atol=0)


def python_loop_then_traced(x):
    y = x[0]
    k = 0.0
    while k < 2.0:  # a constant condition: Python runs it while tracing
        y = y * 2.0
        k = k + 1.0
    while y > 0.1:  # a traced one: a while_loop
        y = y * 0.5
    return y


def test_loops_on_constants_still_unroll() -> None:
    g = trace(python_loop_then_traced, [((1,), "float64")])
    assert [e.primitive.name for e in g.eqns].count("while_loop") == 1
    x = np.array([0.7])
    close(g.evaluate(x)[0], python_loop_then_traced(x), rtol=0, atol=0)


def no_branch(x):
    return np.sum(np.where(x > 0, x, 0.0))


def test_functions_without_traced_branches_trace_as_before() -> None:
    assert {e.primitive.name for e in trace(no_branch, [((3,), "float64")]).eqns} == {
        "gt",
        "where",
        "reduce_sum",
    }


def test_the_sweep_declares_every_field() -> None:
    assert not missing_fields(SWEEP)


def test_equal_branches_trace_the_same_graph_twice() -> None:
    """The purity check compares two traces: sub-graphs compare by structure."""
    from difgen.passes import fingerprint

    a, b = graph("adaptive_euler"), graph("adaptive_euler")
    assert fingerprint(a) == fingerprint(b)


# -------------------------------------------------------------------- refusals
def _line(fn: Any, needle: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if needle in line)


def break_in_try(x):
    for i in range(3):
        try:
            if x[0] > i:
                break
        finally:
            x = x * 2.0
    return x


class _Box:
    value: Any = 0.0


def attribute_in_branch(x):
    box = _Box()
    if x[0] > 0:
        box.value = x[0]
    return x * 2.0


def return_in_loop(x):
    for i in range(3):
        if x[0] > i:
            return x * i
    return x


def appends_in_branch(x):
    out = []
    if x[0] > 0:
        out.append(x[0])
    return x


def different_shapes(x):
    y = x if x[0] > 0 else x[0]
    return y


_KEPT: list[Any] = []


def _keep(value):
    _KEPT.append(value)  # a helper's side effect: difgen cannot see it
    return value


def escapes_branch(x):
    _KEPT.clear()
    if x[0] > 0:
        y = _keep(x * 2.0)
    else:
        y = _keep(x * 3.0)
    return y + _KEPT[0]


def writes_into_dict(x):
    kept = {}
    if x[0] > 0:
        kept["v"] = x * 2.0
    else:
        kept["v"] = x * 3.0
    return kept["v"]


def writes_plain_array(x):
    table = np.ones(3, dtype=np.int64)
    if x[0] > 0:
        table[0] = 2
    return x * 2.0


def nested_function(x):
    def inner(v):
        if v[0] > 0:
            return v * 2.0
        return v

    return inner(x)


REFUSALS = [
    (break_in_try, "if x[0] > i:", "`break` or `continue`"),
    (nested_function, "if v[0] > 0:", "nested function"),
    (attribute_in_branch, "if x[0] > 0:", "assigns an attribute"),
    (return_in_loop, "if x[0] > i:", "returns from inside a loop"),
    (appends_in_branch, "if x[0] > 0:", ".append()"),
    (different_shapes, "y = x if", "same shape and dtype"),
    (escapes_branch, "return y + _KEPT[0]", "used outside it"),
    (writes_into_dict, "if x[0] > 0:", "writes into a dict"),
    (writes_plain_array, "if x[0] > 0:", "writes into a ndarray"),
]


@pytest.mark.parametrize(
    "fn,needle,message", REFUSALS, ids=[f.__name__ for f, _, _ in REFUSALS]
)
def test_refusals_name_the_construct_file_and_line(
    fn: Any, needle: str, message: str
) -> None:
    with pytest.raises(TraceError) as info:
        trace(fn, [((3,), "float64")])
    text = str(info.value)
    assert f"test_control_flow.py:{_line(fn, needle)}:" in text, text
    assert message in text, text


def view_then_write(x):
    A = np.stack([x, x * 2.0])
    row = A[0] if x[0] > 0 else A[1]  # NumPy: a view of A
    A[0, 0] = 5.0
    return row


def view_read_only(x):
    A = np.stack([x, x * 2.0])
    row = A[0] if x[0] > 0 else A[1]
    return row * 2.0


def test_a_view_chosen_by_a_branch_then_written_through_is_refused() -> None:
    """NumPy's chosen row is a view and would see the later write; difgen's is a
    copy: refused, naming the branch. Without the write it is exact."""
    with pytest.raises(TraceError) as info:
        trace(view_then_write, [((3,), "float64")])
    line = _line(view_then_write, "row = A[0] if")
    assert f"traced value at {__file__}:{line}" in str(info.value)
    g = trace(view_read_only, [((3,), "float64")])
    x = np.array([0.5, 0.3, 0.2])
    close(g.evaluate(x)[0], view_read_only(x), rtol=0, atol=0)


def test_reverse_over_reverse_through_a_loop_is_refused() -> None:
    with pytest.raises(DifgenError, match="reverse over reverse"):
        vjp(vjp(cached("kepler")))


def test_a_predicate_batched_over_the_input_is_refused() -> None:
    g = cached("piecewise_quadratic")
    with pytest.raises(DifgenError, match="different branches"):
        vmap(g, (True,), 2)
    loop = cached("kepler")
    with pytest.raises(DifgenError, match="different number of times"):
        vmap(loop, (True,), 2)


def test_the_sympy_backend_refuses_control_flow(tmp_path: Path) -> None:
    from conftest import build_and_import, write_config

    cfg = write_config(
        tmp_path,
        SUPPORT / "control_flow_cases.py",
        "piecewise_quadratic",
        (3,),
        ["gradient"],
        backend="sympy",
    )
    with pytest.raises(ConfigError) as info:
        build_and_import(cfg)
    text = str(info.value)
    assert "control_flow_cases.py:" in text and 'backend = "trace"' in text
