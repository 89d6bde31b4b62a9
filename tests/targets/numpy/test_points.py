"""Points variants (``points = true``): every operator at k points in one call.

Each ``<op>_points`` must equal the loop of the one-point operator over the points
(stacked), on both backends, for scalar, vector and matrix inputs, with shared and
per-point contexts, for k = 0, 1 and 5; its argument checks take any number of
points and refuse everything else; and it runs blockwise over a Dask array on a
``dask.distributed`` cluster.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import scenarios
from conftest import SUPPORT, TESTS, build_and_import
from difgen.errors import ConfigError
from difgen.operators import OPERATORS, seed_shape
from scenario_cases import operators_for

POINTS = (0, 1, 5)

# (scenario, backend, emit, per-point flags of its contexts)
CASES = [
    ("scalar_scalar", "sympy", "auto", ()),
    ("scalar_scalar", "trace", "auto", ()),
    ("scalar_matrix", "trace", "auto", ()),
    ("vector_scalar", "sympy", "auto", ()),
    ("vector_scalar", "trace", "vector", ()),
    ("vector_vector", "trace", "auto", ()),
    ("matrix_scalar", "trace", "auto", ()),
    ("matrix_matrix", "sympy", "auto", ()),
    ("matrix_matrix", "trace", "vector", ()),
    ("vector_scalar_ctx", "sympy", "auto", (False,)),
    ("vector_scalar_ctx", "trace", "auto", (True,)),
    ("vector_vector_ctx", "sympy", "auto", (True, False)),
    ("vector_vector_ctx", "trace", "auto", (False, True)),
    ("vector_scalar_kinks", "trace", "auto", ()),
]


def _value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value).lower()


def write_points_config(
    directory: Path,
    function: str,
    input_shape: Sequence[int],
    operators: Sequence[str],
    contexts: Sequence[tuple[Sequence[int], bool]] = (),
    source: Path = SUPPORT / "scenarios.py",
    **options: Any,
) -> Path:
    """A one-module config with ``points = true``; contexts are (shape, per_point)."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, directory / source.name)
    ctx = ", ".join(
        f'{{ name = "c{i}", shape = {list(shape)}'
        + (", per_point = true" if per_point else "")
        + " }"
        for i, (shape, per_point) in enumerate(contexts)
    )
    lines = [
        "[difgen]",
        'output_dir = "out"',
        "[[module]]",
        'name = "mod"',
        f'function = "{source.name}:{function}"',
        f"operators = {json.dumps(list(operators))}",
        f"input = {{ shape = {list(input_shape)} }}",
        "points = true",
    ]
    if contexts:
        lines.append(f"contexts = [{ctx}]")
    lines += [f"{key} = {_value(v)}" for key, v in options.items()]
    path = directory / "difgen.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Each case's module, built once."""
    cache: dict[Any, tuple[ModuleType, str]] = {}

    def get(name: str, backend: str, emit: str, flags: tuple[bool, ...]) -> Any:
        key = (name, backend, emit, flags)
        if key not in cache:
            xs, ctx_shapes = scenarios.SCENARIOS[name]
            cfg = write_points_config(
                tmp_path_factory.mktemp(name),
                name,
                xs,
                operators_for(name),
                list(zip(ctx_shapes, flags)),
                backend=backend,
                emit=emit,
            )
            cache[key] = build_and_import(cfg)
        return cache[key]

    return get


def _one(value: Any) -> Any:
    """A per-point argument as the one-point operator takes it."""
    return float(value) if np.ndim(value) == 0 else value


def _stack(results: list[Any], k: int, like: Any) -> np.ndarray:
    """One-point results stacked along a new leading axis (shape of ``like``)."""
    return np.reshape(np.array(results, dtype=float), (k, *np.shape(like)))


