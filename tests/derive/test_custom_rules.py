"""User derivative rules (``difgen.custom_jvp``): every operator in both modes and
both backends against JAX's ``jax.custom_jvp`` on the same rules, second order
through the rule, a function difgen cannot trace, nested rules, a rule inside a
``while`` loop, C; the build-time checks (a wrong rule, a rule not linear in the
tangents); and the decorated function at run time, which is the function."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import custom_rules_functions as fns
import difgen
from conftest import build_and_import, import_file, write_config
from difgen.ad import jvp, vjp
from difgen.ad.custom import CALL, inline_calls
from difgen.errors import TraceError
from difgen.frontend import trace

SOURCE = Path(fns.__file__)

CASES: dict[str, tuple[tuple[int, ...], bool]] = {
    # name: (input shape, scalar output)
    "softplus_sum": ((3,), True),
    "softplus_scalar": ((), True),
    "softplus_matrix": ((2, 3), False),
    "norm_of_sines": ((3,), False),
    "poisson_nll": ((4,), True),
    "nested": ((3,), True),
    "two_arguments": ((4,), False),
    "in_while_loop": ((3,), True),
}

FIRST = [
    "pushforward",
    "value_and_pushforward",
    "pullback",
    "value_and_pullback",
    "jacobian",
    "value_and_jacobian",
]
SCALAR_OUT = [
    "gradient",
    "value_and_gradient",
    "hvp",
    "hessian",
    "value_gradient_and_hessian",
]
SCALAR_IN = ["derivative", "value_and_derivative", "second_derivative"]
SCALAR_IN += ["value_derivative_and_second_derivative"]

PARTS = {
    "value_gradient_and_hessian": ("f", "gradient", "hessian"),
    "value_derivative_and_second_derivative": ("f", "derivative", "second_derivative"),
}
"""What a combined operator returns, part by part (``value_and_X``: f, X)."""


def _parts(op: str) -> tuple[str, ...]:
    if op in PARTS:
        return PARTS[op]
    if op.startswith("value_and_"):
        return ("f", op.removeprefix("value_and_"))
    return (op,)


def _operators(name: str, mode: str = "auto") -> list[str]:
    shape, scalar_out = CASES[name]
    ops = list(FIRST)
    if scalar_out:
        ops += SCALAR_OUT
    if name == "in_while_loop" and mode == "reverse":
        # reverse over a loop's adjoint is not offered (second order is forward
        # over reverse): hvp and hessian refuse it with or without a rule
        ops = [op for op in ops if not {"hvp", "hessian"} & set(_parts(op))]
    if shape == ():
        ops += SCALAR_IN
    return ops


@pytest.fixture(scope="module")
def twins() -> dict[str, Any]:
    return fns.jax_twins()


def _point(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-0.9, 0.9, shape)


def _expected(twin: Any, op: str, x: np.ndarray, seeds: dict[str, Any]) -> Any:
    """JAX's result, in forward mode only (JAX has no reverse mode through a
    ``while_loop``): its rules, as difgen's, are JVP rules."""
    parts = _parts(op)
    if len(parts) > 1:
        return tuple(_expected(twin, part, x, seeds) for part in parts)
    import jax

    xj = jax.numpy.asarray(x)
    jac = np.asarray(jax.jacfwd(twin)(xj))
    y = np.asarray(twin(xj))
    n = x.size
    flat = jac.reshape(y.size, n)
    if op == "f":
        return y
    if op == "pushforward":
        return (flat @ seeds["dx"].ravel()).reshape(y.shape)
    if op == "pullback":
        return (seeds["dy"].ravel() @ flat).reshape(x.shape)
    if op == "jacobian":
        return jac
    if op in ("gradient", "derivative"):
        return jac
    hessian = np.asarray(jax.jacfwd(jax.jacfwd(twin))(xj))
    if op == "hvp":
        return (hessian.reshape(n, n) @ seeds["v"].ravel()).reshape(x.shape)
    if op in ("hessian", "second_derivative"):
        return hessian
    raise AssertionError(op)


