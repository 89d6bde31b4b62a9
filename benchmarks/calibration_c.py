"""``python -m benchmarks.calibration_c``: the figures behind the C target's constants.

A constant of ``difgen/targets/c`` says in its docstring what it is for; the
figure that justifies its value is measured here, on this machine, and printed
as a table (figure, measured value, the constant it justifies):

- :func:`ufunc_call`: what one call of a NumPy ufunc costs compiled C loops
  (wrapping the operands as arrays and calling ``numpy.exp``), and from how many
  elements NumPy's loop, faster per element than the C library's, wins it back:
  ``targets/c/plan.py``'s ``UFUNC_SIZE``.
- :func:`demand_analysis`: the build time of the demand analysis per element of
  a result computed on demand, the 512-state Brusselator's sparse jacobian:
  ``targets/c/demand.py``'s ``PUSH_ELEMENTS``.
- :func:`csr_out_check`: what the module's ``_check_csr_out`` (two
  ``np.array_equal`` of a CSR ``out``'s pattern) costs a call, which the
  compiled operator does in C instead: ``targets/c/extension.py``'s
  ``csr_pattern``.

Each builds (and compiles, once) what it times into a temporary directory; the
whole run takes well under a minute. Timings are medians over repeats with the
garbage collector off.
"""

from __future__ import annotations

import functools
import importlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from benchmarks.points import median_time

HERE = Path(__file__).resolve().parent
PROBLEMS = HERE / "problems.py"


@dataclass(frozen=True)
class Figure:
    """One measured figure and the constant it justifies."""

    name: str
    value: str
    justifies: str


def _build(directory: Path, modules: str, compiled: bool = True) -> None:
    """Build (and compile) the ``[[module]]`` tables ``modules`` in ``directory``,
    whose function files are ``problems.py`` and ``calibration_fn.py``."""
    from difgen import build

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "problems.py").write_text(PROBLEMS.read_text())
    (directory / "calibration_fn.py").write_text(
        "import numpy as np\n\n\ndef exps(x):\n    return np.sum(np.exp(x))\n"
    )
    config = directory / "difgen.toml"
    config.write_text('[difgen]\noutput_dir = "out"\n\n' + modules)
    build(config, compile=compiled)


def _import(directory: Path, name: str) -> ModuleType:
    if str(directory / "out") not in sys.path:
        sys.path.insert(0, str(directory / "out"))
    module = importlib.import_module(name)
    if hasattr(module, "COMPILED") and not module.COMPILED:
        raise RuntimeError(f"{name} not compiled: {module.C_FALLBACK_REASON}")
    return module


@contextmanager
def _ufunc_size(size: int) -> Iterator[None]:
    """Build with the C loops calling NumPy's ufuncs from ``size`` elements, and
    every graph printed as loops (none as straight-line C)."""
    from difgen.targets.c import loops, plan

    kept = plan.UFUNC_SIZE, loops.STRAIGHT_LINE_WORK
    plan.UFUNC_SIZE, loops.STRAIGHT_LINE_WORK = size, -1
    try:
        yield
    finally:
        plan.UFUNC_SIZE, loops.STRAIGHT_LINE_WORK = kept


def _exps_module(name: str, n: int) -> str:
    return (
        f'[[module]]\nname = "{name}"\nfunction = "calibration_fn.py:exps"\n'
        f'backend = "trace"\nemit = "c"\noperators = ["gradient"]\n'
        f"input = {{ shape = [{n}] }}\n\n"
    )


def ufunc_call(directory: Path) -> list[Figure]:
    """The gradient of ``sum(exp(x))``, ``exp(x)``, compiled twice at each size:
    as a C loop over the C library's ``exp`` and as one call of ``numpy.exp``.
    At 8 elements the difference is the call; at 65,536 it is the per-element
    saving of NumPy's loop; their ratio is the size from which the call pays."""
    from difgen.targets.c import plan

    small, large = 8, 65536
    for label, size in (("libm", 10**9), ("ufunc", 1)):
        with _ufunc_size(size):
            modules = _exps_module(f"exps_{label}_{small}", small)
            modules += _exps_module(f"exps_{label}_{large}", large)
            _build(directory / label, modules)
        for n in (small, large):
            source = directory / label / "out" / f"exps_{label}_{n}__c.c"
            calls = "NumPy's exp loop" in source.read_text()
            assert calls == (label == "ufunc"), (label, n)  # what is timed
    times: dict[tuple[str, int], float] = {}
    rng = np.random.default_rng(0)
    for n in (small, large):
        x = rng.uniform(-3.0, 3.0, n)
        for label in ("libm", "ufunc"):
            gradient = _import(directory / label, f"exps_{label}_{n}").gradient
            number = 2000 if n == small else 50
            times[label, n] = median_time(functools.partial(gradient, x), 21, number)
    call = times["ufunc", small] - times["libm", small]
    saving = (times["libm", large] - times["ufunc", large]) / large
    crossover = f"{call / saving:.0f} elements" if saving > 0 else "never"
    return [
        Figure(
            "a NumPy ufunc call from the C loops",
            f"{call * 1e6:.2f} us",
            f"UFUNC_SIZE = {plan.UFUNC_SIZE} (plan.py)",
        ),
        Figure(
            "NumPy's exp loop saves, per element",
            f"{saving * 1e9:.2f} ns",
            f"UFUNC_SIZE = {plan.UFUNC_SIZE} (plan.py)",
        ),
        Figure(
            "so the call pays from",
            crossover,
            f"UFUNC_SIZE = {plan.UFUNC_SIZE} (plan.py)",
        ),
    ]


