"""The trace backend: examples against autograd (and JAX when installed), the IR
against the emitted code, the shared primal pass, scale, emission choice, ``difgen ir``.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import oracle
from conftest import build_and_import, import_file, operators_source, write_config
from difgen import structure
from difgen.config import load_config
from difgen.derive.graphs import Derivatives
from difgen.errors import ConfigError, TraceError
from difgen.frontend import trace
from difgen.load import load_function
from difgen.operators import OPERATORS
from difgen.pipeline import ir_text, trace_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = load_config(ROOT / "examples" / "difgen.toml")
TRACE = [s for s in EXAMPLES.modules if s.backend == "trace"]
SPECS = {s.name: s for s in TRACE}


def generated(name: str) -> types.ModuleType:
    return import_file(EXAMPLES.output_dir / f"{name}.py")


def flat_operator(mod: types.ModuleType, name: str) -> Any:
    """The operator on the flat ``x``: a structured module's private flat one
    (``_gradient_flat``), else the operator itself."""
    return getattr(mod, f"_{name}_flat", None) or getattr(mod, name)


def flat_function(name: str, fn: Any) -> Any:
    """The example's function of the flat ``x`` and its contexts: a function of
    several inputs or trees (``inputs``) gets ``x`` cut into its arguments."""
    spec = SPECS[name]
    if not spec.inputs:
        return fn
    tree = spec.input_tree()
    several = len(spec.inputs) > 1
    return lambda z, *ctx: (
        fn(*structure.unravel(tree, z), *ctx)
        if several
        else fn(structure.unravel(tree, z), *ctx)
    )


def in_module_dtype(name: str, values: list[Any]) -> list[Any]:
    """Arguments as the module takes them: float32 ones for a float32 module."""
    if SPECS[name].input.dtype != "float32":
        return values
    return [
        np.float32(v) if np.ndim(v) == 0 else np.asarray(v, np.float32) for v in values
    ]


def arguments(name: str, seed: int = 0) -> tuple[Any, list[Any]]:
    """A point in each example's domain, and its contexts."""
    spec = SPECS[name]
    rng = np.random.default_rng(seed)
    xs = tuple(spec.input.shape)
    x = rng.uniform(0.2, 0.9, xs) if xs else float(rng.uniform(0.2, 0.9))
    if name == "brusselator":
        x = rng.uniform(0.0, 4.0, xs)
    ctx = [rng.normal(size=c.shape) for c in spec.contexts]
    if name == "logistic":
        ctx[1] = (rng.uniform(size=1000) < 0.5).astype(float)
    if name == "kepler":  # an eccentricity: Newton's iteration converges for e < 1
        ctx = [float(rng.uniform(0.1, 0.8))]
    return x, ctx


def _autograd_engine() -> dict[str, Any]:
    import autograd

    return {"grad": autograd.grad, "jacobian": autograd.jacobian}


def _jax_engine() -> dict[str, Any]:
    import jax

    return {"grad": jax.grad, "jacobian": jax.jacfwd}


def reference(
    engine: dict[str, Any],
    fn: Any,
    name: str,
    x: Any,
    ctx: list[Any],
    seeds: dict[str, Any],
) -> dict[str, Any]:
    """What each requested result kind should be, computed only as far as needed."""
    g = lambda z: fn(z, *ctx)
    kinds = {k for op in SPECS[name].operators for k in OPERATORS[op].results}
    xs = np.shape(x)
    out: dict[str, Any] = {"value": np.asarray(g(x))}
    if kinds & {"jvp", "vjp", "jacobian", "derivative"}:
        J = np.asarray(engine["jacobian"](g)(x))
        ys = out["value"].shape
        out.update(
            jacobian=J,
            derivative=J,
            jvp=np.tensordot(J, seeds["dx"], axes=len(xs)),
            vjp=np.tensordot(seeds["dy"], J, axes=len(ys)),
        )
    if "second_derivative" in kinds:
        out["second_derivative"] = np.asarray(
            engine["jacobian"](engine["jacobian"](g))(x)
        )
    if kinds & {"gradient", "hvp", "hessian"}:
        grad = engine["grad"](g)
        out["gradient"] = np.asarray(grad(x))
        v = seeds["v"]
        hvp = engine["grad"](lambda z: (grad(z) * v).sum())
        out["hvp"] = np.asarray(hvp(x))
        if "hessian" in kinds:
            out["hessian"] = np.asarray(engine["jacobian"](grad)(x))
    return out


