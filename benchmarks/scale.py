"""``python -m benchmarks.scale [--quick] [--limit S] [--memory GB]``: cost against size.

Issue 21 asks that what difgen builds, and the time it takes, grow with the
*program* rather than the *data*. This script builds three families at growing
sizes, each build in a fresh process (like ``difgen build``) with a wall-time
limit and an address-space limit (so that a build that would take the machine's
memory fails here instead), and records, per size: the build's wall seconds, the
process's peak memory, the size of what it wrote (the module, and its C source
where there is one), the evaluation time of the operator, and a check of its
values against an independent reference:

- ``brusselator``: the 2-D Brusselator on an N x N periodic grid (2 N^2 states),
  ``sparse = true`` jacobian, NumPy and compiled C; the reference and the peer is a
  hand-written NumPy fill of the CSR data of the same pattern (four state-dependent
  diagonals over a copy of the constant coupling), the C extension filling its CSR
  result in place (``out=``); at N = 16, 32 and 48 the C row is also timed against
  CasADi's generated C of the same jacobian filling the same CSR data in place (a
  missing CasADi is a failed bar);
- ``arrowhead``: ``sum(x[0] * x[1:]**2) + sum(x**4)``, ``sparse = true`` Hessian; the
  number of colors the build used is recorded (the coloring is observed in the
  build process), the reference is the Hessian written by hand;
- ``euler``: an explicit-Euler loop of ``steps`` steps (a static ``range``) on a
  2-parameter oscillator, gradient of the final energy, NumPy and compiled C (the
  loop, its tape and the backward loop in C); the reference and the peer is
  ``jax.jit(jax.grad(...))`` of the same loop written with ``lax.fori_loop``
  (float64), when JAX is installed.

The bars are the issue's targets, judged on this run; a size that fails to build is
a failed row, never a missing one. Writes ``benchmarks/results/scale.md`` (the table
and the bars), ``scale.json`` and ``scale.png`` (build time, module size and
evaluation time against size, log-log). Exits 1 when a bar fails.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"

FUNCTIONS = """\
import numpy as np


def brusselator(s, n):
    u = s[: n * n].reshape(n, n)
    v = s[n * n :].reshape(n, n)
    lap_u = (
        np.roll(u, 1, 0) + np.roll(u, -1, 0) + np.roll(u, 1, 1) + np.roll(u, -1, 1)
    ) - 4 * u
    lap_v = (
        np.roll(v, 1, 0) + np.roll(v, -1, 0) + np.roll(v, 1, 1) + np.roll(v, -1, 1)
    ) - 4 * v
    uuv = u * u * v
    du = 10.0 * lap_u + 1.0 + uuv - 4.4 * u
    dv = 10.0 * lap_v + 3.4 * u - uuv
    return np.concatenate([du.ravel(), dv.ravel()])


def arrowhead(x):
    return np.sum(x[0] * x[1:] ** 2) + np.sum(x**4)


def euler(p, steps):
    h = 0.01
    pos, vel = 1.0, 0.0
    for _ in range(steps):
        acc = -p[0] * pos - p[1] * vel + 0.5 * np.sin(pos)
        pos, vel = pos + h * vel, vel + h * acc
    return pos**2 + vel**2
"""


@dataclass(frozen=True)
class Build:
    """One row: a family at one size, built with one emission."""

    family: str
    size: int
    emit: str

    @property
    def label(self) -> str:
        return f"{self.family} {self.size} ({self.emit})"

    @property
    def function(self) -> str:
        if self.family == "arrowhead":
            return "arrowhead"
        return f"{self.family}_{self.size}"

    @property
    def shape(self) -> list[int]:
        return {
            "brusselator": [2 * self.size * self.size],
            "arrowhead": [self.size],
            "euler": [2],
        }[self.family]

    @property
    def operator(self) -> str:
        return {"brusselator": "jacobian", "arrowhead": "hessian", "euler": "gradient"}[
            self.family
        ]


CASADI_GRIDS = (16, 32, 48)
"""Brusselator grids whose C jacobian is also timed against CasADi's generated C
(filling the same CSR data in place); issue 24's bar is there."""

