"""Issue 20, item 6: silent wrong numbers, found by a round of hostile use.

Each case is a derivative that used to come out as a plausible float that is not
the function's: checked against mpmath (40 digits) to a few ulps, on both backends,
both modes and every emission (scalar, vector, compiled C).

- ``tanh'``, written ``1 - tanh(x)**2``, was 0 from |x| = 19.1 on (tanh'(20) is
  1.7e-17), and the SymPy backend's expansion rewrote ``4 e / (1 + e)**2``
  (e = exp(-2|x|)) into ``4 / (exp(2|x|) + 2 + exp(-2|x|))``, which overflows.
- ``hypot``'s derivative ``a / h`` was inf at subnormal inputs (3e-320, 4e-320,
  where it is 0.6 and 0.8): the scalar and C printers write ``a * (1 / h)``.
- ``np.cbrt`` in the sympy backend and the scalar and C emissions was
  ``sign(x) * |x| ** (1/3)``, a power: 61 ulps from NumPy at 1e308 (the README
  promises 4). It is C's ``cbrt`` and Python's ``math.cbrt`` now.
- SymPy's derivative of ``sign(x) * x``, ``2 x DiracDelta(x) + sign(x)``, was
  printed ``2 x * 0.0 + sign(x)``: NaN from x = 9e307 on, where 2 x overflows.
- An int64 index context out of bounds (5, -6, 2**62 for a length of 4) made the
  hessian and hvp of ``np.sum(x[idx])`` zeros where the function raises
  IndexError: their graphs never read ``idx``. Every operator (and points
  variant) now checks the indices the function reads, at entry, with NumPy's
  message naming the argument; valid indices (-4 included) keep their exact
  results. Not compared with mpmath: the functions are linear in ``x``.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

import mpmath as mp
import numpy as np
import pytest

import difgen
import wrong_numbers_functions as wf
from compiled import BuiltConfig
from conftest import SUPPORT
from difgen.errors import ConfigError
from difgen.operators import TABLE

CONFIGS = [
    ("sympy", "auto", "auto"),
    ("trace", "forward", "vector"),
    ("trace", "reverse", "vector"),
    ("trace", "forward", "scalar"),
    ("trace", "reverse", "scalar"),
    ("trace", "forward", "c"),
    ("trace", "reverse", "c"),
]

ULPS = 4
"""The README's promise for the elementary functions: within 4 ulps of the exact
value (relative 4 * 2**-52)."""

nan, inf = np.nan, np.inf
ELEMENTWISE: dict[str, np.ndarray] = {
    "tanh_sum": np.array(
        [20.0, -20.0, 19.5, 0.3, -0.49, 0.5, 0.51, 1e-200, -5e-324, 400.0, 720.0]
    ),
    "cbrt_sum": np.array([1e308, -1e308, 27.0, -8.0, 1e-300, 0.3, 5.0, -1e-5]),
    "sign_times": np.array([9e307, -9e307, 1.7e308, -1.7e308, 2.0, -3.0, 0.0]),
}
NON_FINITE: dict[str, tuple[np.ndarray, np.ndarray]] = {
    # the first points replaced, and the limits of the first derivative there
    "tanh_sum": (np.array([inf, -inf]), np.array([0.0, 0.0])),
    "cbrt_sum": (np.array([inf, -inf]), np.array([0.0, 0.0])),
    "sign_times": (np.array([inf, -inf]), np.array([1.0, -1.0])),
}
PAIRS: dict[str, tuple[list[tuple[float, float]], list[tuple[float, float]]]] = {
    # gradient points (subnormal included), hessian points
    "hypot_pair": (
        [
            (3e-320, 4e-320),
            (5e-324, 0.0),
            (-5e-324, 5e-324),
            (1e-310, 2e-310),
            (3e-160, 4e-160),
            (3.0, 4.0),
            (1e300, -1e300),
            (0.3, 1e-200),
        ],
        [(3.0, 4.0), (1e150, -2e150), (0.3, -1.7), (1e-100, 2e-100)],
    ),
}
VALUES: dict[str, np.ndarray] = {
    # elementwise functions whose value is checked against NumPy's, in ulps
    "cbrt_values": np.array(
        [1e308, -1e308, 1.7e308, 27.0, -8.0, 1e-310, -5e-324, 0.3, 2.0, 1e-300]
    ),
}
OPERATORS = ["gradient", "hessian", "hvp"]


def _name(function: str, backend: str, mode: str, emit: str) -> str:
    return f"{function}_{backend}_{mode}_{emit}"


class Modules(BuiltConfig):
    """Every (function, configuration) module, built in one build (C compiled)."""

    def __init__(self, directory: Path) -> None:
        shutil.copy(SUPPORT / "wrong_numbers_functions.py", directory)
        parts = ['[difgen]\noutput_dir = "out"\n']
        tables = [(name, p.size, OPERATORS) for name, p in ELEMENTWISE.items()]
        tables += [(name, 2, OPERATORS) for name in PAIRS]
        tables += [(name, p.size, ["jacobian"]) for name, p in VALUES.items()]
        for function, size, operators in tables:
            for backend, mode, emit in CONFIGS:
                parts.append(
                    "[[module]]\n"
                    f'name = "{_name(function, backend, mode, emit)}"\n'
                    f'function = "wrong_numbers_functions.py:{function}"\n'
                    f"operators = {operators!r}\n".replace("'", '"')
                    + f"input = {{ shape = [{size}] }}\n"
                    f'backend = "{backend}"\nmode = "{mode}"\nemit = "{emit}"\n'
                )
        super().__init__(directory, "\n".join(parts))


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> Modules:
    return Modules(tmp_path_factory.mktemp("wrong_numbers"))


@functools.cache
def exact(function: str, order: int) -> np.ndarray:
    """The order-th derivative of the elementwise part at each point, by mpmath."""
    with mp.workdps(40):
        return np.array(
            [
                float(wf.MP_DIFF[function](mp.mpf(float(v)), order))
                for v in ELEMENTWISE[function]
            ]
        )


ULPS_SECOND = 2 * ULPS
"""Second derivatives compose a few more rounded operations (cbrt's
-2/9 x**(-5/3) is 1/(3 y**2)'s derivative: 5 ulps measured at x = -1e-5)."""


def assert_ulps(
    actual: object, expected: np.ndarray, what: str, ulps: int = ULPS
) -> None:
    """Within ``ulps`` ulps of the exact value, NaN where it is NaN, exact zeros."""
    actual = np.asarray(actual, dtype=float)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected), err_msg=what)
    np.testing.assert_allclose(
        actual, expected, rtol=ulps * 2.0**-52, atol=0, err_msg=what
    )


