"""The linear-algebra surface (issue 9): generated modules against JAX.

Each function of ``tests/support/linalg_cases.py`` is built into a generated module and checked
against a JAX twin (the same source run with ``np`` bound to ``jax.numpy``, the
eigen-decompositions reading one triangle as NumPy does): values equal NumPy's
(bit for bit, NaN inputs included), forward mode (``pushforward``, ``jacobian``) and
reverse mode (``pullback``, ``gradient``) against JAX's, and ``hvp`` where the output
is scalar; on the SymPy backend where it applies, and refused there clearly where it
does not (decompositions).
"""

from __future__ import annotations

import types
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linalg_cases as cases
from conftest import SUPPORT
from difgen.errors import ConfigError, TraceError
from difgen.frontend import trace
from difgen.primitives import PRIMITIVES
from difgen.primitives.linalg import TRACE_ONLY, SymbolicDecomposition

jax.config.update("jax_enable_x64", True)

SOURCE = SUPPORT / "linalg_cases.py"

# name: input shape
VECTOR_CASES = {
    "cross": (12,),
    "tensordot": (24,),
    "dot_nd": (24,),
    "einsum_diagonal": (18,),
    "einsum_ellipsis": (18,),
    "einsum_sublist": (9,),
    "matrix_power": (9,),
    "matrix_power_small": (4,),
    "pinv": (12,),
    "pinv_hermitian": (9,),
    "svd_values": (12,),
    "svd_vectors": (12,),
    "eigh_values": (9,),
    "eigh_vectors": (9,),
    "matrix_norms": (12,),
    "vector_norms": (4,),
    "norm_axes": (24,),
    "stacked": (18,),
    "stacked_small": (8,),
}
SCALAR_CASES = {
    "cross_energy": (6,),
    "einsum_energy": (9,),
    "nuclear_energy": (12,),
    "eigh_energy": (9,),
    "pinv_energy": (12,),
    "power_energy": (9,),
}
# the SymPy backend: everything but the decompositions (whose values LAPACK computes)
SYMPY_VECTOR = [
    "cross",
    "einsum_sublist",
    "matrix_power_small",
    "vector_norms",
    "stacked_small",
]
SYMPY_SCALAR = ["cross_energy", "einsum_energy"]
REFUSED_BY_SYMPY = ["svd_values", "eigh_values", "pinv", "matrix_norms"]


# ------------------------------------------------------------------ JAX twins
def _triangle(a: Any, uplo: str) -> Any:
    """The symmetric matrix NumPy's eigh/eigvalsh read from one triangle."""
    low = jnp.tril(a) if uplo == "L" else jnp.triu(a)
    return low + jnp.swapaxes(low, -1, -2) - low * jnp.eye(a.shape[-1])


def _linalg_twin() -> Any:
    ns = types.SimpleNamespace(**{k: getattr(jnp.linalg, k) for k in dir(jnp.linalg)})
    ns.eigh = lambda a, UPLO="L": jnp.linalg.eigh(_triangle(a, UPLO))
    ns.eigvalsh = lambda a, UPLO="L": jnp.linalg.eigvalsh(_triangle(a, UPLO))
    ns.pinv = lambda a, hermitian=False: jnp.linalg.pinv(
        _triangle(a, "L") if hermitian else a
    )
    return ns


class _NumpyTwin(types.SimpleNamespace):
    """``jax.numpy`` with NumPy's ``linalg`` semantics."""

    def __getattr__(self, name: str) -> Any:
        return getattr(jnp, name)


JNP = _NumpyTwin(linalg=_linalg_twin())


def twin(name: str) -> Any:
    fn = getattr(cases, name)
    return types.FunctionType(fn.__code__, {**vars(cases), "np": JNP})


# ------------------------------------------------------------------ helpers
def point(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.2, 0.8, shape)


def normal(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


def close(actual: Any, expected: Any, rtol: float = 1e-9, atol: float = 1e-11) -> None:
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol, atol)


