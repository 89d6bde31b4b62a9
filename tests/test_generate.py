"""difgen.generate: in-process generation at example arguments (issue 22, item 7)."""

from __future__ import annotations

import doctest
import importlib.util
import inspect
import re
import subprocess
import sys
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

import difgen
import difgen.inprocess
import difgen.targets.c.compiling
import difgen.write
import documentation
from difgen.budget import BuildTimeout
from difgen.errors import ConfigError, TraceError, UsageError, WriteError
from oracle import central_jacobian

ROOT = Path(__file__).resolve().parent.parent


def rosen(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def field(u, p):
    return np.stack([p[0] * (u[1] - u[0]), u[0] * (p[1] - u[2]) - u[1], np.sin(u[2])])


def wave(x, a):
    return np.sin(a * x) * np.exp(-0.1 * x * x)


def nll(X, beta, y):
    """A logistic regression's loss; the differentiated argument is the second."""
    m = X @ beta
    return np.sum(np.log1p(np.exp(m)) - y * m)


def gathered(x, idx, mask, scale):
    """float64, int64 (indices into x), bool (a mask) and a Python float context."""
    return np.sum(np.where(mask, x[idx] * scale, 0.0) ** 2)


def scaled(x, n, flag):
    """A Python int and a Python bool as contexts."""
    return np.sum(np.where(flag, x * n, -x) ** 2)


def under_jax(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The same function with its global ``np`` bound to ``jax.numpy`` (x64)."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    names = dict(fn.__globals__)
    names["np"] = jnp
    return types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__)


def jax_derivative(fn: Callable[..., Any], order: int, *args: Any, wrt: int = 0) -> Any:
    """The ``order``-th derivative of ``fn`` in its argument ``wrt``, by JAX."""
    import jax

    g = under_jax(fn)
    d: Callable[..., Any] = lambda z: g(*args[:wrt], z, *args[wrt + 1 :])
    for _ in range(order):
        d = jax.jacfwd(d)
    return np.asarray(d(np.asarray(args[wrt], dtype=float)))


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test compiles in its own cache, and runs in an empty directory."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(difgen.inprocess.CACHE_ENV, str(cache))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return cache


@pytest.mark.parametrize("backend", ["sympy", "trace"])
def test_scalar_output_operators_match_jax_and_differences(backend: str) -> None:
    ops = ["gradient", "value_and_gradient", "hvp", "hessian"]
    module = difgen.generate(rosen, np.zeros(5), operators=ops, backend=backend)
    x = np.array([0.3, -1.2, 0.8, 1.1, -0.4])
    v = np.array([1.0, 0.5, -2.0, 0.25, 3.0])
    gradient = jax_derivative(rosen, 1, x)
    hessian = jax_derivative(rosen, 2, x)
    np.testing.assert_allclose(module.gradient(x), gradient, rtol=1e-12)
    value, g = module.value_and_gradient(x)
    assert value == pytest.approx(float(rosen(x)), rel=1e-14)
    np.testing.assert_allclose(g, gradient, rtol=1e-12)
    np.testing.assert_allclose(module.hvp(x, v), hessian @ v, rtol=1e-12)
    np.testing.assert_allclose(module.hessian(x), hessian, rtol=1e-12)
    np.testing.assert_allclose(
        module.gradient(x), central_jacobian(rosen, x), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("backend", ["sympy", "trace"])
def test_array_output_operators_match_jax_and_differences(backend: str) -> None:
    u, p = np.array([1.0, 2.0, 0.5]), np.array([10.0, 28.0, 8.0 / 3.0])
    module = difgen.generate(
        field, u, p, operators=["jacobian", "pushforward", "pullback"], backend=backend
    )
    jacobian = jax_derivative(field, 1, u, p)
    np.testing.assert_allclose(module.jacobian(u, p), jacobian, rtol=1e-13)
    np.testing.assert_allclose(
        module.jacobian(u, p), central_jacobian(field, u, p), rtol=1e-6, atol=1e-7
    )
    du, dy = np.array([0.1, -0.3, 2.0]), np.array([1.0, -1.0, 0.5])
    np.testing.assert_allclose(module.pushforward(u, du, p), jacobian @ du, rtol=1e-13)
    np.testing.assert_allclose(module.pullback(u, dy, p), dy @ jacobian, rtol=1e-13)


@pytest.mark.parametrize("backend", ["sympy", "trace"])
def test_python_float_examples_give_scalar_modules(backend: str) -> None:
    ops = ["derivative", "second_derivative", "value_and_derivative"]
    module = difgen.generate(wave, 0.5, 2.0, operators=ops, backend=backend)
    assert module.INPUT_SHAPE == ()
    for x, a in [(0.5, 2.0), (-1.3, 0.7)]:
        assert module.derivative(x, a) == pytest.approx(
            float(jax_derivative(wave, 1, x, a)), rel=1e-13
        )
        assert module.second_derivative(x, a) == pytest.approx(
            float(jax_derivative(wave, 2, x, a)), rel=1e-12
        )
        value, d = module.value_and_derivative(x, a)
        assert value == pytest.approx(float(wave(x, a)), rel=1e-15)
        assert d == pytest.approx(float(central_jacobian(wave, x, a)), rel=1e-7)


def test_wrt_picks_the_differentiated_argument() -> None:
    """``wrt=1``: beta is x, and the operators take it first, then X and y."""
    X = np.linspace(-1.0, 1.0, 12).reshape(6, 2)
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.0])
    beta = np.array([0.3, -0.7])
    module = difgen.generate(nll, X, beta, y, wrt=1, operators=["gradient", "hessian"])
    assert list(inspect.signature(module.gradient).parameters) == ["x", "X", "y", "out"]
    expected = jax_derivative(nll, 1, X, beta, y, wrt=1)
    np.testing.assert_allclose(module.gradient(beta, X, y), expected, rtol=1e-13)
    differences = central_jacobian(lambda b, X, y: nll(X, b, y), beta, X, y)
    np.testing.assert_allclose(module.gradient(beta, X, y), differences, rtol=1e-7)
    assert module.hessian(beta, X, y).shape == (2, 2)