def _inputs(
    name: str, op: str, k: int, flags: tuple[bool, ...], ys: tuple[int, ...], seed: int
) -> tuple[list[Any], list[list[Any]]]:
    """(arguments of the points variant, arguments of the one-point operator per
    point): x, seeds, contexts in order."""
    xs, ctx_shapes = scenarios.SCENARIOS[name]
    rng = np.random.default_rng(seed)
    args: list[Any] = [rng.uniform(0.2, 1.0, (k, *xs))]
    per_point = [True]
    for s in OPERATORS[op].seeds:
        args.append(rng.normal(size=(k, *seed_shape(s, xs, ys, 1))))
        per_point.append(True)
    for shape, flag in zip(ctx_shapes, flags):
        lead = (k,) if flag else ()
        value = rng.uniform(-1.0, 1.0, (*lead, *shape))
        args.append(value if lead or shape else float(value))
        per_point.append(flag)
    singles = [
        [_one(a[i]) if p else a for a, p in zip(args, per_point)] for i in range(k)
    ]
    return args, singles


def _compare(got: Any, expected: np.ndarray) -> None:
    assert isinstance(got, np.ndarray), type(got)
    assert got.dtype == np.float64 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,backend,emit,flags", CASES)
def test_points_equal_the_loop(
    built: Any, name: str, backend: str, emit: str, flags: tuple[bool, ...]
) -> None:
    mod, _ = built(name, backend, emit, flags)
    ys = tuple(mod.OUTPUT_SHAPE)
    for op in ("f", *operators_for(name)):
        single, points = getattr(mod, op), getattr(mod, f"{op}_points")
        nres = len(OPERATORS[op].results)
        # the shapes of the one-point results, for k = 0
        _, probe = _inputs(name, op, 1, flags, ys, 0)
        like = single(*probe[0])
        like = like if nres > 1 else (like,)
        for k in POINTS:
            args, singles = _inputs(name, op, k, flags, ys, k + 7)
            got = points(*args)
            got = got if nres > 1 else (got,)
            assert isinstance(got, tuple) and len(got) == nres
            loop = [single(*a) for a in singles]
            loop = [r if nres > 1 else (r,) for r in loop]
            for j in range(nres):
                expected = _stack([r[j] for r in loop], k, like[j])
                _compare(got[j], expected)


def test_points_bitwise_for_elementwise_vector_code(tmp_path: Path) -> None:
    """Elementwise code batched over points computes each element by the same
    NumPy operations as the one-point vector code: equal bit for bit."""
    source = tmp_path / "fns.py"
    source.write_text(
        "import numpy as np\n\n\ndef f(x, c):\n"
        "    return np.sin(x) * np.exp(c * x) + x**3 / (1.0 + x * x)\n"
    )
    cfg = write_points_config(
        tmp_path / "build",
        "f",
        [6],
        ["pushforward", "pullback", "value_and_pullback"],
        [((6,), True)],
        source=source,
        backend="trace",
        emit="vector",
    )
    mod, _ = build_and_import(cfg)
    rng = np.random.default_rng(3)
    X, D, C = (rng.normal(size=(9, 6)) for _ in range(3))
    assert np.array_equal(
        mod.f_points(X, C), np.array([mod.f(x, c) for x, c in zip(X, C)])
    )
    assert np.array_equal(
        mod.pushforward_points(X, D, C),
        np.array([mod.pushforward(x, d, c) for x, d, c in zip(X, D, C)]),
    )
    value, vjp = mod.value_and_pullback_points(X, D, C)
    loop = [mod.value_and_pullback(x, d, c) for x, d, c in zip(X, D, C)]
    assert np.array_equal(value, np.array([v for v, _ in loop]))
    assert np.array_equal(vjp, np.array([g for _, g in loop]))
    # NumPy's NaN and inf, point by point, as the one-point operator has them
    X[1, :3], X[4, 2:5], C[6, 1] = np.inf, np.nan, -np.inf
    with np.errstate(all="ignore"):
        value, vjp = mod.value_and_pullback_points(X, D, C)
        loop = [mod.value_and_pullback(x, d, c) for x, d, c in zip(X, D, C)]
    assert np.isnan(value).any() and np.isnan(vjp).any()
    assert np.array_equal(value, np.array([v for v, _ in loop]), equal_nan=True)
    assert np.array_equal(vjp, np.array([g for _, g in loop]), equal_nan=True)


