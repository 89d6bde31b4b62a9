"""The tools timed for a case: hand-written, ``f``, difgen modules and the peers.

Every peer is optional: one that is not installed gives no rows and a note in the
report header. The peers differentiate the very source in ``problems.py``: its
``np`` global is rebound to ``jax.numpy``, ``autograd.numpy`` or a small torch shim
(:func:`rebind`), SymPy runs it on object arrays of symbols. A framework's headline
``call`` is its own: JAX's jitted function on JAX arrays already on the device,
waited for with ``block_until_ready``; torch's on tensors. ``converted`` is the same
operator taking and returning NumPy values (the conversion a NumPy caller pays),
timed beside it but never the headline, so that conversion cannot flatter difgen.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from time import perf_counter
from typing import Any

import numpy as np

from benchmarks.cases import Case
from benchmarks.timing import Tool, first_line

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "difgen.toml"
GENERATED = HERE / "generated"
FD_MAX_SIZE = 2000  # beyond this, one FD gradient costs thousands of calls of f

PEERS = ("jax", "torch", "autograd", "sympy", "scipy")
STATUS: dict[str, str] = {}  # peer -> version, or why it is skipped


def rebind(fn: Callable[..., Any], namespace: Any) -> Callable[..., Any]:
    """``fn`` with its global ``np`` replaced (problem functions call no helpers)."""
    scope = dict(fn.__globals__, np=namespace)
    return types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__)


@cache
def load(peer: str) -> Any:
    """Import a peer once; None (with the reason in STATUS) when it is missing."""
    try:
        if peer == "jax":
            import jax

            jax.config.update("jax_enable_x64", True)
            module = jax
        else:
            module = __import__(peer)
    except Exception as exc:  # noqa: BLE001  ImportError, or a broken install
        STATUS[peer] = f"not installed ({first_line(exc)})"
        return None
    try:
        STATUS[peer] = metadata.version(peer)
    except metadata.PackageNotFoundError:
        STATUS[peer] = getattr(module, "__version__", "?")
    return module


def _out(case: Case) -> Callable[[Any], Any]:
    """Framework result to what the NumPy user wants back."""
    return float if case.operator == "derivative" else np.asarray


# --- difgen ---------------------------------------------------------------------------


@dataclass
class Built:
    module: types.ModuleType | None
    build_s: float | None
    note: str = ""


def build_difgen(names: list[str], build: bool = True) -> dict[str, Built]:
    """Build each module with the difgen CLI (a subprocess), then import it."""
    built: dict[str, Built] = {}
    with CONFIG.open("rb") as file:
        configured = {m.get("name") for m in tomllib.load(file).get("module", [])}
    for name in names:
        build_s = None
        if name not in configured:
            built[name] = Built(
                None, None, f"not in {CONFIG.name} (see the comment there)"
            )
            continue
        if build:
            command = [sys.executable, "-m", "difgen", "build", str(CONFIG)]
            start = perf_counter()
            try:
                proc = subprocess.run(
                    command + ["--module", name],
                    check=False,
                    cwd=HERE.parent,
                    capture_output=True,
                    text=True,
                    timeout=900,
                )
            except subprocess.TimeoutExpired:
                built[name] = Built(None, perf_counter() - start, "build timed out")
                continue
            build_s = perf_counter() - start
            if proc.returncode != 0:
                note = "build failed: " + _error_line(proc.stderr or proc.stdout)
                built[name] = Built(None, build_s, note)
                print(f"  difgen {name}: {note}", file=sys.stderr)
                continue
        try:
            module = _import_file(GENERATED / f"{name}.py")
        except Exception as exc:  # noqa: BLE001  whatever the module raises
            built[name] = Built(None, build_s, "import failed: " + first_line(exc))
            continue
        built[name] = Built(module, build_s)
        print(f"  difgen {name}: built in {build_s or 0:.2f} s", file=sys.stderr)
    return built


def _error_line(text: str) -> str:
    """The error's first line; for a traceback, the exception line at its end."""
    text = text.replace(f"{HERE.parent}/", "")  # repo-relative paths in the report
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback"):
        return first_line(lines[-1])
    return first_line(text or "(no output)")