CASES = [
    pytest.param(function, *config, id=_name(function, *config))
    for function in ELEMENTWISE
    for config in CONFIGS
]


@pytest.mark.parametrize(("function", "backend", "mode", "emit"), CASES)
def test_elementwise_derivatives_are_exact(
    modules: Modules, function: str, backend: str, mode: str, emit: str
) -> None:
    """gradient, hessian (diagonal) and hvp of a sum of an elementwise function are
    its first and second derivatives to a few ulps, at every point, the far tails
    included; NaN and inf inputs give NumPy's NaN and the exact limit."""
    mod = modules.get(_name(function, backend, mode, emit))
    x = ELEMENTWISE[function]
    first, second = exact(function, 1), exact(function, 2)
    v = np.linspace(-1.0, 1.5, x.size)
    with np.errstate(all="ignore"):  # cbrt'' overflows at 1e-300, as NumPy would
        gradient, hessian, hvp = (
            mod.gradient(x.copy()),
            mod.hessian(x.copy()),
            mod.hvp(x.copy(), v),
        )
    assert_ulps(gradient, first, "gradient")
    assert_ulps(hessian, np.diag(second), "hessian", ULPS_SECOND)
    assert_ulps(hvp, second * v, "hvp", ULPS_SECOND)


@pytest.mark.parametrize(("function", "backend", "mode", "emit"), CASES)
def test_non_finite_inputs(
    modules: Modules, function: str, backend: str, mode: str, emit: str
) -> None:
    """+-inf gives the derivative's limit, and the finite points keep their exact
    derivative beside them; a NaN point gives NaN in its own entry (forward mode
    spreads it to the others too, as the value of the sum is NaN)."""
    mod = modules.get(_name(function, backend, mode, emit))
    x = ELEMENTWISE[function].copy()
    replaced, limits = NON_FINITE[function]
    x[: replaced.size] = replaced
    expected = exact(function, 1).copy()
    expected[: replaced.size] = limits
    with np.errstate(all="ignore"):
        assert_ulps(mod.gradient(x), expected, "gradient")
        x[0] = nan
        assert np.isnan(mod.gradient(x)[0])