def kinked(a, w):
    s = np.sum(a * w)
    if s > 0:  # a branch on a traced value: the tracer rewrites this function
        return s * s
    return -s


def test_a_branch_is_traced_through_the_wrapper_of_wrt() -> None:
    module = difgen.generate(
        kinked, np.ones(3), np.ones(3), wrt=1, operators=["gradient"]
    )
    a = np.array([1.0, 2.0, -0.5])
    for w in (np.ones(3), -np.ones(3)):
        np.testing.assert_allclose(
            module.gradient(w, a), jax_derivative(kinked, 1, a, w, wrt=1), rtol=1e-15
        )


def test_contexts_of_each_dtype() -> None:
    """float64, int64 and bool contexts, from arrays and from Python numbers."""
    x = np.array([0.5, -1.0, 2.0, 0.25, 3.0, -2.0])
    idx = np.array([0, 2, 2, 5])
    mask = np.array([True, False, True, True])
    module = difgen.generate(
        gathered, x, idx, mask, 1.5, operators=["gradient", "hessian"]
    )
    assert "idx int64 array of shape (4,)" in module.__source__
    assert "mask bool array of shape (4,)" in module.__source__
    expected = jax_derivative(gathered, 1, x, idx, mask, 1.5)
    np.testing.assert_allclose(module.gradient(x, idx, mask, 1.5), expected, rtol=1e-14)
    other = np.array([5, 1, 0, 3])  # indices are run-time data, not baked in
    np.testing.assert_allclose(
        module.gradient(x, other, ~mask, 2.0),
        jax_derivative(gathered, 1, x, other, ~mask, 2.0),
        rtol=1e-14,
    )
    np.testing.assert_allclose(
        module.hessian(x, idx, mask, 1.5),
        jax_derivative(gathered, 2, x, idx, mask, 1.5),
        rtol=1e-14,
    )
    python_numbers = difgen.generate(
        scaled, np.arange(3.0), 3, True, operators=["gradient"]
    )
    assert "n int64 scalar" in python_numbers.__source__
    assert "flag bool scalar" in python_numbers.__source__
    for n, flag in [(3, True), (2, False), (-1, True)]:
        np.testing.assert_allclose(
            python_numbers.gradient(np.arange(3.0), n, flag),
            central_jacobian(scaled, np.arange(3.0), n, flag),
            rtol=1e-8,
            atol=1e-8,
        )


