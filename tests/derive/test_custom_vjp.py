"""User VJPs (``difgen.custom_vjp``, and autograd's ``difgen.defvjp`` spelling):
every operator in both modes and both backends against JAX's ``jax.custom_vjp``
on the same passes (reverse over reverse in JAX, which refuses forward mode over a
custom_vjp; difgen transposes the VJP for forward mode), a function difgen cannot
trace, a call inside a ``while`` loop, C; the build-time checks (a wrong VJP, one
not linear or affine in its cotangent, a missing VJP); and the decorated function
at run time, which is the function."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import custom_vjp_functions as fns
import difgen
from conftest import build_and_import, import_file, operators_source, write_config
from difgen.ad import vjp
from difgen.ad.custom import CALL
from difgen.errors import TraceError
from difgen.frontend import trace

SOURCE = Path(fns.__file__)

CASES: dict[str, tuple[tuple[int, ...], bool]] = {
    # name: (input shape, scalar output)
    "softplus_sum": ((3,), True),
    "softplus_matrix": ((2, 3), False),
    "norm_of_sines": ((3,), False),
    "two_arguments": ((7,), False),
    "autograd_spelling": ((4,), True),
    "poisson_nll": ((4,), True),
    "linear_passes": ((3,), True),
}

FIRST = ["pushforward", "pullback", "value_and_pullback", "jacobian"]
SCALAR_OUT = ["gradient", "value_and_gradient", "hvp", "hessian"]


def _operators(name: str) -> list[str]:
    return FIRST + SCALAR_OUT * CASES[name][1]


@pytest.fixture(scope="module")
def twins() -> dict[str, Any]:
    return fns.jax_twins()


def _point(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-0.9, 0.9, shape)


def _expected(twin: Any, op: str, x: np.ndarray, seeds: dict[str, Any]) -> Any:
    """JAX's result in reverse mode (reverse over reverse for second order)."""
    import jax

    if op.startswith("value_and_"):
        return _expected(twin, "f", x, seeds), _expected(
            twin, op.removeprefix("value_and_"), x, seeds
        )
    xj = jax.numpy.asarray(x)
    y = np.asarray(twin(xj))
    jac = np.asarray(jax.jacrev(twin)(xj))
    flat = jac.reshape(y.size, x.size)
    if op == "f":
        return y
    if op == "pushforward":
        return (flat @ seeds["dx"].ravel()).reshape(y.shape)
    if op == "pullback":
        return (seeds["dy"].ravel() @ flat).reshape(x.shape)
    if op in ("jacobian", "gradient"):
        return jac
    hessian = np.asarray(jax.jacrev(jax.jacrev(twin))(xj)).reshape(x.size, x.size)
    if op == "hvp":
        return (hessian @ seeds["v"].ravel()).reshape(x.shape)
    if op == "hessian":
        return hessian
    raise AssertionError(op)


def _call(module: Any, op: str, x: np.ndarray, seeds: dict[str, Any]) -> Any:
    fn = getattr(module, op)
    base = op.removeprefix("value_and_")
    if base == "pushforward":
        return fn(x, seeds["dx"])
    if base == "pullback":
        return fn(x, seeds["dy"])
    if base == "hvp":
        return fn(x, seeds["v"])
    return fn(x)


