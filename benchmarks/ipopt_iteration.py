"""``python -m benchmarks.ipopt_iteration``: IPOPT's derivative time per iteration
through difgen's generated cyipopt problem class against CasADi's ``nlpsol``, on
the sample NLP of the tests (``tests/support/nlp_functions.py``: 80 variables, 81
constraints), the bar of issue 23: "difgen derivative time per IPOPT iteration
/ CasADi's <= 1.0", with as many iterations, on the module built with
``emit = "c"`` (its callbacks call the compiled private functions of x); the
NumPy module's time is printed beside it.

difgen's time is the time spent in the ``gradient``, ``jacobian`` and ``hessian``
callbacks (timed around each call, cyipopt's own conversions outside it); CasADi's
is its ``nlp_grad_f``, ``nlp_jac_g`` and ``nlp_hess_l`` wall times from
``solver.stats()``. Each is divided by the iterations of its solve, and the best
of ``--repeat`` solves is kept. Needs cyipopt (Debian's coinor-libipopt-dev, then
pip's cyipopt), casadi and a C compiler; prints the table and exits 1 when the bar
fails or the iteration counts differ.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import types
from importlib import util
from pathlib import Path
from typing import Any

import numpy as np

import difgen

SUPPORT = Path(__file__).resolve().parents[1] / "tests" / "support"
BAR = "difgen derivative time per IPOPT iteration / CasADi's <= 1.0"
CONFIG = """
[difgen]
output_dir = "out"

[[module]]
name = "sample_nlp"
function = "nlp_functions:objective"
constraints = { function = "nlp_functions:constraints", size = 81 }
backend = "trace"
operators = ["gradient", "hessian"]
input = { shape = [80] }
adapters = ["ipopt"]
emit = "{emit}"
"""
DERIVATIVES = ("gradient", "jacobian", "hessian")
CASADI_DERIVATIVES = ("nlp_grad_f", "nlp_jac_g", "nlp_hess_l")


class _Timed:
    """The generated problem object, timing its derivative callbacks and
    counting IPOPT's iterations."""

    def __init__(self, problem: Any) -> None:
        self.problem = problem
        self.iterations = 0
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.problem, name)
        if name not in DERIVATIVES:
            return method

        def timed(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args)
            finally:
                self.seconds += time.perf_counter() - start

        return timed

    def intermediate(self, *args: Any) -> None:
        self.iterations = int(args[1])


def _module(folder: Path, emit: str) -> types.ModuleType:
    """The sample NLP's module with ``emit`` ("vector" or "c", compiled)."""
    folder.mkdir()
    (folder / "difgen.toml").write_text(CONFIG.replace("{emit}", emit))
    difgen.build(folder / "difgen.toml", compile=emit == "c")
    path = folder / "out" / "sample_nlp.py"
    spec = util.spec_from_file_location(f"sample_nlp_{emit}", path)
    assert spec is not None and spec.loader is not None
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert emit != "c" or module.COMPILED, module.C_FALLBACK_REASON
    return module


def _difgen(module: types.ModuleType, nlp: Any) -> tuple[float, int, np.ndarray]:
    import cyipopt

    timed = _Timed(module.IpoptProblem())
    problem = cyipopt.Problem(
        n=nlp.N, m=nlp.M, problem_obj=timed, cl=nlp.LOWER, cu=nlp.UPPER
    )
    problem.add_option("print_level", 0)
    problem.add_option("tol", 1e-8)
    x, info = problem.solve(nlp.START)
    assert info["status"] == 0, info["status_msg"]
    return timed.seconds, timed.iterations, x


def _casadi(nlp: Any) -> tuple[float, int, np.ndarray]:
    import casadi

    class Ops:
        sum = staticmethod(casadi.sum1)
        sin = staticmethod(casadi.sin)
        exp = staticmethod(casadi.exp)
        concatenate = staticmethod(lambda parts: casadi.vertcat(*parts))

    symbols = casadi.SX.sym("x", nlp.N)
    model = {
        "x": symbols,
        "f": nlp.objective_of(symbols, Ops),
        "g": nlp.constraints_of(symbols, Ops),
    }
    options = {"ipopt.print_level": 0, "print_time": 0, "ipopt.tol": 1e-8}
    solver = casadi.nlpsol("sample", "ipopt", model, options)
    found = solver(x0=nlp.START, lbg=nlp.LOWER, ubg=nlp.UPPER)
    stats = solver.stats()
    assert stats["success"]
    seconds = sum(
        float(stats.get(f"t_wall_{name}", 0.0)) for name in CASADI_DERIVATIVES
    )
    return seconds, int(stats["iter_count"]), np.asarray(found["x"]).ravel()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ipopt_iteration", description=__doc__
    )
    parser.add_argument("--repeat", type=int, default=5, help="solves per tool")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(SUPPORT))
    import nlp_functions as nlp

    with tempfile.TemporaryDirectory() as folder:
        python = _module(Path(folder) / "vector", "vector")
        compiled = _module(Path(folder) / "c", "c")
        numpy_runs = [_difgen(python, nlp) for _ in range(args.repeat)]
        ours = [_difgen(compiled, nlp) for _ in range(args.repeat)]
    theirs = [_casadi(nlp) for _ in range(args.repeat)]
    (_, our_iterations, x), (_, their_iterations, y) = ours[0], theirs[0]
    numpy_time = min(s / max(i, 1) for s, i, _ in numpy_runs)
    our_time = min(s / max(i, 1) for s, i, _ in ours)
    their_time = min(s / max(i, 1) for s, i, _ in theirs)
    same_point = bool(np.allclose(x, y, atol=1e-7))
    ratio = our_time / their_time
    ok = ratio <= 1.0 and our_iterations == their_iterations
    print("| tool | iterations | derivative time per iteration |")
    print("|---|---|---|")
    print(
        f'| difgen (cyipopt, emit = "c") | {our_iterations} | {our_time * 1e3:.3f} ms |'
    )
    print(
        f"| difgen (cyipopt, NumPy) | {numpy_runs[0][1]} | {numpy_time * 1e3:.3f} ms |"
    )
    print(f"| CasADi nlpsol | {their_iterations} | {their_time * 1e3:.3f} ms |")
    print(f"\n{BAR}: {'PASS' if ok else 'FAIL'} (ratio {ratio:.2f})")
    print(f"same solution (to 1e-7): {same_point}")
    return 0 if ok and same_point else 1


if __name__ == "__main__":
    sys.exit(main())
