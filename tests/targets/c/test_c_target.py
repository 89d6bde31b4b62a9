"""``emit = "c"``: the compiled operators against the Python emission they replace.

One config holds every scenario of tests/support/scenarios.py (sympy backend, every
operator it supports), the sympy examples, a trace-backend module and a sparse one,
all with ``emit = "c"``; it is built and compiled once per session (the compiler
runs once per module, in parallel). Each module is imported twice: from the build
directory, where its extension replaces the operators, and as a lone copy of the
``.py``, which runs the Python fallback. The two must agree BIT FOR BIT (same
operations in the same order, same libm), NaN and inf included, and accept and
refuse the same arguments with the same errors.
"""

from __future__ import annotations

import ast
import gc
import os
import shutil
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import difgen
import scenarios
from compiled import Built
from conftest import SUPPORT, TESTS, import_file
from difgen.api import Status
from difgen.errors import ConfigError
from difgen.targets.c.compiling import EXTENSION_SUFFIX
from scenario_cases import operators_for
from test_integrations import forget_sampledf, sample_project  # noqa: F401

EXAMPLES = TESTS.parent / "examples"

SPARSE_OPS = ["jacobian", "value_and_jacobian", "hessian", "value_gradient_and_hessian"]


def _context_table(shapes: Any) -> str:
    items = [f'{{ name = "c{i}", shape = {list(s)} }}' for i, s in enumerate(shapes)]
    return f"contexts = [{', '.join(items)}]\n" if items else ""


def _module(
    name: str,
    function: str,
    shape: Any,
    operators: list[str],
    extra: str = "",
    backend: str = "sympy",
) -> str:
    ops = ", ".join(f'"{op}"' for op in operators)
    return (
        f'[[module]]\nname = "{name}"\nfunction = "{function}"\n'
        f'backend = "{backend}"\nemit = "c"\noperators = [{ops}]\n'
        f"input = {{ shape = {list(shape)} }}\n{extra}\n"
    )


KINKS = ["pushforward", "pullback", "jacobian", "gradient", "value_and_gradient"]
"""The kinks scenario's hessian costs SymPy seconds and is zero almost everywhere."""


def _config_text() -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    for name, (xs, ctx) in scenarios.SCENARIOS.items():
        ops = KINKS if name == "vector_scalar_kinks" else operators_for(name)
        parts.append(
            _module(name, f"scenarios.py:{name}", xs, ops, _context_table(ctx))
        )
    parts.append(
        _module(
            "sparse_vs",
            "scenarios.py:vector_scalar",
            (4,),
            SPARSE_OPS,
            "sparse = true\n",
        )
    )
    parts.append(
        _module(
            "seed",
            "functions.py:seed",
            (),
            ["derivative", "value_and_derivative", "second_derivative"],
        )
    )
    parts.append(
        _module(
            "seed_trace",
            "functions.py:seed",
            (),
            ["derivative", "pushforward", "pullback"],
            'mode = "reverse"\n',
            backend="trace",
        )
    )
    parts.append(
        _module(
            "lorenz",
            "functions.py:lorenz",
            (3,),
            ["jacobian", "pushforward", "pullback", "value_and_jacobian"],
            'contexts = [{ name = "p", shape = [3] }]\n',
        )
    )
    parts.append(
        _module(
            "rosenbrock",
            "functions.py:rosenbrock",
            (10,),
            ["gradient", "value_and_gradient", "hessian", "hvp"],
        )
    )
    return "\n".join(parts)


NAMES = [
    *scenarios.SCENARIOS,
    "sparse_vs",
    "seed",
    "seed_trace",
    "lorenz",
    "rosenbrock",
]


