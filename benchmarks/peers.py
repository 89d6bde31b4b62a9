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

PEERS = ("jax", "torch", "autograd", "sympy", "scipy", "casadi")
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
            command.append("--compile")  # emit = "c" modules: build the extension
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
        note = ""
        if getattr(module, "COMPILED", None) is False:
            note = "C extension not loaded: " + str(module.C_FALLBACK_REASON)
        elif build and getattr(module, "COMPILED", None):
            note = "compile " + _compile_seconds(proc.stdout)
        built[name] = Built(module, build_s, note)
        print(f"  difgen {name}: built in {build_s or 0:.2f} s", file=sys.stderr)
    return built


def _compile_seconds(stdout: str) -> str:
    """The compile time ``difgen build --compile`` printed (``compiled P (X s)``)."""
    for line in stdout.splitlines():
        if line.startswith("compiled "):
            return line.rsplit("(", 1)[-1].rstrip(")")
    return "? s (extension up to date)"


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
    for label, entry in case.difgen:
        name, _, variant = entry.partition(":")
        b = built.get(name, Built(None, None, "not built"))
        fn = getattr(b.module, case.operator, None) if b.module else None
        if fn is not None and variant == "in_place":
            fn = _in_place(fn, case)
        note = b.note or ("" if fn else f"module {name} has no {case.operator}")
        tool = Tool(label, "difgen", fn, case.op_args, build_s=b.build_s, note=note)
        tool.status = "ok" if fn else "SKIPPED"
        tools.append(tool)
    return tools


def _in_place(fn: Callable[..., Any], case: Case) -> Callable[..., Any]:
    """A sparse operator filling one CSR array's ``data`` in place (``out=``)."""
    csr = fn(*case.op_args)
    return lambda *a: fn(*a, out=csr)


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


# --- CasADi ---------------------------------------------------------------------------

CASADI_CFLAGS = ("-O2", "-fPIC", "-shared")
"""How CasADi's generated C is compiled: the system compiler, optimized, as a
shared library called through ctypes (CasADi's documented C interface)."""


def _casadi_numpy(ca: Any) -> types.SimpleNamespace:
    """NumPy on object arrays of SX scalars: NumPy keeps the structure (slices,
    reshape, roll, matmul), CasADi the expressions; ``max`` folds ``fmax``."""

    def fold_max(a):
        items = list(np.ravel(a))
        out = items[0]
        for item in items[1:]:
            out = ca.fmax(out, item)
        return out

    return types.SimpleNamespace(
        **{name: getattr(np, name) for name in ("sum", "mean", "exp", "log", "log1p")},
        tanh=np.tanh,
        roll=np.roll,
        concatenate=np.concatenate,
        array=lambda obj: np.array(obj, dtype=object),
        max=fold_max,
    )


def _sx_vector(ca: Any, name: str, value: Any) -> tuple[Any, Any]:
    """A symbolic input of ``value``'s shape: (the SX column, the object array)."""
    n = int(np.size(value))
    sym = ca.SX.sym(name, n)
    flat = np.empty(n, dtype=object)
    flat[:] = [sym[i] for i in range(n)]
    return sym, (flat[0] if np.ndim(value) == 0 else flat.reshape(np.shape(value)))


def _casadi_function(case: Case, ca: Any) -> Any:
    """The case's operator as a CasADi SX Function of (x, [v], *contexts)."""
    f = rebind(case.fn, _casadi_numpy(ca))
    x, xo = _sx_vector(ca, "x", case.x)
    ctx = [_sx_vector(ca, f"c{i}", c) for i, c in enumerate(case.contexts)]
    y = f(xo, *(o for _, o in ctx))
    y = ca.vertcat(*np.ravel(np.asarray(y, dtype=object)))
    inputs = [x]
    if case.operator in ("derivative", "gradient"):
        out = ca.gradient(y, x)
    elif case.operator == "jacobian":
        out = ca.jacobian(y, x)
        if np.size(case.x) < 100:
            out = ca.densify(out)
    elif case.operator == "hessian":
        out = ca.densify(ca.hessian(y, x)[0])
    else:  # hvp
        v = ca.SX.sym("v", int(np.size(case.x)))
        out = ca.jtimes(ca.gradient(y, x), x, v)
        inputs.append(v)
    inputs += [sym for sym, _ in ctx]
    return ca.Function("op", inputs, [out])


CASADI_MAX_SIZE = 2000
"""Inputs (x and contexts) above this many numbers are not given to CasADi: its SX
graphs and generated C grow with every element (the issue saw a 1000x20 logistic
gradient not finish building in 9 minutes)."""