def _call(module: Any, op: str, x: np.ndarray, seeds: dict[str, Any]) -> Any:
    fn = getattr(module, op)
    base = _parts(op)[-1]
    if base == "pushforward":
        return fn(x, seeds["dx"])
    if base == "pullback":
        return fn(x, seeds["dy"])
    if base == "hvp":
        return fn(x, seeds["v"])
    return fn(x)


def _compare(got: Any, want: Any, what: str, rtol: float = 1e-9) -> None:
    if isinstance(want, tuple):
        assert len(got) == len(want), what
        for g, w in zip(got, want):
            _compare(g, w, what, rtol)
        return
    np.testing.assert_allclose(
        np.asarray(got), np.asarray(want), rtol=rtol, atol=1e-11, err_msg=what
    )


def _seeds(name: str, module: Any) -> dict[str, Any]:
    shape, _ = CASES[name]
    y = np.asarray(module.f(_point(shape)))
    rng = np.random.default_rng(7)
    return {
        "dx": rng.uniform(-1, 1, shape),
        "dy": rng.uniform(-1, 1, y.shape),
        "v": rng.uniform(-1, 1, shape),
    }


BUILDS = [
    ("trace", "forward", "auto"),
    ("trace", "reverse", "auto"),
    ("trace", "auto", "vector"),
    ("sympy", "auto", "auto"),
]


@pytest.mark.parametrize("backend,mode,emit", BUILDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_operator_agrees_with_jax_custom_jvp(
    module_cache: Any,
    twins: dict[str, Any],
    name: str,
    backend: str,
    mode: str,
    emit: str,
) -> None:
    shape, _ = CASES[name]
    ops = _operators(name, mode)
    module, _ = module_cache(
        SOURCE, name, shape, ops, backend=backend, mode=mode, emit=emit
    )
    seeds = _seeds(name, module)
    for k in range(2):
        x = _point(shape, k)
        for op in ["f", *ops]:
            want = _expected(twins[name], op, x, seeds)
            _compare(_call(module, op, x, seeds), want, f"{name} {op} at {x}")


@pytest.mark.parametrize(
    "name", ["softplus_sum", "poisson_nll", "nested", "in_while_loop"]
)
def test_emit_c_agrees_with_jax(
    tmp_path: Path, twins: dict[str, Any], name: str
) -> None:
    """Compiled: the calls are inlined before the C loops see the graph."""
    shape, _ = CASES[name]
    ops = _operators(name)
    cfg = write_config(tmp_path, SOURCE, name, shape, ops, backend="trace", emit="c")
    difgen.build(cfg, compile=True)
    module = import_file(tmp_path / "out" / "mod.py")
    assert module.COMPILED, module.C_FALLBACK_REASON
    assert "custom_jvp_call" not in (tmp_path / "out" / "mod__c.c").read_text()
    seeds = _seeds(name, module)
    x = _point(shape, 3)
    for op in ["f", *ops]:
        want = _expected(twins[name], op, x, seeds)
        _compare(_call(module, op, x, seeds), want, f"{name} {op} (C)")


def test_the_value_of_an_untraceable_function_comes_from_its_rule(
    tmp_path: Path,
) -> None:
    """lgamma, a math.lgamma loop, is untraceable: the module computes the rule's
    Stirling value, and its hessian is the rule's own derivative (there is nothing
    else to differentiate); both agree with SciPy's gammaln and its derivatives."""
    from scipy.special import gammaln, polygamma

    cfg = write_config(
        tmp_path, SOURCE, "poisson_nll", (4,), ["gradient", "hessian"], backend="trace"
    )
    (built,) = difgen.build(cfg).modules
    assert any(
        "difgen cannot trace" in n and "its value comes from its rule lgamma_jvp" in n
        for n in built.notes
    ), built.notes
    module = import_file(tmp_path / "out" / "mod.py")
    x = _point((4,), 5)
    rate = np.exp(x) + 0.5
    counts = np.array([1.0, 3.0, 0.0, 2.0])
    z = counts + rate
    value = np.sum(rate - counts * np.log(rate) + gammaln(z))
    gradient = (1 - counts / rate + polygamma(0, z)) * np.exp(x)
    curvature = (counts / rate**2 + polygamma(1, z)) * np.exp(2 * x) + gradient
    np.testing.assert_allclose(module.f(x), value, rtol=1e-9)
    np.testing.assert_allclose(module.gradient(x), gradient, rtol=1e-7)
    np.testing.assert_allclose(module.hessian(x), np.diag(curvature), rtol=1e-6)


def test_second_order_differentiates_the_rule_not_the_function() -> None:
    """The hvp graph of a rule's function holds the rule's equations: a rule that
    says exp where the function computes something else (a stand-in both agree on
    to first order nowhere) shows which one second order used."""
    graph = trace(fns.softplus_sum, [((3,), "float64")])
    assert [e.primitive for e in graph.eqns].count(CALL) == 1
    first = jvp(graph)
    # the tangent comes from the rule: 1 - exp(-y), whose exp(neg(...)) the
    # function itself never computes
    names = [e.primitive.name for e in inline_calls(first).eqns]
    assert "neg" in names and "exp" in names
    second = jvp(vjp(graph), (True, False))
    inlined = inline_calls(second)
    assert CALL not in [e.primitive for e in inlined.eqns]


def _build(tmp_path: Path, function: str, **options: Any) -> Any:
    cfg = write_config(tmp_path, SOURCE, function, (3,), ["gradient"], **options)
    return build_and_import(cfg)


@pytest.mark.parametrize("backend", ["trace", "sympy"])
def test_a_wrong_rule_fails_the_build_naming_it_and_both_values(
    tmp_path: Path, backend: str
) -> None:
    with pytest.raises(TraceError) as caught:
        _build(tmp_path, "uses_wrong_rule", backend=backend)
    message = str(caught.value)
    line = fns.wrong_sin_jvp.__code__.co_firstlineno
    assert f"wrong_sin_jvp of wrong_sin at {tmp_path / SOURCE.name}:{line}" in message
    assert "disagrees with central differences" in message
    # both values: the rule's tangent and the differences, of opposite signs
    got = message.split("the rule's tangent is ")[1].split(", the differences")[0]
    want = message.split("the differences give ")[1].split(" (relative")[0]
    np.testing.assert_allclose(eval(got), -np.asarray(eval(want)), rtol=1e-5)


def test_a_rule_not_linear_in_the_tangents_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"square_jvp of square .*not linear"):
        _build(tmp_path, "uses_nonlinear_rule", backend="trace")