def demand_analysis(directory: Path) -> list[Figure]:
    """The demand analysis's build time per element, timed inside a build of
    the 512-state Brusselator's sparse jacobian (3,072 nonzeros) as C loops."""
    from difgen.targets.c import demand, plan

    spent: list[tuple[float, int]] = []
    original = plan.demand_of

    def timed(graph: Any, out: Any, consts: Any) -> Any:
        start = time.process_time()  # CPU time: other processes do not count
        found = original(graph, out, consts)
        spent.append((time.process_time() - start, int(out.size)))
        return found

    module = (
        '[[module]]\nname = "brusselator_demand"\nfunction = "problems.py:brusselator"\n'
        'backend = "trace"\nemit = "c"\noperators = ["jacobian"]\n'
        "input = { shape = [512] }\nsparse = true\n"
    )
    plan.demand_of = timed
    try:
        _build(directory / "demand", module, compiled=False)
    finally:
        plan.demand_of = original
    seconds = sum(s for s, _ in spent)
    elements = sum(n for _, n in spent)
    return [
        Figure(
            "demand analysis, per element (build time)",
            f"{seconds / elements * 1e6:.0f} us ({len(spent)} results, "
            f"{elements} elements: {seconds:.2f} s CPU)",
            f"PUSH_ELEMENTS = {demand.PUSH_ELEMENTS} (demand.py)",
        )
    ]


def csr_out_check(directory: Path) -> list[Figure]:
    """The module's ``_check_csr_out`` on a CSR ``out`` of the operator's
    pattern (a copy, so that its index arrays are compared, not identical), and
    the compiled jacobian's whole call into that ``out``, which checks it in C."""
    module = (
        '[[module]]\nname = "brusselator_out"\nfunction = "problems.py:brusselator"\n'
        'backend = "trace"\nemit = "c"\noperators = ["jacobian"]\n'
        "input = { shape = [512] }\nsparse = true\n"
    )
    _build(directory / "csr", module)
    mod = _import(directory / "csr", "brusselator_out")
    x = np.random.default_rng(0).uniform(0.5, 2.0, 512)
    out = mod.jacobian(x).copy()
    indices, indptr = mod.JACOBIAN_INDICES, mod.JACOBIAN_INDPTR
    check: Callable[[], Any] = lambda: mod._check_csr_out(
        out, indices, indptr, (512, 512)
    )
    checked = median_time(check, 15, 2000)
    call = median_time(lambda: mod.jacobian(x, out=out), 15, 2000)
    return [
        Figure(
            "_check_csr_out of a CSR out (Python)",
            f"{checked * 1e6:.2f} us",
            "csr_pattern: the C checks out (extension.py)",
        ),
        Figure(
            "the compiled jacobian into that out, whole call",
            f"{call * 1e6:.2f} us",
            "csr_pattern: the C checks out (extension.py)",
        ),
    ]


MEASUREMENTS = (ufunc_call, demand_analysis, csr_out_check)


def main() -> int:
    start = time.perf_counter()
    rows: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="difgen-calibration-c-") as tmp:
        for measure in MEASUREMENTS:
            directory = Path(tmp) / measure.__name__
            directory.mkdir()
            rows += measure(directory)
    widths = [
        max(len(r.name) for r in rows),
        max(len(r.value) for r in rows),
    ]
    print(f"| {'figure':<{widths[0]}} | {'measured':<{widths[1]}} | justifies |")
    print(f"|{'-' * (widths[0] + 2)}|{'-' * (widths[1] + 2)}|-----------|")
    for r in rows:
        print(f"| {r.name:<{widths[0]}} | {r.value:<{widths[1]}} | {r.justifies} |")
    print(f"\n({time.perf_counter() - start:.0f} s on this machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
