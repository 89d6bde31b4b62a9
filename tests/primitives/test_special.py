"""SciPy's special functions: values against SciPy, first and second derivatives
against mpmath (50 digits), in generated modules of both backends, every emission
(scalar, vector, C), forward and reverse operators; SciPy's values at the edges
(gammaln's poles, xlogy(0, 0), log_ndtr far in the tail, expit at +-800, logit at
0 and 1), JAX's derivative conventions for xlogy/xlog1py at x = 0, and logsumexp,
softmax and log_softmax with axis=, b=, keepdims= and -inf entries."""

from __future__ import annotations

import itertools
import math
import shutil
from collections.abc import Callable
from typing import Any

import jax
import mpmath
import numpy as np
import pytest
import scipy.special as sc

import special_cases as cases
from compiled import Built
from conftest import SUPPORT
from difgen.ad import jvp
from difgen.errors import TraceError
from difgen.frontend import trace
from difgen.primitives.special import ERFCX_SERIES

jax.config.update("jax_enable_x64", True)

mp = mpmath.mp
Fn = Callable[..., Any]


def _lgamma(x: Any) -> Any:
    return mpmath.log(abs(mpmath.gamma(x)))


def _log_ndtr(x: Any) -> Any:
    return mpmath.log(mpmath.ncdf(x))


SLOTS: list[tuple[str, tuple[int, ...], Fn]] = [
    ("gammaln", (0,), _lgamma),
    ("psi", (1,), mpmath.digamma),
    ("polygamma1", (2,), lambda x: mpmath.psi(1, x)),
    ("erf", (3,), mpmath.erf),
    ("erfc", (4,), mpmath.erfc),
    ("ndtr", (5,), mpmath.ncdf),
    ("log_ndtr", (6,), _log_ndtr),
    ("expit", (7,), lambda x: 1 / (1 + mpmath.exp(-x))),
    ("logit", (8,), lambda p: mpmath.log(p / (1 - p))),
    ("xlogy", (9, 10), lambda x, y: x * mpmath.log(y)),
    ("xlog1py", (11, 12), lambda x, y: x * mpmath.log1p(y)),
    ("betaln", (13, 14), lambda a, b: mpmath.log(mpmath.beta(a, b))),
    ("erfcx", (15,), lambda x: mpmath.exp(x * x) * mpmath.erfc(x)),
    ("gamma", (16,), mpmath.gamma),
]
"""Each output of ``special_cases.elementwise``: its name, input slots, exact form."""

SCIPY: dict[str, Fn] = {
    "gammaln": sc.gammaln,
    "psi": sc.psi,
    "polygamma1": lambda x: sc.polygamma(1, x),
    "erf": sc.erf,
    "erfc": sc.erfc,
    "ndtr": sc.ndtr,
    "log_ndtr": sc.log_ndtr,
    "expit": sc.expit,
    "logit": sc.logit,
    "xlogy": sc.xlogy,
    "xlog1py": sc.xlog1py,
    "betaln": sc.betaln,
    "erfcx": sc.erfcx,
    "gamma": sc.gamma,
}

N_IN, N_OUT = 17, len(SLOTS)

POINTS = [
    # ordinary values
    [2.5, 1.7, 0.8, 0.4, 1.2, -0.7, -3.0, 0.9, 0.3, 1.3, 2.2, 0.7, 0.4, 2.5, 1.5, 0.6]
    + [3.5],
    # negative arguments, the other side of each function
    [-2.5, -0.5, -1.5, -1.8, -0.9, 3.0, -12.0, -30.0, 0.9, -0.4, 5.0, 3.0, -0.5, 10.0]
    + [0.3, -1.0, -1.5],
    # tails: log_ndtr at -40, expit at 30, logit near 0, large arguments
    [50.0, 30.0, 10.0, 3.5, 5.0, -8.0, -40.0, 30.0, 1e-3, 2.0, 1e-3, -2.0, 1e3, 0.5]
    + [0.5, 20.0, 20.0],
]