def test_an_affine_tangent_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"shifted_jvp .*nonzero tangent .*zero"):
        _build(tmp_path, "uses_affine_rule", backend="trace")


def test_the_sympy_backend_builds_from_the_graph_and_says_so(module_cache: Any) -> None:
    _, text = module_cache(SOURCE, "softplus_sum", (3,), FIRST + SCALAR_OUT)
    assert "user derivative rule" in text
    assert "custom_jvp_call" not in text


# ------------------------------------------------------------ at run time
def test_at_run_time_the_decorated_function_is_the_function() -> None:
    x = np.array([0.3, -2.0, 40.0])
    assert np.array_equal(fns.logexp(x), np.log1p(np.exp(x)))
    assert fns.logexp.__name__ == "logexp" and fns.logexp.__wrapped__ is fns.logexp.fun
    assert np.array_equal(fns.softplus_sum(x), np.sum(np.log1p(np.exp(x)) * x))
    with pytest.raises(TypeError) as plain:
        fns.logexp.fun("a")
    with pytest.raises(TypeError) as decorated:
        fns.logexp("a")
    assert str(plain.value) == str(decorated.value)
    assert np.array_equal(
        fns.lgamma(np.array([2.5, 7.0])), fns.lgamma.fun(np.array([2.5, 7.0]))
    )