def build(module_cache: Any, name: str, ops: list[str], backend: str) -> Any:
    shape = {**VECTOR_CASES, **SCALAR_CASES}[name]
    # vector emission on the trace backend: the scalar attempt costs build time here
    # and is tested per primitive in tests/primitives/test_primitives.py
    emit = {"emit": "vector"} if backend == "trace" else {}
    mod, _ = module_cache(SOURCE, name, shape, ops, backend=backend, **emit)
    return mod


def same_as_numpy(fn: Any, mod: Any, x: np.ndarray, exact: bool) -> None:
    """The module's value is NumPy's: the same bits (``exact``, else up to
    rounding), NaN where NumPy's is NaN, or the same LinAlgError."""
    try:
        expected = fn(x)
    except np.linalg.LinAlgError:
        with pytest.raises(np.linalg.LinAlgError):
            mod.f(x)
        return
    with np.errstate(all="ignore"):
        if exact:
            np.testing.assert_array_equal(mod.f(x), expected)
        else:
            close(mod.f(x), expected, rtol=1e-14, atol=1e-15)


VECTOR_OPS = ["pushforward", "pullback", "jacobian"]
SCALAR_OPS = ["gradient", "hvp"]


# ------------------------------------------------------------ trace backend
@pytest.mark.parametrize("name", sorted(VECTOR_CASES))
def test_trace_backend_against_jax(module_cache: Any, name: str) -> None:
    shape = VECTOR_CASES[name]
    mod = build(module_cache, name, VECTOR_OPS, "trace")
    check_against_jax(mod, name, shape, "trace")


@pytest.mark.parametrize("name", sorted(SCALAR_CASES))
def test_trace_backend_second_order(module_cache: Any, name: str) -> None:
    mod = build(module_cache, name, SCALAR_OPS, "trace")
    check_second_order(mod, name, SCALAR_CASES[name], "trace")


# ------------------------------------------------------------ SymPy backend
@pytest.mark.parametrize("name", SYMPY_VECTOR)
def test_sympy_backend_against_jax(module_cache: Any, name: str) -> None:
    shape = VECTOR_CASES[name]
    mod = build(module_cache, name, VECTOR_OPS, "sympy")
    check_against_jax(mod, name, shape, "sympy")


@pytest.mark.parametrize("name", SYMPY_SCALAR)
def test_sympy_backend_second_order(module_cache: Any, name: str) -> None:
    mod = build(module_cache, name, SCALAR_OPS, "sympy")
    check_second_order(mod, name, SCALAR_CASES[name], "sympy")


@pytest.mark.parametrize("name", REFUSED_BY_SYMPY)
def test_sympy_backend_refuses_decompositions(module_cache: Any, name: str) -> None:
    """No traceback: the config's backend line, and where to go instead."""
    with pytest.raises(ConfigError) as info:
        build(module_cache, name, ["jacobian"], "sympy")
    message = str(info.value)
    assert "difgen.toml:" in message
    assert "no symbolic form" in message
    assert 'use backend = "trace"' in message


# ----------------------------------------------------------------- checks
# JAX (whose per-function compilation costs seconds) checks the decompositions and
# the einsum transpose; central differences, which cost microseconds here, check the
# functions written on existing primitives (whose rules tests/primitives/test_primitives.py
# checks against differences and by the inner-product identity).
JAX_ORACLE = {
    "einsum_diagonal",
    "pinv",
    "pinv_hermitian",
    "svd_values",
    "svd_vectors",
    "eigh_values",
    "eigh_vectors",
    "matrix_norms",
    "nuclear_energy",
    "eigh_energy",
    "pinv_energy",
}
# Values equal NumPy's bit for bit, except where the sums run in another order:
# np.dot of N-d operands sums with BLAS's ddot per element and the generated code
# with one matrix product, and the SymPy backend's scalar code sums matrix products
# and LAPACK's closed forms term by term (the same value up to rounding).
ROUNDING = {"dot_nd"}
SYMPY_EXACT = {"cross", "cross_energy"}  # no matrix product or LAPACK call inside


