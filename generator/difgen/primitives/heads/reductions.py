"""The SymPy side of the reductions (:mod:`difgen.primitives.reductions`): n-ary
``Max``/``Min`` heads that never compare their arguments symbolically."""

from __future__ import annotations

from typing import Any

import sympy as sp

from difgen.primitives.reductions import _object_extremum


def _nary(base: Any, sign: int, name: str) -> Any:
    """SymPy's ``Max`` (``Min``) of many arguments that never compares them
    symbolically.

    SymPy's ``Max`` drops arguments it can prove smaller than another
    (``Max._find_localzeros``): every new argument is compared with all the others,
    so building (or rebuilding, as ``cse`` does) the max of n elements costs n^2
    symbolic comparisons, and a pairwise fold n^3: minutes for a few dozen
    elements. The generated code is the same nested NaN-propagating
    ``_maximum`` calls either way (the printer dispatches on ``Max``).

    ``sign`` is +1 for ``Max`` and -1 for ``Min``: d/d arg_i is
    ``Heaviside(sign * (arg_i - extremum of the others))``, as SymPy's own.
    """

    def __new__(cls: Any, *args: Any, **options: Any) -> Any:
        options["evaluate"] = False
        return base.__new__(cls, *args, **options)

    def fdiff(self: Any, argindex: int = 1) -> Any:
        others = [a for i, a in enumerate(self.args) if i != argindex - 1]
        rest = others[0] if len(others) == 1 else type(self)(*others)
        return sp.Heaviside(sign * (self.args[argindex - 1] - rest))

    namespace = {"__new__": __new__, "fdiff": fdiff, "__doc__": _nary.__doc__}
    return type(name, (base,), namespace)


NaryMax = _nary(sp.Max, 1, "NaryMax")
NaryMin = _nary(sp.Min, -1, "NaryMin")

maximum = _object_extremum(NaryMax)
"""``sympy`` of ``max``: one :class:`NaryMax` per output element."""
minimum = _object_extremum(NaryMin)
"""``sympy`` of ``min``: one :class:`NaryMin` per output element."""