def test_points_argument_checks(built: Any) -> None:
    mod, _ = built("vector_vector_ctx", "trace", "auto", (False, True))
    x, dy = np.ones((4, 3)), np.ones((4, 3))
    M, s = np.eye(3), np.ones(4)
    assert mod.pullback_points(x, dy, M, s).shape == (4, 3)
    # lists and integer arrays are converted, as for one point
    listed = mod.pullback_points(x.tolist(), dy.astype(int), M.tolist(), [1, 1, 1, 1])
    assert np.array_equal(listed, mod.pullback_points(x, dy, M, s))
    with pytest.raises(ValueError, match=r"x: expected shape \(k, 3\) for k points"):
        mod.pullback_points(np.ones(3), np.ones((1, 3)), M, np.ones(1))
    with pytest.raises(ValueError, match=r"x: expected shape \(k, 3\) for k points"):
        mod.pullback_points(np.ones((4, 2)), dy, M, s)
    with pytest.raises(ValueError, match=r"dy: expected shape \(4, 3\)"):
        mod.pullback_points(x, np.ones((5, 3)), M, s)
    with pytest.raises(ValueError, match=r"c1: expected shape \(4,\)"):
        mod.pullback_points(x, dy, M, np.ones(3))
    with pytest.raises(ValueError, match=r"c0: expected shape \(3, 3\)"):
        mod.pullback_points(x, dy, np.ones((4, 3, 3)), s)
    with pytest.raises(TypeError, match="x: expected real numbers"):
        mod.pullback_points(x + 1j, dy, M, s)
    with pytest.raises(TypeError, match="dy: expected real numbers"):
        mod.pullback_points(x, dy.astype(complex), M, s)
    empty = mod.f_points(np.ones((0, 3)), M, np.ones(0))
    assert empty.shape == (0, 3) and empty.dtype == np.float64


def test_points_scalar_input_and_scalar_per_point_context(built: Any) -> None:
    """Scalar inputs take a 1-D array of points; a scalar shared context a float."""
    mod, _ = built("scalar_scalar", "sympy", "auto", ())
    with pytest.raises(ValueError, match=r"x: expected shape \(k,\) for k points"):
        mod.derivative_points(np.ones((2, 1)))
    with pytest.raises(ValueError, match=r"x: expected shape \(k,\) for k points"):
        mod.derivative_points(1.0)
    assert mod.derivative_points([0.5, 0.7]).shape == (2,)


def test_points_module_is_typed_and_names_its_variants(built: Any) -> None:
    mod, text = built("vector_scalar", "sympy", "auto", ())
    names = {n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}
    for op in ("f", *operators_for("vector_scalar")):
        assert f"{op}_points" in names and f"{op}_points" in mod.__all__
    assert "import dask" not in text and "dask" not in text


def test_points_config_errors(tmp_path: Path) -> None:
    def load(extra: str, contexts: str = "") -> None:
        from difgen.config import load_config

        path = tmp_path / "difgen.toml"
        path.write_text(
            '[[module]]\nname = "m"\nfunction = "f.py:f"\n'
            'operators = ["jacobian"]\ninput = { shape = [3] }\n' + contexts + extra
        )
        load_config(path)

    with pytest.raises(ConfigError, match="'points' must be true or false"):
        load('points = "yes"\n')
    with pytest.raises(ConfigError, match="cannot be combined with sparse = true"):
        load("points = true\nsparse = true\n")
    with pytest.raises(ConfigError, match=r":6: .*add points = true to the module"):
        load("", 'contexts = [{ name = "p", shape = [3], per_point = true }]\n')
    # the names the points variants use cannot name a context
    for name in ("npoints", "gradient_points", "f_points", "_points_layout"):
        with pytest.raises(ConfigError, match=r"uses itself"):
            load(
                "points = true\n", f'contexts = [{{ name = "{name}", shape = [3] }}]\n'
            )