def test_emit_c_is_compiled_in_the_cache_and_loaded(private_cache: Path) -> None:
    x = np.array([0.3, -1.2, 0.8, 1.1, -0.4])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: the extension loads
        module = difgen.generate(
            rosen, np.zeros(5), operators=["gradient", "hessian"], emit="c"
        )
    assert module.COMPILED, module.C_FALLBACK_REASON
    assert module.__c_source__.startswith("/* Generated by difgen")
    assert (
        f'C_HASH = "{difgen.write.classify(module.__c_source__.encode()).body_hash}"'
        in (module.__source__)
    )
    np.testing.assert_allclose(
        module.gradient(x), jax_derivative(rosen, 1, x), rtol=1e-12
    )
    np.testing.assert_allclose(
        module.hessian(x), jax_derivative(rosen, 2, x), rtol=1e-12
    )
    python = difgen.generate(rosen, np.zeros(5), operators=["gradient"], emit="vector")
    np.testing.assert_allclose(module.gradient(x), python.gradient(x), rtol=1e-15)
    assert not list(Path.cwd().iterdir())  # the cache is elsewhere
    (directory,) = (private_cache / "generate").iterdir()
    assert Path(module.__file__).parent == directory
    again = difgen.generate(
        rosen, np.zeros(5), operators=["gradient", "hessian"], emit="c"
    )
    assert again.COMPILED and again.__source__ == module.__source__
    assert list((private_cache / "generate").iterdir()) == [directory]


def test_nothing_is_written_unless_asked(tmp_path: Path, private_cache: Path) -> None:
    work = Path.cwd()
    module = difgen.generate(rosen, np.zeros(4), operators=["gradient"])
    assert not list(work.iterdir()) and not private_cache.exists()
    assert not hasattr(module, "__file__") and module.__name__ == "rosen"
    assert module.__name__ not in sys.modules
    # tracebacks and inspect read the module's lines from its text
    assert inspect.getsource(module.gradient).startswith("def gradient(")


def test_output_dir_writes_with_the_build_transaction() -> None:
    out = Path("out")
    module = difgen.generate(rosen, np.zeros(4), operators=["gradient"], output_dir=out)
    written = out / "rosen.py"
    assert written.read_text() == module.__source__
    assert Path(module.__file__) == written
    assert "Generated in-process by `difgen.generate`" in module.__source__
    assert difgen.write.inspect_file(written).state is difgen.write.State.INTACT
    before = written.stat().st_mtime_ns
    difgen.generate(rosen, np.zeros(4), operators=["gradient"], output_dir=out)
    assert written.stat().st_mtime_ns == before  # identical bytes: left alone
    (out / "mine.py").write_text("# my own module\n")
    with pytest.raises(WriteError, match="not written by difgen"):
        difgen.generate(
            rosen, np.zeros(4), operators=["gradient"], output_dir=out, name="mine"
        )
    assert (out / "mine.py").read_text() == "# my own module\n"
    assert sorted(p.name for p in out.iterdir()) == ["mine.py", "rosen.py"]


def test_output_dir_with_emit_c_writes_the_source_and_the_extension() -> None:
    module = difgen.generate(
        rosen, np.zeros(3), operators=["gradient"], emit="c", output_dir="out"
    )
    names = sorted(p.name for p in Path("out").iterdir())
    extension = difgen.targets.c.compiling.extension_path(Path("out"), "rosen")
    assert names == sorted(["rosen.py", "rosen__c.c", extension.name])
    assert Path("out/rosen__c.c").read_text() == module.__c_source__
    assert module.COMPILED


def squares(x):
    return np.sum(x**2)


def cubes(x):
    return np.sum(x**3)


