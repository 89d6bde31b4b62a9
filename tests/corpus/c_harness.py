"""The corpus with ``emit = "c"``: build, compile, and compare with the fallback.

Every corpus function is built once with ``emit = "c"``: on the sympy backend when
the corpus handles it there, else on the trace backend (reverse mode), with the
operators the corpus samples for that backend (:func:`harness.operators`). Each
module is generated in its own directory by a pool of two worker processes (a
refusal is that module's outcome, not the batch's), then every extension is
compiled in one parallel batch (:func:`difgen.targets.c.compiling.compile_module`, two at a
time). ``test_c_corpus.py`` compares each compiled module with its own Python
fallback; the builds that refuse must be exactly those of
:data:`c_expectations.EXPECTED_C_REFUSALS`.

After a change to the C target, regenerate that table with::

    python tests/corpus/c_harness.py > tests/corpus/c_expectations.py

which builds the whole corpus this way and prints that file (the refusals
observed, one fragment of difgen's message each).
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import shutil
import sys
import time
import types
import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # run as a script: the corpus modules sit here
    sys.path.insert(0, str(HERE))

from catalog import BY_NAME, CASES, Case  # noqa: E402
from expectations import EXPECTED_REFUSALS, KNOWN_CRASHES  # noqa: E402
from harness import POINTS, module_table  # noqa: E402

import difgen  # noqa: E402
from difgen.errors import DifgenError  # noqa: E402
from difgen.targets.c.compiling import CompileError, compile_module  # noqa: E402

TIMEOUT = 30.0
"""Seconds one module's generation may take (difgen's own limit): a build over it
is listed as a refusal ("the time limit"), so one slow module cannot stall CI."""

JOBS = 2
"""Worker processes generating modules, and compilers running at once."""

SPECIAL = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300, -1e300)
"""Values spread over the input of the third point each module is compared at."""


def backend_of(case: Case) -> tuple[str, str]:
    """(backend, mode) of the case's C build: sympy when the corpus builds it
    there, else the trace backend in reverse mode."""
    sympy_ok = (
        "sympy" in case.backends
        and (case.name, "sympy") not in EXPECTED_REFUSALS
        and (case.name, "sympy") not in KNOWN_CRASHES
    )
    return ("sympy", "auto") if sympy_ok else ("trace", "reverse")


def module_name(case: Case) -> str:
    """The C build's module name."""
    return f"{case.name}__c_target"


def config_text(case: Case) -> str:
    """A one-module config: the corpus's table for the case with ``emit = "c"``."""
    backend, mode = backend_of(case)
    table = module_table((case.name, backend, mode))
    table[1] = f'name = "{module_name(case)}"'
    return "\n".join(['[difgen]\noutput_dir = "out"\n', *table[:-1], 'emit = "c"', ""])


@dataclass(frozen=True)
class Outcome:
    """One case's C build: its directory, or why difgen refused it."""

    name: str
    directory: Path
    refusal: str | None
    seconds: float


def generate(name: str, root: str) -> Outcome:
    """Generate one case's module and C source in ``root/<name>`` (in a worker)."""
    case = BY_NAME[name]
    directory = Path(root) / name
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "difgen.toml"
    config.write_text(config_text(case))
    start = time.perf_counter()
    try:
        difgen.build(config, timeout=TIMEOUT)
    except DifgenError as exc:
        return Outcome(name, directory, _one_line(exc), time.perf_counter() - start)
    return Outcome(name, directory, None, time.perf_counter() - start)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def build_corpus(root: Path, names: list[str] | None = None) -> dict[str, Outcome]:
    """Generate every case's module (two workers), then compile every extension
    in one parallel batch; a compiler failure is recorded as that case's
    refusal (and is a bug of the C target: the table never lists one)."""
    names = [c.name for c in CASES] if names is None else names
    with ProcessPoolExecutor(JOBS, mp_context=get_context("spawn")) as pool:
        outcomes = {
            o.name: o for o in pool.map(generate, names, itertools.repeat(str(root)))
        }

    def compile_one(o: Outcome) -> Outcome:
        try:
            compile_module(o.directory / "out", module_name(BY_NAME[o.name]))
        except CompileError as exc:
            return Outcome(o.name, o.directory, f"compile: {_one_line(exc)}", 0.0)
        return o

    built = [o for o in outcomes.values() if o.refusal is None]
    with ThreadPoolExecutor(JOBS) as threads:
        for o in threads.map(compile_one, built):
            outcomes[o.name] = o
    return outcomes


