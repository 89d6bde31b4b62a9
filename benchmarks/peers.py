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
from difgen import naming
from difgen.targets.c import compiling

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
    """Framework result to what the NumPy user wants back (a dict of arrays for
    a gradient of a dict)."""
    if isinstance(case.x, dict):
        return lambda tree: {key: np.asarray(leaf) for key, leaf in tree.items()}
    return float if case.operator == "derivative" else np.asarray


# --- difgen ---------------------------------------------------------------------------


@dataclass
class Built:
    module: types.ModuleType | None
    build_s: float | None  # difgen build: generation only (a subprocess)
    note: str = ""
    compile_s: float | None = None  # emit = "c": the C compiler, timed apart


def build_difgen(names: list[str], build: bool = True) -> dict[str, Built]:
    """Build each module with the difgen CLI (a subprocess), compile the extension
    of an ``emit = "c"`` module (timed apart, always recompiled so that the time is
    measured), then import it."""
    built: dict[str, Built] = {}
    with CONFIG.open("rb") as file:
        configured = {m.get("name") for m in tomllib.load(file).get("module", [])}
    for name in names:
        build_s = compile_s = None
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
            if (GENERATED / f"{name}{naming.C_SUFFIX}.c").exists():
                try:
                    compile_s = compiling.compile_module(GENERATED, name).seconds
                except compiling.CompileError as exc:
                    note = "compile failed: " + first_line(exc)
                    built[name] = Built(None, build_s, note)
                    continue
        try:
            module = _import_file(GENERATED / f"{name}.py")
        except Exception as exc:  # noqa: BLE001  whatever the module raises
            built[name] = Built(None, build_s, "import failed: " + first_line(exc))
            continue
        note = ""
        if getattr(module, "COMPILED", None) is False:
            note = "C extension not loaded: " + str(module.C_FALLBACK_REASON)
        built[name] = Built(module, build_s, note, compile_s)
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
    for label, entry in case.difgen:
        name, _, variant = entry.partition(":")
        b = built.get(name, Built(None, None, "not built"))
        fn = getattr(b.module, case.operator, None) if b.module else None
        if fn is not None and variant == "in_place":
            fn = _in_place(fn, case)
        note = b.note or ("" if fn else f"module {name} has no {case.operator}")
        tool = Tool(label, "difgen", fn, case.op_args, build_s=b.build_s, note=note)
        tool.compile_s = b.compile_s
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
        tuple(jax.tree_util.tree_map(jax.device_put, a) for a in case.op_args)
    )
    tools = []
    for label, op in transforms:
        jitted = jax.jit(op)
        tools.append(
            Tool(
                label,
                "jax",
                lambda *a, j=jitted: jax.block_until_ready(j(*a)),
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
        if isinstance(a, dict):
            return {key: to_torch(leaf) for key, leaf in a.items()}
        if isinstance(a, (np.ndarray, np.float32)):
            return torch.from_numpy(np.asarray(a))
        return torch.tensor(a, dtype=torch.float64)

    if case.operator == "derivative":
        out = lambda t: t.item()
    elif isinstance(case.x, dict):
        out = lambda t: {key: leaf.numpy() for key, leaf in t.items()}
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

CASADI_COMPILE_LIMIT = 120
"""Seconds gcc may take on CasADi's generated C: an SX graph of a whole MLP is
straight-line C that gcc -O2 had not compiled after 8 minutes; the row then says
so (SKIPPED with the limit), as a build that did not finish."""
CASADI_CFLAGS = (*compiling.CFLAGS, "-fPIC", "-shared")
"""How CasADi's generated C is compiled: exactly as difgen compiles its own
(``difgen.targets.c.compiling.CFLAGS``, the same compiler), so that the code is the only
difference. ``-ffp-contract=off`` costs nothing on the default x86-64 target
(no FMA instructions there without ``-march``)."""


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
    if isinstance(case.x, dict):
        note = "the CasADi function is built over one flat vector, not a dict"
        return [Tool("casadi", "casadi", None, status="SKIPPED", note=note)]
    size = sum(int(np.size(a)) for a in case.op_args)
    if size > CASADI_MAX_SIZE:
        note = f"{size} input numbers: not built (SX graphs grow per element)"
        return [Tool("casadi", "casadi", None, status="SKIPPED", note=note)]
    start = perf_counter()
    F = _casadi_function(case, ca)
    build_s = perf_counter() - start
    _casadi_function_seconds[case.name] = build_s
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
    try:
        tools.append(_casadi_c_tool(case, F, ca, scalar, sparse_out))
    except subprocess.TimeoutExpired:
        note = f"gcc did not finish compiling CasADi's C in {CASADI_COMPILE_LIMIT} s"
        print(f"  casadi {case.name}: {note}", file=sys.stderr)
        label = casadi_c_label(sparse_out)
        tools.append(Tool(label, "casadi", None, status="SKIPPED", note=note))
    return tools


CASADI_WRAPPER = r"""
/* A CPython extension around CasADi's generated C (op.c, included below): the
   same kind of glue as difgen's emit = "c" extension (METH_FASTCALL, exact-type
   fast path for C-contiguous float64 arrays and floats, a new result array per
   call), so that both tools are timed doing the same job. Work arrays are
   allocated once, at import. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include "op.c"

#define CW_N_IN @N_IN@
static const int cw_nd_in[CW_N_IN] = {@ND_IN@};
static const npy_intp cw_dims_in[CW_N_IN][4] = {@DIMS_IN@};
static const int cw_nd_out = @ND_OUT@; /* -1: a float */
static const npy_intp cw_dims_out[] = {@DIMS_OUT@};
static const npy_intp cw_nnz_out = @NNZ_OUT@;
static const int cw_sparse = @SPARSE@; /* 1: fill out.data of a CSR in place */
static casadi_int cw_iw[@SZ_IW@];
static casadi_real cw_w[@SZ_W@];
static const casadi_real *cw_arg[@SZ_ARG@];
static casadi_real *cw_res[@SZ_RES@];
static double cw_box[CW_N_IN];
static PyObject *cw_indices = NULL, *cw_indptr = NULL; /* the CSR pattern */
static PyObject *cw_s_data = NULL, *cw_s_indices = NULL, *cw_s_indptr = NULL;
static PyArray_Descr *cw_float64 = NULL;

static int
cw_input(PyObject *obj, int i)
{
    if (PyFloat_CheckExact(obj) && cw_nd_in[i] == 0) {
        cw_box[i] = PyFloat_AS_DOUBLE(obj);
        cw_arg[i] = &cw_box[i];
        return 0;
    }
    if (PyArray_CheckExact(obj)) {
        PyArrayObject *a = (PyArrayObject *)obj;
        int ok = PyArray_TYPE(a) == NPY_DOUBLE && PyArray_ISCARRAY_RO(a) &&
                 PyArray_ISNOTSWAPPED(a) && PyArray_NDIM(a) == cw_nd_in[i];
        for (int k = 0; ok && k < cw_nd_in[i]; k++)
            ok = PyArray_DIMS(a)[k] == cw_dims_in[i][k];
        if (ok) {
            cw_arg[i] = (const casadi_real *)PyArray_DATA(a);
            return 0;
        }
    }
    PyErr_Format(PyExc_TypeError,
                 "argument %d: expected a C-contiguous float64 array of the "
                 "operator's shape (or a float)", i);
    return -1;
}

/* The data of a CSR `out` with the pattern bound at setup, checked. */
static PyObject *
cw_csr_data(PyObject *out)
{
    PyObject *data = PyObject_GetAttr(out, cw_s_data);
    PyObject *indices = PyObject_GetAttr(out, cw_s_indices);
    PyObject *indptr = PyObject_GetAttr(out, cw_s_indptr);
    int ok = data != NULL && indices == cw_indices && indptr == cw_indptr &&
             PyArray_CheckExact(data) &&
             PyArray_TYPE((PyArrayObject *)data) == NPY_DOUBLE &&
             PyArray_ISCARRAY((PyArrayObject *)data) &&
             PyArray_NDIM((PyArrayObject *)data) == 1 &&
             PyArray_DIMS((PyArrayObject *)data)[0] == cw_nnz_out;
    Py_XDECREF(indices);
    Py_XDECREF(indptr);
    if (!ok) {
        Py_XDECREF(data);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError,
                            "out: expected the CSR array of this pattern");
        return NULL;
    }
    return data;
}

static PyObject *
cw_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != CW_N_IN + cw_sparse) {
        PyErr_Format(PyExc_TypeError, "op() takes %d arguments (%zd given)",
                     CW_N_IN + cw_sparse, nargs);
        return NULL;
    }
    for (int i = 0; i < CW_N_IN; i++) {
        if (cw_input(args[i], i) < 0) return NULL;
    }
    if (cw_nd_out < 0) {
        double value;
        cw_res[0] = &value;
        if (op(cw_arg, cw_res, cw_iw, cw_w, 0) != 0) goto failed;
        return PyFloat_FromDouble(value);
    }
    if (cw_sparse) {
        PyObject *data = cw_csr_data(args[CW_N_IN]);
        if (data == NULL) return NULL;
        cw_res[0] = (casadi_real *)PyArray_DATA((PyArrayObject *)data);
        Py_DECREF(data);
        if (op(cw_arg, cw_res, cw_iw, cw_w, 0) != 0) goto failed;
        Py_INCREF(args[CW_N_IN]);
        return args[CW_N_IN];
    }
    Py_INCREF(cw_float64); /* as difgen's dg_new: the descriptor looked up once */
    PyObject *result = PyArray_NewFromDescr(&PyArray_Type, cw_float64, cw_nd_out,
                                            (npy_intp *)cw_dims_out, NULL, NULL, 0,
                                            NULL);
    if (result == NULL) return NULL;
    cw_res[0] = (casadi_real *)PyArray_DATA((PyArrayObject *)result);
    if (op(cw_arg, cw_res, cw_iw, cw_w, 0) != 0) {
        Py_DECREF(result);
        goto failed;
    }
    return result;
failed:
    PyErr_SetString(PyExc_RuntimeError, "the CasADi function failed");
    return NULL;
}

static PyObject *
cw_bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "bind(indices, indptr)");
        return NULL;
    }
    Py_INCREF(args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(cw_indices, args[0]);
    Py_XSETREF(cw_indptr, args[1]);
    Py_RETURN_NONE;
}

static PyMethodDef cw_methods[] = {
    {"op", (PyCFunction)(void (*)(void))cw_call, METH_FASTCALL, "the operator"},
    {"bind", (PyCFunction)(void (*)(void))cw_bind, METH_FASTCALL, "CSR pattern"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef cw_module = {
    PyModuleDef_HEAD_INIT, "@MODULE@", NULL, -1, cw_methods, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit_@MODULE@(void)
{
    import_array();
    cw_s_data = PyUnicode_InternFromString("data");
    cw_s_indices = PyUnicode_InternFromString("indices");
    cw_s_indptr = PyUnicode_InternFromString("indptr");
    cw_float64 = PyArray_DescrFromType(NPY_DOUBLE);
    if (cw_s_data == NULL || cw_s_indices == NULL || cw_s_indptr == NULL ||
        cw_float64 == NULL)
        return NULL;
    return PyModule_Create(&cw_module);
}
"""
"""The C extension module wrapped around CasADi's ``op.c`` (``@NAME@`` filled in
by :func:`_casadi_wrapper`)."""


def _c_list(values: Any) -> str:
    return ", ".join(str(int(v)) for v in values) or "0"


def _casadi_wrapper(module: str, case: Case, F: Any, FT: Any, sparse_out: bool) -> str:
    """The wrapper's C source for ``FT`` (the operator with its result transposed,
    so that CasADi's column-major nonzeros are the result in C order)."""
    shapes = [tuple(np.shape(a)) for a in case.op_args]
    scalar = case.operator == "derivative"
    out_shape = (int(FT.nnz_out(0)),) if sparse_out else _result_shape(case, F)
    fill = {
        "N_IN": str(len(shapes)),
        "ND_IN": _c_list(len(s) for s in shapes),
        "DIMS_IN": ", ".join("{" + _c_list(s) + "}" for s in shapes),
        "ND_OUT": "-1" if scalar else str(len(out_shape)),
        "DIMS_OUT": _c_list(out_shape),
        "NNZ_OUT": str(int(FT.nnz_out(0))),
        "SPARSE": "1" if sparse_out else "0",
        "SZ_IW": str(max(int(FT.sz_iw()), 1)),
        "SZ_W": str(max(int(FT.sz_w()), 1)),
        "SZ_ARG": str(max(int(FT.sz_arg()), 1)),
        "SZ_RES": str(max(int(FT.sz_res()), 1)),
        "MODULE": module,
    }
    text = CASADI_WRAPPER
    for key, value in fill.items():
        text = text.replace(f"@{key}@", value)
    return text


def casadi_c_label(sparse_out: bool) -> str:
    """The row label of CasADi's compiled C (the bars name it)."""
    if sparse_out:
        return "casadi SX codegen C (CSR data in place)"
    return "casadi SX codegen C (extension)"


def _casadi_c_tool(case: Case, F: Any, ca: Any, scalar: bool, sparse_out: bool) -> Tool:
    """CasADi's generated C in a CPython extension built like difgen's (see
    :data:`CASADI_WRAPPER`): the same compiler and flags (``difgen.targets.c.compiling``),
    a new result array per call, or a sparse result filled into the ``data`` of a
    caller's CSR array, as difgen's in-place operator does. The build time is
    SX graph and code generation; the compile time is the compiler's alone."""
    built = casadi_extension(case, F, ca, sparse_out)
    op, csr = built.op, built.csr
    call: Callable[..., Any] = op
    if csr is not None:
        call = lambda *a: op(*a, csr)  # as difgen's in-place row: one lambda
    tool = Tool(casadi_c_label(sparse_out), "casadi", call, case.op_args)
    tool.build_s, tool.compile_s = built.build_s, built.compile_s
    return tool


@dataclass
class CasadiC:
    """CasADi's compiled operator: ``op(*args)``, or ``op(*args, csr)`` filling
    ``csr.data`` when the result is sparse."""

    op: Callable[..., Any]
    csr: Any  # scipy.sparse.csr_array of the pattern, or None
    build_s: float
    compile_s: float


def casadi_extension(case: Case, F: Any, ca: Any, sparse_out: bool) -> CasadiC:
    """Generate CasADi's C for ``F`` (its result transposed, so that CasADi's
    column-major nonzeros are the result's C order, or CSR order when sparse),
    wrap it in :data:`CASADI_WRAPPER`, compile and import it."""
    import importlib.machinery
    import tempfile

    start = perf_counter()
    ins = [ca.SX.sym(f"i{k}", F.sparsity_in(k)) for k in range(F.n_in())]
    FT = ca.Function("op", ins, [ca.transpose(F(*ins))])
    # the directory goes once the extension is loaded (its mapping stays)
    with tempfile.TemporaryDirectory(prefix="casadi_") as tmp:
        directory = Path(tmp)
        generator = ca.CodeGenerator("op.c", {"with_header": False})
        generator.add(FT)
        generator.generate(str(directory) + "/")
        module = f"casadi_{case.name}"
        source = directory / f"{module}.c"
        source.write_text(_casadi_wrapper(module, case, F, FT, sparse_out))
        build_s = perf_counter() - start + _casadi_function_seconds.get(case.name, 0.0)
        target = directory / (module + compiling.EXTENSION_SUFFIX)
        command = [
            *compiling.compiler(),
            *CASADI_CFLAGS,
            *(f"-I{d}" for d in compiling.include_dirs()),
            str(source),
            "-o",
            str(target),
            "-lm",
        ]
        start = perf_counter()
        _run_bounded(command, directory, CASADI_COMPILE_LIMIT)
        compile_s = perf_counter() - start
        loader = importlib.machinery.ExtensionFileLoader(module, str(target))
        spec = importlib.util.spec_from_loader(module, loader)
        assert spec is not None
        extension = importlib.util.module_from_spec(spec)
        loader.exec_module(extension)
    csr = None
    if sparse_out:  # CSC nonzeros of J^T: the nonzeros of J in CSR order
        import scipy.sparse

        sp = FT.sparsity_out(0)
        shape = (sp.shape[1], sp.shape[0])
        csr = scipy.sparse.csr_array(
            (
                np.zeros(sp.nnz()),
                np.array(sp.row(), dtype=np.int32),
                np.array(sp.colind(), dtype=np.int32),
            ),
            shape=shape,
        )
        extension.bind(csr.indices, csr.indptr)
    return CasadiC(extension.op, csr, build_s, compile_s)


def _run_bounded(command: list[str], directory: Path, limit: float) -> None:
    """Run the compiler; past ``limit`` seconds kill its whole process group (gcc's
    cc1 would otherwise keep a core busy through the rest of the benchmark) and
    raise TimeoutExpired."""
    import os
    import signal

    proc = subprocess.Popen(
        command,
        cwd=directory,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, command, out, err)


_casadi_function_seconds: dict[str, float] = {}
"""Seconds CasADi took to build each case's SX operator (part of its C build)."""


# --- finite differences ---------------------------------------------------------------


def fd_tools(case: Case) -> list[Tool]:
    if case.operator not in ("derivative", "gradient", "jacobian"):
        return []
    if load("scipy") is None:
        return []
    from scipy.optimize import approx_fprime

    label = "finite differences (approx_fprime)"
    if isinstance(case.x, dict):
        note = "approx_fprime takes one flat vector, not a dict"
        return [Tool(label, "fd", None, status="SKIPPED", note=note)]
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


FLOOR = "empty Python function (same arguments)"


def _empty1(x: Any) -> None:
    """Does nothing: what calling a Python function with this argument costs."""


def _empty2(x: Any, a: Any) -> None:
    """Does nothing, taking two arguments."""


def _empty3(x: Any, a: Any, b: Any) -> None:
    """Does nothing, taking three arguments."""


EMPTY = {1: _empty1, 2: _empty2, 3: _empty3}
"""An empty function per number of arguments: positional parameters, as the
operator's, not ``*args`` (whose tuple would make the floor slower)."""


def tools_for(case: Case, built: dict[str, Built]) -> list[Tool]:
    """Hand-written first (the reference), then f, extras, difgen and peers."""
    tools = [
        Tool(case.limit_name, "hand", case.limit, case.op_args, role="limit"),
        Tool("f (NumPy)", "f", case.fn, case.f_args, role="f"),
    ]
    if case.floor:
        empty = EMPTY[len(case.op_args)]
        tools.append(Tool(FLOOR, "floor", empty, case.op_args, role="floor"))
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
