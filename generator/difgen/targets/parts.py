"""What printers produce: :class:`Function` values (one per operator, with its C twin
for ``emit = "c"``) and what each one's code names (:class:`Uses`), the module's
:class:`Constants`, and :class:`ModuleParts`, all a module's printed parts, which
:mod:`difgen.render.module` puts into the template.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from difgen import naming
from difgen.derive.checks import IndexCheck

MATH = "math"
TYPING = "typing"
"""Its ``Any``: the element type of a loop adjoint's stack of states."""
SCIPY_SPARSE = "scipy.sparse"
"""Imported as ``sp``: sparse results are ``sp.csr_array``."""
SCIPY_SPECIAL = "scipy.special"
"""Imported as itself: the special functions only SciPy computes."""
ZLIB = "zlib"
BASE64 = "base64"
"""With :data:`ZLIB`, imported as themselves: a large index table's compressed
block is decoded at import (:mod:`difgen.targets.tables`)."""


@dataclass(frozen=True)
class Uses:
    """What printed code names besides NumPy and the template's argument checks, as
    the printer that wrote it reports it (SymPy's printers collect
    ``module_imports`` so): a module defines and imports exactly what its
    functions report, and nothing reads the printed text back to find out."""

    helpers: frozenset[str] = frozenset()
    """Module helpers the code calls: those of :mod:`difgen.floats`, and the
    template's optional ``naming.CHECK_CSR_OUT``."""
    modules: frozenset[str] = frozenset()
    """Modules besides NumPy: :data:`MATH`, :data:`TYPING`, :data:`SCIPY_SPARSE`,
    :data:`SCIPY_SPECIAL`."""

    def __or__(self, other: Uses) -> Uses:
        return Uses(self.helpers | other.helpers, self.modules | other.modules)


NOTHING = Uses()
SPARSE = Uses(modules=frozenset({SCIPY_SPARSE}))
"""What code naming ``sp.csr_array`` uses."""
PACKED = Uses(modules=frozenset({ZLIB, BASE64}))
"""What a compressed index table's decoding names (:func:`difgen.targets.tables.packed`)."""


@dataclass(frozen=True)
class Function:
    """One emitted operator.

    ``checked`` names the arguments whose checks the body makes itself (scalar
    code checks a 1-D argument as it unpacks it); render adds the others'.
    ``points_of`` names the operator a points variant evaluates at many points
    (``points = true``), whose argument checks take a leading axis of points.
    """

    name: str
    signature: str
    returns: str
    doc: str
    body: tuple[str, ...]
    checked: frozenset[str] = frozenset()
    numpy_floats: bool = False
    """Its body is NumPy code, so a float argument is checked into an ``np.float64``
    (a Python float's arithmetic raises ``ZeroDivisionError`` and
    ``OverflowError`` where NumPy's gives inf and NaN)."""
    points_of: str | None = None
    block_of: str | None = None
    """The private function (not in ``__all__``, no argument checks) that the points
    variant of this operator calls on each block of points, already checked."""
    native: str = ""
    """``emit = "c"``: the C function computing the same (:mod:`difgen.targets.c.extension`)."""
    native_doc: str = ""
    """``emit = "c"``: the C function's docstring, with its text signature."""
    native_runtime: frozenset[str] = frozenset()
    """``emit = "c"``: the C runtime's names the C function uses, as its printers
    reported them: the C file carries their sections (and only these)."""
    wrappers: tuple[tuple[str, str], ...] = ()
    """``emit = "c"``: (result kind, Python expression of ``data``) building a sparse
    result from the nonzeros the C function computes."""
    native_points: tuple[str, str, frozenset[str]] | None = None
    """``emit = "c"`` with ``points = true``: (C source, text signature, runtime
    names used) of this operator's points variant, one C loop over the same statements
    (:mod:`difgen.targets.c.points`); its ``_points`` Function takes it."""
    helpers: frozenset[str] = frozenset()
    """The module helpers (those of :mod:`difgen.floats` and the template's
    optional ones) and constants its code calls, as its printers reported them:
    the module defines these (and only these). See :class:`Uses`."""
    modules: frozenset[str] = frozenset()
    """The modules its code names besides NumPy, as its printers reported them
    (SymPy's ``module_imports``). See :class:`Uses`."""
    expressions: tuple[Any, Any] | None = field(default=None, compare=False)
    """Straight-line code: (its ``ScalarCode``, the reduction its body prints), so
    that its points variant computes the same expressions on columns
    (:mod:`difgen.targets.numpy.columns`)."""

    @property
    def uses(self) -> Uses:
        """What its code (body, signature, C wrappers) names, as reported."""
        return Uses(self.helpers, self.modules)

    def using(self, uses: Uses) -> Function:
        """This function, also reporting ``uses`` (what code added to it names)."""
        return replace(
            self,
            helpers=self.helpers | uses.helpers,
            modules=self.modules | uses.modules,
        )


@dataclass(frozen=True)
class Pattern:
    """The pattern of a module's sparse result ``kind``, as its module constants
    name it: the structure functions (``jacobian_sparsity()``,
    ``jacobian_structure()``) and the adapters read it."""

    kind: str
    indices: str
    indptr: str
    shape: tuple[int, int]
    nnz: int


class Constants:
    """Module-level constants, deduplicated by their source text; ``uses`` is
    what their sources name besides NumPy, as the printer that wrote them
    reported it (the module imports it)."""

    def __init__(self) -> None:
        self.uses: Uses = NOTHING
        self.items: list[tuple[str, str]] = []
        self._names: dict[str, str] = {}
        self.setup: list[str] = []
        self._hoisted: dict[str, str] = {}
        self.patterns: dict[str, Pattern] = {}
        """The pattern of each sparse result kind (:func:`csr_format` records it)."""

    def hoist(self, lines: list[str]) -> str:
        """A module-level value computed once at import by ``lines`` (which assign
        ``OUT``): input-independent work hoisted out of the operators."""
        key = "\n".join(lines)
        if key not in self._hoisted:
            name = naming.hoisted(len(self._hoisted))
            self._hoisted[key] = name
            self.setup += [re.sub(r"\bOUT\b", name, line) for line in lines]
        return self._hoisted[key]

    def add(self, source: str, hint: str) -> str:
        """The name of a constant with this source, defined once."""
        if source not in self._names:
            taken = {name for name, _ in self.items}
            name = hint if hint not in taken else f"{hint}_{len(self.items)}"
            self._names[source] = name
            self.items.append((name, source))
        return self._names[source]


@dataclass
class ModuleParts:
    """Everything the template needs besides the spec."""

    functions: list[Function]
    output_shape: tuple[int, ...]
    emission: str
    coloring: str = ""
    """The colorings of compressed results, in words (``jacobian: 3 column colors
    (forward); hessian: star coloring, 2 colors``), for the module header."""
    constants: list[tuple[str, str]] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)
    uses: Uses = NOTHING
    """What the module constants' sources name (:attr:`Constants.uses`)."""
    patterns: dict[str, Pattern] = field(default_factory=dict)
    """The sparse results' patterns, by kind (:attr:`Constants.patterns`)."""
    index_checks: tuple[IndexCheck, ...] = ()
    """The run-time index checks the function performs, which every operator
    performs at entry (:mod:`difgen.derive.checks`)."""