_counter = itertools.count()


def load(path: Path) -> types.ModuleType:
    """Import a generated module from its file under a unique name (its
    fallback's RuntimeWarning silenced: the caller checks ``COMPILED``)."""
    spec = importlib.util.spec_from_file_location(
        f"_c_corpus_{path.stem}_{next(_counter)}", path
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        spec.loader.exec_module(module)
    return module


def compiled_and_fallback(o: Outcome) -> tuple[types.ModuleType, types.ModuleType]:
    """The module with its extension, and a lone copy running its Python code."""
    name = module_name(BY_NAME[o.name])
    compiled = load(o.directory / "out" / f"{name}.py")
    lone = o.directory / "fallback"
    lone.mkdir(exist_ok=True)
    python = load(Path(shutil.copy(o.directory / "out" / f"{name}.py", lone)))
    return compiled, python


def sample_calls(case: Case, module: types.ModuleType) -> list[tuple[str, list[Any]]]:
    """(operator, arguments) of every public operator at the corpus's two sample
    points and at a third one with NaN, inf, signed zeros and huge values."""
    x0, _ = case.point(POINTS[0])
    ys = np.shape(case.fn(np.copy(x0), *case.point(POINTS[0])[1]))
    calls = []
    for seed in (*POINTS, None):
        x, ctx = case.point(POINTS[0] if seed is None else seed)
        if seed is None:
            x = np.array(x, dtype=float)
            rng = np.random.default_rng(5)
            where = rng.random(x.shape) < 0.5
            x[where] = rng.choice(SPECIAL, size=int(where.sum()))
            x = float(x) if x.ndim == 0 else x
        rng = np.random.default_rng(0 if seed is None else seed + 100)
        seeds = {
            "dx": rng.normal(size=np.shape(x)),
            "v": rng.normal(size=np.shape(x)),
            "dy": rng.normal(size=ys),
        }
        for op in module.__all__:
            code = getattr(module, op).__code__
            params = code.co_varnames[: code.co_argcount]
            extra = [seeds[p] for p in params if p in seeds]
            calls.append((op, [x, *extra, *ctx]))
    return calls


def outcome(fn: Any, args: list[Any]) -> Any:
    """A call's result, or the type and message of what it raised."""
    try:
        with np.errstate(all="ignore"):
            return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 (the exception is the outcome)
        return (type(exc), str(exc))


def pairwise(a: Any, b: Any, what: str, leaf: Any) -> None:
    """``leaf(a, b, what)`` on each pair of results, after checking that ``a`` has
    ``b``'s structure: tuples of the same length, leaves of the same type."""
    if isinstance(b, tuple):
        assert isinstance(a, tuple) and len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b)):
            pairwise(x, y, f"{what}[{i}]", leaf)
        return
    assert type(a) is type(b), f"{what}: {type(a)} != {type(b)}"
    leaf(a, b, what)


def same(a: Any, b: Any, what: str) -> None:
    """Bit-identical results (NaN equal to NaN), of the same types and shapes."""
    pairwise(a, b, what, _same_leaf)


def _same_leaf(a: Any, b: Any, what: str) -> None:
    np.testing.assert_array_equal(
        np.asarray(a), np.asarray(b), strict=True, err_msg=what
    )