def trace_c_build(
    tmp_path_factory: pytest.TempPathFactory,
    functions: str,
    modules: dict[str, tuple[str, list[int], list[str], str]],
) -> Built:
    """Trace-backend ``emit = "c"`` modules of ``tests/<functions>.py``, built and
    compiled once: ``modules`` maps each name to (function, input shape,
    operators, extra config lines)."""
    directory = tmp_path_factory.mktemp(functions)
    shutil.copy(SUPPORT / f"{functions}.py", directory)
    parts = ['[difgen]\noutput_dir = "out"\n']
    for name, (function, shape, ops, extra) in modules.items():
        quoted = ", ".join(f'"{op}"' for op in ops)
        parts.append(
            f'[[module]]\nname = "{name}"\nfunction = "{functions}.py:{function}"\n'
            f'backend = "trace"\nemit = "c"\noperators = [{quoted}]\n'
            f"input = {{ shape = {shape} }}\n{extra}\n"
        )
    (directory / "difgen.toml").write_text("\n".join(parts))
    return Built(directory)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    directory = tmp_path_factory.mktemp("c_target")
    shutil.copy(SUPPORT / "scenarios.py", directory)
    shutil.copy(EXAMPLES / "functions.py", directory)
    (directory / "difgen.toml").write_text(_config_text())
    return Built(directory)


def _arguments(
    module: ModuleType, name: str, fill: Callable[[Any], Any]
) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """Each public operator with arguments of its shapes, filled by ``fill``."""
    import inspect

    python = module
    for op in python.__all__:
        params = [
            p
            for p in inspect.signature(getattr(python, op)).parameters.values()
            if p.name != "out"
        ]
        args = []
        for p in params:
            shape = _shape_of(module, op, p.name)
            args.append(fill(shape))
        yield op, tuple(args)


def _shape_of(module: ModuleType, op: str, param: str) -> tuple[int, ...]:
    """An argument's shape, read from the Python function's own argument checks."""
    import inspect
    import re

    source = inspect.getsource(getattr(module, op))
    found = re.search(rf"{param}\.shape != (\([0-9, ]*\))", source)
    if found:
        return tuple(ast.literal_eval(found.group(1)))
    found = re.search(rf'_as_array\("\w+: {param}", {param}, (\([0-9, ]*\))\)', source)
    if found:
        return tuple(ast.literal_eval(found.group(1)))
    return ()


def _filler(values: list[float]) -> Callable[[tuple[int, ...]], Any]:
    """Arrays (or floats) cycling through ``values``."""

    def fill(shape: tuple[int, ...]) -> Any:
        size = int(np.prod(shape, dtype=np.int64))
        data = np.resize(np.asarray(values, dtype=np.float64), size).reshape(shape)
        return float(data) if shape == () else data

    return fill


def _same(a: Any, b: Any) -> None:
    """Bit-identical results (NaN equal to NaN), of the same types and shapes."""
    if isinstance(b, tuple):
        assert isinstance(a, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    if hasattr(b, "toarray"):  # CSR: the same pattern and the same nonzeros
        assert type(a) is type(b)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.indptr, b.indptr)
        _same(a.data, b.data)
        return
    assert type(a) is type(b), (type(a), type(b))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b), strict=True)


POINTS = {
    "regular": [0.3, 0.7, -0.4, 0.9, 0.55, -0.8],
    "nan": [np.nan, 0.5, 0.25],
    "inf": [np.inf, 0.5, -np.inf],
    "zeros": [0.0, -0.0, 1.0],
    "huge": [1e300, -1e300, 3.0],
    "negative": [-5.0, -2.5, -3.5],
}


@pytest.mark.parametrize("name", NAMES)
def test_compiled_equals_python(built: Built, name: str) -> None:
    """Every operator, at regular points and at NaN, inf, zeros, huge and
    negative values (logs and roots of negatives, overflow, 0/0)."""
    compiled, python = built.compiled(name), built.python(name)
    for label, values in POINTS.items():
        for op, args in _arguments(python, name, _filler(values)):
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = getattr(python, op)(*args)
                got = getattr(compiled, op)(*args)
            try:
                _same(got, expected)
            except AssertionError as exc:
                raise AssertionError(f"{name}.{op} at {label} points: {exc}") from None