CASADI_COMPILE_SECONDS = 900
"""How long gcc may take on CasADi's C here (one large function per jacobian:
at N = 32 it took over 120 s on a loaded machine); run with a ``--limit`` above
it."""


def builds(quick: bool) -> list[Build]:
    """The table's rows, family by family, in increasing size (the C rows also
    at the CasADi grids)."""
    grids = [16, 32, 64] if quick else [16, 32, 64, 128, 256]
    c_grids = sorted(set(grids) | set(CASADI_GRIDS))
    arrows = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    steps = [10, 100, 1_000] if quick else [10, 100, 1_000, 10_000, 100_000]
    return (
        [Build("brusselator", n, "vector") for n in grids]
        + [Build("brusselator", n, "c") for n in c_grids]
        + [Build("arrowhead", n, "vector") for n in arrows]
        + [Build("euler", n, emit) for emit in ("vector", "c") for n in steps]
    )


CONFIG = """\
[difgen]
output_dir = "out"

[[module]]
name = "m"
function = "functions.py:{function}"
backend = "trace"
operators = ["{operator}"]
input = {{ shape = {shape} }}
emit = "{emit}"
{extra}
"""


def point(build: Build) -> np.ndarray:
    """The evaluation point of a row."""
    rng = np.random.default_rng(0)
    if build.family == "euler":
        return np.array([4.0, 0.3])
    return rng.uniform(0.5, 2.0, build.shape[0])


# ------------------------------------------------------------------ references
def brusselator_csr(n: int) -> tuple[Callable[[np.ndarray, np.ndarray], None], Any]:
    """The hand-written jacobian of the N x N Brusselator: a fill of the CSR data in
    place, and the CSR array it fills (the pattern fixed once, as a user would)."""
    from scipy import sparse

    m = n * n
    k = np.arange(m)
    i, j = np.divmod(k, n)
    neighbours = [
        ((i + di) % n) * n + (j + dj) % n
        for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1))
    ]
    blocks = [(k, k, 1), (k, k + m, 2), (k + m, k, 3), (k + m, k + m, 4)]
    blocks += [(k, nb, 0) for nb in neighbours] + [
        (k + m, nb + m, 0) for nb in neighbours
    ]
    rows = np.concatenate([b[0] for b in blocks])
    cols = np.concatenate([b[1] for b in blocks])
    kind = np.concatenate([np.full(m, b[2]) for b in blocks])
    order = np.lexsort((cols, rows))
    rows, indices, kind = rows[order], cols[order], kind[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=2 * m))])
    base = np.where(kind == 0, 10.0, 0.0)
    at = [np.flatnonzero(kind == c) for c in (1, 2, 3, 4)]

    def fill(s: np.ndarray, data: np.ndarray) -> None:
        u, v = s[:m], s[m:]
        uv2, uu = 2 * u * v, u * u
        data[:] = base
        data[at[0]] = uv2 - 44.4
        data[at[1]] = uu
        data[at[2]] = 3.4 - uv2
        data[at[3]] = -40.0 - uu

    csr = sparse.csr_array((base.copy(), indices, indptr), shape=(2 * m, 2 * m))
    return fill, csr