def _import_file(path: Path) -> types.ModuleType:
    if not path.exists():
        raise FileNotFoundError(f"{path.relative_to(HERE.parent)} not found")
    spec = importlib.util.spec_from_file_location(f"difgen_bench_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def difgen_tools(case: Case, built: dict[str, Built]) -> list[Tool]:
    tools = []
    for label, name in case.difgen:
        b = built.get(name, Built(None, None, "not built"))
        fn = getattr(b.module, case.operator, None) if b.module else None
        note = b.note or ("" if fn else f"module {name} has no {case.operator}")
        tool = Tool(label, "difgen", fn, case.op_args, build_s=b.build_s, note=note)
        tool.status = "ok" if fn else "SKIPPED"
        tools.append(tool)
    return tools


# --- JAX ------------------------------------------------------------------------------


def jax_tools(case: Case) -> list[Tool]:
    jax = load("jax")
    if jax is None:
        return []
    f = rebind(case.fn, jax.numpy)

    def hvp(x, v, *ctx):
        return jax.jvp(lambda y: jax.grad(f)(y, *ctx), (x,), (v,))[1]

    transforms = {
        "derivative": [("jax.jit(grad)", jax.grad(f))],
        "gradient": [("jax.jit(grad)", jax.grad(f))],
        "jacobian": [
            ("jax.jit(jacfwd)", jax.jacfwd(f)),
            ("jax.jit(jacrev)", jax.jacrev(f)),
        ],
        "hessian": [("jax.jit(hessian)", jax.hessian(f))],
        "hvp": [("jax.jit(jvp of grad)", hvp)],
    }[case.operator]
    out = _out(case)
    # Put on the device once, before any timing: the headline call converts nothing.
    on_device = jax.block_until_ready(
        tuple(jax.device_put(np.asarray(a)) for a in case.op_args)
    )
    tools = []
    for label, op in transforms:
        jitted = jax.jit(op)
        tools.append(
            Tool(
                label,
                "jax",
                lambda *a, j=jitted: j(*a).block_until_ready(),
                on_device,
                converted=lambda *a, j=jitted: out(j(*a)),
                converted_args=case.op_args,
            )
        )
    return tools


# --- PyTorch torch.func -----------------------------------------------------------------


def _torch_numpy(torch: Any) -> types.SimpleNamespace:
    """The few NumPy names the problems use, on torch tensors."""

    def array(obj):
        if isinstance(obj, (list, tuple)):
            return torch.stack([array(item) for item in obj])
        return torch.as_tensor(obj, dtype=torch.float64)

    return types.SimpleNamespace(
        array=array,
        sum=torch.sum,
        mean=torch.mean,
        max=torch.max,
        exp=torch.exp,
        log=torch.log,
        log1p=torch.log1p,
        tanh=torch.tanh,
        concatenate=torch.cat,
        roll=lambda a, shift, axis: torch.roll(a, shift, dims=axis),
    )


def torch_tools(case: Case) -> list[Tool]:
    torch = load("torch")
    if torch is None:
        return []
    from torch import func

    f = rebind(case.fn, _torch_numpy(torch))

    def hvp(x, v, *ctx):
        return func.jvp(lambda y: func.grad(f)(y, *ctx), (x,), (v,))[1]

    transforms = {
        "derivative": [("torch.func.grad", func.grad(f))],
        "gradient": [("torch.func.grad", func.grad(f))],
        "jacobian": [
            ("torch.func.jacfwd", func.jacfwd(f)),
            ("torch.func.jacrev", func.jacrev(f)),
        ],
        "hessian": [("torch.func.hessian", func.hessian(f))],
        "hvp": [("torch.func.jvp of grad", hvp)],
    }[case.operator]

    def to_torch(a):
        if isinstance(a, np.ndarray):
            return torch.from_numpy(a)
        return torch.tensor(a, dtype=torch.float64)

    if case.operator == "derivative":
        out = lambda t: t.item()
    else:
        out = lambda t: t.numpy()
    tensors = tuple(to_torch(a) for a in case.op_args)
    return [
        Tool(
            label,
            "torch",
            op,
            tensors,
            converted=lambda *a, g=op: out(g(*map(to_torch, a))),
            converted_args=case.op_args,
        )
        for label, op in transforms
    ]


# --- autograd -----------------------------------------------------------------------


def autograd_tools(case: Case) -> list[Tool]:
    autograd = load("autograd")
    if autograd is None:
        return []
    import autograd.numpy as anp

    f = rebind(case.fn, anp)
    if case.operator == "hvp":
        hvp = autograd.hessian_vector_product(f)  # called as hvp(x, *ctx, v)
        op = lambda x, v, *ctx: hvp(x, *ctx, v)
        label = "autograd hessian_vector_product"
    else:
        name = {"derivative": "grad", "gradient": "grad"}.get(
            case.operator, case.operator
        )
        op, label = getattr(autograd, name)(f), f"autograd.{name}"
    out = _out(case)
    return [Tool(label, "autograd", lambda *a: out(op(*a)), case.op_args)]


# --- SymPy ----------------------------------------------------------------------------


def sympy_tools(case: Case) -> list[Tool]:
    if not case.symbolic or case.operator not in ("derivative", "gradient", "jacobian"):
        return []
    sp = load("sympy")
    if sp is None:
        return []
    start = perf_counter()

    def symbols(value, prefix):
        if np.ndim(value) == 0:
            return sp.Symbol(prefix), [sp.Symbol(prefix)]
        syms = sp.symbols(f"{prefix}0:{np.size(value)}")
        return np.array(syms, dtype=object).reshape(np.shape(value)), list(syms)

    x, xs = symbols(case.x, "x")
    ctx, cs = [], []
    for i, value in enumerate(case.contexts):
        c, flat = symbols(value, f"c{i}_")
        ctx.append(c)
        cs += flat
    y = case.fn(x, *ctx)
    if case.operator == "derivative":
        fn = sp.lambdify(xs, sp.diff(y, x), "numpy", cse=True)
        call = lambda x: float(fn(x))
    elif case.operator == "gradient":
        fn = sp.lambdify(xs + cs, [sp.diff(y, s) for s in xs], "numpy", cse=True)
        call = lambda x, *c: np.array(fn(*x.tolist(), *_floats(c)))
    else:
        jac = sp.Matrix(list(np.ravel(y))).jacobian(xs)
        fn = sp.lambdify(xs + cs, jac, "numpy", cse=True)
        call = lambda x, *c: fn(*x.tolist(), *_floats(c))
    tool = Tool("sympy lambdify(cse=True)", "sympy", call, case.op_args)
    tool.build_s = perf_counter() - start
    return [tool]


def _floats(contexts: tuple[np.ndarray, ...]) -> list[float]:
    return [value for c in contexts for value in np.ravel(c).tolist()]


# --- finite differences ---------------------------------------------------------------


def fd_tools(case: Case) -> list[Tool]:
    if case.operator not in ("derivative", "gradient", "jacobian"):
        return []
    if load("scipy") is None:
        return []
    from scipy.optimize import approx_fprime

    label = "finite differences (approx_fprime)"
    if np.size(case.x) > FD_MAX_SIZE:
        note = f"n = {np.size(case.x)}: {np.size(case.x) + 1} calls of f per call"
        return [Tool(label, "fd", None, status="SKIPPED", note=note)]
    fn, eps = case.fn, np.sqrt(np.finfo(float).eps)
    if case.operator == "derivative":

        def call(x):
            return float(approx_fprime(np.array([x]), lambda a: fn(a[0]), eps)[0])

    else:
        call = lambda x, *c: approx_fprime(x, fn, eps, *c)
    return [Tool(label, "fd", call, case.op_args, loose=True)]


# --- all tools of a case ----------------------------------------------------------------


def tools_for(case: Case, built: dict[str, Built]) -> list[Tool]:
    """Hand-written first (the reference), then f, extras, difgen and peers."""
    tools = [
        Tool(case.limit_name, "hand", case.limit, case.op_args, role="limit"),
        Tool("f (NumPy)", "f", case.fn, case.f_args, role="f"),
    ]
    for label, fn in case.extras:
        family = "scipy" if label.startswith("scipy") else "hand"
        tools.append(Tool(label, family, fn, case.op_args))
    tools += difgen_tools(case, built)
    for make in (jax_tools, torch_tools, autograd_tools, sympy_tools, fd_tools):
        try:
            tools += make(case)
        except Exception as exc:  # noqa: BLE001  a peer that cannot set up: ERROR
            family = make.__name__.removesuffix("_tools")
            tools.append(
                Tool(family, family, None, status="ERROR", note=first_line(exc))
            )
    return tools


def peer_status() -> dict[str, str]:
    """Version or skip reason of every peer (importing those not yet loaded)."""
    for peer in PEERS:
        load(peer)
    return {peer: STATUS[peer] for peer in PEERS}