def check_operators(name: str, engine: dict[str, Any], fn: Any, seed: int) -> None:
    """Every operator of the generated example against the reference engine."""
    mod = generated(name)
    x, ctx = arguments(name, seed)
    rng = np.random.default_rng(seed + 7)
    xs, ys = np.shape(x), np.shape(
        flat_operator(mod, "f")(*in_module_dtype(name, [x, *ctx]))
    )
    seeds = {
        "dx": rng.normal(size=xs),
        "dy": rng.normal(size=ys),
        "v": rng.normal(size=xs),
    }
    seeds = {k: float(v) if np.ndim(v) == 0 else v for k, v in seeds.items()}
    float32 = SPECS[name].input.dtype == "float32"
    if float32:  # the float64 references at the float32 module's own point
        x, ctx = in_module_dtype(name, [x])[0].astype(float), [
            np.asarray(c, np.float32).astype(float) for c in ctx
        ]
        seeds = {k: np.asarray(v, np.float32).astype(float) for k, v in seeds.items()}
    want = reference(engine, flat_function(name, fn), name, x, ctx, seeds)
    rtol, atol = (1e-4, 1e-5) if float32 else (1e-8, 1e-10)
    for op_name in SPECS[name].operators:
        op = OPERATORS[op_name]
        args = in_module_dtype(name, [x, *(seeds[s] for s in op.seeds), *ctx])
        got = flat_operator(mod, op_name)(*args)
        got = got if isinstance(got, tuple) else (got,)
        for kind, value in zip(op.results, got):
            scale = max(1.0, float(np.max(np.abs(want[kind]))))
            np.testing.assert_allclose(
                value,
                want[kind],
                rtol=rtol,
                atol=atol * scale,
                err_msg=f"{name}.{op_name}: {kind}",
            )


@pytest.mark.parametrize("name", sorted(SPECS))
def test_examples_agree_with_autograd(name: str) -> None:
    fn = oracle.under_autograd(load_function(SPECS[name]))
    check_operators(name, _autograd_engine(), fn, seed=0)


def _under_jax(fn: Callable[..., Any]) -> Callable[..., Any]:
    import jax.numpy as jnp

    globals_ = dict(fn.__globals__)
    globals_["np"] = jnp
    return types.FunctionType(fn.__code__, globals_, fn.__name__, fn.__defaults__)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_examples_agree_with_jax(name: str) -> None:
    """JAX is a test dependency (the test extra): a failed import fails, not skips."""
    import jax

    jax.config.update("jax_enable_x64", True)
    fn = JAX_VERSIONS[name]() if name in JAX_VERSIONS else load_function(SPECS[name])
    check_operators(name, _jax_engine(), _under_jax(fn), seed=1)


def _jax_kepler() -> Callable[..., Any]:
    """JAX cannot run a Python loop on a traced condition: the same Newton
    iteration as ``lax.while_loop`` (differentiated in forward mode, jacfwd)."""

    def kepler(M: Any, e: Any) -> Any:
        import jax.numpy as jnp  # inside: _under_jax rebuilds it without a closure
        from jax import lax

        def body(state: Any) -> Any:
            E, _ = state
            step = (E - e * jnp.sin(E) - M) / (1.0 - e * jnp.cos(E))
            return E - step, step

        start = (M + e * jnp.sin(M), jnp.ones(M.shape))
        cond = lambda state: jnp.max(jnp.abs(state[1])) > 1e-13
        return lax.while_loop(cond, body, start)[0]

    return kepler


JAX_VERSIONS = {"kepler": _jax_kepler}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_interpreted_ir_and_emitted_module_agree(name: str) -> None:
    """Each operator's optimized graph, run by the reference interpreter, is the code."""
    spec = SPECS[name]
    derivs = Derivatives(spec, trace_spec(spec, load_function(spec)))
    mod = generated(name)
    x, ctx = arguments(name, seed=2)
    rng = np.random.default_rng(3)
    for op_name in ("f", *spec.operators):
        op = OPERATORS[op_name]
        graph = derivs.operator_graph(op)
        seeds = [rng.normal(size=v.shape) for v in graph.inputs[1 : 1 + len(op.seeds)]]
        seeds = [float(s) if s.ndim == 0 else s for s in seeds]
        args = in_module_dtype(name, [x, *seeds, *ctx])
        got = flat_operator(mod, op_name)(*args)
        got = got if isinstance(got, tuple) else (got,)
        # a float32 module against the float64 interpreter at its own point
        tolerance = 1e-4 if spec.input.dtype == "float32" else 1e-12
        exact = [np.asarray(a, dtype=float) for a in args]
        for a, b in zip(got, graph.evaluate(*exact)):
            np.testing.assert_allclose(
                a, b, rtol=tolerance, atol=tolerance, err_msg=op_name
            )