def brusselator_casadi(n: int, x: np.ndarray) -> tuple[Any, Any] | str:
    """CasADi's generated C of the N x N Brusselator's jacobian (SX graph of the
    same function, ``ca.jacobian``, C from its code generator compiled as
    ``benchmarks.peers`` compiles it): ``(fill, csr)`` where ``fill(x)`` writes
    the jacobian's nonzeros into ``csr.data`` in place, or why there is none."""
    from benchmarks import peers
    from benchmarks.cases import Case

    ca = peers.load("casadi")
    if ca is None:
        return "CasADi not installed"
    namespace: dict[str, Any] = {}
    exec(FUNCTIONS, namespace)  # noqa: S102 (the benchmark's own functions)
    fn = peers.rebind(namespace["brusselator"], peers._casadi_numpy(ca))
    sym, elements = peers._sx_vector(ca, "x", x)
    y = ca.vertcat(*np.ravel(np.asarray(fn(elements, n), dtype=object)))
    F = ca.Function("op", [sym], [ca.jacobian(y, sym)])
    case = Case(f"brusselator_{n}", "brusselator", "jacobian", fn, fn, x)
    peers.CASADI_COMPILE_LIMIT = max(peers.CASADI_COMPILE_LIMIT, CASADI_COMPILE_SECONDS)
    try:
        built = peers.casadi_extension(case, F, ca, sparse_out=True)
    except subprocess.TimeoutExpired:
        limit = peers.CASADI_COMPILE_LIMIT
        return f"gcc did not finish compiling CasADi's C in {limit} s"
    op, csr = built.op, built.csr
    return (lambda s: op(s, csr)), csr


def arrowhead_hessian(x: np.ndarray) -> np.ndarray:
    """The arrowhead's Hessian by hand (dense: used at the sizes it fits)."""
    n = x.size
    h = np.diag(12.0 * x**2)
    h[1:, 1:] += np.diag(np.full(n - 1, 2.0 * x[0]))
    h[0, 1:] += 2.0 * x[1:]
    h[1:, 0] += 2.0 * x[1:]
    return h


def euler_jax(steps: int) -> Callable[[np.ndarray], np.ndarray] | None:
    """``jax.jit(jax.grad(...))`` of the loop with ``lax.fori_loop`` (float64)."""
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def energy(p: Any) -> Any:
        def step(_: Any, state: Any) -> Any:
            pos, vel = state
            acc = -p[0] * pos - p[1] * vel + 0.5 * jnp.sin(pos)
            return pos + 0.01 * vel, vel + 0.01 * acc

        pos, vel = jax.lax.fori_loop(0, steps, step, (1.0, 0.0))
        return pos**2 + vel**2

    return jax.jit(jax.grad(energy))  # type: ignore[no-any-return]


def best_seconds(fn: Callable[[], Any], budget: float = 0.3) -> float:
    """The fastest of repeated calls over about ``budget`` seconds (at least 3)."""
    fn()
    times: list[float] = []
    spent = 0.0
    while len(times) < 3 or (spent < budget and len(times) < 10_000):
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        times.append(dt)
        spent += dt
    return min(times)