HEADER = '''"""The corpus functions the C target does not build today, and why.

GENERATED by ``python tests/corpus/c_harness.py > tests/corpus/c_expectations.py``
(then ``black``): each entry is a corpus function whose ``emit = "c"`` build
(:mod:`c_harness`) difgen refuses, with a fragment its message must contain.
``test_c_corpus.py`` fails on a refusal missing here and on an entry that now
builds: regenerate the table after a change to the C target. A compiler failure
is never an entry (it is a bug).
"""

'''


LIBM = re.compile(r"\b_(log2|log10|exp2)\(")
"""Helpers whose fallback is NumPy's own function and whose C code is the C
library's: the two differ in the last bit on some floats."""


def libm_differs(o: Outcome) -> bool:
    """Whether the module's C code calls one of :data:`LIBM`."""
    name = module_name(BY_NAME[o.name])
    return bool(LIBM.search((o.directory / "out" / f"{name}__c.c").read_text()))


def near(a: Any, b: Any, what: str) -> None:
    """Equal to ``rtol = 1e-12`` (NaN equal to NaN), same types and shapes."""
    pairwise(a, b, what, _near_leaf)


def _near_leaf(a: Any, b: Any, what: str) -> None:
    assert np.shape(a) == np.shape(b), what
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=0.0, err_msg=what)


def loop_operators(o: Outcome) -> set[str]:
    """The operators of the module's C code that are C loops over the graph (the
    rest are straight-line code)."""
    name = module_name(BY_NAME[o.name])
    text = (o.directory / "out" / f"{name}__c.c").read_text()
    return set(re.findall(r"/\* (\w+): C loops over the trace backend's graph", text))


def near_scale(a: Any, b: Any, what: str) -> None:
    """C loops against their vector fallback: NaN and infinities where the fallback
    has them, finite values to 1e-12 of the result's largest finite magnitude (loops
    sum in index order where NumPy sums pairwise and BLAS blocks; large
    transcendentals are NumPy's own loops in both)."""
    pairwise(a, b, what, _near_scale_leaf)


def _near_scale_leaf(a: Any, b: Any, what: str) -> None:
    if hasattr(b, "toarray"):  # a sparse result: its values
        assert np.array_equal(a.indices, b.indices), what
        assert np.array_equal(a.indptr, b.indptr), what
        a, b = a.data, b.data
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, what
    finite = np.isfinite(b)
    np.testing.assert_array_equal(a[~finite], b[~finite], err_msg=what)
    scale = float(np.max(np.abs(b[finite]), initial=0.0))
    np.testing.assert_allclose(a[finite], b[finite], rtol=0, atol=1e-12 * scale)


def table(outcomes: dict[str, Outcome]) -> str:
    """The refusals observed, as the text of ``c_expectations.py``."""
    lines = [HEADER + "EXPECTED_C_REFUSALS: dict[str, str] = {"]
    for name, o in sorted(outcomes.items()):
        if o.refusal is not None:
            lines.append(f"    {name!r}: {reason_fragment(o.refusal)!r},")
    return "\n".join([*lines, "}"])


FRAGMENTS = (
    "have no C code",
    "cannot scalarize",
    "cannot print",
    "time limit",
    "compile:",
)
"""The parts of difgen's messages a table entry keeps (the first that occurs); the
full message otherwise."""


def normalized(message: str) -> str:
    """A refusal's message without directories (file names and lines stay)."""
    return re.sub(r"/\S*/", "", message)


def reason_fragment(message: str) -> str:
    """The part of a refusal's message its table entry must match."""
    message = re.sub(r"^module '[^']*' \([^)]*\): ", "", normalized(message))
    for fragment in FRAGMENTS:
        at = message.find(fragment)
        if at >= 0:
            message = message[at:]
            break
    return message if len(message) <= 72 else message[:72].rsplit(" ", 1)[0]


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        outcomes = build_corpus(Path(tmp))
        print(table(outcomes))
        done = sum(o.refusal is None for o in outcomes.values())
        print(
            f"# {done} built and compiled, {len(outcomes) - done} refused, "
            f"{time.perf_counter() - start:.0f} s",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
