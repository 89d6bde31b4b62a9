"""The benchmark table: which operator of which problem, at which point, against what.

A :class:`Case` is one row group of the report. Its ``limit`` is the hand-written
derivative (the correctness reference and the 1.0x of the ratios); ``extras`` are
other NumPy/SciPy implementations timed beside it; ``difgen`` names the tool label
and the ``[[module]]`` of ``difgen.toml`` that provides the operator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks import problems as P
from benchmarks.kernels import logistic as logistic_kernel


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    operator: str  # derivative | gradient | jacobian | hessian | hvp
    fn: Callable[..., Any]
    limit: Callable[..., Any]
    x: Any  # float or ndarray
    contexts: tuple[np.ndarray, ...] = ()
    v: np.ndarray | None = None  # hvp direction
    difgen: tuple[tuple[str, str], ...] = ()  # (tool label, module name)
    extras: tuple[tuple[str, Callable[..., Any]], ...] = ()
    symbolic: bool = False  # small enough for SymPy lambdify
    limit_name: str = "hand-written"
    note: str = ""  # what the reader must know to read the rows fairly
    # the peer families difgen must beat here (None: jax, autograd and torch); a
    # case names fewer only where the others cannot compute the derivative at all,
    # and its note says why
    peers: tuple[str, ...] | None = None
    # also time an empty Python function taking the same arguments: the per-call
    # floor a compiled operator is judged against
    floor: bool = False

    @property
    def op_args(self) -> tuple[Any, ...]:
        """Arguments of the operator: (x, *ctx), or (x, v, *ctx) for hvp."""
        if self.operator == "hvp":
            return (self.x, self.v, *self.contexts)
        return (self.x, *self.contexts)

    @property
    def f_args(self) -> tuple[Any, ...]:
        return (self.x, *self.contexts)


KERNEL = "hand C kernel"
"""The label of a hand-written C kernel's row (``benchmarks/kernels``): the
limit a generated C derivative is measured against (issue 24)."""


def all_cases() -> list[Case]:
    """Every case, with its fixed seeded data."""
    from benchmarks.kernels import rosenbrock as rosenbrock_kernel

    try:
        from scipy.optimize import rosen_der, rosen_hess, rosen_hess_prod

        scipy_ok = True
    except ImportError:  # SciPy is optional: its rows are left out
        scipy_ok = False
    x2, _ = P.make_rosenbrock(2)
    x3, _ = P.make_rosenbrock(3)
    x100, _ = P.make_rosenbrock(100)
    x10k, v10k = P.make_rosenbrock(10_000)
    x1m, v1m = P.make_rosenbrock(1_000_000)
    kernel = rosenbrock_kernel.LABEL
    w, Xl, yl = P.make_logistic()
    w_big, X_big, y_big = P.make_logistic(100_000, 50)
    p, Xm, tm = P.make_mlp()
    u, params = P.make_lorenz()
    mlp_params, Xf, tf = P.make_mlp_params()
    return [
        Case(
            "seed",
            "seed: derivative of sum(A.T @ (B * 1.5)), scalar x",
            "derivative",
            P.seed,
            P.seed_derivative,
            0.7,
            difgen=(
                ("difgen sympy", "seed_sympy"),
                ("difgen trace forward", "seed_trace_forward"),
                ("difgen trace reverse", "seed_trace_reverse"),
                ("difgen C", "seed_c"),
            ),
            symbolic=True,
            limit_name="hand-written 81.0*x",
        ),
        Case(
            "rosenbrock_n2_gradient",
            "Rosenbrock gradient, n = 2",
            "gradient",
            P.rosenbrock,
            P.rosenbrock2_gradient,
            x2,
            difgen=(
                ("difgen sympy", "rosenbrock_n2_sympy"),
                ("difgen C", "rosenbrock_n2_c"),
            ),
            extras=(("hand-written (vectorized)", P.rosenbrock_gradient),)
            + ((("scipy rosen_der", rosen_der),) if scipy_ok else ()),
            symbolic=True,
            limit_name="hand-written (straight-line)",
        ),
        Case(
            "call_floor",
            "per-call floor: Rosenbrock gradient on a 3-vector, compiled",
            "gradient",
            P.rosenbrock,
            P.rosenbrock_gradient,
            x3,
            difgen=(("difgen C", "rosenbrock_n3_c"),),
            floor=True,
            note=(
                "The cost of a call: the compiled operator against an empty Python "
                "function taking the same argument (the issue's bar: within 3x)."
            ),
        ),
        Case(
            "rosenbrock_n100_gradient",
            "Rosenbrock gradient, n = 100",
            "gradient",
            P.rosenbrock,
            P.rosenbrock_gradient,
            x100,
            difgen=(
                ("difgen trace", "rosenbrock_n100"),
                ("difgen C", "rosenbrock_n100_c"),
            ),
            extras=(("scipy rosen_der", rosen_der),) if scipy_ok else (),
        ),
        Case(
            "rosenbrock_n100_hessian",
            "Rosenbrock hessian (dense), n = 100",
            "hessian",
            P.rosenbrock,
            P.rosenbrock_hessian,
            x100,
            difgen=(
                ("difgen trace", "rosenbrock_n100"),
                ("difgen C", "rosenbrock_n100_c"),
            ),
            extras=(("scipy rosen_hess", rosen_hess),) if scipy_ok else (),
        ),
        Case(
            "rosenbrock_n10000_gradient",
            "Rosenbrock gradient, n = 10,000",
            "gradient",
            P.rosenbrock,
            P.rosenbrock_gradient,
            x10k,
            difgen=(
                ("difgen trace", "rosenbrock_n10000"),
                ("difgen C", "rosenbrock_n10000_c"),
            ),
            extras=((kernel, rosenbrock_kernel.gradient),)
            + ((("scipy rosen_der", rosen_der),) if scipy_ok else ()),
        ),
        Case(
            "rosenbrock_n10000_hvp",
            "Rosenbrock hessian-vector product, n = 10,000",
            "hvp",
            P.rosenbrock,
            P.rosenbrock_hvp,
            x10k,
            v=v10k,
            difgen=(
                ("difgen trace", "rosenbrock_n10000"),
                ("difgen C", "rosenbrock_n10000_c"),
            ),
            extras=((kernel, rosenbrock_kernel.hvp),)
            + ((("scipy rosen_hess_prod", rosen_hess_prod),) if scipy_ok else ()),
        ),
        Case(
            "rosenbrock_n1000000_gradient",
            "Rosenbrock gradient, n = 1,000,000",
            "gradient",
            P.rosenbrock,
            P.rosenbrock_gradient,
            x1m,
            difgen=(("difgen C", "rosenbrock_n1000000_c"),),
            extras=((kernel, rosenbrock_kernel.gradient),)
            + ((("scipy rosen_der", rosen_der),) if scipy_ok else ()),
            note=(
                "Beyond the caches (8 MB per vector): the time is memory traffic. "
                "The hand C kernel reads x once and writes the gradient once."
            ),
        ),
        Case(
            "rosenbrock_n1000000_hvp",
            "Rosenbrock hessian-vector product, n = 1,000,000",
            "hvp",
            P.rosenbrock,
            P.rosenbrock_hvp,
            x1m,
            v=v1m,
            difgen=(("difgen C", "rosenbrock_n1000000_c"),),
            extras=((kernel, rosenbrock_kernel.hvp),)
            + ((("scipy rosen_hess_prod", rosen_hess_prod),) if scipy_ok else ()),
            note=(
                "Beyond the caches: the hand C kernel reads x and v once and writes "
                "the product once."
            ),
        ),
        Case(
            "logistic_gradient",
            "logistic regression NLL gradient, 20 weights, X 1000x20",
            "gradient",
            P.logistic_nll,
            P.logistic_nll_gradient,
            w,
            contexts=(Xl, yl),
            difgen=(("difgen trace", "logistic"), ("difgen C", "logistic_c")),
        ),
        Case(
            "logistic_100000x50_gradient",
            "logistic regression NLL gradient, 50 weights, X 100000x50 (40 MB)",
            "gradient",
            P.logistic_nll,
            P.logistic_nll_gradient,
            w_big,
            contexts=(X_big, y_big),
            difgen=(
                ("difgen trace", "logistic_100000x50"),
                ("difgen C", "logistic_100000x50_c"),
            ),
            extras=((KERNEL, logistic_kernel.gradient),),
            note=(
                "X does not fit in cache: the hand C kernel reads it once (per "
                "row: its dot with w, the residual, the row added into the "
                "gradient), compiled with difgen's C flags; a gemv then a "
                "transposed gemv read it twice."
            ),
        ),
        Case(
            "mlp_gradient",
            f"2-layer tanh MLP loss gradient, {P.N_PARAMS} parameters, batch 64",
            "gradient",
            P.mlp_loss,
            P.mlp_loss_gradient,
            p,
            contexts=(Xm, tm),
            difgen=(("difgen trace", "mlp"), ("difgen C", "mlp_c")),
        ),
        Case(
            "mlp_params_float32_gradient",
            (
                "the same MLP written the natural way: gradient of a dict of four "
                "float32 arrays, float32 batch"
            ),
            "gradient",
            P.mlp_params_loss,
            P.mlp_params_loss_gradient,
            mlp_params,
            contexts=(Xf, tf),
            difgen=(("difgen C", "mlp_params_float32_c"),),
            note=(
                "Every tool takes and returns the dict {W1, b1, W2, b2} of float32 "
                "arrays and computes in float32 (difgen: input dtype float32, C "
                "loops and NumPy's sgemm; JAX: jit(grad) on float32 device arrays); "
                "results are checked at float32's tolerance. Finite differences "
                "and CasADi take one flat vector and are not set up here."
            ),
        ),
        Case(
            "lorenz_jacobian",
            "Lorenz right-hand side jacobian (3x3), parameters as a context",
            "jacobian",
            P.lorenz,
            P.lorenz_jacobian,
            u,
            contexts=(params,),
            difgen=(("difgen sympy", "lorenz_sympy"), ("difgen C", "lorenz_c")),
            symbolic=True,
            limit_name="hand-written (unpacked floats)",
        ),
        Case(
            "brusselator_jacobian",
            "Brusselator 2D 16x16 jacobian (512x512; hand-written is sparse CSR)",
            "jacobian",
            P.brusselator,
            P.make_brusselator_jacobian(dense=not scipy_ok),
            P.make_brusselator(),
            difgen=(
                ("difgen trace (dense, colored)", "brusselator"),
                ("difgen trace (sparse CSR, colored)", "brusselator_sparse"),
                ("difgen C (sparse CSR, colored)", "brusselator_sparse_c"),
                (
                    "difgen C (CSR data in place, colored)",
                    "brusselator_sparse_c:in_place",
                ),
            ),
            extras=(
                (("hand-written (dense)", P.make_brusselator_jacobian(dense=True)),)
                if scipy_ok
                else ()
            ),
            limit_name="hand-written (sparse CSR)" if scipy_ok else "hand-written",
            note=(
                "Not like for like: both difgen rows compress the jacobian by column "
                "coloring (one batched pushforward per color of columns, then a "
                "gather), even the dense one; the JAX, torch and autograd rows do "
                "not, they push forward (or pull back) all 512 basis vectors."
            ),
        ),
        Case(
            "logsumexp_gradient",
            "logsumexp gradient, n = 1000",
            "gradient",
            P.logsumexp,
            P.logsumexp_gradient,
            P.make_logsumexp(),
            difgen=(("difgen trace", "logsumexp"), ("difgen C", "logsumexp_c")),
        ),
        Case(
            "kepler_newton_gradient",
            "Newton's iteration to a tolerance (Kepler's equation, n = 1000): gradient",
            "gradient",
            P.kepler_newton,
            P.kepler_newton_gradient,
            P.make_kepler(),
            difgen=(
                ("difgen trace", "kepler_newton"),
                ("difgen trace implicit", "kepler_newton_implicit"),
            ),
            limit_name="hand-written implicit derivative",
            note=(
                "A while loop on a traced condition: difgen's gradient runs the "
                "iterations forward, keeping each state on a list, then backward "
                "through them (the derivative of the iterations taken); with "
                "implicit = true it runs the iterations once and applies the "
                "implicit-function derivative at the final state, with no tape. The "
                "hand-written row solves, then applies the implicit-function "
                "derivative 1 / (1 - e cos E). JAX cannot differentiate a Python "
                "loop on a traced condition (nor reverse-differentiate lax.while_loop), "
                "and torch.func refuses data-dependent control flow: autograd is the "
                "peer to beat."
            ),
            peers=("autograd",),
        ),
    ]


def select(cases: list[Case], only: str | None) -> list[Case]:
    """Cases matching any comma-separated word of ``only``, by whole ``_`` parts.

    >>> [c.name for c in select(all_cases(), "rosenbrock_n100")]
    ['rosenbrock_n100_gradient', 'rosenbrock_n100_hessian']
    """
    if not only:
        return cases
    words = [w.strip().split("_") for w in only.split(",") if w.strip()]

    def matches(name: str, word: list[str]) -> bool:
        parts = name.split("_")
        return any(
            parts[i : i + len(word)] == word for i in range(len(parts) - len(word) + 1)
        )

    return [c for c in cases if any(matches(c.name, w) for w in words)]