def _mp_floats(values: object) -> np.ndarray:
    return np.array(values, dtype=object).astype(float)


PAIR_CASES = [
    pytest.param(function, *config, id=_name(function, *config))
    for function in PAIRS
    for config in CONFIGS
]


@pytest.mark.parametrize(("function", "backend", "mode", "emit"), PAIR_CASES)
def test_pair_derivatives_are_exact(
    modules: Modules, function: str, backend: str, mode: str, emit: str
) -> None:
    """The gradient at subnormal, tiny, ordinary and huge points to a few ulps of
    mpmath, and the hessian where it is a normal float to a few ulps of 1 / h."""
    mod = modules.get(_name(function, backend, mode, emit))
    gradient_points, hessian_points = PAIRS[function]
    gradient, hessian = wf.MP_PAIR[function]
    with mp.workdps(40):
        for a, b in gradient_points:
            want = _mp_floats(gradient(mp.mpf(a), mp.mpf(b)))
            assert_ulps(mod.gradient(np.array([a, b])), want, f"gradient at {a, b}")
        for a, b in hessian_points:
            # to a few ulps of 1 / h, the size of its terms: a**2 / h**3 is
            # computed as 1 / h - b**2 / h**3, which cancels where |b| >> |a|
            want = _mp_floats(hessian(mp.mpf(a), mp.mpf(b)))
            scale = ULPS * 2.0**-52 / float(mp.hypot(a, b))
            got = mod.hessian(np.array([a, b]))
            np.testing.assert_allclose(got, want, rtol=0, atol=scale)


def _ulps(got: np.ndarray, expected: np.ndarray) -> float:
    """The largest distance in units of the last place of NumPy's value."""
    spacing = np.spacing(np.abs(expected))
    return float(np.max(np.abs(got - expected) / spacing))


VALUE_CASES = [
    pytest.param(function, *config, id=_name(function, *config))
    for function in VALUES
    for config in CONFIGS
]


@pytest.mark.parametrize(("function", "backend", "mode", "emit"), VALUE_CASES)
def test_values_within_the_promised_ulps(
    modules: Modules, function: str, backend: str, mode: str, emit: str
) -> None:
    """f is within the README's 4 ulps of NumPy's own value at every point (the
    largest floats and subnormals included), and its non-finite values are
    NumPy's exactly."""
    mod = modules.get(_name(function, backend, mode, emit))
    x = VALUES[function]
    expected = getattr(wf, function)(x.copy())
    assert _ulps(np.asarray(mod.f(x.copy())), expected) <= ULPS
    special = np.array([nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 8.0, -8.0, 0.0])
    with np.errstate(all="ignore"):
        got = np.asarray(mod.f(special.copy()))
    want = getattr(wf, function)(special.copy())
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# ------------------------------------------------------------ run-time indices
INDEX_CONFIGS = [
    # the sympy backend and emit = "scalar" refuse int64 contexts (see below)
    (mode, emit)
    for mode in ("forward", "reverse")
    for emit in ("vector", "c", "auto")
]
INDEX: dict[str, tuple[tuple[int, ...], list[Any], tuple[int, ...]]] = {
    # x's shape, valid indices (negative ones included), where a bad index goes
    "index_sum": ((4,), [0, -4, 3], (1,)),
    "index_weighted": ((4,), [0, -4, 3], (1,)),
    "index_dot": ((4,), [0, -4, 3], (1,)),
    "index_take": ((4,), [0, -4, 3], (1,)),
    "index_scatter": ((4,), [3, -4, 0], (1,)),
    "index_array_2d": ((4,), [[0, -4, 3], [1, 2, -1]], (1, 1)),
    "index_fancy_2d": ((4,), [[0, 1], [-2, -1], [1, 0]], (1, 1)),
    "index_constant": ((4,), [0, -4, 3], (1,)),
    "index_scalar": ((), [0, -4, 3], (1,)),
}
BAD_INDICES = {"5": 5, "-6": -6, "2**62": 2**62}


def _index_name(function: str, mode: str, emit: str) -> str:
    return f"{function}_{mode}_{emit}"