# ------------------------------------------------------------------ the worker
def worker(directory: Path, build: Build) -> dict[str, Any]:
    """Build the row's config in this process, then evaluate and check it."""
    import importlib.util

    import difgen

    colors: list[int] = []

    def observed(color: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            coloring = color(*args, **kwargs)
            colors.append(coloring.ncolors)
            return coloring

        return run

    from difgen.derive import graphs

    # what the build colors with
    for name in ("coloring_of", "hessian_coloring_of", "jacobian_coloring_of"):
        if hasattr(graphs, name):
            setattr(graphs, name, observed(getattr(graphs, name)))

    def cpu() -> float:  # this process's and its children's (the compiler's)
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    wall, spent = time.perf_counter(), cpu()
    difgen.build(directory / "difgen.toml", compile=build.emit == "c")
    wall, spent = time.perf_counter() - wall, cpu() - spent
    out = directory / "out"
    written = sum(p.stat().st_size for p in out.iterdir() if p.suffix in (".py", ".c"))
    c_source = sum(p.stat().st_size for p in out.iterdir() if p.suffix == ".c")
    spec = importlib.util.spec_from_file_location("m", out / "m.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    op = getattr(module, build.operator)
    x = point(build)
    result: dict[str, Any] = {
        "build_s": wall,
        "build_cpu_s": spent,
        "c_bytes": c_source,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "bytes": written,
        "colors": max(colors) if colors else None,
        "compiled": getattr(module, "COMPILED", None),
        # emit = "c" keeps an operator in Python when it has no C form: say so
        "in_c": build.emit == "c"
        and bool(getattr(module, "COMPILED", False))
        and build.operator not in getattr(module, "PYTHON_OPERATORS", ()),
    }
    if build.family == "brusselator":
        fill, csr = brusselator_csr(build.size)
        got = op(x)
        fill(x, csr.data)
        same = (
            np.array_equal(got.indices, csr.indices)
            and np.array_equal(got.indptr, csr.indptr)
            and np.allclose(got.data, csr.data, rtol=1e-13, atol=0.0)
        )
        if build.emit == "c":
            target = op(x)
            result["eval_s"] = best_seconds(lambda: op(x, out=target))
        else:
            result["eval_s"] = best_seconds(lambda: op(x))
        data = csr.data
        result["peer_s"] = best_seconds(lambda: fill(x, data))
        result["peer"] = "hand-written NumPy CSR fill"
        if build.emit == "c" and build.size in CASADI_GRIDS:
            found = brusselator_casadi(build.size, x)
            if isinstance(found, str):
                result["casadi"] = found
            else:
                casadi_fill, casadi_csr = found
                casadi_fill(x)
                same = same and bool(
                    np.array_equal(casadi_csr.indices, csr.indices)
                    and np.array_equal(casadi_csr.indptr, csr.indptr)
                    and np.allclose(casadi_csr.data, got.data, rtol=1e-13, atol=0.0)
                )
                result["casadi_s"] = best_seconds(lambda: casadi_fill(x))
    elif build.family == "arrowhead":
        got = op(x)
        if build.size <= 10_000:
            same = bool(np.allclose(got.toarray(), arrowhead_hessian(x), rtol=1e-13))
        else:  # the nonzeros only: the arrow's row, column and diagonal
            dense_row = got[[0], :].toarray().ravel()
            ref_row = np.concatenate([[12 * x[0] ** 2], 2.0 * x[1:]])
            diag = got.diagonal()
            ref_diag = np.concatenate([[12 * x[0] ** 2], 12 * x[1:] ** 2 + 2 * x[0]])
            same = got.nnz == 3 * build.size - 2 and bool(
                np.allclose(dense_row, ref_row, rtol=1e-13)
                and np.allclose(diag, ref_diag, rtol=1e-13)
            )
        result["eval_s"] = best_seconds(lambda: op(x))
    else:
        got = op(x)
        peer = euler_jax(build.size)
        if peer is None:
            same, result["peer"] = False, "JAX not installed"
        else:
            ref = np.asarray(peer(x))
            same = bool(np.allclose(got, ref, rtol=1e-12, atol=0.0))
            result["peer_s"] = best_seconds(lambda: peer(x).block_until_ready())
            result["peer"] = "jax.jit(jax.grad) with lax.fori_loop"
        result["eval_s"] = best_seconds(lambda: op(x))
    result["correct"] = bool(same)
    return result


def _limit_memory(gigabytes: float) -> Callable[[], None]:
    def apply() -> None:
        limit = int(gigabytes * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def run(build: Build, root: Path, limit: float, memory_gb: float) -> dict[str, Any]:
    """One row in a fresh process, stopped after ``limit`` wall seconds."""
    directory = root / build.label.replace(" ", "_").replace("(", "").replace(")", "")
    directory.mkdir()
    wrappers = [FUNCTIONS]
    if build.family != "arrowhead":
        wrappers.append(
            f"\n\ndef {build.function}(x):\n    return {build.family}(x, {build.size})\n"
        )
    (directory / "functions.py").write_text("".join(wrappers))
    extra = "sparse = true" if build.family != "euler" else ""
    (directory / "difgen.toml").write_text(
        CONFIG.format(
            function=build.function,
            operator=build.operator,
            shape=json.dumps(build.shape),
            emit=build.emit,
            extra=extra,
        )
    )
    command = [sys.executable, "-m", "benchmarks.scale", "--worker", str(directory)]
    command += ["--row", json.dumps(asdict(build))]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=limit,
            check=False,
            preexec_fn=_limit_memory(memory_gb),
            cwd=Path(__file__).resolve().parent.parent,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {limit:g} s"}
    if done.returncode != 0:
        stderr = done.stderr.replace(f"{directory}/", "").replace("difgen.errors.", "")
        lines = stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        if "MemoryError" in stderr:
            return {"error": f"over {memory_gb:g} GB of memory ({lines[-1][:120]})"}
        return {"error": lines[-1][:200]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ------------------------------------------------------------------ the bars
def _row(rows: list[tuple[Build, dict[str, Any]]], family: str, size: int, emit: str):
    for b, r in rows:
        if (b.family, b.size, b.emit) == (family, size, emit):
            return r
    return None


def bars(rows: list[tuple[Build, dict[str, Any]]]) -> list[tuple[str, str, str]]:
    """(bar, measured, PASS/FAIL) for the issue's targets on this run."""
    found: list[tuple[str, str, str]] = []

    def judge(what: str, ok: bool, measured: str) -> None:
        found.append((what, measured, "pass" if ok else "**FAIL**"))

    for b, r in rows:
        if "error" in r:
            judge(f"{b.label} builds", False, r["error"])
        elif not r["correct"]:
            judge(f"{b.label} values match the reference", False, "WRONG")
    big = max((b.size for b, _ in rows if b.family == "brusselator"), default=0)
    r = _row(rows, "brusselator", big, "vector")
    if r is not None and "error" not in r:
        judge(
            f"brusselator {big}: build < 30 s",
            r["build_s"] < 30,
            f"{r['build_s']:.1f} s",
        )
        judge(
            f"brusselator {big}: peak < 4 GB",
            r["peak_mb"] < 4096,
            f"{r['peak_mb']:.0f} MB",
        )
        judge(
            f"brusselator {big}: module < 1 MB",
            r["bytes"] < 2**20,
            f"{r['bytes'] / 1024:.0f} KB",
        )
    r = _row(rows, "brusselator", big, "c")
    if r is not None and "error" not in r:
        judge(
            f"brusselator {big} (C): build < 30 s",
            r["build_s"] < 30,
            f"{r['build_s']:.1f} s ({r.get('build_cpu_s', 0.0):.1f} s of CPU)",
        )
        judge(
            f"brusselator {big} (C): peak < 4 GB",
            r["peak_mb"] < 4096,
            f"{r['peak_mb']:.0f} MB",
        )
        if "c_bytes" in r:
            judge(
                f"brusselator {big} (C): C source < 1 MB",
                r["c_bytes"] < 2**20,
                f"{r['c_bytes'] / 1024:.0f} KB",
            )
    for b, r in rows:
        if b.family == "brusselator" and b.emit == "c" and not r.get("in_c", True):
            judge(f"brusselator {b.size} jacobian runs in C", False, "kept in Python")
        if b.family == "brusselator" and b.emit == "c" and "eval_s" in r:
            ratio = r["eval_s"] / r["peer_s"]
            judge(
                f"brusselator {b.size} jacobian (C, in place) <= 1.5x hand-written fill",
                ratio <= 1.5,
                f"{ratio:.2f}x",
            )
        if b.family == "brusselator" and b.emit == "c" and b.size in CASADI_GRIDS:
            what = f"brusselator {b.size} jacobian (C, in place) <= 1.0x CasADi's C"
            if "casadi_s" in r and "eval_s" in r:
                ratio = r["eval_s"] / r["casadi_s"]
                judge(what, ratio <= 1.0, f"{ratio:.2f}x")
            else:  # a missing CasADi is a failed bar, never a hidden one
                judge(what, False, r.get("casadi", r.get("error", "not measured")))
    sizes = sorted(b.size for b, _ in rows if b.family == "arrowhead")
    if sizes:
        r = _row(rows, "arrowhead", sizes[-1], "vector")
        if r is not None and "error" not in r:
            judge(
                f"arrowhead {sizes[-1]}: <= 3 colors",
                (r["colors"] or 0) <= 3,
                str(r["colors"]),
            )
            judge(
                f"arrowhead {sizes[-1]}: build < 10 s",
                r["build_s"] < 10,
                f"{r['build_s']:.1f} s",
            )
        r0 = _row(rows, "arrowhead", sizes[0], "vector")
        if r is not None and r0 is not None and "eval_s" in r and "eval_s" in r0:
            ratio = r["eval_s"] / r0["eval_s"]
            bound = 150 * sizes[-1] / sizes[0] / 100
            judge(
                f"arrowhead eval time {sizes[-1]} / {sizes[0]} <= {bound:g}",
                ratio <= bound,
                f"{ratio:.0f}",
            )
    steps = sorted(b.size for b, _ in rows if b.family == "euler")
    if steps:
        r = _row(rows, "euler", steps[-1], "vector")
        r0 = _row(rows, "euler", steps[0], "vector")
        if r is not None and "error" not in r:
            judge(
                f"euler {steps[-1]}: build < 5 s",
                r["build_s"] < 5,
                f"{r['build_s']:.1f} s",
            )
            if r0 is not None and "error" not in r0:
                grow = r["bytes"] / r0["bytes"]
                judge(
                    f"euler {steps[-1]}: module within 2x of the {steps[0]}-step one",
                    grow <= 2,
                    f"{grow:.1f}x",
                )
            if "peer_s" in r:
                ratio = r["eval_s"] / r["peer_s"]
                judge(
                    f"euler {steps[-1]}: gradient <= 1.0x jax.jit(jax.grad) fori_loop",
                    ratio <= 1.0,
                    f"{ratio:.2f}x",
                )
        r = _row(rows, "euler", steps[-1], "c")
        if r is not None and "error" not in r:
            if not r.get("in_c", True):
                judge(f"euler {steps[-1]} gradient runs in C", False, "kept in Python")
            if "peer_s" in r:
                ratio = r["eval_s"] / r["peer_s"]
                judge(
                    f"euler {steps[-1]} (C): gradient <= 1.0x jax.jit(jax.grad) "
                    "fori_loop",
                    ratio <= 1.0,
                    f"{ratio:.2f}x",
                )
    return found


def _fmt(v: Any, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def table(
    rows: list[tuple[Build, dict[str, Any]]],
    load: float,
    memory_gb: float,
    updated: str | None = None,
) -> str:
    """The Markdown report (``updated``: the family this run re-measured, the
    other rows kept from the previous run)."""
    again = (
        f"; this run re-measured the {updated} rows (`--only {updated} --update`) and "
        "kept the others, measured in earlier runs (each row's `load` in scale.json)"
        if updated
        else ""
    )
    lines = [
        "# Cost against problem size",
        "",
        (
            "`python -m benchmarks.scale`: each row built in a fresh process limited to "
            f"{memory_gb:g} GB of address space (load average {load:.1f} at the start"
            f"{again}); "
            "wall and CPU seconds of `difgen.build` (compiling included for C, the "
            "compiler's CPU too), the process's "
            "peak memory, the bytes written (module and C source), colors used by the "
            "sparse derivative, the best evaluation time of the operator and of the "
            "peer, CasADi's generated C filling the same CSR data in place (C rows at "
            "the CasADi grids), and whether the values match the reference."
        ),
        "",
        (
            "| family | size | emit | build s | build CPU s | peak MB | written KB "
            "| colors | eval µs | peer µs | peer | CasADi C µs | correct |"
        ),
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for b, r in rows:
        if "error" in r:
            lines.append(
                f"| {b.family} | {b.size} | {b.emit} | | | | | | | | | | **{r['error']}** |"
            )
            continue
        emit = b.emit
        if b.emit == "c" and not r.get("in_c"):
            emit = "c (operator kept in Python)"
        lines.append(
            f"| {b.family} | {b.size} | {emit} | {r['build_s']:.2f} "
            f"| {_fmt(r.get('build_cpu_s'), '.2f')} | {r['peak_mb']:.0f} "
            f"| {r['bytes'] / 1024:.1f} | {_fmt(r['colors'], 'd')} "
            f"| {_fmt(r.get('eval_s') and r['eval_s'] * 1e6, '.1f')} "
            f"| {_fmt(r.get('peer_s') and r['peer_s'] * 1e6, '.1f')} "
            f"| {r.get('peer', '')} "
            f"| {_fmt(r.get('casadi_s') and r['casadi_s'] * 1e6, '.1f')} "
            f"| {'yes' if r['correct'] else '**WRONG**'} |"
        )
    found = bars(rows)
    lines += ["", "| bar | measured | result |", "|---|---|---|"]
    lines += [f"| {what} | {measured} | {res} |" for what, measured, res in found]
    return "\n".join(lines) + "\n"


def plot(rows: list[tuple[Build, dict[str, Any]]], path: Path) -> None:
    """Build seconds, KB written and evaluation µs against size (log-log)."""
    try:
        import matplotlib
    except ImportError:  # the bench extra is not installed: the table still stands
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    keys = (
        ("build_s", "build seconds"),
        ("bytes", "bytes written"),
        ("eval_s", "eval s"),
    )
    for ax, (key, title) in zip(axes, keys):
        series: dict[str, list[tuple[int, float]]] = {}
        for b, r in rows:
            if "error" not in r and r.get(key):
                series.setdefault(f"{b.family} ({b.emit})", []).append((b.size, r[key]))
        for label, pts in series.items():
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("size (grid N, n, steps)")
        ax.set_title(title)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def merged(
    previous: Path, rows: list[tuple[Build, dict[str, Any]]], quick: bool
) -> list[tuple[Build, dict[str, Any]]]:
    """The rows of ``previous`` (a scale.json) with those measured now in their
    place, in the table's order."""
    fields = ("family", "size", "emit")
    kept: dict[Build, dict[str, Any]] = {}
    if previous.exists():
        for entry in json.loads(previous.read_text()):
            build = Build(*(entry[f] for f in fields))
            kept[build] = {k: v for k, v in entry.items() if k not in fields}
    kept.update(dict(rows))
    order = {b: i for i, b in enumerate(builds(quick))}
    return sorted(kept.items(), key=lambda item: order.get(item[0], len(order)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale", description=__doc__
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes only")
    parser.add_argument(
        "--limit", type=float, default=300.0, help="wall seconds per row"
    )
    parser.add_argument(
        "--memory", type=float, default=8.0, help="GB of address space per row"
    )
    parser.add_argument("--only", help="a family: brusselator, arrowhead or euler")
    parser.add_argument("--output", type=Path, default=RESULTS, help="results folder")
    parser.add_argument(
        "--update",
        action="store_true",
        help="with --only: replace that family's rows in scale.json and scale.md, "
        "keeping the other rows (else --only writes scale_<family>.*)",
    )
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--row", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(args.worker, Build(**json.loads(args.row)))))
        return 0
    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for build in builds(args.quick):
            if args.only and build.family != args.only:
                continue
            result = {**run(build, Path(tmp), args.limit, args.memory), "load": load}
            rows.append((build, result))
            shown = result.get("error") or f"{result['build_s']:.2f} s build"
            print(f"{build.label}: {shown}", file=sys.stderr)
    args.output.mkdir(parents=True, exist_ok=True)
    updated = args.only if args.update and args.only else None
    if updated:
        rows = merged(args.output / "scale.json", rows, args.quick)
    text = table(rows, load, args.memory, updated)
    suffix = f"_{args.only}" if args.only and not updated else ""
    (args.output / f"scale{suffix}.md").write_text(text)
    (args.output / f"scale{suffix}.json").write_text(
        json.dumps([{**asdict(b), **r} for b, r in rows], indent=1)
    )
    plot(rows, args.output / f"scale{suffix}.png")
    print(text, end="")
    return 1 if any(res != "pass" for _, _, res in bars(rows)) else 0


if __name__ == "__main__":
    sys.exit(main())