def _result_shape(case: Case, F: Any) -> tuple[int, ...]:
    if case.operator in ("gradient", "hvp"):
        return tuple(np.shape(case.x))
    if case.operator == "derivative":
        return ()
    return tuple(F.size_out(0))


def casadi_tools(case: Case) -> list[Tool]:
    ca = load("casadi")
    if ca is None:
        return []
    size = sum(int(np.size(a)) for a in case.op_args)
    if size > CASADI_MAX_SIZE:
        note = f"{size} input numbers: not built (SX graphs grow per element)"
        return [Tool("casadi", "casadi", None, status="SKIPPED", note=note)]
    start = perf_counter()
    F = _casadi_function(case, ca)
    build_s = perf_counter() - start
    scalar = case.operator == "derivative"
    sparse_out = not F.sparsity_out(0).is_dense()

    shape = _result_shape(case, F)

    def sx_call(*args):
        result = F(*(np.ravel(a) if np.ndim(a) > 1 else a for a in args))
        if scalar:
            return float(result)
        return result.sparse() if sparse_out else result.full().reshape(shape)

    tools = [
        Tool("casadi SX Function", "casadi", sx_call, case.op_args, build_s=build_s)
    ]
    tools.append(_casadi_c_tool(case, F, ca, scalar, sparse_out))
    return tools


def _casadi_c_tool(case: Case, F: Any, ca: Any, scalar: bool, sparse_out: bool) -> Tool:
    """CasADi's generated C, compiled with gcc -O2, called through ctypes with the
    inputs' own buffers and a preallocated result (sparse: the CSC nonzeros, in
    place). The build time is code generation plus compilation."""
    import ctypes
    import tempfile

    start = perf_counter()
    directory = Path(tempfile.mkdtemp(prefix="casadi_"))
    generator = ca.CodeGenerator("op.c", {"with_header": False})
    generator.add(F)
    generator.generate(str(directory) + "/")
    library = directory / "op.so"
    subprocess.run(
        ["gcc", *CASADI_CFLAGS, str(directory / "op.c"), "-o", str(library), "-lm"],
        check=True,
        capture_output=True,
    )
    build_s = perf_counter() - start
    lib = ctypes.CDLL(str(library))
    fn = lib.op
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int]
    args = (ctypes.c_void_p * max(F.sz_arg(), 1))()
    results = (ctypes.c_void_p * max(F.sz_res(), 1))()
    iw = (ctypes.c_longlong * max(F.sz_iw(), 1))()
    w = np.zeros(max(F.sz_w(), 1))
    out = np.zeros(F.nnz_out(0))
    results[0] = out.ctypes.data
    w_ptr, iw_ptr = w.ctypes.data, ctypes.addressof(iw)
    n_in = len(case.op_args)
    boxes = [np.zeros(1) for _ in range(n_in)]  # scalar inputs are copied in
    box_ptrs = [int(b.ctypes.data) for b in boxes]
    if not sparse_out:
        view = out.reshape(_result_shape(case, F), order="F")  # column-major
    known: dict[int, tuple[Any, int]] = {}  # id -> (array kept alive, its pointer)

    def buffer(i: int, a: Any) -> int:
        """The input's buffer: its elements in C order, as the SX vector has them.
        An array's address is looked up once per array object (``.ctypes.data``
        costs microseconds): the most favourable way to call CasADi's C."""
        if type(a) is float:
            boxes[i][0] = a
            return box_ptrs[i]
        found = known.get(id(a))
        if found is None or found[0] is not a:
            found = known[id(a)] = (a, int(a.ctypes.data))
        return found[1]

    if sparse_out:  # the result's pattern, fixed: CSC nonzeros into `out`
        sp = F.sparsity_out(0)
        import scipy.sparse

        template = scipy.sparse.csc_array(
            (out, np.array(sp.row()), np.array(sp.colind())), shape=sp.shape
        )

    def call(*a):
        for i, value in enumerate(a):
            args[i] = buffer(i, value)
        fn(args, results, iw_ptr, w_ptr, 0)
        if scalar:
            return float(out[0])
        return template if sparse_out else view

    return Tool(
        "casadi SX codegen C (gcc -O2, ctypes)",
        "casadi",
        call,
        case.op_args,
        build_s=build_s,
    )


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
    makers = (
        jax_tools,
        torch_tools,
        autograd_tools,
        sympy_tools,
        casadi_tools,
        fd_tools,
    )
    for make in makers:
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