def _index_operators(function: str) -> list[str]:
    """Every operator that applies: all of them for a scalar x."""
    scalar = INDEX[function][0] == ()
    return [
        op.name
        for op in TABLE
        if not op.always_emitted and (scalar or not op.scalar_input)
    ]


def _index_module(function: str, mode: str, emit: str, backend: str = "trace") -> str:
    shape, valid, _ = INDEX[function]
    return (
        "[[module]]\n"
        f'name = "{_index_name(function, mode, emit)}"\n'
        f'function = "wrong_numbers_functions.py:{function}"\n'
        f"operators = {_index_operators(function)!r}\n".replace("'", '"')
        + f"input = {{ shape = {list(shape)} }}\n"
        f'contexts = [{{ name = "idx", shape = {list(np.shape(valid))}, '
        'dtype = "int64" }]\n'
        f'backend = "{backend}"\nmode = "{mode}"\nemit = "{emit}"\npoints = true\n'
    )


class IndexModules(BuiltConfig):
    """Every index function in every configuration, with its points variants."""

    def __init__(self, directory: Path) -> None:
        shutil.copy(SUPPORT / "wrong_numbers_functions.py", directory)
        parts = ['[difgen]\noutput_dir = "out"\n']
        parts += [
            _index_module(function, mode, emit)
            for function in INDEX
            for mode, emit in INDEX_CONFIGS
        ]
        super().__init__(directory, "\n".join(parts))


@pytest.fixture(scope="module")
def index_modules(tmp_path_factory: pytest.TempPathFactory) -> IndexModules:
    return IndexModules(tmp_path_factory.mktemp("wrong_numbers_index"))


def _seeds(name: str, shape: tuple[int, ...]) -> list[np.ndarray]:
    """Seeds of an operator at one point: dx and v of x's shape, dy of f's (a
    scalar)."""
    seeds = {"dx": shape, "v": shape, "dy": ()}
    operator = next(op for op in TABLE if op.name == name)
    return [
        np.linspace(0.5, 1.5, int(np.prod(seeds[s]))).reshape(seeds[s])
        for s in operator.seeds
    ]


def _calls(
    mod: Any, function: str, idx: np.ndarray
) -> list[tuple[str, Any, list[Any]]]:
    """(name, operator, arguments) of f and every operator at x = (0.3, -1.2,
    2.5, 0.7) (its first element for a scalar x), and of each one's points
    variant at x, 2 x and x - 1."""
    shape = INDEX[function][0]
    x = np.array([0.3, -1.2, 2.5, 0.7])[: int(np.prod(shape))].reshape(shape)
    calls = []
    for name in ["f", *_index_operators(function)]:
        seeds = _seeds(name, shape) if name != "f" else []
        calls.append((name, getattr(mod, name), [x.copy(), *seeds, idx]))
        points = [np.stack([a, 2.0 * a, a - 1.0]) for a in [x, *seeds]]
        calls.append((f"{name}_points", getattr(mod, f"{name}_points"), [*points, idx]))
    return calls


def _bad(function: str, value: int) -> np.ndarray:
    _, valid, where = INDEX[function]
    idx = np.array(valid, dtype=np.int64)
    idx[where] = value
    return idx


INDEX_CASES = [
    pytest.param(
        function, mode, emit, bad, id=f"{_index_name(function, mode, emit)}_{bad}"
    )
    for function in INDEX
    for mode, emit in INDEX_CONFIGS
    for bad in BAD_INDICES
]


@pytest.mark.parametrize(("function", "mode", "emit", "bad"), INDEX_CASES)
def test_index_out_of_bounds_raises_in_every_operator(
    index_modules: IndexModules, function: str, mode: str, emit: str, bad: str
) -> None:
    """An index out of bounds raises IndexError in f, every operator and every
    points variant, as the function does under NumPy, with NumPy's message naming
    the argument: also in the second-order operators, whose graphs never read
    the index (they returned zeros), and for an index only a constant is read
    through."""
    mod = index_modules.get(_index_name(function, mode, emit))
    idx = _bad(function, BAD_INDICES[bad])
    x = np.array([0.3, -1.2, 2.5, 0.7])[: int(np.prod(INDEX[function][0]))]
    with pytest.raises(IndexError) as numpy_error:
        getattr(wf, function)(x.reshape(INDEX[function][0]), idx)
    message = f"idx: {numpy_error.value}"
    outcomes = {}
    for name, operator, args in _calls(mod, function, idx):
        try:
            outcomes[name] = f"returned {operator(*args)!r}"
        except IndexError as error:
            outcomes[name] = str(error)
    assert outcomes == dict.fromkeys(outcomes, message)
    if emit == "c":
        # an operator that gathers with idx as the module's check does raises
        # from its C loops; one that does not (the second-order ones) stays in
        # Python, whose check runs at every call
        compiled = set(mod.__all__) - set(mod.PYTHON_OPERATORS)
        assert not compiled & {"hessian", "hvp", "second_derivative"}, compiled