# -------------------------------------------------------------- the seed function
def _body(path: Path, function: str) -> str:
    text = path.read_text()
    return text.split(f"\ndef {function}(")[1].split("\ndef ")[0]


def test_seed_builds_the_same_code_in_forward_and_reverse_mode() -> None:
    """Reverse-mode derivative folds to the forward one: same code, same speed."""
    fwd, rev = (EXAMPLES.output_dir / f"seed_{m}.py" for m in ("forward", "reverse"))
    for function in ("derivative", "second_derivative", "pushforward", "pullback"):
        assert _body(fwd, function) == _body(rev, function)
    assert _body(fwd, "derivative").strip().endswith("return 81.0 * x")
    assert _body(fwd, "second_derivative").strip().endswith("return 81.0")


def _signature(graph: Any) -> list[Any]:
    return [(e.primitive.name, e.inputs, e.params) for e in graph.eqns]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_value_and_operators_share_one_primal_pass(name: str) -> None:
    """value_and_<op> is <op> plus what only the value needs: f's equations once."""
    spec = SPECS[name]
    derivs = Derivatives(spec, trace_spec(spec, load_function(spec)))
    f = derivs.operator_graph(OPERATORS["f"])
    for op_name in spec.operators:
        if op_name.startswith("value_"):
            both = derivs.operator_graph(OPERATORS[op_name])
            sig = _signature(both)
            assert len(set(sig)) == len(sig)  # no equation twice
            alone = derivs.operator_graph(OPERATORS[op_name.split("_and_")[-1]])
            assert len(both.eqns) < len(alone.eqns) + len(f.eqns)


# ---------------------------------------------------------------------- scale
ROSENBROCK = """\
import numpy as np


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def chain(x):
    return np.sin(x[:-1]) * x[1:] + x[0]
"""


def _build(
    tmp_path: Path, function: str, n: int, ops: list[str], **kw: Any
) -> tuple[Any, str]:
    source = tmp_path / "src" / "scale_functions.py"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(ROSENBROCK)
    cfg = write_config(
        tmp_path / f"{function}_{n}", source, function, (n,), ops, backend="trace", **kw
    )
    return build_and_import(cfg)


def test_a_100000_element_gradient_builds_fast_and_small(tmp_path: Path) -> None:
    ops = ["gradient", "value_and_gradient", "hvp"]
    start = time.perf_counter()
    mod, text = _build(tmp_path, "rosenbrock", 100_000, ops)
    elapsed = time.perf_counter() - start
    _, small = _build(tmp_path, "rosenbrock", 1_000, ops)
    assert elapsed < 10.0 and len(text) < 20_000
    assert abs(len(text) - len(small)) < 100  # only the digits of n differ
    x = np.linspace(-1.0, 1.0, 100_000)
    g = np.zeros_like(x)
    g[:-1] = -400.0 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2.0 * (1.0 - x[:-1])
    g[1:] += 200.0 * (x[1:] - x[:-1] ** 2)
    np.testing.assert_allclose(mod.gradient(x), g, rtol=1e-12, atol=1e-9)