def test_a_changed_c_module_loads_from_a_new_cache_directory() -> None:
    """Unlike one regenerated into the same output_dir (the README says why)."""
    first = difgen.generate(
        squares, np.zeros(3), operators=["gradient"], emit="c", name="m"
    )
    second = difgen.generate(
        cubes, np.zeros(3), operators=["gradient"], emit="c", name="m"
    )
    assert first.COMPILED and second.COMPILED
    assert Path(first.__file__).parent != Path(second.__file__).parent
    np.testing.assert_array_equal(second.gradient(np.ones(3)), [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(first.gradient(np.ones(3)), [2.0, 2.0, 2.0])
    difgen.generate(
        squares, np.zeros(3), operators=["gradient"], emit="c", output_dir="o"
    )
    with pytest.warns(RuntimeWarning, match="rebuilt after this process loaded it"):
        same_path = difgen.generate(
            cubes,
            np.zeros(3),
            operators=["gradient"],
            emit="c",
            output_dir="o",
            name="squares",
        )
    assert not same_path.COMPILED
    np.testing.assert_array_equal(same_path.gradient(np.ones(3)), [3.0, 3.0, 3.0])


@pytest.mark.parametrize(
    ("options", "keyword", "message"),
    [
        ({"sparse": 1}, "sparse", r"'sparse' must be true or false; got 1 \(integer\)"),
        ({"spase": True}, "spase", "unknown key 'spase'.*did you mean 'sparse'"),
        ({"mode": "fwd"}, "mode", "did you mean 'forward'"),
        ({"batch": 0}, "batch", "'batch' must be an integer >= 1"),
        ({"timeout": -1}, "timeout", "'timeout' must be a positive number"),
        ({"points": True, "sparse": True}, "points", "cannot be combined"),
        ({"name": "math"}, "name", "standard-library module"),
        ({"operators": ["gradiant"]}, "operators", "did you mean 'gradient'"),
        ({"operators": ["derivative"]}, "operators", "needs a scalar input"),
        ({"backend": "jax"}, "backend", '"sympy" or "trace"'),
        ({"emit": "cuda"}, "emit", '"auto" or "scalar" or "vector" or "c"'),
    ],
)
def test_bad_options_name_the_keyword(
    options: dict[str, Any], keyword: str, message: str
) -> None:
    options = {"operators": ["gradient", "hessian"], **options}
    with pytest.raises(ConfigError) as caught:
        difgen.generate(rosen, np.zeros(4), **options)
    text = str(caught.value)
    assert text.startswith(f"difgen.generate(..., {keyword}=...): "), text
    assert re.search(message, text), text


def test_a_module_option_given_as_none_is_its_default() -> None:
    module = difgen.generate(rosen, np.zeros(3), operators=["gradient"], timeout=None)
    assert "Backend trace, mode auto" in module.__source__
    with pytest.raises(
        ConfigError, match=r"^difgen.generate\(\.\.\., backend=\.\.\.\)"
    ):
        difgen.generate(rosen, np.zeros(3), operators=["gradient"], backend=None)


def test_operators_checked_after_tracing_name_the_keyword() -> None:
    """The output's shape is known once traced: the pipeline's error is located too."""
    with pytest.raises(ConfigError) as caught:
        difgen.generate(field, np.zeros(3), np.ones(3), operators=["gradient"])
    assert str(caught.value).startswith("difgen.generate(..., operators=...): ")
    assert "needs a scalar output" in str(caught.value)


def test_parameters_named_as_the_module_names_its_own_are_renamed() -> None:
    def spread(mu, x, out):
        return np.sum((x - mu) ** 2 * out)

    module = difgen.generate(
        spread, np.zeros(3), np.arange(3.0), np.ones(3), operators=["gradient"]
    )
    assert list(inspect.signature(module.gradient).parameters)[:3] == [
        "x",
        "x_",
        "out_",
    ]
    np.testing.assert_allclose(
        module.gradient(np.zeros(3), np.arange(3.0), np.ones(3)), [0.0, -2.0, -4.0]
    )


def test_float32_examples_make_a_float32_module() -> None:
    x = np.linspace(-1.0, 1.0, 4).astype(np.float32)
    module = difgen.generate(wave, x, 1.5, operators=["jacobian"])  # 1.5 is weak
    jacobian = module.jacobian(x, np.float32(1.5))
    assert jacobian.dtype == np.float32
    np.testing.assert_allclose(
        jacobian, jax_derivative(wave, 1, x.astype(float), 1.5), rtol=1e-5, atol=1e-6
    )


def _params_loss(p, X, t):
    return np.mean((np.tanh(X @ p["W1"] + p["b1"]) @ p["w2"] + p["b2"] - t) ** 2)


@pytest.mark.parametrize("emit", ["vector", "c"])
def test_a_tree_of_float32_examples_makes_a_float32_module(emit: str) -> None:
    """A dict of float32 arrays (b2 an np.float32) is a float32 module, as a
    float32 x is: its gradient is a dict of float32 values; with one float64 leaf
    NumPy would promote, and the module is float64."""
    rng = np.random.default_rng(3)
    p = {
        "W1": rng.standard_normal((3, 5)).astype(np.float32),
        "b1": rng.standard_normal(5).astype(np.float32),
        "w2": rng.standard_normal(5).astype(np.float32),
        "b2": np.float32(0.25),
    }
    X = rng.standard_normal((7, 3)).astype(np.float32)
    t = rng.standard_normal(7).astype(np.float32)
    module = difgen.generate(_params_loss, p, X, t, operators=["gradient"], emit=emit)
    grad = module.gradient(p, X, t)
    assert all(np.asarray(v).dtype == np.float32 for v in grad.values())
    assert type(grad["b2"]) is np.float32
    p64 = {k: np.asarray(v, np.float64) for k, v in p.items()}
    mixed = dict(p, W1=p64["W1"])
    wide = difgen.generate(
        _params_loss, mixed, X.astype(float), t.astype(float), operators=["gradient"]
    )
    exact = wide.gradient(p64, X.astype(float), t.astype(float))
    assert exact["W1"].dtype == np.float64
    for key, value in grad.items():
        np.testing.assert_allclose(value, exact[key], rtol=1e-4, atol=1e-6)
    with pytest.raises(
        TypeError, match=r"gradient: p\['W1'\]: expected float32 values"
    ):
        module.gradient(mixed, X, t)


def test_bad_examples_name_the_argument() -> None:
    with pytest.raises(ConfigError) as caught:
        difgen.generate(wave, np.zeros(3, np.float16), 1.0, operators=["jacobian"])
    assert str(caught.value).startswith(
        "difgen.generate(wave, ...), example argument 0 ('x'): 'input.dtype' is "
        '"float16" (string)'
    )
    with pytest.raises(ConfigError, match=r"argument 1 \('a'\).*float64 in a float32"):
        difgen.generate(
            wave, np.zeros(3, np.float32), np.ones(3), operators=["jacobian"]
        )
    with pytest.raises(ConfigError) as caught:
        difgen.generate(wave, np.zeros(3), np.int32(2), operators=["jacobian"])
    assert str(caught.value).startswith(
        "difgen.generate(wave, ...), example argument 1 ('a'): 'contexts[0].dtype'"
    )
    with pytest.raises(ConfigError, match=r"argument 1 \('idx'\).*backend = \"trace\""):
        difgen.generate(
            gathered, np.zeros(3), np.zeros(2, int), np.ones(2, bool), 1.0,
            operators=["gradient"], backend="sympy",
        )  # fmt: skip
    with pytest.raises(UsageError, match=r"argument 1 \('a'\): a str"):
        difgen.generate(wave, np.zeros(3), "2", operators=["jacobian"])
    with pytest.raises(UsageError, match="which 1 example argument"):
        difgen.generate(wave, np.zeros(3), operators=["jacobian"])
    with pytest.raises(UsageError, match="wrt must be the index"):
        difgen.generate(wave, np.zeros(3), 1.0, wrt=2, operators=["jacobian"])
    with pytest.raises(UsageError, match="'input' is given by the function"):
        difgen.generate(wave, np.zeros(3), 1.0, operators=["jacobian"], input={})


class Pair(NamedTuple):
    a: np.ndarray
    b: np.ndarray


def mlp(params, X, y):
    """A two-layer network's loss over a dict of parameters (a scalar leaf too)."""
    h = np.tanh(X @ params["W1"] + params["b1"])
    return np.mean((h @ params["W2"] + params["b2"] - y) ** 2)


def paired(p, z):
    """A NamedTuple argument."""
    return np.sum(p.a * np.sin(z)) + np.sum(p.b**2 * z)


def nested(t, z):
    """A tuple holding an array and a list."""
    u, (v, w) = t
    return np.sum(u * z) + v * w**2


def jax_tree(tree: Any) -> Any:
    """A tree of NumPy values as JAX takes it (NamedTuples stay NamedTuples)."""
    import jax

    return jax.tree_util.tree_map(lambda leaf: np.asarray(leaf, dtype=float), tree)


def assert_trees_close(ours: Any, theirs: Any) -> None:
    """Same structure (lists and tuples alike), leaves equal to 1e-12."""
    import jax

    ours_leaves, ours_def = jax.tree_util.tree_flatten(ours)
    their_leaves, their_def = jax.tree_util.tree_flatten(theirs)
    assert len(ours_leaves) == len(their_leaves), (ours_def, their_def)
    for a, b in zip(ours_leaves, their_leaves):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("backend", ["trace", "sympy"])
def test_dict_parameters_match_jax(backend: str) -> None:
    import jax

    rng = np.random.default_rng(3)
    params = {
        "W1": rng.normal(size=(3, 4)),
        "b1": rng.normal(size=4),
        "W2": rng.normal(size=4),
        "b2": 0.25,
    }
    X, y = rng.normal(size=(6, 3)), rng.normal(size=6)
    module = difgen.generate(
        mlp, params, X, y, operators=["gradient", "hessian"], backend=backend
    )
    gradient = module.gradient(params, X, y)
    assert set(gradient) == set(params) and gradient["W1"].shape == (3, 4)
    assert isinstance(gradient["b2"], float)
    g = under_jax(mlp)
    assert_trees_close(gradient, jax.grad(g)(jax_tree(params), X, y))
    hessian = module.hessian(params, X, y)
    assert hessian["W1"]["b1"].shape == (3, 4, 4)
    assert_trees_close(hessian, jax.hessian(g)(jax_tree(params), X, y))


def test_several_wrt_in_their_order_match_jax() -> None:
    import jax

    rng = np.random.default_rng(4)
    X, beta, y = rng.normal(size=(7, 3)), rng.normal(size=3), rng.normal(size=7)
    module = difgen.generate(
        nll, X, beta, y, wrt=(1, 0), operators=["gradient", "jacobian"]
    )
    # the differentiated arguments first, in wrt's order, then the contexts
    d_beta, d_X = module.gradient(beta, X, y)
    theirs = jax.grad(under_jax(nll), argnums=(1, 0))(X, beta, y)
    assert_trees_close((d_beta, d_X), theirs)
    assert d_X.shape == (7, 3)


def test_namedtuple_and_nested_tuple_arguments() -> None:
    import jax

    z = np.linspace(-1.0, 2.0, 3)
    pair = Pair(np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.0, -0.5]))
    module = difgen.generate(paired, pair, z, operators=["gradient"])
    gradient = module.gradient(pair, z)
    assert type(gradient).__name__ == "Pair" and gradient._fields == ("a", "b")
    theirs = jax.grad(under_jax(paired))(jax_tree(pair), z)
    assert_trees_close(tuple(gradient), tuple(theirs))
    t = (np.array([1.0, -2.0, 0.5]), (2.0, 3.0))
    module = difgen.generate(nested, t, z, operators=["gradient"])
    # a tuple inside the tree comes back as a list (the config spells trees so)
    assert_trees_close(module.gradient(t, z), jax.grad(under_jax(nested))(t, z))