def _expected(function: str, kind: str, args: list[Any]) -> Any:
    """A result kind at one point, from the NumPy function: f is linear in x, so
    its gradient is exact by central differences of step 1, and its second
    derivatives are zero."""
    fn = getattr(wf, function)
    x, idx = args[0], args[-1]
    shape = x.shape
    basis = np.eye(x.size).reshape((x.size, *shape))
    gradient = np.array(
        [(fn(x + e, idx) - fn(x - e, idx)) / 2.0 for e in basis]
    ).reshape(shape)
    results = {
        "value": lambda: fn(x.copy(), idx),
        "jvp": lambda: np.sum(gradient * args[1]),  # args[1] is dx
        "vjp": lambda: args[1] * gradient,  # dy, a scalar
        "derivative": lambda: gradient,
        "gradient": lambda: gradient,
        "jacobian": lambda: gradient,  # f is a scalar: y.shape + x.shape
        "second_derivative": lambda: np.zeros(shape),
        "hvp": lambda: np.zeros(shape),
        "hessian": lambda: np.zeros(shape + shape),
    }
    return results[kind]()


VALID_CASES = [
    pytest.param(function, mode, emit, id=_index_name(function, mode, emit))
    for function in INDEX
    for mode, emit in INDEX_CONFIGS
]


@pytest.mark.parametrize(("function", "mode", "emit"), VALID_CASES)
def test_valid_indices_keep_exact_results(
    index_modules: IndexModules, function: str, mode: str, emit: str
) -> None:
    """Valid indices (negative ones and repeats included) pass the checks: f and
    every operator give the NumPy function's value, its gradient and zero second
    derivatives, at one point and at each of three points."""
    mod = index_modules.get(_index_name(function, mode, emit))
    idx = np.array(INDEX[function][1], dtype=np.int64)
    for name, operator, args in _calls(mod, function, idx):
        base = name.removesuffix("_points")
        kinds = next(op for op in TABLE if op.name == base).results
        got = operator(*args)
        got = got if len(kinds) > 1 else (got,)
        if base == name:
            want = [_expected(function, kind, args) for kind in kinds]
        else:
            point_args = [[a[k] for a in args[:-1]] + [idx] for k in range(3)]
            want = [
                np.stack([_expected(function, kind, p) for p in point_args])
                for kind in kinds
            ]
        for kind, g, w in zip(kinds, got, want):
            np.testing.assert_allclose(
                g, w, rtol=1e-13, atol=1e-13, err_msg=f"{name} {kind}"
            )


REFUSAL_CASES = [
    pytest.param(function, backend, emit, id=f"{function}_{backend}_{emit}")
    for function in INDEX
    for backend, emit in (("sympy", "auto"), ("trace", "scalar"))
]


@pytest.mark.parametrize(("function", "backend", "emit"), REFUSAL_CASES)
def test_index_contexts_refused_where_no_check_can_run(
    tmp_path: Path, function: str, backend: str, emit: str
) -> None:
    """The sympy backend and emit = "scalar" write straight-line float code,
    which cannot index at run time: they refuse an int64 context at its config
    line, so neither can return a number where the function raises."""
    shutil.copy(SUPPORT / "wrong_numbers_functions.py", tmp_path)
    config = tmp_path / "difgen.toml"
    config.write_text(
        '[difgen]\noutput_dir = "out"\n\n'
        + _index_module(function, "auto", emit, backend)
    )
    with pytest.raises(ConfigError, match=r"int64|run-time") as error:
        difgen.build(config)
    assert "difgen.toml:" in str(error.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