def test_dense_hessian_and_jacobian_at_1000_without_loops(tmp_path: Path) -> None:
    hess, _text = _build(tmp_path, "rosenbrock", 1_000, ["hvp", "hessian"])
    jac, _jtext = _build(tmp_path, "chain", 1_000, ["jacobian", "pushforward"])
    for module in (hess, jac):
        source = operators_source(module)
        assert len(source) < 5_000
        assert not any(
            line.lstrip().startswith(("for ", "while ")) for line in source.splitlines()
        )
    x = np.linspace(-1.0, 1.0, 1_000)
    v = np.cos(np.arange(1_000.0))
    H = hess.hessian(x)
    np.testing.assert_allclose(H @ v, hess.hvp(x, v), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(H, H.T, rtol=0, atol=1e-9)
    np.testing.assert_allclose(
        jac.jacobian(x) @ v, jac.pushforward(x, v), rtol=1e-12, atol=1e-12
    )


# ------------------------------------------------------------------- emission
SMALL = """\
import numpy as np


def small(x, c):
    return np.sin(x * c) @ x[::-1] + np.sum(np.exp(x) * np.cumsum(x))
"""


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_scalar_and_vector_emission_compute_the_same(tmp_path: Path, mode: str) -> None:
    source = tmp_path / "small.py"
    source.write_text(SMALL)
    ops = [
        "gradient",
        "value_and_gradient",
        "hvp",
        "hessian",
        "pushforward",
        "pullback",
    ]
    mods = {}
    for emit in ("scalar", "vector", "auto"):
        cfg = write_config(
            tmp_path / f"{mode}_{emit}",
            source,
            "small",
            (3,),
            ops,
            [(3,)],
            backend="trace",
            mode=mode,
            emit=emit,
        )
        mods[emit], text = build_and_import(cfg)
        if emit != "auto":
            assert f"emission {emit}." in text
    x, c = np.array([0.3, 0.7, 0.2]), np.array([1.5, -0.5, 2.0])
    v = np.array([0.1, -0.2, 0.3])
    for op, args in [
        ("gradient", ()),
        ("hessian", ()),
        ("hvp", (v,)),
        ("pushforward", (v,)),
        ("pullback", (0.7,)),
    ]:
        ref = getattr(mods["vector"], op)(x, *args, c)
        for emit in ("scalar", "auto"):
            np.testing.assert_allclose(
                getattr(mods[emit], op)(x, *args, c), ref, rtol=1e-12, atol=1e-13
            )


def test_the_cost_model_picks_scalar_code_for_small_and_vector_for_large() -> None:
    assert "emission scalar." in (EXAMPLES.output_dir / "seed_reverse.py").read_text()
    text = (EXAMPLES.output_dir / "rosenbrock_10000.py").read_text()
    assert "emission vector." in text and "x_0" not in text


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_batched_seeds_in_vector_code(tmp_path: Path, mode: str) -> None:
    source = tmp_path / "small.py"
    source.write_text(SMALL.replace("@ x[::-1] +", "* x[::-1] +"))
    cfg = write_config(
        tmp_path / mode,
        source,
        "small",
        (3,),
        ["pushforward", "pullback", "jacobian"],
        [(3,)],
        backend="trace",
        mode=mode,
        emit="vector",
        batch=4,
    )
    mod, _text = build_and_import(cfg)
    assert "for " not in operators_source(mod)
    x, c = np.array([0.3, 0.7, 0.2]), np.array([1.5, -0.5, 2.0])
    rng = np.random.default_rng(0)
    dx, dy = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    J = mod.jacobian(x, c)
    np.testing.assert_allclose(mod.pushforward(x, dx, c), dx @ J.T, rtol=1e-12)
    np.testing.assert_allclose(mod.pullback(x, dy, c), dy @ J, rtol=1e-12)


# ------------------------------------------------------------- ir and errors
def test_ir_stages() -> None:
    spec = SPECS["mlp"]
    fn = load_function(spec)
    assert "scatter_sum" in ir_text(spec, fn, "gradient")
    assert "reduce_sum" in ir_text(spec, fn, "vjp")
    raw = ir_text(spec, fn, "gradient:unoptimized")
    assert raw.startswith("{ lambda") and raw.count("\n") >= ir_text(
        spec, fn, "gradient"
    ).count("\n")
    text = ir_text(spec, fn, "all")
    assert "# traced" in text and "# value_and_gradient:unoptimized" in text
    with pytest.raises(ConfigError, match="unknown IR stage"):
        ir_text(spec, fn, "nonsense")


def _eig(x):
    return np.sum(np.linalg.eigvals(x.reshape(2, 2)))  # line named by the error


def test_unsupported_functions_name_the_function_and_line() -> None:
    with pytest.raises(
        TraceError, match=r"test_trace_backend.py:\d+: np.linalg.eigvals"
    ):
        trace(_eig, [((4,), "float64")])


def test_input_independent_work_is_hoisted_and_results_are_fresh(
    tmp_path: Path,
) -> None:
    """A constant jacobian is computed once at import; each call returns a copy."""
    source = tmp_path / "linear.py"
    source.write_text(
        "import numpy as np\n\nA = np.arange(12.0).reshape(3, 4)\n\n\n"
        "def linear(x):\n    return np.roll(A @ x, 1) * 2.0 + np.sin(x[:3])\n"
    )
    cfg = write_config(
        tmp_path / "build",
        source,
        "linear",
        (4,),
        ["jacobian"],
        backend="trace",
        emit="vector",
    )
    mod, text = build_and_import(cfg)
    assert "computed once at import" in text
    A = np.arange(12.0).reshape(3, 4)
    x = np.linspace(0.1, 0.4, 4)
    expected = 2.0 * np.roll(A, 1, axis=0) + np.eye(3, 4) * np.cos(x[:3])[:, None]
    first = mod.jacobian(x)
    np.testing.assert_allclose(first, expected, rtol=1e-13)
    first[...] = 0.0  # the caller owns the result: no module constant changes
    np.testing.assert_allclose(mod.jacobian(x), expected, rtol=1e-13)