def test_import_difgen_does_not_import_the_tracer() -> None:
    code = (
        "import sys, difgen\n"
        "@difgen.custom_jvp\n"
        "def f(x): return x\n"
        "assert f(2.0) == 2.0\n"
        "print(sorted(m for m in sys.modules if m.startswith('difgen.core.tracer')"
        " or m in ('numpy', 'sympy')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert "difgen.core.tracer" not in out.stdout and "sympy" not in out.stdout


def test_a_function_without_a_rule_is_refused_while_traced() -> None:
    import difgen

    @difgen.custom_jvp
    def bare(x: Any) -> Any:
        return np.sin(x)

    with pytest.raises(TraceError, match="without a rule"):
        trace(lambda x: bare(x), [((2,), "float64")])


def test_a_closure_over_a_traced_value_is_refused() -> None:
    import difgen

    def f(x: Any) -> Any:
        @difgen.custom_jvp
        def scaled(z: Any) -> Any:
            return z * x[0]

        @scaled.defjvp
        def _(primals: Any, tangents: Any) -> Any:
            return scaled(primals[0]), tangents[0] * x[0]

        return scaled(x)

    with pytest.raises(TraceError, match="by closure"):
        trace(f, [((2,), "float64")])


def test_a_batched_call_keeps_its_rule() -> None:
    """vmap of a call is a call of the batched function and rule: its JVP is
    still the rule's, row by row."""
    from difgen.ad import vmap

    graph = trace(fns.nested, [((3,), "float64")])
    batched = vmap(graph, [True], 4)
    assert CALL in [e.primitive for e in batched.eqns]
    rng = np.random.default_rng(1)
    xs, ts = rng.uniform(-1, 1, (4, 3)), rng.uniform(-1, 1, (4, 3))
    one = jvp(graph)
    rows = [one.evaluate(x, t)[1] for x, t in zip(xs, ts)]
    np.testing.assert_allclose(jvp(batched).evaluate(xs, ts)[1], rows, rtol=1e-13)


def test_points_and_sparse_results_go_through_the_rule(tmp_path: Path) -> None:
    """The points variants batch the inlined operator graphs; the sparsity rule of
    a call finds softplus's diagonal hessian."""
    cfg = write_config(
        tmp_path / "points",
        SOURCE,
        "softplus_sum",
        (5,),
        ["gradient", "hessian"],
        backend="trace",
        points=True,
    )
    dense, _ = build_and_import(cfg)
    cfg = write_config(
        tmp_path / "sparse",
        SOURCE,
        "softplus_sum",
        (5,),
        ["hessian"],
        backend="trace",
        sparse=True,
    )
    sparse, _ = build_and_import(cfg)
    xs = np.random.default_rng(2).uniform(-1, 1, (6, 5))
    rows = [dense.gradient(x) for x in xs]
    np.testing.assert_allclose(dense.gradient_points(xs), rows, rtol=1e-13)
    h = sparse.hessian(xs[0])
    assert h.nnz == 5
    np.testing.assert_allclose(h.toarray(), dense.hessian(xs[0]), rtol=1e-13)


def test_branches_on_traced_values_inside_and_around_a_call(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path, SOURCE, "in_branch", (3,), ["gradient", "hessian"], backend="trace"
    )
    module, _ = build_and_import(cfg)
    for x in ([0.5, 0.2, -0.1], [0.5, -0.9, -0.1], [-0.5, 0.2, 0.1]):
        x = np.array(x)
        if x[0] > 0.0:
            up = np.sum(x) > 0.0
            dramp = 2.0 * x if up else -np.ones(3)
            ramp = x * x if up else -x
            grad = dramp * np.cos(x) - ramp * np.sin(x)
            d2 = (2.0 if up else 0.0) * np.cos(x) - 2 * dramp * np.sin(x)
            d2 = d2 - ramp * np.cos(x)
        else:
            s = 1.0 / (1.0 + np.exp(-x))
            grad, d2 = s, s * (1 - s)
        np.testing.assert_allclose(module.gradient(x), grad, rtol=1e-12)
        np.testing.assert_allclose(module.hessian(x), np.diag(d2), rtol=1e-12)


def test_a_rule_calling_an_untraceable_function_says_to_compute_the_value() -> None:
    with pytest.raises(TraceError) as caught:
        trace(fns.uses_opaque, [((3,), "float64")])
    message = str(caught.value)
    assert "the rule opaque_jvp of" in message and "calls" in message
    assert "compute the value in the rule without calling the function" in message
    assert "float()" in message  # why difgen could not trace it


def test_a_wrong_rule_inside_a_loop_is_caught_too(tmp_path: Path) -> None:
    """The check records each call's operands at any depth of the reference
    interpreter: here only inside a while loop's body."""
    with pytest.raises(TraceError, match=r"wrong_sin_jvp of wrong_sin .*disagrees"):
        _build(tmp_path, "wrong_rule_in_loop", backend="trace")