def exact(name: str, backend: str) -> bool:
    """Whether the module must reproduce NumPy's value bit for bit."""
    return name in SYMPY_EXACT if backend == "sympy" else name not in ROUNDING


H = 1e-6


def oracle_jacobian(name: str, x: np.ndarray) -> tuple[np.ndarray, float]:
    """The jacobian (flattened output by input) from JAX or central differences,
    with the relative tolerance the oracle allows."""
    fn = getattr(cases, name)
    if name in JAX_ORACLE:
        return np.asarray(jax.jit(jax.jacfwd(twin(name)))(x)).reshape(-1, x.size), 1e-9
    columns = [
        (np.ravel(fn(x + H * e)) - np.ravel(fn(x - H * e))) / (2 * H)
        for e in np.eye(x.size)
    ]
    return np.stack(columns, axis=1), 1e-6


def check_against_jax(
    mod: Any, name: str, shape: tuple[int, ...], backend: str
) -> None:
    """Values, forward mode (pushforward, jacobian) and reverse mode (pullback)
    against the oracle, and NumPy's value at a NaN input."""
    fn = getattr(cases, name)
    x = point(shape, 0)
    same_as_numpy(fn, mod, x, exact=exact(name, backend))
    J, rtol = oracle_jacobian(name, x)
    v, u = normal(shape, 10), normal(np.shape(fn(x)), 20)
    close(np.ravel(mod.pushforward(x, v)), J @ v, rtol=rtol, atol=rtol)
    close(np.ravel(mod.pullback(x, u)), u.ravel() @ J, rtol=rtol, atol=rtol)
    close(np.reshape(mod.jacobian(x), J.shape), J, rtol=rtol, atol=rtol)
    x[1] = np.nan
    same_as_numpy(fn, mod, x, exact=exact(name, backend))


def check_second_order(
    mod: Any, name: str, shape: tuple[int, ...], backend: str
) -> None:
    """Gradient against the oracle, hvp against JAX's hessian or differences of the
    (checked) gradient."""
    fn = getattr(cases, name)
    x, v = point(shape, 3), normal(shape, 4)
    same_as_numpy(fn, mod, x, exact=exact(name, backend))
    J, rtol = oracle_jacobian(name, x)
    close(mod.gradient(x), J[0], rtol=rtol, atol=rtol)
    if name in JAX_ORACLE:
        expected = jax.jit(jax.hessian(twin(name)))(x) @ v
    else:
        expected = (mod.gradient(x + H * v) - mod.gradient(x - H * v)) / (2 * H)
    close(mod.hvp(x, v), expected, rtol=max(rtol, 1e-8), atol=max(rtol, 1e-8))


# ------------------------------------------------------------ semantics
def test_eigvalsh_reads_one_triangle_only(module_cache: Any) -> None:
    """NaN in the triangle NumPy does not read changes nothing, and that triangle
    gets no derivative (eigh_energy reads the lower one)."""
    mod = build(module_cache, "eigh_energy", SCALAR_OPS, "trace")
    x = point((9,), 5)
    upper = x.copy()
    upper[[1, 2, 5]] = np.nan  # above the diagonal
    assert np.isfinite(mod.f(upper))
    np.testing.assert_array_equal(mod.f(upper), cases.eigh_energy(upper))
    np.testing.assert_array_equal(mod.gradient(upper)[[1, 2, 5]], 0.0)
    assert np.isfinite(mod.gradient(upper)).all()
    lower = x.copy()
    lower[3] = np.nan  # below the diagonal: LAPACK does not converge, as in NumPy
    with pytest.raises(np.linalg.LinAlgError):
        cases.eigh_energy(lower)
    with pytest.raises(np.linalg.LinAlgError):
        mod.gradient(lower)