def test_pytree_refusals_name_the_argument() -> None:
    with pytest.raises(
        UsageError, match=r"example argument 1 \('beta'\).*a context is one"
    ):
        difgen.generate(
            nll,
            np.zeros((3, 2)),
            {"a": np.zeros(2)},
            np.zeros(3),
            operators=["gradient"],
        )
    with pytest.raises(UsageError, match="tuple of distinct ones"):
        difgen.generate(
            nll,
            np.zeros((3, 2)),
            np.zeros(2),
            np.zeros(3),
            wrt=(1, 1),
            operators=["gradient"],
        )
    with pytest.raises(UsageError, match=r"example argument 0 .*empty dict"):
        difgen.generate(lambda p: 0.0, {}, operators=["gradient"])
    with pytest.raises(UsageError, match=r"Pair inside another container"):
        difgen.generate(
            lambda t: t[0].a, (Pair(np.zeros(2), np.zeros(2)),), operators=["jacobian"]
        )


def broken(u, a):
    y = np.sin(u) * a
    return y / undefined_scale  # type: ignore[name-defined]  # noqa: F821


BROKEN_LINE = inspect.getsourcelines(broken)[1] + 2


@pytest.mark.parametrize("wrt", [0, 1])
def test_a_function_that_fails_to_trace_names_the_users_line(wrt: int) -> None:
    with pytest.raises(TraceError) as caught:
        difgen.generate(
            broken, np.zeros(3), np.ones(3), wrt=wrt, operators=["jacobian"]
        )
    text = str(caught.value)
    assert f"{__file__}:{BROKEN_LINE}" in text, text
    assert "NameError" in text and "inprocess.py" not in text, text