def _outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        with np.errstate(all="ignore"):
            return ("ok", fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 (the exception is the outcome)
        return (type(exc), str(exc))


def _same_outcome(got: Any, expected: Any) -> None:
    assert got[0] == expected[0], (got, expected)
    if got[0] == "ok":
        _same(got[1], expected[1])
    else:
        assert got[1] == expected[1]


@pytest.mark.parametrize(
    "name", ["lorenz", "vector_vector_ctx", "matrix_matrix", "seed"]
)
def test_same_argument_checks(built: Built, name: str) -> None:
    """Conversions and refusals are the Python module's own, with its messages."""
    compiled, python = built.compiled(name), built.python(name)
    for op, args in _arguments(python, name, _filler(POINTS["regular"])):
        variants: list[tuple[Any, ...]] = [args]
        for i, a in enumerate(args):
            change = [
                a.tolist() if isinstance(a, np.ndarray) else int(a),  # list / int
                np.asarray(a, dtype=np.float32),
                np.asarray(a, dtype=np.complex128),
                np.asarray(a, dtype=">f8"),  # byte-swapped
                np.asarray(a, dtype=object),
                np.zeros(np.shape(a) + (2,)),  # wrong shape
                "text",
                None,
            ]
            if isinstance(a, np.ndarray):
                change.append(np.repeat(a, 2, axis=-1)[..., ::2])  # non-contiguous
                change.append(a[..., :-1])
                change.append(np.asarray(a, dtype=np.int64))
            variants += [(*args[:i], value, *args[i + 1 :]) for value in change]
        for variant in variants:
            _same_outcome(
                _outcome(getattr(compiled, op), *variant),
                _outcome(getattr(python, op), *variant),
            )
        # keywords: all by name, and errors of the call itself (types only)
        names = [p for p in _param_names(python, op) if p != "out"]
        _same_outcome(
            _outcome(getattr(compiled, op), **dict(zip(names, args))),
            _outcome(getattr(python, op), **dict(zip(names, args))),
        )
        for bad_args, bad_kwargs in [
            ((), {}),
            (args, {"nonsense": 1.0}),
            (args, {names[0]: args[0]}),
            ((*args, None, None), {}),
        ]:
            got = _outcome(getattr(compiled, op), *bad_args, **bad_kwargs)
            expected = _outcome(getattr(python, op), *bad_args, **bad_kwargs)
            assert got[0] is expected[0] is TypeError, (got, expected)


def _param_names(module: ModuleType, op: str) -> list[str]:
    import inspect

    return list(inspect.signature(getattr(module, op)).parameters)


@pytest.mark.parametrize("name", ["lorenz", "matrix_matrix"])
def test_out_argument(built: Built, name: str) -> None:
    """``out``: written in place when it can be, else checked and assigned as the
    Python code does (non-contiguous), or refused with the same message."""
    compiled, python = built.compiled(name), built.python(name)
    for op, args in _arguments(python, name, _filler(POINTS["regular"])):
        if "out" not in _param_names(python, op):
            continue
        fresh = getattr(python, op)(*args)
        shape = np.shape(fresh[-1] if isinstance(fresh, tuple) else fresh)
        good = np.full(shape, np.nan)
        result = getattr(compiled, op)(*args, out=good)
        assert (result[-1] if isinstance(result, tuple) else result) is good
        _same(result, fresh)
        strided = np.full(shape + (2,), np.nan)[..., 0]
        result = getattr(compiled, op)(*args, out=strided)
        _same(strided, fresh[-1] if isinstance(fresh, tuple) else fresh)
        read_only = np.zeros(shape)
        read_only.flags.writeable = False
        for bad in [np.zeros(shape + (1,)), np.zeros(shape, ">f8"), read_only, [0.0]]:
            _same_outcome(
                _outcome(getattr(compiled, op), *args, out=bad),
                _outcome(getattr(python, op), *args, out=bad),
            )


def test_aliasing_out_and_input(built: Built) -> None:
    """``out`` may be the input itself: the inputs are read before any write."""
    compiled, python = built.compiled("rosenbrock"), built.python("rosenbrock")
    x = np.linspace(-1.0, 1.0, 10)
    expected = python.gradient(x.copy())
    y = x.copy()
    assert compiled.gradient(y, out=y) is y
    _same(y, expected)


def test_fallback_warns_once_and_can_be_quieted(
    built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(built.directory / "out" / "lorenz.py", tmp_path)
    with pytest.warns(RuntimeWarning, match="not built.*DIFGEN_QUIET_FALLBACK"):
        module = import_file(tmp_path / "lorenz.py")
    assert "not built" in module.C_FALLBACK_REASON
    monkeypatch.setenv("DIFGEN_QUIET_FALLBACK", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not import_file(tmp_path / "lorenz.py").COMPILED


def test_extension_of_another_source_is_not_used(built: Built, tmp_path: Path) -> None:
    """An extension compiled from another C source (a stale build) is refused."""
    out = built.directory / "out"
    shutil.copy(out / "lorenz.py", tmp_path / "seed.py")  # lorenz's text ...
    extension = next(out.glob("seed__c.*.so"))
    shutil.copy(extension, tmp_path / extension.name.replace("seed", "lorenz"))
    text = (tmp_path / "seed.py").read_text()
    (tmp_path / "lorenz.py").write_text(text)
    with pytest.warns(RuntimeWarning):
        module = import_file(tmp_path / "lorenz.py")
    assert not module.COMPILED


def test_check_covers_the_c_source_and_the_extension(built: Built) -> None:
    out = built.directory / "out"
    assert difgen.check(built.config, ["seed"]).ok
    source = out / "seed__c.c"
    original, times = source.read_text(), source.stat()
    try:
        source.write_text(original.replace("81.0", "82.0"))
        (problem,) = difgen.check(built.config, ["seed"]).problems
        assert problem.status is Status.EDITED and problem.path == source
        source.unlink()
        (problem,) = difgen.check(built.config, ["seed"]).problems
        assert problem.status is Status.MISSING
    finally:
        source.write_text(original)
        os.utime(source, ns=(times.st_atime_ns, times.st_mtime_ns))
    # Replaced by renaming, never rewritten in place: this process has it mapped.
    extension = next(out.glob("seed__c.*.so"))
    saved = extension.with_name("saved.so")
    os.replace(extension, saved)
    try:
        shutil.copy(next(out.glob("lorenz__c.*.so")), extension)
        (problem,) = difgen.check(built.config, ["seed"]).problems
        assert problem.status is Status.STALE and "--compile" in problem.reason
    finally:
        os.replace(saved, extension)
    assert difgen.check(built.config, ["seed"]).ok


def test_verify_says_which_code_ran(built: Built, tmp_path: Path) -> None:
    (module,) = difgen.verify(built.config, ["lorenz"], points=1).modules
    assert module.passed and module.emission.startswith("compiled")


def test_build_and_compile_report(built: Built) -> None:
    """Every module was compiled once (times are the benchmarks' business: a
    loaded test machine would make a bound here flaky)."""
    compiled = {c.name: c.seconds for c in built.result.compiled}
    assert sorted(compiled) == sorted(NAMES)
    assert all(c.path.is_file() for c in built.result.compiled)
    again = difgen.build(built.config, ["seed"], compile=True)
    assert again.compiled == ()  # the extension is newer than its source


def test_c_refuses_names_c_reserves(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("def f(x, sin):\n    return x * sin\n")
    (tmp_path / "difgen.toml").write_text(
        '[[module]]\nname = "m"\nfunction = "f.py:f"\nemit = "c"\n'
        'operators = ["derivative"]\ninput = { shape = [] }\n'
        'contexts = [{ name = "sin", shape = [] }]\n'
    )
    with pytest.raises(ConfigError, match="C keyword or a C library name"):
        difgen.build(tmp_path / "difgen.toml")


C_CONFIG = (
    '[difgen]\noutput_dir = "../src/sampledf"\n\n[[module]]\n'
    'name = "energy_derivatives"\nfunction = "../src/sampledf/model.py:energy"\n'
    'emit = "c"\noperators = ["gradient"]\ninput = { shape = [3] }\n'
)


@pytest.mark.usefixtures("forget_sampledf")
def test_hatch_hook_compiles_and_ships_the_extension(tmp_path: Path) -> None:
    """The hook compiles the extension, lists it and its source as artifacts, and
    makes the wheel platform-specific."""
    from difgen.integrations.hatch_hook import DifgenBuildHook

    project = sample_project(tmp_path, "hatchling")
    (project / "tools").mkdir()
    (project / "tools" / "difgen.toml").write_text(C_CONFIG)
    hook = DifgenBuildHook(
        str(project),
        {"config": "tools/difgen.toml"},
        None,
        None,
        str(tmp_path),
        "wheel",
    )
    build_data: dict[str, Any] = {"artifacts": []}
    hook.initialize("standard", build_data)
    extension = f"/src/sampledf/energy_derivatives__c{EXTENSION_SUFFIX}"
    assert build_data["artifacts"] == [
        "/src/sampledf/energy_derivatives.py",
        "/src/sampledf/energy_derivatives__c.c",
        extension,
    ]
    assert build_data["pure_python"] is False and build_data["infer_tag"] is True
    module = import_file(project / "src/sampledf/energy_derivatives.py")
    assert module.COMPILED
    x = np.array([0.3, -0.2, 0.5])
    sigmoid, softplus = 1 / (1 + np.exp(-x)), np.log1p(np.exp(x))
    expected = (
        softplus + x * sigmoid + np.array([x[1] * x[2], x[0] * x[2], x[0] * x[1]])
    )
    np.testing.assert_allclose(module.gradient(x), expected, rtol=1e-13)


@pytest.mark.usefixtures("forget_sampledf")
def test_setuptools_declares_and_builds_the_extension(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``extensions()`` names the extension inside its package; setuptools'
    ``build_ext`` compiles it after ``build_py`` wrote its source."""
    from setuptools import Distribution

    from difgen.integrations.setuptools import build_py, extensions

    project = sample_project(tmp_path, "setuptools")
    (project / "difgen.toml").write_text(C_CONFIG.replace("../src", "src"))
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    start = text.index("[tool.difgen]")
    pyproject.write_text(text[:start])  # difgen.toml configures it instead
    monkeypatch.chdir(project)
    (extension,) = extensions()
    assert extension.name == "sampledf.energy_derivatives__c"
    assert extension.sources == ["src/sampledf/energy_derivatives__c.c"]
    dist = Distribution(
        {
            "name": "sampledf",
            "packages": ["sampledf"],
            "package_dir": {"": "src"},
            "script_name": "setup.py",
            "ext_modules": [extension],
            "cmdclass": {"build_py": build_py},
        }
    )
    dist.get_command_obj("build_py").ensure_finalized()  # generates the C source
    command = dist.get_command_obj("build_ext")
    command.inplace = True
    dist.run_command("build_ext")
    module = import_file(project / "src/sampledf/energy_derivatives.py")
    assert module.COMPILED


def test_sparse_out_fills_the_data_in_place(built: Built) -> None:
    """``out=`` of a sparse operator: the CSR array it returned is filled in place
    (same object, same data buffer), by the compiled and the Python operators
    alike; a CSR array of another pattern, or no CSR array, is refused the same."""
    import scipy.sparse

    compiled, python = built.compiled("sparse_vs"), built.python("sparse_vs")
    x, y = np.array([0.3, 0.5, 0.7, 0.9]), np.array([0.2, -0.4, 0.6, 1.1])
    for module in (compiled, python):
        for op in ("jacobian", "hessian", "value_and_jacobian"):
            first = getattr(module, op)(x)
            csr = first[-1] if isinstance(first, tuple) else first
            data = csr.data
            result = getattr(module, op)(y, out=csr)
            assert (result[-1] if isinstance(result, tuple) else result) is csr
            assert csr.data is data
            _same(result, getattr(python, op)(y))
    hessian = python.hessian(x)
    equal_pattern = scipy.sparse.csr_array(
        (hessian.data.copy(), hessian.indices.copy(), hessian.indptr.copy()),
        shape=hessian.shape,
    )
    compiled.hessian(y, out=equal_pattern)
    _same(equal_pattern, python.hessian(y))
    read_only = python.hessian(x)
    read_only.data.flags.writeable = False
    for bad in [scipy.sparse.csr_array(np.eye(4)), np.zeros(4), read_only]:
        _same_outcome(
            _outcome(compiled.hessian, y, out=bad), _outcome(python.hessian, y, out=bad)
        )


# Small compiled results are recycled (``dg_recycled`` in targets/c/extension.py): a
# compiled operator keeps the last two arrays each small result was returned in and
# writes into one of them again when nothing else can reach it any more. The tests
# below take the user's side: a result they hold, view, export, weakly reference or
# change in place must never change under them, and a recycled result must be
# indistinguishable from a new one.

RECYCLE_X = np.linspace(-1.2, 0.9, 10)
"""A point of the session build's Rosenbrock n=10 module."""


def _points(k: int) -> list[np.ndarray]:
    return [RECYCLE_X + 0.1 * i for i in range(k)]


def test_a_dropped_result_is_written_again(built: Built) -> None:
    """The recycling is on: a result nobody holds gives its memory to the next."""
    gradient = built.compiled("rosenbrock").gradient
    address = gradient(RECYCLE_X).ctypes.data
    again = gradient(RECYCLE_X + 1.0)
    assert again.ctypes.data == address
    np.testing.assert_array_equal(
        again, built.python("rosenbrock").gradient(RECYCLE_X + 1.0)
    )


def test_held_results_never_change(built: Built) -> None:
    """``g = gradient(x)`` in a loop, and a list of results: each keeps its values."""
    compiled, python = built.compiled("rosenbrock"), built.python("rosenbrock")
    kept = [compiled.gradient(x) for x in _points(6)]
    for x, g in zip(_points(6), kept):
        np.testing.assert_array_equal(g, python.gradient(x))
    assert len({g.ctypes.data for g in kept}) == 6
    previous: tuple[np.ndarray, np.ndarray] | None = None
    for x in _points(8):
        g = compiled.gradient(x)
        if previous is not None:
            assert g is not previous[1]
            np.testing.assert_array_equal(previous[1], python.gradient(previous[0]))
        previous = (x, g)


@pytest.mark.parametrize("hold", ["view", "memoryview", "weakref", "in_a_tuple"])
def test_what_reaches_a_result_keeps_it(built: Built, hold: str) -> None:
    """A view, a buffer export, a weak reference or a container keeps a dropped
    result from being written again: its values stay, readable through the hold."""
    compiled = built.compiled("rosenbrock")
    expected = compiled.gradient(RECYCLE_X).copy()
    result = compiled.gradient(RECYCLE_X)
    holder: Any = {
        "view": lambda r: r[2:],
        "memoryview": memoryview,
        "weakref": weakref.ref,
        "in_a_tuple": lambda r: (r,),
    }[hold](result)
    del result
    gc.collect()
    for x in _points(5):
        compiled.gradient(x + 3.0)
    seen = {
        "view": lambda h: np.concatenate([expected[:2], h]),
        "memoryview": lambda h: np.asarray(h),
        "weakref": lambda h: h(),
        "in_a_tuple": lambda h: h[0],
    }[hold](holder)
    assert seen is not None  # the weak reference still reaches the array
    np.testing.assert_array_equal(seen, expected)


@pytest.mark.parametrize("change", ["read_only", "reshaped", "retyped"])
def test_a_result_changed_in_place_is_not_reused(built: Built, change: str) -> None:
    """A dropped result whose flags, shape or dtype the caller changed in place is
    never handed out again: every result comes back writeable, float64, (10,)."""
    compiled = built.compiled("rosenbrock")
    for _ in range(3):  # both slots
        result = compiled.gradient(RECYCLE_X)
        if change == "read_only":
            result.flags.writeable = False
        elif change == "reshaped":
            result.shape = (2, 5)
        else:
            result.dtype = np.int64
        del result
    for x in _points(3):
        fresh = compiled.gradient(x)
        assert fresh.shape == (10,) and fresh.dtype == np.float64
        assert (
            fresh.flags.writeable and fresh.flags.c_contiguous and fresh.flags.owndata
        )
        np.testing.assert_array_equal(fresh, built.python("rosenbrock").gradient(x))


def test_tuples_of_results_and_out(built: Built) -> None:
    """Each result of a tuple is recycled on its own; ``out`` is never recycled."""
    compiled, python = built.compiled("rosenbrock"), built.python("rosenbrock")
    held = [compiled.value_and_gradient(x) for x in _points(4)]
    for x, (value, g) in zip(_points(4), held):
        expected_value, expected = python.value_and_gradient(x)
        assert value == expected_value
        np.testing.assert_array_equal(g, expected)
    out = np.zeros(10)
    assert compiled.gradient(RECYCLE_X, out=out) is out
    kept = out.copy()
    for x in _points(4):
        compiled.gradient(x)
    np.testing.assert_array_equal(out, kept)


def test_threads_see_their_own_results(built: Built) -> None:
    """Calls from several threads (the GIL held around each) never share a result."""
    compiled, python = built.compiled("rosenbrock"), built.python("rosenbrock")
    errors: list[str] = []

    def work(offset: float) -> None:
        for i in range(300):
            x = RECYCLE_X + offset + 1e-3 * i
            g = compiled.gradient(x)
            if not np.array_equal(g, python.gradient(x)):
                errors.append(f"thread {offset}: call {i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