def test_pinv_at_a_rank_deficient_point(module_cache: Any) -> None:
    """Where NumPy's cutoff drops singular values, the value is NumPy's and the
    derivative is the one along perturbations that keep the rank."""
    mod = build(module_cache, "pinv", VECTOR_OPS, "trace")
    rng = np.random.default_rng(6)
    u, w, du, dw = rng.normal(size=4), rng.normal(size=3), *rng.normal(size=(2, 7))
    du, dw = du[:4], dw[:3]

    def at(t: float) -> np.ndarray:
        return (np.outer(u + t * du, w + t * dw) / cases.W).ravel()

    x = at(0.0)
    same_as_numpy(cases.pinv, mod, x, exact=True)
    h = 1e-6
    along = (cases.pinv(at(h)) - cases.pinv(at(-h))) / (2 * h)
    close(mod.pushforward(x, (at(h) - at(-h)) / (2 * h)), along, rtol=1e-6, atol=1e-7)


REFUSALS = [
    (lambda x: np.linalg.svd(x.reshape(4, 3)), "full_matrices=False"),
    (lambda x: np.linalg.norm(x.reshape(4, 3), 3), "Invalid norm order 3 for matrices"),
    (lambda x: np.linalg.norm(x, "fro"), "Invalid norm order 'fro' for vectors"),
    (lambda x: np.linalg.matrix_power(x.reshape(4, 3), 2), "square matrices"),
    (lambda x: np.linalg.eigh(x.reshape(3, 4)), "square matrices"),
    (lambda x: np.linalg.eigvalsh(x[:9].reshape(3, 3), UPLO="X"), "'L' or 'U'"),
    (lambda x: np.cross(x[:4], x[4:8]), "dimension must be 2 or 3"),
    (lambda x: np.tensordot(x.reshape(3, 4), x.reshape(3, 4), 1), "shape-mismatch"),
    (lambda x: np.einsum("ij,jk", x.reshape(3, 4), x.reshape(3, 4)), "np.einsum"),
]


@pytest.mark.parametrize(("fn", "message"), REFUSALS)
def test_refusals_name_the_line(fn: Any, message: str) -> None:
    """What NumPy would refuse, or difgen cannot differentiate, is a TraceError at
    the user's line."""
    with pytest.raises(TraceError, match=r"test_surface_linalg.py:\d+") as info:
        trace(fn, [((12,), "float64")])
    assert message in str(info.value)


def test_stacks_of_matrices_agree_between_backends(module_cache: Any) -> None:
    """The SymPy backend unrolls a static stack; both backends compute NumPy's value
    and the same jacobian."""
    sym = build(module_cache, "stacked_small", VECTOR_OPS, "sympy")
    vec = build(module_cache, "stacked_small", VECTOR_OPS, "trace")
    x = point((8,), 7)
    close(sym.f(x), cases.stacked_small(x), rtol=1e-13, atol=1e-14)
    close(sym.jacobian(x), vec.jacobian(x))


@pytest.mark.parametrize("name", TRACE_ONLY)
def test_trace_only_primitives_refuse_symbolic_lowering(name: str) -> None:
    """The table the README's surface lists as trace-only is what refuses."""
    params = {"svd": {"part": 0, "full": False}, "eigh": {"part": 0, "uplo": "L"}}
    params |= {"eigvalsh": {"uplo": "L"}, "pinv": {"rcond": 1e-15, "hermitian": False}}
    with pytest.raises(SymbolicDecomposition, match="no symbolic form"):
        PRIMITIVES[name].lower_sympy(
            np.zeros((2, 2), dtype=object), **params.get(name, {})
        )


def test_singular_vectors_at_repeated_singular_values_are_not_finite(
    module_cache: Any,
) -> None:
    """U and V are not unique where singular values repeat: the derivative is inf
    or NaN there, never a silently chosen finite value."""
    mod = build(module_cache, "svd_vectors", VECTOR_OPS, "trace")
    A = np.zeros((4, 3))
    A[:3] = np.diag([1.0, 1.0, 2.0])
    x = (A / cases.W).ravel()
    same_as_numpy(cases.svd_vectors, mod, x, exact=True)
    with np.errstate(all="ignore"):
        assert not np.isfinite(mod.pushforward(x, normal((12,), 30))).all()