def exact_partials(x: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values, the jacobian (N_OUT x N_IN) and the hessian of the sum, by mpmath."""
    values = np.zeros(N_OUT)
    jac = np.zeros((N_OUT, N_IN))
    hess = np.zeros((N_IN, N_IN))
    with mpmath.workdps(50):
        for k, (_, slots, fn) in enumerate(SLOTS):
            args = [mpmath.mpf(x[i]) for i in slots]
            values[k] = float(fn(*args))
            for a, i in enumerate(slots):
                order = [0] * len(slots)
                order[a] = 1
                jac[k, i] = float(mpmath.diff(fn, args, tuple(order)))
                for b, j in enumerate(slots):
                    order2 = [0] * len(slots)
                    order2[a] += 1
                    order2[b] += 1
                    hess[i, j] += float(mpmath.diff(fn, args, tuple(order2)))
    return values, jac, hess


EXACT = [exact_partials(p) for p in POINTS]


def close(actual: Any, expected: np.ndarray, rtol: Any, what: str) -> None:
    actual = np.asarray(actual, dtype=np.float64).reshape(expected.shape)
    # mpmath's differences leave ~1e-64 where a partial is exactly 0
    with np.errstate(invalid="ignore"):  # inf - inf: equal infinities pass
        within = np.abs(actual - expected) <= rtol * np.abs(expected) + 1e-40
    bad = ~(within | (actual == expected))  # NaN anywhere fails
    assert not bad.any(), (what, np.argwhere(bad), actual[bad], expected[bad])


def check_elementwise(mod: Any, x: np.ndarray, exact: tuple[Any, ...]) -> None:
    """Values (SciPy's, within a few ulps), the jacobian forward and reverse,
    elementwise pushforward and pullback."""
    values, jac, _ = exact
    scipy_values = np.array(
        [SCIPY[name](*(x[i] for i in slots)) for name, slots, _ in SLOTS]
    )
    # betaln is gammaln(a) + gammaln(b) - gammaln(a + b): its rounding is a few
    # ulps of the largest term, not of the (smaller) result
    a, b = x[13], x[14]
    terms = sum(abs(sc.gammaln(t)) for t in (a, b, a + b))
    rtol = np.full(N_OUT, 1e-14)
    rtol[11] += 4 * 2.0**-52 * terms / abs(sc.betaln(a, b))
    close(mod.f(x), scipy_values, rtol, "f vs scipy")
    close(mod.f(x), values, rtol + 1e-14, "f vs mpmath")
    close(mod.jacobian(x), jac, 1e-11, "jacobian")
    for i in range(N_IN):
        seed = np.zeros(N_IN)
        seed[i] = 1.0
        close(mod.pushforward(x, seed), jac[:, i], 1e-11, f"pushforward {i}")
    for k in range(N_OUT):
        seed = np.zeros(N_OUT)
        seed[k] = 1.0
        close(mod.pullback(x, seed), jac[k], 1e-11, f"pullback {k}")


def check_summed(mod: Any, x: np.ndarray, exact: tuple[Any, ...]) -> None:
    """The gradient and hessian of the sum (second order, mixed partials of the
    binary functions included) and an hvp."""
    _, jac, hess = exact
    close(mod.gradient(x), jac.sum(axis=0), 1e-11, "gradient")
    close(mod.hessian(x), hess, 1e-9, "hessian")
    v = np.linspace(-1.0, 1.0, N_IN)
    close(mod.hvp(x, v), hess @ v, 1e-9, "hvp")


ELEMENTWISE_OPS = ["f", "jacobian", "pushforward", "pullback"]
SUMMED_OPS = ["gradient", "hessian", "hvp"]
CONFIGS = [
    ("sympy", "auto", "scalar"),
    ("trace", "forward", "vector"),
    ("trace", "reverse", "vector"),
    ("trace", "forward", "scalar"),
    ("trace", "reverse", "scalar"),
]


@pytest.mark.parametrize("backend,mode,emit", CONFIGS)
def test_modules_match_scipy_and_mpmath(
    module_cache: Any, backend: str, mode: str, emit: str
) -> None:
    options = {"backend": backend, "mode": mode, "emit": emit}
    source = SUPPORT / "special_cases.py"
    elementwise, text = module_cache(
        source, "elementwise", (N_IN,), ELEMENTWISE_OPS, **options
    )
    summed, _ = module_cache(source, "summed", (N_IN,), SUMMED_OPS, **options)
    assert "import scipy.special" in text and "SciPy's special functions" in text
    for point, exact in zip(POINTS, EXACT, strict=True):
        x = np.array(point)
        with np.errstate(divide="raise", invalid="raise", over="raise"):
            check_elementwise(elementwise, x, exact)
            check_summed(summed, x, exact)


# ------------------------------------------------------------------------ C
@pytest.fixture(scope="module")
def c_built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    directory = tmp_path_factory.mktemp("special_c")
    shutil.copy(SUPPORT / "special_cases.py", directory)
    parts = ['[difgen]\noutput_dir = "out"\n']
    for backend in ("sympy", "trace"):
        for name, function, shape, ops in (
            ("elementwise", "elementwise", N_IN, ELEMENTWISE_OPS),
            ("summed", "summed", N_IN, SUMMED_OPS),
            ("c_able", "c_able", 9, ["f", "jacobian"]),
            ("c_able_values", "c_able_values", 3, ["f"]),
            ("helpers_pair", "helpers_pair", 2, ["f"]),
        ):
            quoted = ", ".join(f'"{op}"' for op in ops)
            parts.append(
                f'[[module]]\nname = "{backend}_{name}"\n'
                f'function = "special_cases.py:{function}"\n'
                f'backend = "{backend}"\nemit = "c"\noperators = [{quoted}]\n'
                f"input = {{ shape = [{shape}] }}\n"
            )
    (directory / "difgen.toml").write_text("\n".join(parts))
    return Built(directory)


@pytest.mark.parametrize("backend", ["sympy", "trace"])
def test_compiled_modules(c_built: Built, backend: str) -> None:
    """What has a C form is compiled; what calls a SciPy-only function (digamma,
    polygamma, erfcx, log_ndtr) stays in Python, and every value is right."""
    elementwise = c_built.compiled(f"{backend}_elementwise")
    summed = c_built.compiled(f"{backend}_summed")
    for point, exact in zip(POINTS, EXACT, strict=True):
        x = np.array(point)
        check_elementwise(elementwise, x, exact)
        check_summed(summed, x, exact)
    c_able = c_built.compiled(f"{backend}_c_able")
    values = c_built.compiled(f"{backend}_c_able_values")
    assert c_able.PYTHON_OPERATORS == () and values.PYTHON_OPERATORS == ()
    x = np.array([0.4, 1.2, -0.7, 0.9, 0.3, 1.3, 2.2, 0.7, 0.4])
    expected = [
        sc.erf(x[0]),
        sc.erfc(x[1]),
        sc.ndtr(x[2]),
        sc.expit(x[3]),
        sc.logit(x[4]),
        sc.xlogy(x[5], x[6]),
        sc.xlog1py(x[7], x[8]),
    ]
    close(c_able.f(x), np.array(expected), 1e-14, "C values")
    fallback = c_built.python(f"{backend}_c_able")
    close(c_able.jacobian(x), np.asarray(fallback.jacobian(x)), 1e-14, "C jacobian")
    z = np.array([2.5, -0.5, 30.0])
    expected_values = sc.gammaln(z) + sc.betaln(z, 2.0 * z) + sc.gamma(z / 4.0)
    close(values.f(z), expected_values, 1e-13, "C gammaln, gamma")
    text = (c_built.directory / "out" / f"{backend}_c_able.py").read_text()
    if backend == "sympy":  # C99's erf, erfc, difgen's expit, xlogy: no SciPy
        assert "import scipy" not in text
    else:  # the C loops' Python fallback is vector code, SciPy's ufuncs
        assert "import scipy.special" in text and "SciPy's special functions" in text


EDGE = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.5, -1.5]
EDGE += [1e300, -1e300, 1e-300, 171.7, -170.5, 800.0, -800.0]


def _ulps(a: float, b: float) -> float:
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / float(np.spacing(max(abs(a), abs(b))))


def test_c_helpers_against_python_and_scipy(c_built: Built) -> None:
    """The C runtime's special functions (straight-line C, sympy backend) on a grid
    of special values and 3,000 random pairs in [-30, 30]^2: expit, xlogy,
    xlog1py, erf and erfc make the same libm calls as their Python twins (bit for
    bit); C99's lgamma and tgamma are within 16 ulp of SciPy's gammaln and gamma
    where |value| >= 1/2 (measured: 7), with SciPy's values at every special point
    (and gammaln(5e-324) = 744.44, finite, where SciPy's overflows to inf)."""
    compiled = c_built.compiled("sympy_helpers_pair")
    python = c_built.python("sympy_helpers_pair")
    pairs = [np.array(p) for p in itertools.product(EDGE, repeat=2)]
    pairs += list(np.random.default_rng(0).uniform(-30.0, 30.0, (3000, 2)))
    with np.errstate(all="ignore"):
        for x in pairs:
            got, twin = compiled.f(x), python.f(x)
            same(got[2:], twin[2:])
            for k, fn in ((0, sc.gammaln), (1, sc.gamma)):
                expected = float(fn(x[0]))
                if abs(expected) >= 0.5 or not math.isfinite(expected):
                    assert _ulps(float(got[k]), expected) <= 16, (k, x[0], got[k])
        tiny = compiled.f(np.array([5e-324, 1.0]))[0]
    assert tiny == pytest.approx(-math.log(5e-324), rel=1e-15)


# ------------------------------------------------------------------- edges
def _scalar_modules(module_cache: Any, function: str, shape: Any) -> list[Any]:
    source = SUPPORT / "special_cases.py"
    ops = ["f", "jacobian"] if shape else ["f", "derivative", "second_derivative"]
    return [
        module_cache(source, function, shape, ops, backend=b, mode=m, emit=e)[0]
        for b, m, e in CONFIGS
    ]


def same(a: Any, b: Any) -> None:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape and np.array_equal(a, b, equal_nan=True), (a, b)


def test_gammaln_at_its_poles_and_infinities(module_cache: Any) -> None:
    """+inf at 0, -0, -1, -2 (SciPy's), +inf at +inf, -inf at -inf; the derivative
    at a pole is digamma's there (SciPy's NaN / inf), in every emission."""
    for mod in _scalar_modules(module_cache, "gammaln_only", ()):
        for x in (0.0, -0.0, -1.0, -2.0, math.inf, -math.inf, math.nan):
            with np.errstate(all="ignore"):
                same(mod.f(x), sc.gammaln(x))
        same(mod.derivative(3.5), float(mpmath.digamma(3.5)))


def test_gamma_where_math_gamma_raises(module_cache: Any) -> None:
    """SciPy's +-inf at +-0, NaN at the negative integers and -inf, inf where it
    overflows, in every emission (math.gamma raises at each)."""
    for mod in _scalar_modules(module_cache, "gamma_only", ()):
        for x in (0.0, -0.0, -1.0, -3.0, -math.inf, math.inf, 200.0, math.nan):
            with np.errstate(all="ignore"):
                same(mod.f(x), sc.gamma(x))
        # math.gamma and SciPy's differ in the last bit on some floats
        close(mod.f(-2.5), np.array(sc.gamma(-2.5)), 1e-15, "gamma(-2.5)")
        close(
            mod.derivative(3.5),
            np.array(float(mpmath.diff(mpmath.gamma, 3.5))),
            1e-13,
            "gamma'",
        )


def test_xlogy_at_zero_is_scipys_value_and_jaxs_derivative(module_cache: Any) -> None:
    """xlogy(0, y) = 0 for every y but NaN (0 * log 0 would be NaN); its derivative
    in x there is log(y), in y x / y = 0, as jax.scipy.special's."""
    source = SUPPORT / "special_cases.py"
    for fn_name, ours, theirs in (
        ("xlogy_pair", sc.xlogy, jax.scipy.special.xlogy),
        ("xlog1py_pair", sc.xlog1py, jax.scipy.special.xlog1py),
    ):
        for b, m, e in CONFIGS:
            mod, _ = module_cache(
                source, fn_name, (2,), ["f", "gradient"], backend=b, mode=m, emit=e
            )
            for pair in ([0.0, 0.0], [0.0, 2.0], [0.0, -1.0], [0.0, math.nan]):
                with np.errstate(all="ignore"):
                    same(mod.f(np.array(pair)), ours(*pair))
            for pair in ([0.0, 2.0], [0.0, 0.5], [1.5, 2.0]):
                expected = np.array(jax.grad(theirs, argnums=(0, 1))(*pair))
                close(mod.gradient(np.array(pair)), expected, 1e-15, fn_name)


def test_log_ndtr_far_in_the_tail(module_cache: Any) -> None:
    """Finite at -40 (and -1e3), the derivative phi/Phi ~ -x and the second
    derivative without cancellation (1e-13 relative): the second differentiates
    erfcx, whose derivative 2 u erfcx(u) - 2/sqrt(pi) cancels to ~u^2 ulp, so from
    u = 10 on it is its asymptotic series (both sides of the switch checked)."""
    switch = -ERFCX_SERIES * math.sqrt(2.0)
    points = (-40.0, -1e3, -300.0, -5.0, 0.0, 8.0, switch, switch * 0.99)
    for mod in _scalar_modules(module_cache, "log_ndtr_only", ()):
        with np.errstate(all="raise"):
            for x in points:
                close(mod.f(x), np.array(sc.log_ndtr(x)), 1e-15, f"log_ndtr {x}")
                with mpmath.workdps(60):
                    d1 = float(mpmath.diff(_log_ndtr, mpmath.mpf(x)))
                    d2 = float(mpmath.diff(_log_ndtr, mpmath.mpf(x), 2))
                close(mod.derivative(x), np.array(d1), 1e-13, f"log_ndtr' {x}")
                close(mod.second_derivative(x), np.array(d2), 1e-13, f"'' {x}")


def test_expit_at_800_and_logit_at_0_and_1(module_cache: Any) -> None:
    """expit(+-800) is exactly 1 and 0 with no floating-point warning (and its
    derivative 0); logit(0) = -inf, logit(1) = inf."""
    for mod in _scalar_modules(module_cache, "expit_only", ()):
        with np.errstate(all="raise"):
            assert mod.f(800.0) == 1.0 and mod.f(-800.0) == 0.0
            assert mod.derivative(800.0) == 0.0 and mod.derivative(-800.0) == 0.0
            close(mod.derivative(0.0), np.array(0.25), 1e-16, "expit'(0)")
            same(mod.second_derivative(0.0), 0.0)
    # on arrays: a scalar input's vector code divides Python floats, which raises
    # at 1.0 / 0.0 for any function (a limit of the vector emission, not logit's)
    for mod in _scalar_modules(module_cache, "logit_only", (2,)):
        with np.errstate(divide="ignore"):
            same(mod.f(np.array([0.0, 1.0])), np.array([-math.inf, math.inf]))
        close(
            np.diag(mod.jacobian(np.array([0.25, 0.5]))),
            np.array([1 / (0.25 * 0.75), 4.0]),
            1e-15,
            "logit'",
        )


# ------------------------------------------------------- logsumexp, softmax
MATRIX = np.array([[0.5, -1.0, 2.0, 0.1], [-np.inf, 0.3, -np.inf, 1.2], [-np.inf] * 4])


def _graph_value(fn: Fn, x: np.ndarray) -> Any:
    return trace(fn, [(x.shape, "float64")]).evaluate(x)[0]


@pytest.mark.parametrize(
    "fn, expected",
    [
        (cases.lse_all, lambda x: sc.logsumexp(x)),
        (cases.lse_rows, lambda x: sc.logsumexp(x, axis=1)),
        (cases.lse_columns_keep, lambda x: sc.logsumexp(x, axis=0, keepdims=True)),
        (
            cases.lse_weighted,
            lambda x: sc.logsumexp(x, axis=-1, b=np.array([0.5, 2.0, 0.0, 1.0])),
        ),
        (cases.softmax_rows, lambda x: sc.softmax(x, axis=1)),
        (cases.log_softmax_rows, lambda x: sc.log_softmax(x, axis=1)),
        (cases.softmax_all, lambda x: sc.softmax(x)),
    ],
)
def test_logsumexp_family_values(fn: Fn, expected: Fn) -> None:
    """SciPy's values, -inf entries and an all -inf row included (whose
    logsumexp is -inf and softmax NaN, as SciPy's)."""
    finite = MATRIX[:2]
    with np.errstate(all="ignore"):
        got, want = _graph_value(fn, finite), expected(finite)
        close(got, np.asarray(want, dtype=np.float64), 1e-15, fn.__name__)
        same(np.isnan(_graph_value(fn, MATRIX)), np.isnan(expected(MATRIX)))
        full = np.asarray(_graph_value(fn, MATRIX))
        ok = ~np.isnan(full)
        close(full[ok], np.asarray(expected(MATRIX))[ok], 1e-15, fn.__name__)


def test_logsumexp_of_all_minus_inf_is_minus_inf() -> None:
    with np.errstate(divide="ignore"):
        assert _graph_value(cases.lse_all, np.full(3, -np.inf)) == -np.inf
        assert _graph_value(cases.lse_all, np.array([1.0, np.inf])) == np.inf


@pytest.mark.parametrize("backend,mode,emit", CONFIGS)
def test_logsumexp_softmax_derivatives(
    module_cache: Any, backend: str, mode: str, emit: str
) -> None:
    """The jacobians against JAX's (x64) on finite values, -1e3 included: the
    gradient of logsumexp is softmax, exactly, with no cancellation of the
    maximum's tangent."""
    x = np.array([[0.5, -1.0, 2.0, 0.1], [-1e3, 0.3, 40.0, 1.2], [3.0, 3.0, 3.0, 3.0]])
    source = SUPPORT / "special_cases.py"
    options = {"backend": backend, "mode": mode, "emit": emit}
    b = np.array([0.5, 2.0, 0.0, 1.0])
    for name, reference in (
        ("lse_rows", lambda v: jax.scipy.special.logsumexp(v, axis=1)),
        ("lse_weighted", lambda v: jax.scipy.special.logsumexp(v, axis=-1, b=b)),
        ("softmax_rows", lambda v: jax.nn.softmax(v, axis=1)),
        ("log_softmax_rows", lambda v: jax.nn.log_softmax(v, axis=1)),
    ):
        mod, _ = module_cache(source, name, x.shape, ["f", "jacobian"], **options)
        close(mod.f(x), np.asarray(reference(x)), 1e-14, name)
        expected = np.asarray(jax.jacfwd(reference)(x))
        got = np.asarray(mod.jacobian(x)).reshape(expected.shape)
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-300)


# ---------------------------------------------------------------- tracing
def test_traced_second_derivatives_to_any_order() -> None:
    """Each derivative is written on primitives: third derivatives exist too."""
    g = trace(lambda x: sc.gammaln(x) + sc.log_ndtr(x) + sc.expit(x), [((), "float64")])
    third = jvp(jvp(jvp(g), (True, False)), (True, False, False))
    x = 1.3
    seeds = [np.array(1.0)] * 3
    fn = lambda t: _lgamma(t) + _log_ndtr(t) + 1 / (1 + mpmath.exp(-t))
    with mpmath.workdps(50):
        expected = float(mpmath.diff(fn, mpmath.mpf(x), 3))
    close(third.evaluate(np.array(x), *seeds)[-1], np.array(expected), 1e-12, "d3")


def test_an_unsupported_scipy_function_names_scipy() -> None:
    with pytest.raises(TraceError, match=r"scipy\.special\.beta is not"):
        trace(lambda x: sc.beta(x, x), [((3,), "float64")])
    with pytest.raises(TraceError, match=r"scipy\.special\.exp2 is not"):
        trace(lambda x: sc.exp2(x), [((3,), "float64")])  # not NumPy's exp2


def test_polygamma_needs_a_constant_order() -> None:
    with pytest.raises(TraceError, match="order n must be one constant"):
        trace(lambda x: sc.polygamma(x[0], x), [((3,), "float64")])


def test_scipy_is_untouched_after_tracing() -> None:
    before = (sc.logsumexp, sc.softmax, sc.log_softmax, sc.polygamma)
    trace(cases.lse_all, [((3,), "float64")])
    assert (sc.logsumexp, sc.softmax, sc.log_softmax, sc.polygamma) == before
    assert cases.logsumexp is before[0]
    same(sc.logsumexp(np.array([0.0, 0.0])), math.log(2.0))
