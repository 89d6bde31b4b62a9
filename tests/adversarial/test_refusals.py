"""Class 3: refuse what cannot be reproduced; reproduce exactly what is accepted.

Complex numbers, impure functions (random draws, clocks, state kept between calls),
dtypes that change values and process exits are refused at build time, naming the
user's ``file:line`` (the line marked ``# <-`` in each row's source), exit 1, nothing
written. Writes through views and aliases, which NumPy propagates to the base array,
are reproduced: value and gradient equal NumPy's (run on a copy of the input) and
finite differences.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from .adversarial_support import (
    SOURCE,
    Builder,
    Project,
    assert_refused,
    finite_differences,
    line_of,
    module_block,
    rows,
)

HEADER = """\
import os
import random
import sys
import time

import numpy as np

RNG = np.random.default_rng(0)
STATE = [0.0]
J = 1j
"""

# (id, function source with the refused line marked "# <-", phrase of the message)
REFUSED = [
    # complex numbers anywhere in the trace
    ("add_1j", "def f(x):\n    return np.abs(x + 1j).sum()  # <-", "complex"),
    (
        "complex_scalar",
        "def f(x):\n    return (x * (2 + 0j)).real.sum()  # <-",
        "complex",
    ),
    ("np_real", "def f(x):\n    return np.real(x * 1j).sum()  # <-", "complex"),
    (
        "complex_array",
        "def f(x):\n    return (x + np.array([1j, 0, 0])).real.sum()  # <-",
        "complex",
    ),
    (
        "complex_call",
        "def f(x):\n    return (x * complex(1, 0)).real.sum()  # <-",
        "complex",
    ),
    ("exp_1j", "def f(x):\n    return np.exp(1j * x).real.sum()  # <-", "complex"),
    ("module_constant", "def f(x):\n    return (x * J).imag.sum()  # <-", "complex"),
    (
        "sqrt_complex",
        "def f(x):\n    return np.sqrt(x + 0j).real.sum()  # <-",
        "complex",
    ),
    (
        "astype_complex",
        "def f(x):\n    z = x.astype(complex)  # <-\n    return z.real.sum()",
        "complex",
    ),
    (
        "complex_power",
        "def f(x):\n    return (x ** (0.5 + 0j)).real.sum()  # <-",
        "complex",
    ),
    # impure: two traces differ (the message names the def line)
    (
        "np_random_rand",
        "def f(x):  # <-\n    return (x * np.random.rand(3)).sum()",
        "different values",
    ),
    (
        "np_random_normal",
        "def f(x):  # <-\n    return (x + np.random.standard_normal()).sum()",
        "different values",
    ),
    (
        "module_rng",
        "def f(x):  # <-\n    return (x * RNG.normal(size=3)).sum()",
        "different values",
    ),
    (
        "unseeded_rng",
        "def f(x):  # <-\n    return (x * np.random.default_rng().random(3)).sum()",
        "different values",
    ),
    (
        "stdlib_random",
        "def f(x):  # <-\n    return (x * random.random()).sum()",
        "different values",
    ),
    (
        "clock",
        "def f(x):  # <-\n    return (x * time.time()).sum()",
        "different values",
    ),
    (
        "perf_counter",
        "def f(x):  # <-\n    return (x + time.perf_counter()).sum()",
        "different values",
    ),
    (
        "urandom",
        "def f(x):  # <-\n    return (x * os.urandom(1)[0]).sum()",
        "different values",
    ),
    (
        "global_state",
        "def f(x):  # <-\n    STATE[0] += 1.0\n    return (x * STATE[0]).sum()",
        "different values",
    ),
    (
        "function_attribute",
        "def f(x):  # <-\n    f.calls = getattr(f, 'calls', 0) + 1\n    return (x * f.calls).sum()",
        "different values",
    ),
    # dtypes that change values
    # (x.astype(int) and x.astype(bool) are run-time data now: tests/test_runtime_data)
    (
        "asarray_int",
        "def f(x):\n    return np.asarray(x, dtype=int).sum() * 1.0  # <-",
        "int64",
    ),
    (
        "array_float32",
        "def f(x):\n    return np.array([x[0]], dtype=np.float32).sum()  # <-",
        "float32",
    ),
    (
        "astype_float32",
        "def f(x):\n    return x.astype(np.float32).sum()  # <-",
        "float32",
    ),
    (
        "astype_int32_back",
        "def f(x):\n    return x.astype(np.int32).astype(float).sum()  # <-",
        "int32",
    ),
    (
        "array_int64",
        "def f(x):\n    return np.array(x, dtype=np.int64).sum() + 0.0  # <-",
        "int64",
    ),
    (
        "astype_float16",
        "def f(x):\n    return x.astype(np.float16).sum()  # <-",
        "float16",
    ),
    (
        "asarray_f4",
        "def f(x):\n    return np.asarray(x, dtype='f4').sum()  # <-",
        "float32",
    ),
    (
        "store_into_int_array",
        "def f(x):\n    y = np.zeros(3, dtype=int)\n    y[0] = x[0]  # <-\n    return y.sum() + x.sum()",
        "integer",
    ),
    ("sum_dtype_int", "def f(x):\n    return np.sum(x, dtype=int) * 1.0  # <-", "int"),
    (
        "mean_dtype_float32",
        "def f(x):\n    return np.mean(x, dtype=np.float32)  # <-",
        "float32",
    ),
    (
        "cumsum_dtype_int",
        "def f(x):\n    return np.cumsum(x, dtype=int).sum() * 1.0  # <-",
        "int",
    ),
    (
        "prod_dtype_float32",
        "def f(x):\n    return np.prod(x, dtype=np.float32)  # <-",
        "float32",
    ),
    (
        "reduce_dtype_int",
        "def f(x):\n    return np.add.reduce(x, dtype=int) * 1.0  # <-",
        "int",
    ),
    # ending the process
    ("sys_exit", "def f(x):\n    sys.exit(3)  # <-", "ends the process"),
    ("os_exit", "def f(x):\n    os._exit(0)  # <-", "ends the process"),
    ("raise_systemexit", "def f(x):\n    raise SystemExit  # <-", "ends the process"),
    ("site_exit", "def f(x):\n    exit()  # <-", "ends the process"),
    ("site_quit", "def f(x):\n    quit(2)  # <-", "ends the process"),
    (
        "exit_after_work",
        "def f(x):\n    y = x * 2.0\n    sys.exit(y.shape[0])  # <-",
        "ends the process",
    ),
    # writes NumPy itself refuses, or difgen cannot follow
    (
        "broadcast_to_write",
        "def f(x):\n    y = np.broadcast_to(x, (2, 3))\n    y[0, 0] = 1.0  # <-\n    return y.sum()",
        "read-only",
    ),
    (
        "ufunc_out",
        "def f(x):\n    np.multiply(x, 2.0, out=x)  # <-\n    return x.sum()",
        "out=",
    ),
    (
        "traced_mask_write_of_an_array",
        "def f(x):\n    x[x > 0] = np.ones(x.shape)  # <-\n    return (x * x).sum()",
        "np.where",
    ),
]


@pytest.mark.parametrize(("name", "body", "phrase"), rows(REFUSED))
def test_refused_naming_the_line(
    project: Project, name: str, body: str, phrase: str
) -> None:
    """exit 1, ``difgen: error: .../fn.py:LINE`` with the reason, nothing written."""
    source = HEADER + "\n\n" + body + "\n"
    project.write(SOURCE, source)
    project.config(module_block(operators=["value_and_gradient"], backend="trace"))
    before = project.snapshot()
    result = project.build()
    where = f"{project.root / SOURCE}:{line_of(source, '# <-')}"
    assert_refused(result, where, phrase, before=before, after=project.snapshot())


# (id, function source, input shape): NumPy propagates these writes; so must difgen.
REPRODUCED = [
    (
        "reversed_view_imul",
        "def f(x):\n    y = x[::-1]\n    y *= 2\n    return (x * x).sum()",
        (3,),
    ),
    ("alias_iadd", "def f(x):\n    y = x\n    y += 1\n    return (x * x).sum()", (3,)),
    ("setitem_input", "def f(x):\n    x[0] = 5.0\n    return (x * x).sum()", (3,)),
    (
        "row_view_then_write",
        "def f(X):\n    r = X[0]\n    X[0, 1] = 5.0\n    return (r * r).sum()",
        (2, 3),
    ),
    (
        "reshape_view_write",
        "def f(x):\n    y = x.reshape(3, 2)\n    y[0] = 0.0\n    return (x * x).sum()",
        (6,),
    ),
    (
        "transpose_view_write",
        "def f(x):\n    y = x.T\n    y[0, 1] = 1.0\n    return (x * x).sum()",
        (2, 3),
    ),
    (
        "slice_assign_from_self",
        "def f(x):\n    y = x[1:]\n    y[:] = y * 2\n    return (x * x).sum()",
        (3,),
    ),
    (
        "overlap_reversed_iadd",
        "def f(x):\n    x += x[::-1]\n    return (x * x).sum()",
        (3,),
    ),
    (
        "overlap_shifted_iadd",
        "def f(x):\n    x[1:] += x[:-1]\n    return (x * x).sum()",
        (4,),
    ),
    (
        "column_view_fill",
        "def f(x):\n    y = x[:, 0]\n    y[...] = 3.0\n    return (x * x).sum()",
        (2, 2),
    ),
    (
        "copy_is_not_alias",
        "def f(x):\n    z = x.copy()\n    z *= 2\n    return (x * x).sum() + z.sum()",
        (3,),
    ),
    (
        "asarray_is_alias",
        "def f(x):\n    y = np.asarray(x)\n    y[0] = 0.0\n    return (x * x).sum()",
        (3,),
    ),
    (
        "array_is_copy",
        "def f(x):\n    y = np.array(x)\n    y[0] = 0.0\n    return (x * x).sum() + y.sum()",
        (3,),
    ),
    (
        "ravel_view_write",
        "def f(x):\n    y = x.ravel()\n    y[0] = 10.0\n    return (x * x).sum()",
        (2, 2),
    ),
    (
        "flatten_is_copy",
        "def f(x):\n    y = x.flatten()\n    y[0] = 10.0\n    return (x * x).sum() + y.sum()",
        (2, 2),
    ),
    (
        "newaxis_view_write",
        "def f(x):\n    y = x[None]\n    y[0, 0] = 7.0\n    return (x * x).sum()",
        (3,),
    ),
    (
        "repeated_index_iadd",
        "def f(x):\n    x[[0, 0]] += 1.0\n    return (x * x).sum()",
        (3,),
    ),
    (
        "strided_views_iadd",
        "def f(x):\n    a = x[::2]\n    b = x[1::2]\n    a += b\n    return (x * x).sum()",
        (4,),
    ),
    (
        "view_of_view_write",
        "def f(x):\n    y = x[1:][::-1]\n    y[0] = -1.0\n    return (x * x * x).sum()",
        (4,),
    ),
    (
        "write_then_read_old_alias",
        "def f(x):\n    old = x[0] * 1.0\n    x[0] = 2.0\n    return old * x.sum()",
        (3,),
    ),
    (
        "seeded_rng_inside",
        "def f(x):\n    g = np.random.default_rng(0)\n    return (x * g.normal(size=3)).sum()",
        (3,),
    ),
    (
        "global_seed_inside",
        "def f(x):\n    np.random.seed(1)\n    return (x * np.random.rand(3)).sum()",
        (3,),
    ),
]

REPRODUCED_MATRIX = [
    (n, b, s, backend) for n, b, s in REPRODUCED for backend in ("trace", "sympy")
]


@pytest.mark.parametrize(
    ("name", "body", "shape", "backend"),
    rows(REPRODUCED_MATRIX, id_of=lambda r: f"{r[0]}-{r[3]}"),
)
def test_write_through_view_reproduced(
    build: Builder, name: str, body: str, shape: tuple[int, ...], backend: str
) -> None:
    """f and value_and_gradient equal NumPy on a copy; the gradient equals central
    differences of the NumPy function."""
    source = HEADER + "\n\n" + textwrap.dedent(body) + "\n"
    built = build(source, "f", shape, ("value_and_gradient",), backend=backend)
    x = np.linspace(-1.3, 2.1, int(np.prod(shape))).reshape(shape)
    expected = built.call_reference(x)
    value, gradient = built.module.value_and_gradient(x.copy())
    np.testing.assert_allclose(built.module.f(x.copy()), expected, rtol=1e-14, atol=0)
    np.testing.assert_allclose(value, expected, rtol=1e-14, atol=0)
    numeric = finite_differences(built.call_reference, x)
    np.testing.assert_allclose(gradient, numeric, rtol=1e-6, atol=1e-8)
