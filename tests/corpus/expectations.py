"""What difgen cannot build in the corpus today, and why.

Each entry of :data:`EXPECTED_REFUSALS` is a (function, backend) pair that difgen
refuses today, with the reason and where the refusal must point. ``test_refused``
checks that the build really refuses that way (a DifgenError naming the user's file
and line, the config line, or the time limit). When a gap is fixed the build
succeeds, ``test_refused`` FAILS, and the entry must be removed here: the pair is
then checked against autograd by ``test_handled``. Never add an entry for a wrong
answer or a raw traceback: those are bugs (see :data:`KNOWN_CRASHES`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    """Why difgen refuses a (function, backend) pair today, and where it says so."""

    reason: str
    where: str = "source"
    """``"source"``: a DifgenError naming the corpus file and a line of the function;
    ``"config"``: a ConfigError naming the difgen.toml line (a dtype config refuses);
    ``"timeout"``: the build does not finish within the time limit (it did not in
    20 s when this table was made; ``test_refused`` gives it ``REFUSAL_TIMEOUT``)."""
    modes: tuple[str, ...] | None = None
    """The modes that refuse (None: every mode of the backend)."""
    mentions: tuple[str, ...] = ()
    """Fragments the message must contain (the NumPy name refused, say)."""


INT64_CONTEXT = Refusal(
    "needs int64 contexts: integer labels or edge lists (issue 9 §3)", where="config"
)
ASTYPE_INT = Refusal(
    "needs astype(int) of a float context: indices known at run time (issue 9 §3)",
    mentions=(".astype(int64)",),
)
RUNTIME_MASK = Refusal(
    "needs boolean masks computed at run time (issue 9 §3)",
    mentions=("indexing with a traced value",),
)
SYMPY_SLOW = Refusal(
    "sympy backend: the build does not finish in time; SymPy expands without a "
    "budget (issue 9 §1)",
    where="timeout",
)
TRACE_SLOW = Refusal(
    "trace backend: the build does not finish in time; scalar emission expands with "
    "SymPy without a budget (issue 9 §1)",
    where="timeout",
)


def missing(name: str) -> Refusal:
    """A NumPy function the tracer does not support yet (issue 9 §2)."""
    return Refusal(f"needs {name} (issue 9 §2)", mentions=(name,))


def slow(backend: str, *modes: str) -> Refusal:
    """A build over the time limit, in the modes given (all if none)."""
    base = SYMPY_SLOW if backend == "sympy" else TRACE_SLOW
    return Refusal(base.reason, where="timeout", modes=modes or None)


_BOTH = ("sympy", "trace")
_TABLE: list[tuple[str, tuple[str, ...], Refusal]] = [
    # ---- integer and boolean data known only at run time (issue 9 §3)
    ("softmax_cross_entropy", _BOTH, INT64_CONTEXT),
    ("multiclass_hinge", _BOTH, INT64_CONTEXT),
    ("springs_edge_list", _BOTH, INT64_CONTEXT),
    ("bond_angles", _BOTH, INT64_CONTEXT),
    ("neighbour_list_energy", _BOTH, INT64_CONTEXT),
    ("softmax_cross_entropy_float_labels", _BOTH, ASTYPE_INT),
    ("springs_float_edges", _BOTH, ASTYPE_INT),
    ("masked_mse", _BOTH, RUNTIME_MASK),
    ("clipped_predictions", _BOTH, RUNTIME_MASK),
    # ---- NumPy surface the tracer does not follow yet (issue 9 §2)
    ("logistic_regression_stable", _BOTH, missing("np.logaddexp")),
    ("harmonic_chain", _BOTH, missing("np.diff")),
    ("fene_chain", _BOTH, missing("np.diff")),
    ("total_variation_anisotropic", _BOTH, missing("np.diff")),
    ("dihedral", _BOTH, missing("np.cross")),
    ("smoothing_penalty", _BOTH, missing("np.gradient")),
    ("convolution_blur", _BOTH, missing("np.convolve")),
    ("kron_penalty", _BOTH, missing("np.kron")),
    ("smallest_eigenvalue", _BOTH, missing("np.linalg.eigvalsh")),
    ("matrix_power_trace", _BOTH, missing("np.linalg.matrix_power")),
    ("running_max_drawdown", _BOTH, missing("np.maximum.accumulate")),
]
_SLOW: dict[str, list[tuple[str, ...]]] = {
    # ---- build time (issue 9 §1): sympy on everything below
    "sympy": [
        (n,)
        for n in [
            "softmax_cross_entropy_onehot",
            "mlp_tanh",
            "mlp_relu",
            "squared_hinge",
            "attention",
            "self_attention",
            "rbf_network",
            "lennard_jones_loop",
            "lennard_jones_vectorized",
            "coulomb",
            "bond_angle_fixed",
            "gravity",
            "rof_denoising",
            "logdet_slogdet",
            "solve_based",
            "gp_nll",
            "trace_of_inverse",
            "determinant",
            "gram_logdet",
            "euler_oscillator",
            "rk4_lorenz",
            "leapfrog",
            "newton_kepler",
            "unrolled_gradient_descent",
            "rnn",
        ]
    ],
    # trace, in both modes or in the one mode named
    "trace": [
        ("logistic_regression", "forward"),
        ("mlp_tanh", "reverse"),
        ("attention",),
        ("self_attention",),
        ("rbf_network",),
        ("lennard_jones_loop",),
        ("lennard_jones_vectorized",),
        ("springs_fixed_topology",),
        ("coulomb", "forward"),
        ("bond_angle_fixed",),
        ("morse",),
        ("gravity", "forward"),
        ("euler_oscillator",),
        ("rk4_lorenz",),
        ("leapfrog", "reverse"),
        ("newton_kepler", "reverse"),
        ("unrolled_gradient_descent",),
        ("rnn", "reverse"),
    ],
}

EXPECTED_REFUSALS: dict[tuple[str, str], Refusal] = {
    **{(name, b): refusal for name, backends, refusal in _TABLE for b in backends},
    **{
        (entry[0], backend): slow(backend, *entry[1:])
        for backend, entries in _SLOW.items()
        for entry in entries
    },
}


KNOWN_CRASHES: dict[tuple[str, str], tuple[str, str]] = {
    ("mahalanobis", "sympy"): (
        "CoercionFailed",
        (
            "BUG: np.linalg.inv of a context on the sympy backend raises SymPy's "
            "CoercionFailed (a raw traceback, primitives/linalg.py inv lowering)"
        ),
    ),
}
"""Pairs where difgen raises something that is not a DifgenError today: bugs, not
refusals. ``test_known_crash`` pins the exception so that the fix is noticed; the
entry must then move to EXPECTED_REFUSALS or go."""
