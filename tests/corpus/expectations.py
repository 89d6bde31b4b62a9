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
    ``"timeout"``: the build does not finish within the time limit on a loaded
    machine (``test_refused`` gives such an entry ``REFUSAL_TIMEOUT``)."""
    modes: tuple[str, ...] | None = None
    """The modes that refuse (None: every mode of the backend)."""
    mentions: tuple[str, ...] = ()
    """Fragments the message must contain (the NumPy name refused, say)."""


INT64_CONTEXT = Refusal(
    "sympy backend: an int64 context (integer labels, an edge list) is run-time data "
    "that scalar code cannot index with; refused at the context's config line, the "
    "trace backend handles it (issue 9 §3)",
    where="config",
)
RUNTIME_DATA = Refusal(
    "sympy backend: the function computes run-time integer or boolean data "
    "(astype(int) indices, a mask, a running maximum) that scalar code cannot "
    "lower; refused at the backend line, the trace backend handles it (issue 9 §3)",
    where="config",
)
LAPACK = Refusal(
    "sympy backend: np.linalg.eigvalsh is computed by LAPACK at run time and has no "
    "symbolic form; refused at the backend line, the trace backend handles it",
    where="config",
)


def missing(name: str) -> Refusal:
    """A NumPy function the tracer does not support yet (issue 9 §2)."""
    return Refusal(f"needs {name} (issue 9 §2)", mentions=(name,))


_BOTH = ("sympy", "trace")
_SYMPY = ("sympy",)
_TABLE: list[tuple[str, tuple[str, ...], Refusal]] = [
    # ---- integer and boolean data known only at run time (issue 9 §3): the trace
    # backend indexes at run time; scalar code cannot
    ("softmax_cross_entropy", _SYMPY, INT64_CONTEXT),
    ("multiclass_hinge", _SYMPY, INT64_CONTEXT),
    ("springs_edge_list", _SYMPY, INT64_CONTEXT),
    ("bond_angles", _SYMPY, INT64_CONTEXT),
    ("neighbour_list_energy", _SYMPY, INT64_CONTEXT),
    ("softmax_cross_entropy_float_labels", _SYMPY, RUNTIME_DATA),
    ("springs_float_edges", _SYMPY, RUNTIME_DATA),
    ("masked_mse", _SYMPY, RUNTIME_DATA),
    ("running_max_drawdown", _SYMPY, RUNTIME_DATA),
    # ---- a LAPACK routine with no symbolic form
    ("smallest_eigenvalue", _SYMPY, LAPACK),
    # ---- NumPy surface the tracer does not follow yet (issue 9 §2)
    ("convolution_blur", _BOTH, missing("np.convolve")),
]

EXPECTED_REFUSALS: dict[tuple[str, str], Refusal] = {
    (name, b): refusal for name, backends, refusal in _TABLE for b in backends
}


KNOWN_CRASHES: dict[tuple[str, str], tuple[str, str]] = {}
"""Pairs where difgen raises something that is not a DifgenError today: bugs, not
refusals. ``test_known_crash`` pins the exception so that the fix is noticed; the
entry must then move to EXPECTED_REFUSALS or go. (Empty: the SymPy CoercionFailed
of np.linalg.inv on a context, the one crash the corpus found, is fixed.)"""