def test_points_change_the_source_hash() -> None:
    """Turning points on changes SOURCE_HASH (so ``difgen check`` sees it);
    a module that does not use it keeps the hash it had before the key existed."""
    from difgen.config import ArraySpec, ContextSpec, ModuleSpec
    from difgen.hashing import spec_fingerprint

    plain = ModuleSpec("m", "f:f", "trace", "auto", (), ArraySpec((3,)))
    assert "points" not in spec_fingerprint(plain)
    on = ModuleSpec("m", "f:f", "trace", "auto", (), ArraySpec((3,)), points=True)
    assert spec_fingerprint(on) != spec_fingerprint(plain)
    ctx = (ContextSpec("p", (3,)),)
    shared = ModuleSpec("m", "f:f", "trace", "auto", (), ArraySpec((3,)), ctx)
    per = ModuleSpec(
        "m",
        "f:f",
        "trace",
        "auto",
        (),
        ArraySpec((3,)),
        (ContextSpec("p", (3,), per_point=True),),
        points=True,
    )
    assert "per_point" not in spec_fingerprint(shared)
    assert spec_fingerprint(per) != spec_fingerprint(
        ModuleSpec("m", "f:f", "trace", "auto", (), ArraySpec((3,)), ctx, points=True)
    )


def test_points_over_a_dask_array(tmp_path: Path) -> None:
    """A points variant evaluates a chunked Dask array block by block on a
    ``dask.distributed`` cluster (per-point context chunked alike, shared one
    passed whole), and equals the one call on the whole NumPy array."""
    import dask.array as da
    from dask.distributed import Client, LocalCluster

    cfg = write_points_config(
        tmp_path,
        "vector_vector_ctx",
        [3],
        ["pullback"],
        [((3, 3), False), ((), True)],
        backend="trace",
    )
    mod, text = build_and_import(cfg)
    assert "dask" not in text
    rng = np.random.default_rng(5)
    X, DY, S = rng.normal(size=(30, 3)), rng.normal(size=(30, 3)), rng.normal(size=30)
    M = rng.normal(size=(3, 3))
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster),
    ):
        x, dy = da.from_array(X, chunks=(7, 3)), da.from_array(DY, chunks=(7, 3))
        s = da.from_array(S, chunks=7)
        # blockwise, not map_blocks: map_blocks aligns a 1-D argument with the
        # last axis (NumPy broadcasting); index "i" is the points axis everywhere
        vjp = da.blockwise(
            mod.pullback_points, "ij", x, "ij", dy, "ij", M, None, s, "i", dtype=float
        ).compute()
        value = da.blockwise(
            mod.f_points, "ij", x, "ij", M, None, s, "i", dtype=float
        ).compute()
        empty = da.blockwise(
            mod.f_points, "ij", x[:0], "ij", M, None, s[:0], "i", dtype=float
        ).compute()
    # blocks of 7 and 2 points against one call of 30: each block may take the
    # other memory layout (see _points_layout), which BLAS may round differently
    whole = mod.pullback_points(X, DY, M, S)
    np.testing.assert_allclose(vjp, whole, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(value, mod.f_points(X, M, S), rtol=1e-13, atol=1e-15)
    loop = np.array([mod.pullback(*a, M, float(c)) for *a, c in zip(X, DY, S)])
    np.testing.assert_allclose(vjp, loop, rtol=1e-12, atol=1e-14)
    assert empty.shape == (0, 3)


def test_checked_in_example_is_a_parameter_sweep() -> None:
    """generated/tanh_layer_points.py: the gradient and hvp over inputs and
    parameters at once equal the loop over the one-point example (sympy
    backend there)."""
    from conftest import import_file

    root = TESTS.parent / "generated"
    sweep = import_file(root / "tanh_layer_points.py")
    one = import_file(root / "tanh_layer.py")
    rng = np.random.default_rng(11)
    W, A, V = rng.normal(size=(40, 3, 4)), rng.normal(size=(40, 4)), None
    V = rng.normal(size=(40, 3, 4))
    loop = np.array([one.gradient(w, a) for w, a in zip(W, A)])
    _compare(sweep.gradient_points(W, A), loop)
    value, gradient = sweep.value_and_gradient_points(W, A)
    _compare(gradient, loop)
    _compare(value, np.array([sweep.f(w, a) for w, a in zip(W, A)]))
    hvp = np.array(
        [one.hessian(w, a).reshape(12, 12) @ v.ravel() for w, a, v in zip(W, A, V)]
    )
    np.testing.assert_allclose(
        sweep.hvp_points(W, V, A), hvp.reshape(40, 3, 4), rtol=1e-10, atol=1e-12
    )


def test_points_with_batched_seeds(tmp_path: Path) -> None:
    """batch = 2: each point takes its own batch of seeds, (k, 2, *shape)."""
    cfg = write_points_config(
        tmp_path,
        "vector_vector",
        [3],
        ["pushforward", "pullback"],
        backend="trace",
        batch=2,
    )
    mod, _ = build_and_import(cfg)
    rng = np.random.default_rng(4)
    X, DX, DY = rng.uniform(0.2, 1.0, (5, 3)), rng.normal(size=(5, 2, 3)), None
    DY = rng.normal(size=(5, 2, *mod.OUTPUT_SHAPE))
    loop = np.array([mod.pushforward(x, d) for x, d in zip(X, DX)])
    _compare(mod.pushforward_points(X, DX), loop)
    loop = np.array([mod.pullback(x, d) for x, d in zip(X, DY)])
    _compare(mod.pullback_points(X, DY), loop)
    with pytest.raises(ValueError, match=r"dx: expected shape \(5, 2, 3\)"):
        mod.pushforward_points(X, DX[:, 0])


def test_points_refuse_code_valid_for_one_number_of_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the emissions at the two sentinel sizes disagree (here: the points axis
    is named by its own size, so each prints its own number), the build refuses
    at the points key instead of writing code that is right for one number of
    points only."""
    from difgen.targets.numpy import points
    from difgen.targets.numpy.printer import PointsAxis

    def own_number(value: int, name: str) -> PointsAxis:
        return PointsAxis(value, str(int(value)))

    monkeypatch.setattr(points, "PointsAxis", own_number)
    cfg = write_points_config(  # vector code: its points variant is the batched graph
        tmp_path, "vector_scalar", [4], ["gradient"], backend="trace", emit="vector"
    )
    with pytest.raises(
        ConfigError, match=r"difgen.toml:8: the points variant of 'gradient'"
    ):
        build_and_import(cfg)


def test_points_axis_prints_by_name() -> None:
    """The printer names the points axis wherever its size is printed (shapes,
    slice bounds, constants' shapes); arithmetic on it is a plain number, which
    the comparison of the two sentinel sizes catches."""
    from difgen.targets.numpy.printer import PointsAxis, array_source, symbolic

    k = PointsAxis(97, "npoints")
    assert (f"{k}", str(k), repr(k), k + 0) == ("npoints", "npoints", "npoints", 97)
    assert repr(symbolic((97, 1, 4), k)) == "(npoints, 1, 4)"
    assert (
        repr(symbolic([("slice", 0, 97, None)], k)) == "[('slice', 0, npoints, None)]"
    )
    assert repr(symbolic(slice(0, 97), k)) == "slice(0, npoints, None)"
    assert repr(symbolic((3 * k, 4), k)) == "(291, 4)"
    assert symbolic(True, k) is True and symbolic(97, None) == 97
    assert array_source(np.zeros((97, 3)), axis=k) == "np.zeros((npoints, 3))"
    assert array_source(np.full((97,), 2.0), axis=k) == "np.full((npoints,), 2.0)"


def test_verify_checks_the_points_variants(tmp_path: Path) -> None:
    """``difgen verify`` calls every points variant on stacked random points and
    compares it with the loop of its one-point operator; a wrong one fails."""
    import difgen

    cfg = write_points_config(
        tmp_path,
        "vector_vector_ctx",
        [3],
        ["jacobian", "value_and_pullback"],
        [((3, 3), True), ((), False)],
        backend="trace",
    )
    difgen.build(cfg)
    (module,) = difgen.verify(cfg).modules
    checks = {op.operator: op for op in module.operators}
    assert {"f_points", "jacobian_points", "value_and_pullback_points"} <= set(checks)
    assert [r.kind for r in checks["value_and_pullback_points"].results] == [
        "value",
        "vjp",
    ]
    assert module.passed
    points = [op for op in module.operators if op.operator.endswith("_points")]
    assert len(points) == 3
    assert all(r.error < 1e-12 for op in points for r in op.results)
    path = tmp_path / "out" / "mod.py"
    text = path.read_text()
    wrong = text.replace("def jacobian_points(", "def jacobian_points_wrong(").replace(
        "__all__ = [",
        "def jacobian_points(*args: object) -> object:\n"
        "    return jacobian_points_wrong(*args) * 1.000001\n\n\n__all__ = [",
    )
    path.write_text(wrong)
    (module,) = difgen.verify(cfg).modules
    failed = [op.operator for op in module.operators if not op.passed]
    assert failed == ["jacobian_points"]


@pytest.mark.parametrize("row", ["getitem", "scatter_sum", "concatenate", "pack"])
def test_points_of_structural_primitives(tmp_path: Path, row: str) -> None:
    """Batching rules that broadcast a constant operand to the points axis (the
    jacobians of these rows) make values that depend on no argument but carry the
    number of points: they are computed per call, never hoisted to import time."""
    import primitive_cases

    fn, shape = primitive_cases.ROWS[row]
    cfg = write_points_config(
        tmp_path,
        fn.__name__,
        shape,
        ["jacobian"],
        source=SUPPORT / "primitive_cases.py",
        backend="trace",
    )
    mod, _ = build_and_import(cfg)
    rng = np.random.default_rng(8)
    for k in POINTS:
        X = rng.uniform(0.2, 0.8, (k, *shape))
        like = mod.jacobian(np.full(shape, 0.5))
        loop = _stack([mod.jacobian(x) for x in X], k, like)
        _compare(mod.jacobian_points(X), loop)


# ---------------------------------------------------------------- blocks of points
# (scenario, backend, per-point flags of its contexts): a batched product with a
# per-point matrix, a shared matrix with a per-point scalar, reductions and
# products of a matrix input, a scalar input (no Fortran layout at all), and
# np.where choices that differ from point to point
BLOCK_CASES = [
    ("vector_vector_ctx", "trace", (True, False)),
    ("vector_vector_ctx", "sympy", (False, True)),
    ("matrix_scalar", "sympy", ()),
    ("scalar_scalar", "trace", ()),
    ("vector_scalar_kinks", "trace", ()),
]


def _blocking(mod: ModuleType, op: str) -> tuple[int, int | None]:
    """(points per block, layout threshold or None) of ``op_points``, read from
    its code: ``_run_blocks(rows, npoints, BLOCK)`` and ``if npoints > SIZE:``."""
    source = inspect.getsource(getattr(mod, f"{op}_points"))
    block = re.search(r"_run_blocks\(rows, npoints, (\d+)\)", source)
    layout = re.search(r"if npoints > (\d+):", source)
    assert block is not None, source
    assert f"if npoints < {2 * int(block.group(1))}:" in source, source
    return int(block.group(1)), int(layout.group(1)) if layout else None


def _one_call(
    mod: ModuleType, op: str, args: Sequence[Any], per_point: Sequence[bool]
) -> tuple[Any, ...]:
    """``op_points`` as it was before blocks: its block function on all the points
    at once, laid out as the variant lays out one block."""
    _, size = _blocking(mod, op)
    k = len(args[0])
    laid = [
        (
            mod._points_layout(a)
            if p and np.ndim(a) > 1 and size is not None and k > size
            else a
        )
        for a, p in zip(args, per_point)
    ]
    result = getattr(mod, f"_{op}_points_block")(*laid)
    return result if isinstance(result, tuple) else (result,)


def _bits(value: np.ndarray) -> tuple[tuple[int, ...], str, bytes]:
    """Shape, dtype and bytes (NaN payloads and signed zeros included)."""
    return value.shape, str(value.dtype), np.ascontiguousarray(value).tobytes()


def _block_inputs(
    name: str, op: str, k: int, flags: tuple[bool, ...], ys: tuple[int, ...], block: int
) -> tuple[list[Any], list[list[Any]], list[bool], set[int]]:
    """``_inputs`` with NaN and inf at rows on both sides of block boundaries:
    (arguments, one-point arguments, which are per point, the non-finite rows)."""
    args, singles = _inputs(name, op, k, flags, ys, k + 13)
    per_point = [True] * (1 + len(OPERATORS[op].seeds)) + list(flags)
    bad = {r for r in (0, block - 1, block, 2 * block + 1, k - 1) if 0 <= r < k}
    for n, r in enumerate(sorted(bad)):
        np.reshape(args[0][r : r + 1], -1)[0] = (np.nan, np.inf, -np.inf)[n % 3]
    if len(per_point) > 1 and per_point[-1] and block < k:
        np.reshape(args[-1][block : block + 1], -1)[-1] = np.nan
        bad.add(block)
    return args, singles, per_point, bad


def _check_blocks(
    mod: ModuleType, name: str, op: str, flags: tuple[bool, ...], ks: Sequence[int]
) -> None:
    """``op_points`` in blocks equals its one call bit for bit at every k of ``ks``
    (NaN and inf rows included) and the one-point operator near the boundaries."""
    block, _ = _blocking(mod, op)
    ys, nres = tuple(mod.OUTPUT_SHAPE), len(OPERATORS[op].results)
    for k in ks:
        args, singles, per_point, bad = _block_inputs(name, op, k, flags, ys, block)
        with np.errstate(all="ignore"):
            got = getattr(mod, f"{op}_points")(*args)
            reference = _one_call(mod, op, args, per_point)
        got = got if nres > 1 else (got,)
        assert len(got) == nres
        for g, r in zip(got, reference):
            assert _bits(g) == _bits(r), (op, k)
        for i in {1, block - 2, block + 1, k - 2} - bad:
            if 0 <= i < k:
                one = getattr(mod, op)(*singles[i])
                for g, r in zip(got, one if nres > 1 else (one,)):
                    np.testing.assert_allclose(g[i], r, rtol=1e-10, atol=1e-12)


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks as small as the layout allows, so that few points make many blocks."""
    from difgen.targets.numpy import points

    monkeypatch.setattr(points, "BLOCK_BYTES", 1)
    monkeypatch.setattr(points, "MIN_BLOCK", 16)  # BLAS kernels' rows divide it


@pytest.mark.parametrize("name,backend,flags", BLOCK_CASES)
def test_blocks_equal_one_call_bit_for_bit(
    tmp_path: Path,
    small_blocks: None,
    name: str,
    backend: str,
    flags: tuple[bool, ...],
) -> None:
    """k = 0, 1, block - 1, block, block + 1, 2 * block - 1 (still one block: the
    last block takes the rest), 2 * block and 3 * block + 7 points give the bits
    of one call over all the points, for every operator of the scenario."""
    xs, ctx_shapes = scenarios.SCENARIOS[name]
    cfg = write_points_config(
        tmp_path,
        name,
        xs,
        operators_for(name),
        list(zip(ctx_shapes, flags)),
        backend=backend,
    )
    mod, _ = build_and_import(cfg)
    for op in ("f", *operators_for(name)):
        block, size = _blocking(mod, op)
        assert block == max(16, 1 << (size or 0).bit_length()), (op, block, size)
        ks = (0, 1, block - 1, block, block + 1, 2 * block - 1, 2 * block)
        _check_blocks(mod, name, op, flags, (*ks, 3 * block + 7))


def test_blocks_of_the_built_size(tmp_path: Path) -> None:
    """With the block size difgen chooses: the same bits as one call around one
    block and over several."""
    cfg = write_points_config(
        tmp_path,
        "matrix_scalar",
        [2, 3],
        ["value_and_gradient", "hvp", "value_gradient_and_hessian"],
        backend="trace",
    )
    mod, _ = build_and_import(cfg)
    for op in ("value_and_gradient", "hvp", "value_gradient_and_hessian"):
        block, _ = _blocking(mod, op)
        assert block >= 256 and block & (block - 1) == 0
        ks = (block, 2 * block - 1, 2 * block, 3 * block + 7)
        _check_blocks(mod, "matrix_scalar", op, (), ks)


def _points_inner(a: np.ndarray) -> bool:
    """The points layout: the points axis innermost, a point's own axes in C
    order outside it."""
    c_order = np.ascontiguousarray(np.moveaxis(a, 0, -1))
    return a.strides == np.moveaxis(c_order, -1, 0).strides and a.strides[0] == 8


def test_blocks_are_aligned_and_laid_out(
    tmp_path: Path, small_blocks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block function is called once when the points make one block (on the
    arguments themselves), else on blocks of ``block`` points from the first on,
    the last one taking the rest; each block's per-point arrays have their points
    innermost in memory (and a point's elements in C order among themselves)
    exactly when one call's would; a Fortran-ordered or strided input gives the
    same bits."""
    cfg = write_points_config(
        tmp_path,
        "vector_vector_ctx",
        [3],
        ["pullback"],
        [((3, 3), True), ((), False)],
        backend="trace",
    )
    mod, _ = build_and_import(cfg)
    block, size = _blocking(mod, "pullback")
    assert (block, size) == (16, 9)
    seen: list[tuple[int, bool, bool]] = []
    inner = mod._pullback_points_block

    def spy(x: Any, dy: Any, c0: Any, c1: Any) -> Any:
        seen.append((len(x), _points_inner(x), _points_inner(c0)))
        return inner(x, dy, c0, c1)

    monkeypatch.setattr(mod, "_pullback_points_block", spy)
    rng = np.random.default_rng(21)
    for k, sizes in [
        (0, [0]),
        (1, [1]),
        (9, [9]),
        (10, [10]),
        (31, [31]),
        (32, [16, 16]),
        (55, [16, 16, 23]),
    ]:
        X, DY, M = rng.normal(size=(k, 3)), rng.normal(size=(k, 3)), None
        M = rng.normal(size=(k, 3, 3))
        seen.clear()
        got = mod.pullback_points(X, DY, M, 0.5)
        assert [n for n, _, _ in seen] == sizes, k
        if k > 1:
            assert all(fx == fm == (k > size) for _, fx, fm in seen), (k, seen)
        for other in (np.asfortranarray(X), np.repeat(X, 2, axis=0)[::2]):
            assert _bits(mod.pullback_points(other, DY, M, 0.5)) == _bits(got)
    for k in range(80):
        bounds = mod._point_blocks(k, block)
        assert bounds[0][0] == 0 and bounds[-1][1] == k
        assert all(b[1] == c[0] for b, c in itertools.pairwise(bounds))
        assert all(start % block == 0 for start, _ in bounds)
        last = bounds[-1][1] - bounds[-1][0]
        assert len(bounds) == 1 or block <= last < 2 * block
        assert all(stop - start == block for start, stop in bounds[:-1])


def test_block_size_from_the_live_bytes_per_point() -> None:
    """``bytes_per_point`` is the peak of the batched values live at once
    (views free, the number of points irrelevant); ``block_size`` the largest
    power of two within the budget, at least MIN_BLOCK, and a power of two above
    the layout size."""
    from difgen.ad import build_graph
    from difgen.passes import optimize
    from difgen.targets.numpy import points

    def fn(x: Any) -> Any:
        return (np.sin(x[:, 1:]) * 2.0 + np.cos(x[:, 1:]),)

    graphs = [optimize(build_graph(fn, [((k, 6), "float64")])) for k in (7, 11)]
    # x (48 bytes a point, held throughout), its view x[:, 1:] (0), sin (40),
    # sin * 2 (40), cos (40), the sum (40): sin is freed once doubled, so the
    # peak is x, sin * 2, cos and the sum
    assert [points.bytes_per_point(g) for g in graphs] == [48 + 40 * 3] * 2
    per_point = points.bytes_per_point(graphs[0])
    block = points.block_size(graphs[0], 0)
    assert block & (block - 1) == 0 and block >= points.MIN_BLOCK
    assert block * per_point <= points.BLOCK_BYTES < 2 * block * per_point
    assert points.block_size(graphs[0], 10_000) == 16_384