def spin(x):
    while True:  # a Python loop, not a traced one: only the time limit ends it
        pass


def test_timeout_bounds_the_generation() -> None:
    with pytest.raises(BuildTimeout, match=r"stopped after 0\.3 s"):
        difgen.generate(spin, np.zeros(2), operators=["gradient"], timeout=0.3)


def test_two_calls_give_identical_source() -> None:
    first = difgen.generate(
        gathered,
        np.zeros(6),
        np.zeros(4, int),
        np.ones(4, bool),
        1.0,
        operators=["gradient", "hvp"],
    )
    second = difgen.generate(
        gathered,
        np.zeros(6),
        np.zeros(4, int),
        np.ones(4, bool),
        1.0,
        operators=["gradient", "hvp"],
    )
    assert first.__source__ == second.__source__


def _body(text: str) -> str:
    """A module's text without its docstring and its two hashes."""
    body = text.split('"""\n', 2)[2]
    return re.sub(r'^(SOURCE|BODY)_HASH = "[0-9a-f]+"$', "", body, flags=re.MULTILINE)


@pytest.mark.parametrize(
    ("name", "backend", "operators", "shapes"),
    [
        ("lorenz", "sympy", ["jacobian", "pushforward", "pullback"], [(3,), (3,)]),
        (
            "kepler",
            "trace",
            ["jacobian", "value_and_jacobian", "pushforward", "pullback"],
            [(4,), ()],
        ),
    ],
)
def test_generate_matches_difgen_build_of_the_same_config(
    name: str, backend: str, operators: list[str], shapes: list[tuple[int, ...]]
) -> None:
    """examples/difgen.toml's module, generated in-process: the same code."""
    found = importlib.util.spec_from_file_location(
        "_generate_examples", ROOT / "examples/functions.py"
    )
    assert found is not None and found.loader is not None
    functions = importlib.util.module_from_spec(found)
    found.loader.exec_module(functions)
    examples = [np.zeros(shape) if shape else 0.5 for shape in shapes]
    module = difgen.generate(
        getattr(functions, name),
        *examples,
        operators=operators,
        backend=backend,
        name=name,
    )
    built = (ROOT / "generated" / f"{name}.py").read_text()
    assert _body(module.__source__) == _body(built)


def test_the_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    snippet = documentation.snippet("generate")
    names: dict[str, Any] = {"__name__": "readme_generate"}
    exec(compile(snippet, "project.md", "exec"), names)  # noqa: S102
    assert capsys.readouterr().out.startswith('"""Generated by difgen')
    X, y = names["X"], names["y"]
    differences = central_jacobian(lambda b, X, y: nll(X, b, y), np.zeros(3), X, y)
    np.testing.assert_allclose(names["g"], differences, rtol=1e-7)
    assert not list(Path.cwd().iterdir())


def test_the_docstring_example_runs() -> None:
    result = doctest.testmod(difgen.inprocess, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5 and result.failed == 0


def test_import_difgen_stays_cheap() -> None:
    code = (
        "import sys, difgen\n"
        "difgen.generate\n"
        "heavy = ('sympy', 'difgen.pipeline', 'difgen.derive', 'difgen.render')\n"
        "assert not [m for m in heavy if m in sys.modules], sorted(sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