def _compare(got: Any, want: Any, what: str) -> None:
    if isinstance(want, tuple):
        assert len(got) == len(want), what
        for g, w in zip(got, want):
            _compare(g, w, what)
        return
    np.testing.assert_allclose(
        np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-11, err_msg=what
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
def test_every_operator_agrees_with_jax_custom_vjp(
    module_cache: Any,
    twins: dict[str, Any],
    name: str,
    backend: str,
    mode: str,
    emit: str,
) -> None:
    shape, _ = CASES[name]
    ops = _operators(name)
    module, _ = module_cache(
        SOURCE, name, shape, ops, backend=backend, mode=mode, emit=emit
    )
    seeds = _seeds(name, module)
    for k in range(2):
        x = _point(shape, k)
        for op in ["f", *ops]:
            want = _expected(twins[name], op, x, seeds)
            _compare(_call(module, op, x, seeds), want, f"{name} {op} at {x}")


def test_reverse_mode_runs_the_users_backward_pass() -> None:
    """The gradient graph holds the backward pass's equations (1 - exp(-y) times
    the cotangent), not the function's own derivative (exp(x) / (1 + exp(x)))."""
    graph = trace(fns.softplus_sum, [((3,), "float64")])
    assert [e.primitive for e in graph.eqns].count(CALL) == 1
    from difgen.ad.custom import inline_calls

    names = [e.primitive.name for e in inline_calls(vjp(graph)).eqns]
    assert names.count("exp") == 2 and "neg" in names and "div" not in names


def test_emit_c_agrees_with_jax(tmp_path: Path, twins: dict[str, Any]) -> None:
    name = "autograd_spelling"
    shape, _ = CASES[name]
    ops = _operators(name)
    cfg = write_config(tmp_path, SOURCE, name, shape, ops, backend="trace", emit="c")
    difgen.build(cfg, compile=True)
    module = import_file(tmp_path / "out" / "mod.py")
    assert module.COMPILED, module.C_FALLBACK_REASON
    seeds = _seeds(name, module)
    x = _point(shape, 3)
    for op in ["f", *ops]:
        _compare(_call(module, op, x, seeds), _expected(twins[name], op, x, seeds), op)


def test_a_call_inside_a_while_loop_matches_differences(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path, SOURCE, "in_while_loop", (3,), ["gradient"], backend="trace"
    )
    module, _ = build_and_import(cfg)
    x = np.array([0.3, -0.2, 0.5])
    h = 1e-6
    fd = [
        (fns.in_while_loop(x + h * e) - fns.in_while_loop(x - h * e)) / (2 * h)
        for e in np.eye(3)
    ]
    np.testing.assert_allclose(module.gradient(x), fd, rtol=1e-7, atol=1e-9)


def test_the_value_of_an_untraceable_function_comes_from_its_forward_pass(
    tmp_path: Path,
) -> None:
    from scipy.special import gammaln, polygamma

    cfg = write_config(
        tmp_path, SOURCE, "poisson_nll", (4,), ["gradient"], backend="trace"
    )
    (built,) = difgen.build(cfg).modules
    assert any(
        "difgen cannot trace" in n and "its value comes from its rule lgamma_fwd" in n
        for n in built.notes
    ), built.notes
    module = import_file(built.path)
    x = _point((4,), 5)
    rate = np.exp(x) + 0.5
    z = fns.COUNTS + rate
    value = np.sum(rate - fns.COUNTS * np.log(rate) + gammaln(z))
    gradient = (1 - fns.COUNTS / rate + polygamma(0, z)) * np.exp(x)
    np.testing.assert_allclose(module.f(x), value, rtol=1e-9)
    np.testing.assert_allclose(module.gradient(x), gradient, rtol=1e-7)


# ------------------------------------------------------ build-time checks
def _build(tmp_path: Path, function: str, **options: Any) -> Any:
    cfg = write_config(tmp_path, SOURCE, function, (3,), ["gradient"], **options)
    return build_and_import(cfg)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_a_wrong_vjp_fails_the_build_naming_it_and_both_values(
    tmp_path: Path, mode: str
) -> None:
    with pytest.raises(TraceError) as caught:
        _build(tmp_path, "uses_wrong_vjp", backend="trace", mode=mode)
    message = str(caught.value)
    line = fns.wrong_sin_bwd.__code__.co_firstlineno
    assert (
        f"the VJP rule wrong_sin_bwd (forward pass wrong_sin_fwd) of wrong_sin at "
        f"{tmp_path / SOURCE.name}:{line}" in message
    ), message
    assert "disagrees with central differences" in message
    mine = float(message.split("xbar . dx = ")[1].split(",")[0])
    theirs = float(message.split("ybar . (J dx) = ")[1].split(" ")[0])
    np.testing.assert_allclose(mine, -theirs, rtol=1e-5)  # the sign is wrong


def test_a_vjp_not_linear_in_its_cotangent_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError) as caught:
        _build(tmp_path, "uses_nonlinear_vjp", backend="trace")
    message = str(caught.value)
    assert "square_bwd of" in message and "not linear in its cotangent" in message


def test_an_affine_vjp_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"shifted_bwd .*nonzero cotangents .*zero"):
        _build(tmp_path, "uses_affine_vjp", backend="trace")


def test_a_function_without_a_vjp_is_refused_while_traced() -> None:
    with pytest.raises(TraceError, match=r"without a VJP .*no_vjp\.defvjp\("):
        trace(fns.uses_no_vjp, [((2,), "float64")])


def test_a_forward_pass_not_returning_a_pair_is_refused() -> None:
    @difgen.custom_vjp
    def f(x: Any) -> Any:
        return np.sin(x)

    f.defvjp(lambda x: np.sin(x), lambda r, g: (g,))
    with pytest.raises(TraceError, match=r"forward pass .*pair \(y, residuals\)"):
        trace(lambda x: f(x), [((2,), "float64")])


def test_a_backward_pass_of_the_wrong_arity_is_refused() -> None:
    @difgen.custom_vjp
    def f(a: Any, b: Any) -> Any:
        return a * b

    f.defvjp(lambda a, b: (a * b, (a, b)), lambda r, g: (g * r[1],))
    with pytest.raises(TraceError, match=r"backward pass .*tuple of 2 cotangents"):
        trace(lambda x: f(x, x), [((2,), "float64")])


def test_defvjp_takes_a_custom_vjp_function() -> None:
    with pytest.raises(TypeError, match=r"@difgen\.custom_vjp"):
        difgen.defvjp(np.sin, lambda ans, x: lambda g: g)


# ------------------------------------------------------------ at run time
def test_at_run_time_the_decorated_function_is_the_function() -> None:
    x = np.array([0.3, -2.0, 40.0])
    assert np.array_equal(fns.logexp(x), np.log1p(np.exp(x)))
    assert fns.logexp.__name__ == "logexp" and fns.logexp.__wrapped__ is fns.logexp.fun
    assert np.array_equal(fns.logsumexp(x), fns.logsumexp.fun(x))
    with pytest.raises(TypeError) as plain:
        fns.logexp.fun("a")
    with pytest.raises(TypeError) as decorated:
        fns.logexp("a")
    assert str(plain.value) == str(decorated.value)


def test_the_sympy_backend_builds_from_the_graph_and_says_so(module_cache: Any) -> None:
    module, text = module_cache(SOURCE, "softplus_sum", (3,), FIRST + SCALAR_OUT)
    assert "user derivative rule" in text and "custom_vjp" in text
    assert "custom_jvp_call" not in operators_source(module)


def test_points_sparse_and_generate_go_through_the_vjp(tmp_path: Path) -> None:
    """The points variants batch the call (its rule batched with it), the sparsity
    rule finds softplus's diagonal hessian, and difgen.generate takes a
    custom_vjp function like a module of difgen.toml."""
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
    module = difgen.generate(fns.softplus_sum, xs[0], operators=["gradient"])
    np.testing.assert_allclose(module.gradient(xs[1]), rows[1], rtol=1e-13)
